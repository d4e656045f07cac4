# Sourced by the README's commands: points NVCC at the project's pinned nvcc when
# scripts/install-nvcc.sh has installed it and NVCC is unset. The kernels' build script re-runs
# when NVCC changes, so installing nvcc after a CPU-only build gives GPU kernels on the next
# build; without nvcc the build is CPU-only and the GPU node proves on the CPU.
if [ -z "${NVCC:-}" ]; then
  _nvcc="${CUZK_NVCC_PREFIX:-$HOME/.cache/cuzk/nvcc}/nvidia/cu13/bin/nvcc"
  if [ -x "$_nvcc" ]; then export NVCC="$_nvcc"; fi
  unset _nvcc
fi
