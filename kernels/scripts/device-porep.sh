#!/bin/bash
# Device side, one call (nothing is built here): the witness-only data plane on a real 2 KiB
# PoRep partition, next to SupraSeal in the same run.
#   0. cuzk-gpu-check: kernels and whole partitions, CUDA against the CPU backend (every step
#      compared), then the benchmark tables;
#   1. 2 KiB test parameters from the shape's matrices on the GPU (`cuzk-porep params`);
#   2. `cuzk-porep stats` (synthesis full vs witness-only, blob bytes, decode) on this host;
#   3. `cuzk-porep prove`: CPU and CUDA side by side once, then timed CUDA proofs (verify_seal);
#   4. SupraSeal (`ssa prove-ss`) on the same parameters file and C1;
#   5. `cuzk-porep bench`: the local cluster with the CUDA GPU node (fetch, decode, prove per
#      partition).
# Budgets (s): CHECK_BUDGET, TOTAL.
cd "$(dirname "$0")/.."
B=.device/bin; mkdir -p $B
for f in .device/*.gz; do gunzip -c "$f" > "$B/$(basename "$f" .gz)"; done; chmod +x $B/*
# One parameter directory for every circuit; filecoin-proofs reads it under its own name too.
export CUZK_PARAM_CACHE=/tmp/cuzk-params FIL_PROOFS_PARAMETER_CACHE=/tmp/cuzk-params NATS_SERVER=$B/nats-server
mkdir -p $FIL_PROOFS_PARAMETER_CACHE $CUZK_PARAM_CACHE
TOTAL=${TOTAL:-560}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "cpus: $(nproc); $(grep MemTotal /proc/meminfo)"
step() { echo "== $1 (t=${SECONDS}s)"; }
if [ "${CHECKS:-1}" != 0 ]; then
  step "0. gpu-check"
  timeout ${CHECK_BUDGET:-200} $B/cuzk-gpu-check --max-log 22 --g2-max-log 20 --bench-max-log 24 --reps 5 \
    --partition-logs 20 >$OUT/gpu-check.log 2>&1
  echo "gpu-check exit $?"; grep -E "FAIL|checks:" $OUT/gpu-check.log | tail -4
fi
step "1. params 2KiB (GPU generator)"
/usr/bin/time -v $B/cuzk-porep params --sector-size 2KiB --engine cuda >$OUT/params.log 2>&1
echo "params exit $?"; grep -E "Elapsed|Maximum resident|ERROR|error" $OUT/params.log | head -5; ls -la $FIL_PROOFS_PARAMETER_CACHE
step "2. stats"
$B/cuzk-porep stats --sector-size 2KiB --sector .device/c1-2k.json --json >$OUT/stats.json 2>$OUT/stats.log; echo "stats exit $?"; cat $OUT/stats.json
step "3. prove (cuzk, CUDA)"
timeout 150 $B/cuzk-porep prove --sector-size 2KiB --sector .device/c1-2k.json --engine cuda --runs 10 --json \
  >$OUT/prove.log 2>&1; echo "prove exit $?"
step "4. SupraSeal on the same parameters and C1"
if [ -x $B/ssa ]; then
  (cd .device && timeout 120 bin/ssa prove-ss c1-2k.json 10 10 1 >$OUT/ss.log 2>&1; echo "ssa exit $?")
fi
left=$((TOTAL - SECONDS - 10))
step "5. cluster bench (CUDA GPU node), budget ${left}s"
timeout $left $B/cuzk-porep bench --sector-size 2KiB --sector .device/c1-2k.json --engine cuda --runs 6 --no-filecoin \
  >$OUT/bench.log 2>&1; echo "bench exit $?"
echo "== gpu-check tables"; sed -n '/^benchmark on/,$p' $OUT/gpu-check.log 2>/dev/null
echo "== prove"; grep -v -E "INFO|WARN" $OUT/prove.log | tail -12
echo "== supraseal"; grep -E "SUMMARY|median|batch|verify|rc=|error" $OUT/ss.log 2>/dev/null | tail -12
echo "== cluster bench"; grep -v -E "INFO|WARN|DEBUG" $OUT/bench.log | tail -40
