#!/usr/bin/env bash
# The whole test suite: unit tests beside the code and integration tests that start real
# nats-server processes. Generated test-only Groth16 parameters are cached outside the repo
# ($CUZK_PARAM_CACHE, default ~/.cache/cuzk/params).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/nvcc-env.sh
scripts/ensure-deps.sh --tests
if cargo nextest --version >/dev/null 2>&1; then
  exec cargo nextest run --workspace --no-fail-fast "$@"
else
  exec cargo test --workspace --no-fail-fast "$@"
fi
