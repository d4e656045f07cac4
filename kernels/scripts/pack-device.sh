#!/bin/bash
# Builds what the GPU host runs (cuzk, cuzk-porep, cuzk-gpu-check, cuzk-load) and packs it into
# .device/ (gzipped, a third of the size to copy) with nats-server, the run
# scripts (kernels/scripts/device-*.sh as run-*.sh, and h200-results.py), the SupraSeal anchor
# binaries and its 2 KiB C1 when present. Nothing needs to be built on the GPU host: copy
# .device/ there (e.g. rsync -a .device/ gpuhost:cuzk/.device/) and run a script on it,
#   bash .device/run-32g.sh --help        (or run-all.sh, run-porep.sh, run-plans.sh,
#                                          run-multi-gpu.sh, run-profile-msm.sh)
# or, in a checkout on the GPU host with .device/ at its root, bash kernels/scripts/device-32g.sh.
# The host needs an NVIDIA driver (the kernels are embedded), python3, and for some steps ncu.
#
#   CUZK_CUDA_ARCHS=90 kernels/scripts/pack-device.sh      # H200 SASS only: smaller, faster to build
#   SSA=path/to/ssa                                        # the anchor (default: its build cache)
#   ANCHOR=DIR                                             # the SupraSeal anchor harness's directory, which holds c1-2k.json
#   NATS_ALT="BIN..."                                      # further nats-server binaries, packed as nats-server-<version>
#                                                          # (scripts/install-nats-server.sh), to set beside the default
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC="${NVCC:-$(scripts/install-nvcc.sh | tail -n 1)}"
export NVCC
cargo build --release -p cuzk-porep-tools -p cuzk-gpu-check -p cuzk-cli -p cuzk-load-tests
mkdir -p .device /tmp/cuzk-pack
tools="cuzk cuzk-porep cuzk-gpu-check cuzk-load"
for t in $tools; do cp "target/release/$t" /tmp/cuzk-pack/ && strip "/tmp/cuzk-pack/$t"; done
rm -f /tmp/cuzk-pack/nats-server* .device/nats-server*.gz
cp "$(command -v nats-server)" /tmp/cuzk-pack/
for bin in ${NATS_ALT:-}; do
  cp "$bin" "/tmp/cuzk-pack/nats-server-$("$bin" --version | sed 's/.* v//')"
done
SSA="${SSA:-$HOME/.cache/cuzk/ssa/build/target/release/ssa}"
[ -x "$SSA" ] && cp "$SSA" /tmp/cuzk-pack/ssa
# A 32 GiB build of the anchor (Tree and config switched), made beside it, never in the repo.
SSA32="${SSA32:-$HOME/.cache/cuzk/ssa32/target/release/ssa}"
[ -x "$SSA32" ] && cp "$SSA32" /tmp/cuzk-pack/ssa32
for f in /tmp/cuzk-pack/*; do gzip -6 -c "$f" > ".device/$(basename "$f").gz"; done
[ -n "${ANCHOR:-}" ] && [ -f "$ANCHOR/c1-2k.json" ] && cp "$ANCHOR/c1-2k.json" .device/
rm -f .device/run-*.sh
for s in kernels/scripts/device-*.sh; do cp "$s" ".device/$(basename "$s" | sed 's/^device-/run-/')"; done
cp kernels/scripts/gpu-host.sh .device/
cp kernels/scripts/h200-results.py .device/
du -ch .device/* | tail -1
