#!/bin/bash
# Device-side, one call: is the MSM right, how fast, and where its time goes. Steps (STEPS,
# default all): fp — Fp/Fr multiplication checked against the reference CIOS and timed
# (kernels/bench/fp_mul_bench.cu, compiled there); check — cuzk-gpu-check's GPU-vs-CPU checks
# up to 2^CHECK_LOG; g1 — G1 MSM at G1_LOGS, median of 5; durations — every kernel's time in one
# G1 MSM at 2^LOG under ncu; sections — ncu's occupancy / warp-state / scheduler / memory sections
# of chosen kernels (default: the bucket accumulation; SECTIONS_K below). Expects .device/cuzk-gpu-check.gz (and variants cuzk-gpu-check-NAME.gz,
# timed in step g1) and .device/fp_mul_bench.cu.
# The repository root, from kernels/scripts/ or from .device/ (where pack-device.sh copies it).
case "$(dirname "$0")" in */kernels/scripts | kernels/scripts) cd "$(dirname "$0")/../.." ;; *) cd "$(dirname "$0")/.." ;; esac
STEPS=${STEPS:-fp,check,g1,durations,sections}
LOG=${LOG:-24}
CHECK_LOG=${CHECK_LOG:-20}
G1_LOGS=${G1_LOGS:-20,22,24}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
gunzip -c .device/cuzk-gpu-check.gz > /tmp/gc && chmod +x /tmp/gc
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if has fp; then
  echo "== Fp multiplication"
  (cd .device && nvcc -O3 -std=c++17 -arch=sm_90 -I../kernels/cuda fp_mul_bench.cu -o /tmp/fb && /tmp/fb) 2>&1 | tail -9
fi
if has check; then
  echo "== GPU vs CPU checks up to 2^$CHECK_LOG"
  /tmp/gc --no-bench --max-log $CHECK_LOG --g2-max-log $((CHECK_LOG - 2)) >$OUT/check.log 2>&1
  echo "exit $?"; grep -E "FAIL|checks:" $OUT/check.log | tail -5
fi
if has g1; then
  # every build carried: cuzk-gpu-check.gz and variants cuzk-gpu-check-NAME.gz (CUZK_NVCC_FLAGS)
  for z in .device/cuzk-gpu-check*.gz; do
    v=$(basename $z .gz); gunzip -c $z > /tmp/$v && chmod +x /tmp/$v
    echo "== G1 MSM, $v"
    /tmp/$v --no-check --no-bench --reps 5 --g1-logs $G1_LOGS >$OUT/g1-$v.log 2>&1
    echo "exit $?"; grep -E "^\| G1|FAIL" $OUT/g1-$v.log | sort -u
  done
fi
if has durations; then
  echo "== kernel durations, G1 MSM 2^$LOG (ms per MSM)"
  ncu --clock-control none --metrics gpu__time_duration.sum --csv -k regex:'msm_|scan' \
    /tmp/gc --no-check --no-bench --reps 1 --g1-logs $LOG >$OUT/durations.csv 2>$OUT/ncu1.err
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
    /tmp/gc --no-check --no-bench --reps 1 ${SECTIONS_ARGS:---g1-logs $LOG} >$OUT/sections.txt 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Compute \(SM\) Throughput|Warp Cycles Per Issued|Eligible Warps|Bank Conflicts" $OUT/sections.txt | head -${SECTIONS_LINES:-60}
fi
