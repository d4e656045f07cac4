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
# The suite runs on a current nats-server release, not the distribution's (Debian's is 2.9.10):
# updates of a record in a replicated bucket are kept apart only by 2.9.21 and later, which a
# replicated cluster needs (docs/reliability.md, "Soak"). NATS_SERVER set by the caller wins.
if [ -z "${NATS_SERVER:-}" ]; then
  NATS_SERVER="$(scripts/install-nats-server.sh 2.12.8 | tail -n 1)"
  export NATS_SERVER
fi
exec "${runner[@]}" --workspace --no-fail-fast "$@"
