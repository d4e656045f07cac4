#!/bin/bash
# GPU host side: is the MSM right, how fast, and where its time goes. Steps (--steps, default
# all): fp — Fp/Fr multiplication checked against the reference CIOS and timed
# (kernels/bench/fp_mul_bench.cu, compiled on the host: needs nvcc and a checkout); check —
# cuzk-gpu-check's GPU-vs-CPU checks up to 2^CHECK_LOG; g1 — G1 MSM at G1_LOGS, median of 5;
# durations — every kernel's time in one G1 MSM at 2^LOG under ncu; sections — ncu's occupancy
# / warp-state / scheduler / memory sections of chosen kernels (default: the bucket
# accumulation; SECTIONS_K below). Needs .device/cuzk-gpu-check.gz (and variants
# cuzk-gpu-check-NAME.gz, built with CUZK_NVCC_FLAGS and timed side by side in step g1).
# Runs from a checkout (kernels/scripts/device-profile-msm.sh) or from the pack
# (.device/run-profile-msm.sh, the fp step then needs a checkout around .device/).

usage() {
  cat <<'EOF'
usage: device-profile-msm.sh [options]

The MSM on this GPU host: Fp multiplication checked and timed, the GPU-vs-CPU
checks, G1 MSM timings of every packed cuzk-gpu-check build, each kernel's time
and ncu's sections of chosen kernels.

options (a flag wins over the environment variable in brackets):
  --out DIR        where the logs and ncu reports go [OUT]
                   (default ./cuzk-gpu-msm)
  --steps LIST     comma-separated, of fp,check,g1,durations,sections [STEPS]
                   (default: all)
  --bin DIR        the unpacked binaries (default: .device/bin, unpacked there
                   from .device/*.gz where missing or older)
  -h, --help       this text

further environment: LOG (durations and sections, default 24), CHECK_LOG
(default 20), G1_LOGS (default 20,22,24), SECTIONS_K (kernel regex, default
msm_accumulate_g1), SECTIONS_C (launches, default 1), SECTIONS_ARGS (the
cuzk-gpu-check workload, default --g1-logs LOG), SECTIONS_LINES (default 60),
NVCC (the fp step's compiler, default nvcc).
EOF
}
die() { echo "device-profile-msm.sh: $*" >&2; exit 1; }

OUT=${OUT:-./cuzk-gpu-msm}
STEPS=${STEPS:-fp,check,g1,durations,sections}
B=
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --out|--steps|--bin) [ $# -ge 2 ] || die "$1 needs a value (--help)"; opt=$1 val=$2; shift 2 ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
  case "$opt" in
    --out) OUT=$val ;;
    --steps) STEPS=$val ;;
    --bin) B=$val ;;
    *) die "unknown option '$opt' (--help)" ;;
  esac
done
LOG=${LOG:-24}
CHECK_LOG=${CHECK_LOG:-20}
G1_LOGS=${G1_LOGS:-20,22,24}
has() { [[ ",$STEPS," == *",$1,"* ]]; }

. "$(dirname "${BASH_SOURCE[0]}")/gpu-host.sh"
ROOT=$(dirname "$PACK")
B=${B:-$PACK/bin}
mkdir -p "$OUT" "$B" || die "cannot create $OUT or $B"
OUT=$(cd "$OUT" && pwd); B=$(cd "$B" && pwd)
unpack "$B"
GC=$B/cuzk-gpu-check
[ -x "$GC" ] || die "$GC missing: pack with kernels/scripts/pack-device.sh and copy .device/ here (or --bin DIR)"
need_gpu
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
echo "out: $OUT"
if has fp; then
  echo "== Fp multiplication"
  if [ ! -f "$ROOT/kernels/bench/fp_mul_bench.cu" ]; then
    echo "no checkout around $PACK (kernels/bench/fp_mul_bench.cu): skipped"
  elif ! command -v "${NVCC:-nvcc}" >/dev/null; then
    echo "${NVCC:-nvcc} not found (scripts/install-nvcc.sh installs one; NVCC=PATH): skipped"
  else
    ("${NVCC:-nvcc}" -O3 -std=c++17 -arch=sm_90 -I"$ROOT/kernels/cuda" "$ROOT/kernels/bench/fp_mul_bench.cu" \
      -o "$B/fp_mul_bench" && "$B/fp_mul_bench") 2>&1 | tail -9
  fi
fi
if has check; then
  echo "== GPU vs CPU checks up to 2^$CHECK_LOG"
  $GC --no-bench --max-log $CHECK_LOG --g2-max-log $((CHECK_LOG - 2)) >$OUT/check.log 2>&1
  echo "exit $?"; grep -E "FAIL|checks:" $OUT/check.log | tail -5
fi
if has g1; then
  # every build packed: cuzk-gpu-check and variants cuzk-gpu-check-NAME (CUZK_NVCC_FLAGS)
  for x in "$B"/cuzk-gpu-check*; do
    case "$x" in *.part) continue ;; esac
    [ -x "$x" ] || continue
    v=$(basename "$x")
    echo "== G1 MSM, $v"
    "$x" --no-check --no-bench --reps 5 --g1-logs $G1_LOGS >$OUT/g1-$v.log 2>&1
    echo "exit $?"; grep -E "^\| G1|FAIL" $OUT/g1-$v.log | sort -u
  done
fi
if has durations; then
  echo "== kernel durations, G1 MSM 2^$LOG (ms per MSM)"
  ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:'msm_|scan' \
    $GC --no-check --no-bench --reps 1 --g1-logs $LOG >$OUT/durations.csv 2>$OUT/ncu1.err
  python3 - "$OUT/durations.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}
tot = collections.OrderedDict(); cnt = collections.Counter()
for r in rows[1:]:
    name = r[ki].split("(")[0]
    tot[name] = tot.get(name, 0) + float(r[vi].replace(",", "")) * scale[r[ui]]
    cnt[name] += 1
runs = 2  # the exact check before timing, then one timed run
s = sum(tot.values()) / runs
print(f"all MSM kernels: {s:.1f} ms per MSM")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"{k:28s} {cnt[k] // runs:3d} launches {v / runs:8.2f} ms {100 * v / runs / s:5.1f} %")
PY
fi
if has sections; then
  # SECTIONS_K: the kernels (a regex), SECTIONS_C launches of them, in the workload
  # SECTIONS_ARGS of cuzk-gpu-check (default: the G1 MSM's accumulation at 2^LOG). The whole
  # report is $OUT/sections.txt.
  K=${SECTIONS_K:-msm_accumulate_g1}
  echo "== sections of $K"
  ncu --clock-control none -k regex:"$K" -c ${SECTIONS_C:-1} --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables \
    $GC --no-check --no-bench --reps 1 ${SECTIONS_ARGS:---g1-logs $LOG} >$OUT/sections.txt 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Compute \(SM\) Throughput|Warp Cycles Per Issued|Eligible Warps|Bank Conflicts" $OUT/sections.txt | head -${SECTIONS_LINES:-60}
fi
