#!/bin/bash
# Device side (nothing is built here): the device memory plans at small shapes, correctness
# first. Runs on any Linux host with an NVIDIA driver and the packed binaries (.device/*.gz,
# kernels/scripts/pack-device.sh); writes its logs to OUT_DIR.
#   1. cuzk-gpu-check: the kernels, then the toy circuit and a MiMC partition of 2^PLAN_LOG
#      proved under streaming plans, each against the CPU backend and the resident plan's proof;
#   2. 2 KiB test parameters (GPU), the plan `cuzk gpu-node --explain-plan` gives the 2 KiB
#      shape at BUDGET_2K, and `cuzk-porep prove` at that budget: CPU and CUDA side by side,
#      verify_seal on every proof, the proof equal to the resident plan's; then at the default
#      budget for the time beside it.
#
#   usage: device-plans.sh [OUT_DIR]      (env: PLAN_LOG=22, BUDGET_2K=1000MiB)
cd "$(dirname "$0")/.."
OUT_DIR=${1:-${OUT:-/tmp/cuzk-plans}}; mkdir -p "$OUT_DIR"
B=.device/bin; mkdir -p $B
for f in .device/*.gz; do gunzip -c "$f" > "$B/$(basename "$f" .gz)"; done; chmod +x $B/*
P=$(mktemp -d); export CUZK_PARAM_CACHE=$P FIL_PROOFS_PARAMETER_CACHE=$P
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "== 1. gpu-check (t=${SECONDS}s)"
timeout 300 $B/cuzk-gpu-check --no-bench --max-log 16 --g2-max-log 12 --plan-log ${PLAN_LOG:-22} \
  >"$OUT_DIR/check.log" 2>&1
echo "gpu-check rc=$?"; grep -E "FAIL|PASS .*(plan|toy)|plan:|peak|checks:" "$OUT_DIR/check.log" | cut -c1-260
echo "== 2. 2 KiB at ${BUDGET_2K:=1000MiB} (t=${SECONDS}s)"
$B/cuzk-porep params --sector-size 2KiB --engine cuda --force-insecure >"$OUT_DIR/params2k.log" 2>&1
tail -1 "$OUT_DIR/params2k.log" | cut -c1-200
preload='[{"name":"porep-c2","params":{"sector_size":"2KiB","sector_id":1,"miner":"f01234"}}]'
$B/cuzk gpu-node --gpu-preload "$preload" --gpu-memory-budget "$BUDGET_2K" --explain-plan 2>&1 | tail -20
timeout 200 $B/cuzk-porep prove --sector-size 2KiB --sector .device/c1-2k.json --engine cuda --runs 3 \
  --gpu-memory-budget "$BUDGET_2K" >"$OUT_DIR/prove2k-budget.log" 2>&1
echo "prove at $BUDGET_2K rc=$?"; grep -v -E " INFO | DEBUG" "$OUT_DIR/prove2k-budget.log" | tail -12
timeout 120 $B/cuzk-porep prove --sector-size 2KiB --sector .device/c1-2k.json --engine cuda --runs 10 \
  >"$OUT_DIR/prove2k.log" 2>&1
echo "prove at the default budget rc=$?"; grep -v -E " INFO | DEBUG" "$OUT_DIR/prove2k.log" | tail -9
rm -rf "$P"
