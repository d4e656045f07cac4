// The A/B/C evaluations of a witness through a shape's constraint matrices (CSR, coefficients as
// indices into a deduplicated table whose entries 0 and 1 are 1 and -1), and the gather that
// packs an MSM's scalars from the witness. Values stay in Montgomery form throughout.
#pragma once
#include "field.cuh"

// out[r] = sum_k table[coeff[k]] * w[col[k]] over row r's entries, for r < rows; rows..n_out
// are zeroed (the padding of the evaluation domain).
extern "C" __global__ void __launch_bounds__(256) spmv_csr(
    const uint32_t* __restrict__ row_ptr, const uint32_t* __restrict__ col,
    const uint32_t* __restrict__ coeff, const Fr* __restrict__ table, const Fr* __restrict__ w,
    Fr* __restrict__ out, uint32_t rows, uint64_t n_out) {
    for (uint64_t r = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; r < n_out;
         r += (uint64_t)gridDim.x * blockDim.x) {
        Fr acc = Fr::zero();
        if (r < rows) {
            const uint32_t end = row_ptr[r + 1];
            for (uint32_t k = row_ptr[r]; k < end; k++) {
                const Fr v = ld(w + col[k]);
                const uint32_t c = coeff[k];
                if (c == 0)
                    acc = acc + v;
                else if (c == 1)
                    acc = acc - v;
                else
                    acc = acc + v * ld(table + c);
            }
        }
        st(out + r, acc);
    }
}

// out[i] = w[idx[i]]
extern "C" __global__ void gather_fr(const Fr* __restrict__ w, const uint32_t* __restrict__ idx,
                                     Fr* __restrict__ out, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        st(out + i, ld(w + idx[i]));
}
