#!/bin/bash
# GPU host side (nothing is built here): (0) cuzk-gpu-check's GPU-vs-CPU checks and benchmark
# table (NTT, MSM, H pipeline), (1) the whole cluster on the CUDA backend, (2) whole-partition
# proves CPU vs CUDA at 2^20 / 2^22, (3) G1 MSM 2^24. Runs from a checkout
# (kernels/scripts/device-all.sh) or from the pack (.device/run-all.sh); `--help` for options.

usage() {
  cat <<'EOF'
usage: device-all.sh [options]

The kernels' checks and benchmark table, the cluster on the CUDA backend, whole
partitions CPU vs CUDA at 2^20 and 2^22, and the G1 MSM at 2^24, on this GPU
host, with the binaries kernels/scripts/pack-device.sh packs into .device/.

options (a flag wins over the environment variable in brackets):
  --out DIR          where the logs go [OUT] (default ./cuzk-gpu-all)
  --time-limit SECS  the whole run's time; the partitions and the G1 MSM get
                     what the earlier steps leave [TOTAL] (default 470)
  --no-checks        skip step 0, the checks and benchmark table [CHECKS=0]
  --bin DIR          the unpacked binaries (default: .device/bin, unpacked
                     there from .device/*.gz where missing or older)
  -h, --help         this text

further environment: CHECK_BUDGET (seconds for step 0, default 320).
EOF
}
die() { echo "device-all.sh: $*" >&2; exit 1; }

OUT=${OUT:-./cuzk-gpu-all}
TOTAL=${TOTAL:-470}
. "$(dirname "${BASH_SOURCE[0]}")/gpu-host.sh"
checks_out_time_bin "$@"
need_bins "$B" cuzk cuzk-gpu-check nats-server
need_gpu

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "cpus: $(nproc); out: $OUT"
if [ "${CHECKS:-1}" != 0 ]; then
  echo "== 0. checks and benchmark table"
  timeout ${CHECK_BUDGET:-320} $B/cuzk-gpu-check --max-log 24 --g2-max-log 22 --bench-max-log 26 --reps 5 \
    >$OUT/gpu-check.log 2>&1
  echo "gpu-check exit $? after ${SECONDS} s"; grep -E "FAIL|checks:" $OUT/gpu-check.log | tail -3
fi
export CUZK_PARAM_CACHE=${CUZK_PARAM_CACHE:-/tmp/cuzk-params}; mkdir -p $CUZK_PARAM_CACHE
export NATS_SERVER=$B/nats-server
echo "== 1. cuzk local --gpu-backend cuda (sha256 8 blocks x 4 partitions)"
timeout 170 $B/cuzk local --gpu-backend cuda --circuit sha256 \
  --params '{"blocks":8,"partitions":4}' >$OUT/e2e.log 2>&1
echo "e2e exit $? after ${SECONDS} s"
grep -v -E "DEBUG|TRACE" $OUT/e2e.log | tail -45
left=$((TOTAL - SECONDS - 45))
echo "== 2. partitions (budget ${left} s)"
timeout $left $B/cuzk-gpu-check --no-check --no-bench --reps 3 --partition-logs 20,22 \
  >$OUT/partition.log 2>&1
echo "partition exit $? after ${SECONDS} s"
left=$((TOTAL - SECONDS))
if [ $left -gt 25 ]; then
  echo "== 3. G1 MSM 2^24 (budget ${left} s)"
  timeout $left $B/cuzk-gpu-check --no-check --no-bench --reps 7 --g1-logs 24 >$OUT/g1.log 2>&1
  echo "g1 exit $? after ${SECONDS} s"
fi
[ -f $OUT/gpu-check.log ] && { echo "== benchmark table"; sed -n '/^benchmark on/,$p' $OUT/gpu-check.log; }
echo "== partition log"; cat $OUT/partition.log
echo "== g1 log"; cat $OUT/g1.log 2>/dev/null | tail -5
