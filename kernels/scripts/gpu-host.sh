# Sourced by the GPU-host scripts (kernels/scripts/device-*.sh, packed as .device/run-*.sh):
# where the packed files are, unpacking their binaries, and the checks every script makes.
# The caller defines die().

# HERE: the calling script's directory; PACK: the packed files — beside the script when it
# runs from the pack, else the checkout's .device/.
HERE=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
case "$HERE" in */kernels/scripts) PACK=$(dirname "$(dirname "$HERE")")/.device ;; *) PACK=$HERE ;; esac

# unpack DIR: the pack's binaries into DIR where missing or older than the pack.
unpack() {
  mkdir -p "$1" || die "cannot create $1"
  local f n
  for f in "$PACK"/*.gz; do
    [ -e "$f" ] || continue
    n=$1/$(basename "$f" .gz)
    [ "$n" -nt "$f" ] && continue
    { gunzip -c "$f" >"$n.part" && chmod +x "$n.part" && mv "$n.part" "$n"; } || die "cannot unpack $f into $1"
  done
}

# need_bins DIR NAME...: each NAME an executable in DIR.
need_bins() {
  local dir=$1 x
  shift
  for x in "$@"; do
    [ -x "$dir/$x" ] || die "$dir/$x missing: pack with kernels/scripts/pack-device.sh and copy .device/ here (or --bin DIR)"
  done
}

need_gpu() {
  command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this host needs an NVIDIA driver"
}

# checks_out_time_bin ARGS...: the flags of the scripts that run checks then timings —
# --no-checks, --out DIR, --time-limit SECS, --bin DIR, -h/--help (the caller's usage()) — into
# CHECKS, OUT, TOTAL and B; then OUT and B made absolute and the pack unpacked into B.
checks_out_time_bin() {
  local opt val
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
  B=${B:-$PACK/bin}
  mkdir -p "$OUT" "$B" || die "cannot create $OUT or $B"
  OUT=$(cd "$OUT" && pwd)
  B=$(cd "$B" && pwd)
  unpack "$B"
}
