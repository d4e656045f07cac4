// The A/B/C evaluations of a witness through a shape's constraint matrices (CSR, coefficients as
// indices into a deduplicated table whose entries 0 and 1 are 1 and -1), and the gather that
// packs an MSM's scalars from the witness. Values stay in Montgomery form throughout.
#pragma once
#include "field.cuh"

// acc += table[coeff[k]] * w[col[k]], entry k of a matrix.
DEVI void spmv_entry(Fr& acc, uint32_t k, const uint32_t* __restrict__ col,
                     const uint32_t* __restrict__ coeff, const Fr* __restrict__ table,
                     const Fr* __restrict__ w) {
    const Fr v = ld(w + col[k]);
    const uint32_t c = coeff[k];
    if (c == 0)
        acc = acc + v;
    else if (c == 1)
        acc = acc - v;
    else
        acc = acc + v * ld(table + c);
}

// out[r] = sum_k table[coeff[k]] * w[col[k]] over row r's entries, for r < rows whose length is
// under long_min; rows..n_out are zeroed (the padding of the evaluation domain). Longer rows are
// spmv_long_rows': a thread walking one (a few hundred entries of general coefficients in the
// PoRep A matrix) held its whole warp, and A took many times as long as B, all ±1, at 32 GiB
// (docs/gpu-runs.md, "SpMV: long rows a warp each").
extern "C" __global__ void __launch_bounds__(256) spmv_csr(
    const uint32_t* __restrict__ row_ptr, const uint32_t* __restrict__ col,
    const uint32_t* __restrict__ coeff, const Fr* __restrict__ table, const Fr* __restrict__ w,
    Fr* __restrict__ out, uint32_t rows, uint64_t n_out, uint32_t long_min) {
    for (uint64_t r = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; r < n_out;
         r += (uint64_t)gridDim.x * blockDim.x) {
        Fr acc = Fr::zero();
        if (r < rows) {
            const uint32_t begin = row_ptr[r], end = row_ptr[r + 1];
            if (end - begin >= long_min) continue;
            for (uint32_t k = begin; k < end; k++) spmv_entry(acc, k, col, coeff, table, w);
        }
        st(out + r, acc);
    }
}

// The rows listed in long_rows, a warp each: lane l sums entries l, l + 32, ..., then the lanes'
// sums are added by shuffles.
extern "C" __global__ void __launch_bounds__(256) spmv_long_rows(
    const uint32_t* __restrict__ row_ptr, const uint32_t* __restrict__ col,
    const uint32_t* __restrict__ coeff, const Fr* __restrict__ table, const Fr* __restrict__ w,
    Fr* __restrict__ out, const uint32_t* __restrict__ long_rows, uint32_t n_long) {
    const uint32_t lane = threadIdx.x & 31;
    const uint64_t warps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    for (uint64_t i = (blockIdx.x * (uint64_t)blockDim.x + threadIdx.x) >> 5; i < n_long;
         i += warps) {
        const uint32_t r = long_rows[i];
        const uint32_t end = row_ptr[r + 1];
        Fr acc = Fr::zero();
        for (uint32_t k = row_ptr[r] + lane; k < end; k += 32) spmv_entry(acc, k, col, coeff, table, w);
#pragma unroll
        for (int o = 16; o; o >>= 1) {
            Fr other;
#pragma unroll
            for (int j = 0; j < Fr::N; j++) other.v[j] = __shfl_down_sync(0xffffffffu, acc.v[j], o);
            acc = acc + other;
        }
        if (lane == 0) st(out + r, acc);
    }
}

// out[i] = w[idx[i]]
extern "C" __global__ void gather_fr(const Fr* __restrict__ w, const uint32_t* __restrict__ idx,
                                     Fr* __restrict__ out, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        st(out + i, ld(w + idx[i]));
}
