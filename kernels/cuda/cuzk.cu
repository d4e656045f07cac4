// The one compilation unit of cuzk's GPU kernels (embedded as a fatbin by build.rs).
#include "field.cuh"
#include "curve.cuh"
#include "ntt.cuh"
#include "msm.cuh"
#include "msm_affine.cuh"
#include "spmv.cuh"
#include "fixed_base.cuh"
#include "expand.cuh"
