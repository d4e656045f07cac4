#!/bin/bash
# GPU host side (nothing is built here): the device memory plans at small shapes, correctness
# first. Runs on any Linux host with an NVIDIA driver and the packed binaries (.device/*.gz,
# kernels/scripts/pack-device.sh), from a checkout (kernels/scripts/device-plans.sh) or from
# the pack (.device/run-plans.sh).
#   1. cuzk-gpu-check: the kernels, then the toy circuit and a MiMC partition of 2^PLAN_LOG
#      proved under streaming plans, each against the CPU backend and the resident plan's proof;
#   2. 2 KiB test parameters (GPU), the plan `cuzk gpu-node --explain-plan` gives the 2 KiB
#      shape at BUDGET_2K, and `cuzk-porep prove` at that budget: CPU and CUDA side by side,
#      verify_seal on every proof, the proof equal to the resident plan's; then at the default
#      budget for the time beside it.

usage() {
  cat <<'EOF'
usage: device-plans.sh [options] [OUT_DIR]

The device memory plans at small shapes on this GPU host: cuzk-gpu-check's
streaming-plan proofs against the CPU backend and the resident plan, then the
real 2 KiB partition at a budget below its key, with the binaries and C1
kernels/scripts/pack-device.sh packs into .device/.

options (a flag wins over the environment variable in brackets):
  --out DIR      where the logs go (or OUT_DIR) [OUT] (default ./cuzk-gpu-plans)
  --bin DIR      the unpacked binaries (default: .device/bin, unpacked there
                 from .device/*.gz where missing or older)
  -h, --help     this text

further environment: PLAN_LOG (the MiMC partition's log2 size, default 22),
BUDGET_2K (the 2 KiB partition's budget, default 1000MiB).
EOF
}
die() { echo "device-plans.sh: $*" >&2; exit 1; }

OUT_DIR=${OUT:-./cuzk-gpu-plans}
B=
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --out|--bin) [ $# -ge 2 ] || die "$1 needs a value (--help)"; opt=$1 val=$2; shift 2 ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    -*) die "unknown argument '$1' (--help)" ;;
    *) OUT_DIR=$1; shift; continue ;;
  esac
  case "$opt" in
    --out) OUT_DIR=$val ;;
    --bin) B=$val ;;
    *) die "unknown option '$opt' (--help)" ;;
  esac
done

. "$(dirname "${BASH_SOURCE[0]}")/gpu-host.sh"
B=${B:-$PACK/bin}
mkdir -p "$OUT_DIR" "$B" || die "cannot create $OUT_DIR or $B"
OUT_DIR=$(cd "$OUT_DIR" && pwd); B=$(cd "$B" && pwd)
unpack "$B"
need_bins "$B" cuzk cuzk-porep cuzk-gpu-check
C1=$PACK/c1-2k.json
[ -f "$C1" ] || die "$C1 missing: pack-device.sh copies it from the SupraSeal anchor (ANCHOR=DIR)"
need_gpu

P=$(mktemp -d); export CUZK_PARAM_CACHE=$P FIL_PROOFS_PARAMETER_CACHE=$P
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "out: $OUT_DIR"
echo "== 1. gpu-check (t=${SECONDS}s)"
timeout 300 $B/cuzk-gpu-check --no-bench --max-log 16 --g2-max-log 12 --plan-log ${PLAN_LOG:-22} \
  >"$OUT_DIR/check.log" 2>&1
echo "gpu-check rc=$?"; grep -E "FAIL|PASS .*(plan|toy)|plan:|peak|checks:" "$OUT_DIR/check.log" | cut -c1-260
echo "== 2. 2 KiB at ${BUDGET_2K:=1000MiB} (t=${SECONDS}s)"
$B/cuzk-porep params --sector-size 2KiB --engine cuda --force-insecure >"$OUT_DIR/params2k.log" 2>&1
tail -1 "$OUT_DIR/params2k.log" | cut -c1-200
preload='[{"name":"porep-c2","params":{"sector_size":"2KiB","sector_id":1,"miner":"f01234"}}]'
$B/cuzk gpu-node --allow-test-params --gpu-preload "$preload" --gpu-memory-budget "$BUDGET_2K" --explain-plan 2>&1 | tail -20
timeout 200 $B/cuzk-porep prove --sector-size 2KiB --sector "$C1" --engine cuda --runs 3 \
  --gpu-memory-budget "$BUDGET_2K" >"$OUT_DIR/prove2k-budget.log" 2>&1
echo "prove at $BUDGET_2K rc=$?"; grep -v -E " INFO | DEBUG" "$OUT_DIR/prove2k-budget.log" | tail -12
timeout 120 $B/cuzk-porep prove --sector-size 2KiB --sector "$C1" --engine cuda --runs 10 \
  >"$OUT_DIR/prove2k.log" 2>&1
echo "prove at the default budget rc=$?"; grep -v -E " INFO | DEBUG" "$OUT_DIR/prove2k.log" | tail -9
rm -rf "$P"
