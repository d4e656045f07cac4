#!/bin/bash
# GPU host side (nothing is built here): the witness-only data plane on a real 2 KiB PoRep
# partition, next to SupraSeal in the same run.
#   0. cuzk-gpu-check: kernels and whole partitions, CUDA against the CPU backend (every step
#      compared), then the benchmark tables;
#   1. 2 KiB test parameters from the shape's matrices on the GPU (`cuzk-porep params`);
#   2. `cuzk-porep stats` (synthesis full vs witness-only, blob bytes, decode) on this host;
#   3. `cuzk-porep prove`: CPU and CUDA side by side once, then timed CUDA proofs (verify_seal);
#   4. SupraSeal (`ssa prove-ss`) on the same parameters file and C1;
#   5. `cuzk-porep bench`: the local cluster with the CUDA GPU node (fetch, decode, prove per
#      partition).
# Runs from a checkout (kernels/scripts/device-porep.sh) or from the pack (.device/run-porep.sh).

usage() {
  cat <<'EOF'
usage: device-porep.sh [options]

The real 2 KiB PoRep partition on this GPU host: checks, GPU parameters, witness
statistics, timed proofs beside SupraSeal, and the local cluster's bench, with
the binaries and C1 kernels/scripts/pack-device.sh packs into .device/.

options (a flag wins over the environment variable in brackets):
  --out DIR          where the logs go [OUT] (default ./cuzk-gpu-porep)
  --time-limit SECS  the whole run's time; the cluster bench gets what the
                     earlier steps leave [TOTAL] (default 560)
  --no-checks        skip step 0, cuzk-gpu-check [CHECKS=0]
  --bin DIR          the unpacked binaries (default: .device/bin, unpacked
                     there from .device/*.gz where missing or older)
  -h, --help         this text

further environment: CHECK_BUDGET (seconds for step 0, default 200),
CUZK_PARAM_CACHE (parameters, default /tmp/cuzk-params).
EOF
}
die() { echo "device-porep.sh: $*" >&2; exit 1; }

OUT=${OUT:-./cuzk-gpu-porep}
TOTAL=${TOTAL:-560}
. "$(dirname "${BASH_SOURCE[0]}")/gpu-host.sh"
checks_out_time_bin "$@"
need_bins "$B" cuzk-porep cuzk-gpu-check nats-server
C1=$PACK/c1-2k.json
[ -f "$C1" ] || die "$C1 missing: pack-device.sh copies it from the SupraSeal anchor (ANCHOR=DIR)"
need_gpu

# One parameter directory for every circuit; filecoin-proofs reads it under its own name too.
P=${CUZK_PARAM_CACHE:-/tmp/cuzk-params}
export CUZK_PARAM_CACHE=$P FIL_PROOFS_PARAMETER_CACHE=$P NATS_SERVER=$B/nats-server
mkdir -p "$P"
TIMEV=(); [ -x /usr/bin/time ] && TIMEV=(/usr/bin/time -v)
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "cpus: $(nproc); $(grep MemTotal /proc/meminfo); out: $OUT"
step() { echo "== $1 (t=${SECONDS}s)"; }
if [ "${CHECKS:-1}" != 0 ]; then
  step "0. gpu-check"
  timeout ${CHECK_BUDGET:-200} $B/cuzk-gpu-check --max-log 22 --g2-max-log 20 --bench-max-log 24 --reps 5 \
    --partition-logs 20 >$OUT/gpu-check.log 2>&1
  echo "gpu-check exit $?"; grep -E "FAIL|checks:" $OUT/gpu-check.log | tail -4
fi
step "1. params 2KiB (GPU generator)"
"${TIMEV[@]}" $B/cuzk-porep params --sector-size 2KiB --engine cuda >$OUT/params.log 2>&1
echo "params exit $?"; grep -E "Elapsed|Maximum resident|ERROR|error" $OUT/params.log | head -5; ls -la $FIL_PROOFS_PARAMETER_CACHE
step "2. stats"
$B/cuzk-porep stats --sector-size 2KiB --sector "$C1" --json >$OUT/stats.json 2>$OUT/stats.log; echo "stats exit $?"; cat $OUT/stats.json
step "3. prove (cuzk, CUDA)"
timeout 150 $B/cuzk-porep prove --sector-size 2KiB --sector "$C1" --engine cuda --runs 10 --json \
  >$OUT/prove.log 2>&1; echo "prove exit $?"
step "4. SupraSeal on the same parameters and C1"
if [ -x $B/ssa ]; then
  (cd "$PACK" && timeout 120 $B/ssa prove-ss c1-2k.json 10 10 1 >$OUT/ss.log 2>&1; echo "ssa exit $?")
else
  echo "no ssa packed: skipped"
fi
left=$((TOTAL - SECONDS - 10))
step "5. cluster bench (CUDA GPU node), budget ${left}s"
timeout $left $B/cuzk-porep bench --sector-size 2KiB --sector "$C1" --engine cuda --runs 6 --no-filecoin \
  >$OUT/bench.log 2>&1; echo "bench exit $?"
echo "== gpu-check tables"; sed -n '/^benchmark on/,$p' $OUT/gpu-check.log 2>/dev/null
echo "== prove"; grep -v -E "INFO|WARN" $OUT/prove.log | tail -12
echo "== supraseal"; grep -E "SUMMARY|median|batch|verify|rc=|error" $OUT/ss.log 2>/dev/null | tail -12
echo "== cluster bench"; grep -v -E "INFO|WARN|DEBUG" $OUT/bench.log | tail -40
