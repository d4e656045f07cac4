#!/usr/bin/env bash
# Installs the pinned CUDA 13.0 nvcc (Python wheels) into a cache directory outside the repository
# and prints the path of the nvcc binary on its last line.
#
#   CUZK_NVCC_PREFIX   install prefix (default: $HOME/.cache/cuzk/nvcc)
#   PYTHON             python interpreter with pip (default: python3)
#
# Pinned to 13.0: a newer NVVM emits PTX that a CUDA 13.0 driver (580) cannot load.
# Idempotent: a prefix that already holds the pinned versions is left untouched.
set -euo pipefail

PREFIX="${CUZK_NVCC_PREFIX:-$HOME/.cache/cuzk/nvcc}"
PYTHON="${PYTHON:-python3}"
PKGS=(
  "nvidia-cuda-nvcc==13.0.88"
  "nvidia-cuda-crt==13.0.88"
  "nvidia-cuda-runtime==13.0.96"
  "nvidia-nvvm==13.0.88"
)
STAMP="$PREFIX/.cuzk-nvcc-pins"
NVCC="$PREFIX/nvidia/cu13/bin/nvcc"
WANT="$(printf '%s\n' "${PKGS[@]}")"

if [[ -x "$NVCC" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]; then
  echo "$NVCC"
  exit 0
fi

mkdir -p "$PREFIX"
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-input --upgrade \
  --target "$PREFIX" "${PKGS[@]}" >&2

if [[ ! -x "$NVCC" ]]; then
  echo "install-nvcc: nvcc not found at $NVCC after install" >&2
  exit 1
fi
# The wheels split the toolkit across several packages; nvcc finds cicc/ptxas relative to itself.
"$NVCC" --version >&2
printf '%s\n' "$WANT" > "$STAMP"
echo "$NVCC"
