#!/bin/bash
# Builds the cuzk CLI and the GPU check here and packs them (gzip: the carry limit is 64 MiB and
# the stripped binaries with their fatbin are ~67 MB) with nats-server into .device/ for the
# device tool. Then: run(command="bash .device/run-all.sh", carry=[".device"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p cuzk-cli -p cuzk-kernels --bin cuzk --bin cuzk-gpu-check
mkdir -p .device /tmp/cuzk-pack
cp target/release/cuzk target/release/cuzk-gpu-check "$(command -v nats-server)" /tmp/cuzk-pack/
strip /tmp/cuzk-pack/cuzk /tmp/cuzk-pack/cuzk-gpu-check
for f in cuzk cuzk-gpu-check nats-server; do gzip -6 -c /tmp/cuzk-pack/$f > .device/$f.gz; done
cp kernels/scripts/device-run-all.sh .device/run-all.sh
du -ch .device/*.gz | tail -1
