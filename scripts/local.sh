#!/usr/bin/env bash
# The main job: a local cluster (private nats-server, a synth node, a GPU node — CPU backend
# where there is no GPU) proves one multi-partition job and prints the verified proof and the
# stage timings. Extra arguments go to `cuzk local` (see `cuzk local --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/nvcc-env.sh
scripts/ensure-deps.sh
cargo build --release --quiet -p cuzk-cli
# Wherever the build put it ($CARGO_TARGET_DIR, or target/ beside the workspace).
exec "${CARGO_TARGET_DIR:-target}/release/cuzk" local "$@"
