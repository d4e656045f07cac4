#!/bin/bash
# GPU host side, on a host with several GPUs: the whole cluster on the CUDA backend with one
# GPU node that takes every visible device (one worker per GPU), proving a 16-partition job;
# prints which worker proved each partition and the stage timings. Runs from a checkout
# (kernels/scripts/device-multi-gpu.sh) or from the pack (.device/run-multi-gpu.sh).

usage() {
  cat <<'EOF'
usage: device-multi-gpu.sh [options]

The cluster on every GPU of this host: one GPU node over all visible devices
proves a 16-partition sha256 job; prints the partitions each worker proved and
the stage timings. Needs cuzk and nats-server from kernels/scripts/pack-device.sh
(.device/).

options (a flag wins over the environment variable in brackets):
  --out DIR    where the logs go [OUT] (default ./cuzk-gpu-multi)
  --bin DIR    the unpacked binaries (default: .device/bin, unpacked there from
               .device/*.gz where missing or older)
  -h, --help   this text
EOF
}
die() { echo "device-multi-gpu.sh: $*" >&2; exit 1; }

OUT=${OUT:-./cuzk-gpu-multi}
B=
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --out|--bin) [ $# -ge 2 ] || die "$1 needs a value (--help)"; opt=$1 val=$2; shift 2 ;;
    --*=*) opt=${1%%=*} val=${1#*=}; shift ;;
    *) die "unknown argument '$1' (--help)" ;;
  esac
  case "$opt" in
    --out) OUT=$val ;;
    --bin) B=$val ;;
    *) die "unknown option '$opt' (--help)" ;;
  esac
done

. "$(dirname "${BASH_SOURCE[0]}")/gpu-host.sh"
B=${B:-$PACK/bin}
mkdir -p "$OUT" "$B" || die "cannot create $OUT or $B"
OUT=$(cd "$OUT" && pwd); B=$(cd "$B" && pwd)
unpack "$B"
need_bins "$B" cuzk nats-server
need_gpu

nvidia-smi -L
export CUZK_PARAM_CACHE=${CUZK_PARAM_CACHE:-/tmp/cuzk-params}
NATS_SERVER=$B/nats-server timeout 240 $B/cuzk local --gpu-backend cuda --circuit sha256 \
  --params '{"blocks":8,"partitions":16}' >$OUT/multi-gpu.log 2>&1
echo "exit $?"
sed 's/\x1b\[[0-9;]*m//g' $OUT/multi-gpu.log >$OUT/multi-gpu.txt
echo "partitions proved per worker:"
grep "partition proved" $OUT/multi-gpu.txt | grep -o 'worker="[^"]*"' | sort | uniq -c
grep -E "verified|re-verified" $OUT/multi-gpu.txt | tail -2 | cut -c1-160
sed -n '/^stage timings/,$p' $OUT/multi-gpu.txt
