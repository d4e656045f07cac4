#!/bin/bash
# Device-side, on a machine with several GPUs (kind nvidia-h200-x2): the whole cluster on the
# CUDA backend with one GPU node that takes every visible device (one worker per GPU), proving
# a 16-partition job; prints which worker proved each partition and the stage timings. Expects
# the pack of kernels/scripts/pack-device.sh in .device/.
cd "$(dirname "$0")/../.."
for f in cuzk nats-server; do gunzip -c .device/$f.gz > /tmp/$f && chmod +x /tmp/$f; done
nvidia-smi -L
export CUZK_PARAM_CACHE=/tmp/cuzk-params
NATS_SERVER=/tmp/nats-server timeout 240 /tmp/cuzk local --gpu-backend cuda --circuit sha256 \
  --params '{"blocks":8,"partitions":16}' >$OUT/multi-gpu.log 2>&1
echo "exit $?"
sed 's/\x1b\[[0-9;]*m//g' $OUT/multi-gpu.log >$OUT/multi-gpu.txt
echo "partitions proved per worker:"
grep "partition proved" $OUT/multi-gpu.txt | grep -o 'worker="[^"]*"' | sort | uniq -c
grep -E "verified|re-verified" $OUT/multi-gpu.txt | tail -2 | cut -c1-160
sed -n '/^stage timings/,$p' $OUT/multi-gpu.txt
