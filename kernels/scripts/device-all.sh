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
B=
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --no-checks) CHECKS=0; shift; continue ;;
    --out|--time-limit|--bin) [ $# -ge 2 ] || die "$1 needs a value (--help)"; opt=$1 val=$2; shift 2 ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
  case "$opt" in
    --out) OUT=$val ;;
    --time-limit) TOTAL=$val ;;
    --bin) B=$val ;;
    *) die "unknown option '$opt' (--help)" ;;
  esac
done
case "$TOTAL" in ''|*[!0-9]*) die "--time-limit takes whole seconds, not '$TOTAL'" ;; esac

# The packed files: beside this script when it runs from the pack, else the checkout's .device/.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case "$HERE" in */kernels/scripts) PACK=$(dirname "$(dirname "$HERE")")/.device ;; *) PACK=$HERE ;; esac
B=${B:-$PACK/bin}
mkdir -p "$OUT" "$B" || die "cannot create $OUT or $B"
OUT=$(cd "$OUT" && pwd); B=$(cd "$B" && pwd)
for f in "$PACK"/*.gz; do
  [ -e "$f" ] || continue
  n=$B/$(basename "$f" .gz)
  [ "$n" -nt "$f" ] && continue
  { gunzip -c "$f" >"$n.part" && chmod +x "$n.part" && mv "$n.part" "$n"; } || die "cannot unpack $f into $B"
done
for x in cuzk cuzk-gpu-check nats-server; do
  [ -x "$B/$x" ] || die "$B/$x missing: pack with kernels/scripts/pack-device.sh and copy .device/ here (or --bin DIR)"
done
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this host needs an NVIDIA driver"

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
