#!/bin/bash
# Device side (nothing is built here): 32 GiB PoRep partitions end to end, and the real 2 KiB
# partition beside SupraSeal, with the numbers collected into $OUT/h200.json. Two phases, so a
# call stays inside the device's 10-minute limit; the second reuses the first's files when it
# runs on the same (still warm) machine and redoes what is missing otherwise.
#   PHASE=prep:  2 KiB parameters (GPU) + our prove + SupraSeal on the same file and C1, and the
#                cluster's 2 KiB throughput; 32 GiB parameters on the GPU (matrices captured
#                first); a synthetic 32 GiB C1.
#   PHASE=drain: the synthetic sector's 10 partitions synthesized into the queue, then drained
#                by one GPU node on every visible GPU (`cuzk-porep drain`); SupraSeal (a 32 GiB
#                build of the anchor, ssa32) on partition 0 of the same C1 and parameters file.
# Logs accumulate in $W/logs (the machine keeps them between the phases, $OUT does not) and are
# copied to $OUT with h200.json, the results object kernels/scripts/h200-results.py builds.
cd "$(dirname "$0")/.."
B=.device/bin; mkdir -p $B
for f in .device/*.gz; do [ -x "$B/$(basename "$f" .gz)" ] || { gunzip -c "$f" > "$B/$(basename "$f" .gz)"; chmod +x "$B/$(basename "$f" .gz)"; }; done
W=/tmp/cuzk-32g; L=$W/logs; mkdir -p $W/params $L
# One parameter directory for every circuit; filecoin-proofs reads it under its own name too.
export FIL_PROOFS_PARAMETER_CACHE=$W/params CUZK_PARAM_CACHE=$W/params NATS_SERVER=$B/nats-server TMPDIR=$W
step() { echo "== $1 (t=${SECONDS}s)"; }
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
echo "cpus $(nproc); $(grep MemTotal /proc/meminfo); disk: $(df -h $W | tail -1)"
json() { python3 - "$@" <<'PY'
import json, sys
path, key, src = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(path)) if __import__("os").path.exists(path) else {}
try:
    val = json.loads(src)
except Exception:
    val = src
d[key] = val
json.dump(d, open(path, "w"), indent=1, sort_keys=True)
PY
}
R=$W/results.json
timed() { local t0=$SECONDS; "$@"; local rc=$?; echo "rc=$rc in $((SECONDS - t0)) s"; return $rc; }

if [ "${PHASE:-prep}" = prep ]; then
  step "2 KiB parameters (GPU generator)"
  t0=$(date +%s.%N); timed $B/cuzk-porep params --sector-size 2KiB --engine cuda >$L/params2k.log 2>&1
  json $R params_gen_2kib_s "$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")"
  step "2 KiB: cuzk prove (CUDA) vs SupraSeal, same file and C1"
  timeout 120 $B/cuzk-porep prove --sector-size 2KiB --sector .device/c1-2k.json --engine cuda --runs 10 --json >$L/prove2k.log 2>&1
  tail -1 $L/prove2k.log | grep -q prove_ms && json $R porep_2kib "$(tail -1 $L/prove2k.log)"
  [ -x $B/ssa ] && (cd .device && timeout 150 bin/ssa prove-ss c1-2k.json 10 10 1 >$L/ss2k.log 2>&1)
  grep SUMMARY $L/ss2k.log
  step "2 KiB throughput: synth node + GPU node on this host, 40 jobs at once"
  timeout 200 $B/cuzk-porep bench --sector-size 2KiB --sector .device/c1-2k.json --engine cuda --runs 3 \
    --no-filecoin --throughput 40 ${SYNTH_JOBS:+--synth-jobs-in-flight $SYNTH_JOBS} >$L/throughput2k.log 2>&1
  grep -E "throughput" $L/throughput2k.log | tail -2
  grep -q '"jobs_per_s"' $L/throughput2k.log && json $R throughput_2kib "$(grep '"jobs_per_s"' $L/throughput2k.log | tail -1)"
  step "32 GiB parameters (matrices captured, then the GPU generator)"
  t0=$(date +%s.%N)
  if timeout $((${TOTAL:-570} - SECONDS - 40)) /usr/bin/time -v $B/cuzk-porep params --sector-size 32GiB --engine cuda >$L/params32.log 2>&1; then
    json $R params_gen_32gib_s "$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")"
  else echo "32 GiB parameters failed or ran out of time"; fi
  grep -E "matrices ready|parameters written|constraint matrices captured|Elapsed|Maximum resident|rror" $L/params32.log | cut -c1-300
  ls -la $W/params
  step "synthetic 32 GiB C1"
  timed $B/cuzk-porep synthetic-c1 --sector-size 32GiB --out $W/syn32.json; ls -la $W/syn32.json
fi

if [ "${PHASE:-prep}" = drain ]; then
  [ -f $W/syn32.json ] || { echo "no synthetic C1: run PHASE=prep first on this machine"; exit 1; }
  step "drain: 10 synthetic 32 GiB partitions, prefilled, then one GPU node on every GPU"
  timeout ${DRAIN_BUDGET:-420} $B/cuzk-porep drain --sector-size 32GiB --sector $W/syn32.json \
    --synth-partitions-in-flight ${SYNTH_IN_FLIGHT:-8} --gpu-args="--gpu-backend=cuda" --json $L/drain32.json \
    >$L/drain32.log 2>&1; echo "drain rc=$?"
  grep -v -E " INFO | WARN |DEBUG" $L/drain32.log | tail -45
  [ -f $L/drain32.json ] && json $R drain_32gib "$(cat $L/drain32.json)"
  left=$((${TOTAL:-560} - SECONDS))
  if [ -x $B/ssa32 ] && [ $left -gt 120 ]; then
    step "SupraSeal, partition 0 of the same synthetic C1 and parameters (budget ${left}s)"
    timeout $((left - 10)) $B/ssa32 prove-ss $W/syn32.json 1 0 0 >$L/ss32.log 2>&1; echo "ssa32 rc=$?"
    grep -E "run|SUMMARY|SRS" $L/ss32.log | tail -6
  fi
fi
cp $L/* $OUT/ 2>/dev/null
echo "== results"; python3 kernels/scripts/h200-results.py $R $L $OUT/h200.json
