#!/bin/bash
# Device-side, one call: (0) cuzk-gpu-check's GPU-vs-CPU checks and benchmark table (NTT, MSM,
# H pipeline; skipped with CHECKS=0), (1) the whole cluster on the CUDA backend, (2)
# whole-partition proves CPU vs CUDA at 2^20 / 2^22, (3) G1 MSM 2^24. Nothing is built here.
# TOTAL bounds the command.
cd "$(dirname "$0")/.."
mkdir -p .device/bin
for f in .device/*.gz; do gunzip -c "$f" > ".device/bin/$(basename "$f" .gz)"; done; chmod +x .device/bin/*
TOTAL=${TOTAL:-470}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "cpus: $(nproc)"
if [ "${CHECKS:-1}" != 0 ]; then
  echo "== 0. checks and benchmark table"
  timeout ${CHECK_BUDGET:-320} .device/bin/cuzk-gpu-check --max-log 24 --g2-max-log 22 --bench-max-log 26 --reps 5 \
    >$OUT/gpu-check.log 2>&1
  echo "gpu-check exit $? after ${SECONDS} s"; grep -E "FAIL|checks:" $OUT/gpu-check.log | tail -3
fi
export CUZK_PARAM_CACHE=/tmp/cuzk-params; mkdir -p $CUZK_PARAM_CACHE
export NATS_SERVER=.device/bin/nats-server
echo "== 1. cuzk local --gpu-backend cuda (sha256 8 blocks x 4 partitions)"
NATS_SERVER=.device/bin/nats-server timeout 170 .device/bin/cuzk local --gpu-backend cuda --circuit sha256 \
  --params '{"blocks":8,"partitions":4}' >$OUT/e2e.log 2>&1
echo "e2e exit $? after ${SECONDS} s"
grep -v -E "DEBUG|TRACE" $OUT/e2e.log | tail -45
left=$((TOTAL - SECONDS - 45))
echo "== 2. partitions (budget ${left} s)"
timeout $left .device/bin/cuzk-gpu-check --no-check --no-bench --reps 3 --partition-logs 20,22 \
  >$OUT/partition.log 2>&1
echo "partition exit $? after ${SECONDS} s"
left=$((TOTAL - SECONDS))
if [ $left -gt 25 ]; then
  echo "== 3. G1 MSM 2^24 (budget ${left} s)"
  timeout $left .device/bin/cuzk-gpu-check --no-check --no-bench --reps 7 --g1-logs 24 >$OUT/g1.log 2>&1
  echo "g1 exit $? after ${SECONDS} s"
fi
[ -f $OUT/gpu-check.log ] && { echo "== benchmark table"; sed -n '/^benchmark on/,$p' $OUT/gpu-check.log; }
echo "== partition log"; cat $OUT/partition.log
echo "== g1 log"; cat $OUT/g1.log 2>/dev/null | tail -5
