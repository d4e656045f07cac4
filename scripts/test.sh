#!/usr/bin/env bash
# The whole test suite: unit tests beside the code and integration tests that start real
# nats-server processes. Generated test-only Groth16 parameters are cached outside the repo
# ($CUZK_PARAM_CACHE, default ~/.cache/cuzk/params).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/nvcc-env.sh
scripts/ensure-deps.sh --tests
runner=(cargo test)
if cargo nextest --version >/dev/null 2>&1; then
  runner=(cargo nextest run)
fi
status=0
"${runner[@]}" --workspace --no-fail-fast "$@" || status=$?
if [ $# -eq 0 ]; then
  # Updates of a record in a replicated bucket are kept apart only by nats-server 2.9.21 and
  # later (Debian's is 2.9.10; docs/reliability.md, "Soak"), so the test of two partitions
  # proved at once, skipped on an older server, runs against a current release as well.
  current="$(scripts/install-nats-server.sh 2.12.8 | tail -n 1)"
  # Filtered over the whole workspace: one package alone resolves other features and
  # rebuilds half the dependencies.
  NATS_SERVER="$current" "${runner[@]}" --workspace partitions_proved_at_once || status=$?
fi
exit "$status"
