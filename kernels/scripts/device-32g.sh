#!/bin/bash
# GPU host side (nothing is built here): 32 GiB PoRep partitions end to end, the real 2 KiB
# partition beside SupraSeal, blob transfer, all collected into OUT/h200.json (the object
# docs/results/h200.json holds) by h200-results.py. Runs on any Linux host with an NVIDIA
# driver and the binaries kernels/scripts/pack-device.sh packs into .device/: from a checkout
# (bash kernels/scripts/device-32g.sh, the pack in the checkout's .device/) or from the pack
# itself (bash .device/run-32g.sh). `--help` prints the options and steps.

usage() {
  cat <<'EOF'
usage: device-32g.sh [options]

32 GiB PoRep partitions end to end on this GPU host, beside SupraSeal, with the
real 2 KiB partition and the witness-blob transfer. Results go to OUT/h200.json
(the object docs/results/h200.json holds), OUT/results.json and OUT/logs/.

options (a flag wins over the environment variable in brackets):
  --out DIR             where logs/, results.json and h200.json go [OUT]
                        (default ./cuzk-gpu-results)
  --time-limit SECS     plan the steps within SECS seconds from the start: a step
                        that would not finish in the time left is skipped and
                        long commands are cut to it [TOTAL] (default: none, every
                        asked step runs to the end)
  --steps "a b c"       the steps to run, or none [STEPS] (default: kernels blobs
                        params32 drain32x1 drain32 budgets 2k ss32)
  --budgets "15GiB …"   device memory budgets for the step budgets, "whole" for
                        the whole card; suffixes -lN and -wN for N lanes and
                        N GPU workers, -x for XYZZ accumulation in every MSM
                        (whole-l1, whole-w3-l2, 15GiB-x) [BUDGETS]
                        (default: 15GiB whole 22GiB 30GiB 75GiB)
  --budget-workers N    GPU workers per device in the budgets' drains other
                        than the whole card's: partitions that can share a
                        streamed pass of L, A and B [BUDGET_WORKERS] (default:
                        the node's default)
  --synth-in-flight N   partitions the drains synthesize at once
                        [SYNTH_IN_FLIGHT] (default 8; 6 suits 16 cores)
  --bin DIR             the unpacked binaries (default: bin/ beside the packed
                        files, .device/bin, unpacked there from .device/*.gz
                        where missing or older than the pack)
  --work DIR            scratch for the parameters, matrices and synthetic C1
                        (about 60 GB for the 32 GiB steps), kept: a later run
                        reuses them (default /tmp/cuzk-32g)
  -h, --help            this text

steps, in the order they run:
  kernels    the kernels at a 32 GiB partition's sizes without its parameters:
             GPU-vs-CPU checks up to 2^22, the 2 KiB partition by both backends
             (every step compared, verify_seal; again with every G1 MSM
             batch-affine), H and the G1 MSM at 2^27 (MSM windows, and the
             batch-affine and XYZZ accumulations, side by side, each checked
             exactly), every H kernel's time under ncu (cuzk-gpu-check
             --large-logs 27)
  blobs      witness-blob MB/s: one object per blob vs striped over 1 and 4
             buckets, through 1 to 16 connections (cuzk-load blobs); the nodes'
             layout with the buckets in memory, and on each further packed
             nats-server (pack-device.sh NATS_ALT)
  params32   32 GiB test parameters on the GPU (constraint matrices first)
  drain32x1  a synthetic 32 GiB C1, its 10 partitions synthesized into the
             queue, then drained by one GPU node on GPU 0 (cuzk-porep drain)
  budgets    that drain at each budget of --budgets: the plan (cuzk gpu-node
             --explain-plan), time per partition, device peak, host-to-device
             bytes per partition, GPU busy, the node's host RSS
  drain32    the drain on every visible GPU: one sector's wall time on all
  2k         2 KiB: parameters (GPU), our prove vs SupraSeal on the same file
             and C1, the one-box throughput of ONE_BOX_JOBS real jobs (synth
             node + GPU node on ONE_BOX_CPUS cores and GPU 0) with the node's
             default GPU settings, then with each of ONE_BOX_VARIANTS
  witness    witness generation of one partition, native vs gadgets (wall and
             CPU seconds, checked equal; cuzk-porep stats): the real 2 KiB C1
             and partition 0 of the synthetic 32 GiB C1
  postwit    the same for a synthetic 32 GiB WindowPoSt partition (2,349
             sectors; cuzk-porep post-witness)
  onebox32   synthetic 32 GiB sectors through ONE host: synth node and GPU
             node in one process on GPU 0, a warm-up sector then ONE_BOX_SECTORS
             (default 3) at once: seconds per sector (batch wall / sectors), synthesis
             core-seconds per partition, GPU busy, host RSS (cuzk-porep bench)
  snapwit    witness generation of a synthetic 32 GiB SnapDeals partition (86
             challenges), native vs gadgets (cuzk-porep snap-witness)
  ss32x3     SupraSeal's one-partition prove of the synthetic C1, 3 timed runs
             (ssa32 prove-ss32 --runs 3), for the budgets' comparison
  ss32       SupraSeal (the anchor's 32 GiB build, ssa32) on partition 0
  The 32 GiB steps after params32 (budgets, drains, onebox32) need its parameters (from this run or an
  earlier one with the same --work); ss32x3 and ss32 run only when ssa32 is
  packed.

further environment: MSM_WINDOWS (kernels, default 19,20,22,24), NCU_KERNELS
(kernels, default 'ntt_|fr_|h_'), CONNECTIONS (blobs, default 1,2,4,8,16),
NATS=nats-server-<version> (every step on that packed server), GPU_ARGS (the
drains' GPU node, default --gpu-backend=cuda), ONE_BOX_CPUS (2k, default 16),
ONE_BOX_JOBS (2k, default 40), ONE_BOX_VARIANTS (2k, default "l1 w3 w4": wN sets
--gpu-workers N, lN --gpu-lanes N, as in w4l3),
SYNTH_JOBS (2k: synth jobs in flight), ONE_BOX_SECTORS and ONE_BOX_SYNTH_MEMORY
(onebox32, default 3 and 40GiB: the synth node's share beside the GPU node's key).

example:
  bash kernels/scripts/device-32g.sh --steps "params32 drain32x1 2k" \
    --synth-in-flight 6 --time-limit 560
EOF
}

die() { echo "device-32g.sh: $*" >&2; exit 1; }

OUT=${OUT:-./cuzk-gpu-results}
TIME_LIMIT=${TOTAL:-}
STEPS=${STEPS:-kernels blobs params32 drain32x1 drain32 budgets 2k ss32}
BUDGETS=${BUDGETS:-15GiB whole 22GiB 30GiB 75GiB}
BUDGET_WORKERS=${BUDGET_WORKERS:-}
SYNTH_IN_FLIGHT=${SYNTH_IN_FLIGHT:-8}
B=
W=/tmp/cuzk-32g
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --out|--time-limit|--steps|--budgets|--budget-workers|--synth-in-flight|--bin|--work)
      [ $# -ge 2 ] || die "$1 needs a value (--help)"
      opt=$1 val=$2; shift 2 ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
  case "$opt" in
    --out) OUT=$val ;;
    --time-limit) TIME_LIMIT=$val ;;
    --steps) STEPS=$val ;;
    --budgets) BUDGETS=$val ;;
    --budget-workers) BUDGET_WORKERS=$val ;;
    --synth-in-flight) SYNTH_IN_FLIGHT=$val ;;
    --bin) B=$val ;;
    --work) W=$val ;;
    *) die "unknown option '$opt' (--help)" ;;
  esac
done
case "$TIME_LIMIT" in ''|*[!0-9]*) [ -z "$TIME_LIMIT" ] || die "--time-limit takes whole seconds, not '$TIME_LIMIT'" ;; esac
case "$SYNTH_IN_FLIGHT" in ''|*[!0-9]*) die "--synth-in-flight takes a count, not '$SYNTH_IN_FLIGHT'" ;; esac
case "$BUDGET_WORKERS" in *[!0-9]*) die "--budget-workers takes a count, not '$BUDGET_WORKERS'" ;; esac

. "$(dirname "${BASH_SOURCE[0]}")/gpu-host.sh"
B=${B:-$PACK/bin}
RESULTS_PY=
for f in "$HERE/h200-results.py" "$PACK/h200-results.py"; do [ -f "$f" ] && { RESULTS_PY=$f; break; }; done

command -v python3 >/dev/null || die "python3 is needed (results and timings)"
mkdir -p "$OUT/logs" "$W/params" || die "cannot create $OUT or $W"
OUT=$(cd "$OUT" && pwd); W=$(cd "$W" && pwd)
L=$OUT/logs; R=$OUT/results.json

unpack "$B"
B=$(cd "$B" && pwd)

asked() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
# What the asked steps need, checked before anything runs.
missing=()
for s in $STEPS; do
  case "$s" in
    none) need=() ;;
    kernels) need=(bin/cuzk-gpu-check bin/cuzk-porep pack/c1-2k.json gpu) ;;
    blobs) need=(bin/cuzk-load bin/nats-server) ;;
    params32) need=(bin/cuzk-porep gpu) ;;
    drain32x1|drain32) need=(bin/cuzk-porep bin/cuzk bin/nats-server gpu) ;;
    budgets) need=(bin/cuzk-porep bin/cuzk bin/nats-server gpu) ;;
    2k) need=(bin/cuzk-porep bin/cuzk bin/nats-server pack/c1-2k.json gpu) ;;
    ss32x3|ss32) need=(gpu) ;;
    witness) need=(bin/cuzk-porep pack/c1-2k.json) ;;
    postwit|snapwit) need=(bin/cuzk-porep) ;;
    onebox32) need=(bin/cuzk-porep bin/nats-server gpu) ;;
    *) die "unknown step '$s' (--help lists them)" ;;
  esac
  for x in "${need[@]}"; do
    case "$x" in
      gpu) command -v nvidia-smi >/dev/null || missing+=("nvidia-smi (step $s needs an NVIDIA driver)") ;;
      bin/*) [ -x "$B/${x#bin/}" ] || missing+=("$B/${x#bin/} (step $s)") ;;
      pack/*) [ -f "$PACK/${x#pack/}" ] || missing+=("$PACK/${x#pack/} (step $s)") ;;
    esac
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  printf 'device-32g.sh: missing:\n' >&2; printf '  %s\n' "${missing[@]}" | sort -u >&2
  die "pack the binaries with kernels/scripts/pack-device.sh on a build machine and copy .device/ here (or point --bin at them)"
fi

# One parameter directory for every circuit; filecoin-proofs reads it under its own name too.
export FIL_PROOFS_PARAMETER_CACHE=$W/params CUZK_PARAM_CACHE=$W/params NATS_SERVER=$B/${NATS:-nats-server} TMPDIR=$W
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
else
  echo "nvidia-smi not found: no NVIDIA driver on this host"
fi
echo "cpus $(nproc); $(grep MemTotal /proc/meminfo); disk: $(df -h "$W" | tail -1)"
echo "steps: $STEPS; time limit: ${TIME_LIMIT:-none}; out: $OUT; binaries: $B; work: $W"
json() { python3 - "$@" <<'PY'
import json, os, sys
path, key, src = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(path)) if os.path.exists(path) else {}
try:
    val = json.loads(src)
except Exception:
    val = src
d[key] = val
json.dump(d, open(path, "w"), indent=1, sort_keys=True)
PY
}
# Seconds left of the time limit (without one, more than any step takes).
left() { if [ -n "$TIME_LIMIT" ]; then echo $((TIME_LIMIT - SECONDS)); else echo $((1000000000 - SECONDS)); fi; }
# step NAME NEEDED_SECONDS: true when NAME is asked for and NEEDED_SECONDS remain.
step() {
  asked "$1" || return 1
  if [ "$(left)" -lt "$2" ]; then echo "== $1 skipped: $(left) s left, needs ~$2"; return 1; fi
  echo "== $1 (t=${SECONDS}s)"
}
since() { python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), ${2:-1}))" "$1"; }
# Results so far, after every step: a run cut short still leaves what it measured.
collect() {
  if [ -n "$RESULTS_PY" ]; then python3 "$RESULTS_PY" "$R" "$L" "$OUT/h200.json" >/dev/null
  else echo "h200-results.py not found beside this script or in $PACK: no h200.json"; fi
}
# GNU time's peak RSS in the parameters' log, where it is installed.
TIMEV=(); [ -x /usr/bin/time ] && TIMEV=(/usr/bin/time -v)

# The 2 KiB test parameters, timed only when they were generated in this run (a later step
# finds the earlier step's).
params2k() {
  local t0; t0=$(date +%s.%N)
  $B/cuzk-porep params --sector-size 2KiB --engine cuda --force-insecure >$L/params2k.log 2>&1
  grep -q "parameters written" $L/params2k.log && json $R params_gen_2kib_s "$(since $t0 2)"
}
# The synthetic 32 GiB C1 the drains and SupraSeal prove, made once per work directory.
syn32() { [ -f $W/syn32.json ] || $B/cuzk-porep synthetic-c1 --sector-size 32GiB --out $W/syn32.json; }

if step kernels 240; then
  WINDOWS=${MSM_WINDOWS:-19,20,22,24}
  timeout 150 $B/cuzk-gpu-check --no-bench --max-log 22 --g2-max-log 20 >$L/check.log 2>&1
  echo "checks rc=$?"; grep -E "FAIL|checks:" $L/check.log | tail -5
  params2k
  timeout 120 $B/cuzk-porep prove --sector-size 2KiB --sector "$PACK/c1-2k.json" --engine cuda --runs 5 >$L/check2k.log 2>&1
  echo "2 KiB prove rc=$?"; grep -v -E " INFO | DEBUG" $L/check2k.log | tail -8
  # The same with every G1 MSM batch-affine (at 2 KiB by size they are XYZZ).
  timeout 120 $B/cuzk-porep prove --sector-size 2KiB --sector "$PACK/c1-2k.json" --engine cuda --runs 5 \
    --force-affine >$L/check2k-affine.log 2>&1
  echo "2 KiB prove, batch-affine forced rc=$?"; grep -v -E " INFO | DEBUG" $L/check2k-affine.log | tail -3
  timeout $(( $(left) - 100 )) $B/cuzk-gpu-check --no-check --no-bench --reps 3 --large-logs 27 \
    --msm-windows $WINDOWS >$L/large.log 2>&1
  echo "large rc=$?"; grep -E "FAIL|PASS|^\|" $L/large.log
  # Every H kernel at 2^27 (NCU_KERNELS: another regex, e.g. 'msm_' for the MSM's), ms per run.
  if command -v ncu >/dev/null; then
    timeout $(( $(left) - 20 )) ncu --clock-control none --metrics gpu__time_duration.sum --csv \
      -k regex:"${NCU_KERNELS:-ntt_|fr_|h_}" $B/cuzk-gpu-check --no-check --no-bench --reps 1 \
      --large-logs 27 --msm-windows ${WINDOWS%%,*} >$L/h-kernels.csv 2>$L/ncu.err
  else
    echo "ncu not found: no kernel durations"
  fi
  [ -f $L/h-kernels.csv ] && python3 - $L/h-kernels.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if rows:
    hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value"); ui = hdr.index("Metric Unit")
    scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}
    tot = collections.Counter(); cnt = collections.Counter()
    for r in rows[1:]:
        name = r[ki].split("(")[0]; tot[name] += float(r[vi].replace(",", "")) * scale[r[ui]]; cnt[name] += 1
    # Runs profiled (the warm-up, the timed ones, an exact check's): the fewest launches of any
    # kernel, as each runs at least once a run.
    runs = min(cnt.values())
    print(f"kernels at 2^27: {sum(tot.values()) / runs:.1f} ms per run")
    for k, v in tot.most_common():
        print(f"  {k:20s} {cnt[k] // runs:3d} launches {v / runs:8.2f} ms")
PY
  collect
fi

if step blobs 60; then
  conns=--connections=${CONNECTIONS:-1,2,4,8,16}
  timeout $(( $(left) - 5 )) $B/cuzk-load blobs --mb 80 --count 8 $conns >$L/blobs.log 2>&1
  timeout $(( $(left) - 5 )) $B/cuzk-load blobs --mb 80 --count 8 --in-flight 4 $conns 2>&1 | grep "|" >$L/blobs-4.log
  cat $L/blobs.log $L/blobs-4.log | grep "|"
  # The nodes' layout with the buckets in the server's memory: what the file store costs.
  for n in 1 4; do
    echo "memory storage, $n in flight:"
    timeout $(( $(left) - 5 )) $B/cuzk-load blobs --mb 80 --count 8 --in-flight $n --buckets 4 \
      --connections 4 --storage memory 2>&1 | grep "|" | tee $L/blobs-memory-$n.log
  done
  # The nodes' layout on each further server: what a newer nats-server's file store gives.
  for alt in $B/nats-server-*; do
    [ -x "$alt" ] || continue
    v=${alt##*/nats-server-}
    for n in 1 4; do
      echo "nats-server $v, $n in flight:"
      NATS_SERVER=$alt timeout $(( $(left) - 5 )) $B/cuzk-load blobs --mb 80 --count 8 --in-flight $n \
        --buckets 4 --connections 4 2>&1 | grep "|" | tee $L/blobs-nats-$v-$n.log
    done
  done
  collect
fi

if step params32 150; then
  # What the disk writes once the page cache is full: the floor under writing a 47 GB file.
  dd if=/dev/zero of=$W/disk-probe bs=1M count=4096 conv=fdatasync 2>&1 | tail -1 | tee $L/disk-probe.log
  rm -f $W/disk-probe
  t0=$(date +%s.%N)
  # --force-insecure: this scratch directory is ours; the marker files still label them.
  if timeout $(( $(left) - 20 )) "${TIMEV[@]}" $B/cuzk-porep params --sector-size 32GiB --engine cuda --force-insecure >$L/params32.log 2>&1; then
    json $R params_gen_32gib_s "$(since $t0)"
  else echo "32 GiB parameters failed or ran out of time"; fi
  grep -E "matrices ready|generation phases|parameters written|synced|Elapsed|Maximum resident|rror" $L/params32.log | cut -c1-300
  collect
fi

# drain NAME KEY [ENV...]: one drain of the synthetic sector, its JSON under KEY.
drain() {
  local name=$1 key=$2; shift 2
  syn32
  # cuzk_kernels=debug: the GPU node logs each MSM's time, which the drain prints; and
  # cuzk_common::objects=debug each blob's and stripe's read.
  env RUST_LOG=info,cuzk_kernels=debug,cuzk_common::objects=debug "$@" timeout $(( $(left) - 10 )) $B/cuzk-porep drain --sector-size 32GiB --sector $W/syn32.json \
    --synth-partitions-in-flight $SYNTH_IN_FLIGHT --gpu-args="${GPU_ARGS:---gpu-backend=cuda}" --json $L/$name.json \
    >$L/$name.log 2>&1; echo "$name rc=$?"
  grep -v -E " INFO | WARN |DEBUG" $L/$name.log | tail -30
  # Where the GPU node's blob reads spend their time (medians over the drain's reads).
  python3 - $L/$name.log <<'PY'
import re, statistics, sys
lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in open(sys.argv[1], errors="replace")]
for what in ("stripe read", "object read"):
    rows = [dict(re.findall(r"(\w+_ms)=([\d.]+)", l)) for l in lines if what in l]
    keys = sorted({k for r in rows for k in r})
    if rows:
        print(f"{what} ({len(rows)}): " + ", ".join(
            f"{k} {statistics.median(float(r[k]) for r in rows if k in r):.1f}" for k in keys))
PY
  [ -f $L/$name.json ] && json $R $key "$(cat $L/$name.json)"
  collect
}
if step drain32x1 150; then drain drain32x1 drain_32gib_x1 CUDA_VISIBLE_DEVICES=0; fi
if step budgets 150; then
  syn32
  preload='[{"name":"porep-c2","params":{"sector_size":"32GiB","sector_id":1,"miner":"f01234"}}]'
  for b in $BUDGETS; do
    step budgets 120 >/dev/null || { echo "== budget $b skipped: $(left) s left"; continue; }
    echo "== budget $b (t=${SECONDS}s)"
    flag=() size=${b%%-*} workers=
    [ "$size" = whole ] || workers=$BUDGET_WORKERS
    [[ $b =~ -w([0-9]+) ]] && workers=${BASH_REMATCH[1]}
    [[ $b =~ -l([0-9]+) ]] && flag+=("--gpu-lanes=${BASH_REMATCH[1]}")
    [[ $b =~ -x($|-) ]] && flag+=("--gpu-msm-accumulation=xyzz")
    [ "$size" = whole ] || flag+=("--gpu-memory-budget=$size")
    [ -z "$workers" ] || flag+=("--gpu-workers=$workers")
    $B/cuzk gpu-node --allow-test-params --gpu-preload "$preload" "${flag[@]}" --explain-plan 2>&1 | tee $L/plan-$b.log | tail -4
    gpu_args=$(echo --gpu-backend=cuda "${flag[@]}")
    GPU_ARGS="$gpu_args" drain budget-$b "budget_$b" CUDA_VISIBLE_DEVICES=0
  done
fi
if step drain32 150; then drain drain32 drain_32gib; fi

if step 2k 100; then
  params2k
  timeout 120 $B/cuzk-porep prove --sector-size 2KiB --sector "$PACK/c1-2k.json" --engine cuda --runs 10 --json >$L/prove2k.log 2>&1
  tail -1 $L/prove2k.log | grep -q prove_ms && json $R porep_2kib "$(tail -1 $L/prove2k.log)"
  # The one-box comparison on a 16-core, one-GPU box, on any host: 16 cores and one GPU for
  # SupraSeal's batches and for our synth node + GPU node alike.
  one=(taskset -c 0-$(( ${ONE_BOX_CPUS:-16} - 1 )) env CUDA_VISIBLE_DEVICES=0)
  json $R one_box "\"${ONE_BOX_CPUS:-16} cores (taskset), GPU 0\""
  [ -x $B/ssa ] && (cd "$PACK" && timeout 150 "${one[@]}" $B/ssa prove-ss c1-2k.json 10 10 1 >$L/ss2k.log 2>&1)
  grep SUMMARY $L/ss2k.log 2>/dev/null
  # The node's default GPU settings first (throughput2k.log), then each of ONE_BOX_VARIANTS.
  for v in default ${ONE_BOX_VARIANTS:-l1 w3 w4}; do
    log=$L/throughput2k.log key=throughput_2kib flag=()
    if [ "$v" != default ]; then
      log=$L/throughput2k-$v.log key=throughput_2kib_$v
      [[ $v =~ w([0-9]+) ]] && flag+=(--gpu-workers "${BASH_REMATCH[1]}")
      [[ $v =~ l([0-9]+) ]] && flag+=(--gpu-lanes "${BASH_REMATCH[1]}")
    fi
    timeout $(( $(left) - 10 )) "${one[@]}" $B/cuzk-porep bench --sector-size 2KiB --sector "$PACK/c1-2k.json" --engine cuda --runs 3 \
      --no-filecoin --throughput ${ONE_BOX_JOBS:-40} ${SYNTH_JOBS:+--synth-jobs-in-flight $SYNTH_JOBS} "${flag[@]}" >$log 2>&1
    echo "GPU settings $v: $(grep -E "^throughput" $log | tail -1)"
    grep -q '"jobs_per_s"' $log && json $R $key "$(grep '"jobs_per_s"' $log | tail -1)"
  done
  collect
fi

if step witness 150; then
  timeout 120 $B/cuzk-porep stats --sector-size 2KiB --sector "$PACK/c1-2k.json" --json >$L/witness2k.log 2>&1
  echo "2 KiB witness rc=$?"; tail -1 $L/witness2k.log
  grep -q native_witness_core_s $L/witness2k.log && json $R witness_2kib "$(tail -1 $L/witness2k.log)"
  syn32
  timeout $(( $(left) - 5 )) $B/cuzk-porep stats --sector-size 32GiB --sector $W/syn32.json --witness-only \
    >$L/witness32.log 2>&1; echo "32 GiB witness rc=$?"; tail -1 $L/witness32.log
  grep -q native_witness_core_s $L/witness32.log && json $R witness_32gib "$(tail -1 $L/witness32.log)"
  collect
fi

if step postwit 420; then
  timeout $(( $(left) - 5 )) $B/cuzk-porep post-witness --kind window --sector-size 32GiB \
    >$L/postwit32.log 2>&1; echo "32 GiB WindowPoSt witness rc=$?"; tail -8 $L/postwit32.log
  grep -q native_witness_core_s $L/postwit32.log && json $R window_post_32gib "$(tail -1 $L/postwit32.log)"
  collect
fi

if step onebox32 240; then
  syn32
  timeout $(( $(left) - 5 )) env CUDA_VISIBLE_DEVICES=0 $B/cuzk-porep bench --sector-size 32GiB --sector $W/syn32.json \
    --engine cuda --no-filecoin --runs 0 --throughput ${ONE_BOX_SECTORS:-3} \
    --synth-memory-budget ${ONE_BOX_SYNTH_MEMORY:-40GiB} >$L/onebox32.log 2>&1; echo "onebox32 rc=$?"
  grep -v -E " INFO | WARN |DEBUG" $L/onebox32.log | tail -14
  grep -q '"sector_s"' $L/onebox32.log && json $R one_box_32gib "$(grep '"sector_s"' $L/onebox32.log | tail -1)"
  collect
fi

if step snapwit 120; then
  timeout $(( $(left) - 5 )) $B/cuzk-porep snap-witness --sector-size 32GiB \
    >$L/snapwit32.log 2>&1; echo "32 GiB SnapDeals witness rc=$?"; tail -8 $L/snapwit32.log
  grep -q native_witness_core_s $L/snapwit32.log && json $R snap_32gib "$(tail -1 $L/snapwit32.log)"
  collect
fi

if [ -x $B/ssa32 ] && step ss32x3 200; then
  syn32
  timeout $(( $(left) - 5 )) $B/ssa32 prove-ss32 $W/syn32.json --partition 0 --runs 3 >$L/ss32.log 2>&1; echo "ssa32 rc=$?"
  grep -E "run|SUMMARY|SRS|rror" $L/ss32.log | tail -6
  collect
elif asked ss32x3 && [ ! -x $B/ssa32 ]; then echo "== ss32x3 skipped: no ssa32 in $B"
fi

if [ -x $B/ssa32 ] && step ss32 120; then
  syn32
  timeout $(( $(left) - 5 )) $B/ssa32 prove-ss $W/syn32.json 1 0 0 >$L/ss32.log 2>&1; echo "ssa32 rc=$?"
  grep -E "run|SUMMARY|SRS|rror" $L/ss32.log | tail -6
elif asked ss32 && [ ! -x $B/ssa32 ]; then echo "== ss32 skipped: no ssa32 in $B"
fi
collect
echo "== results ($OUT)"; [ -f "$OUT/h200.json" ] && { cat "$OUT/h200.json"; echo; }
exit 0
