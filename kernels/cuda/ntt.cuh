// NTT over BLS12-381 Fr, in place, stages done in groups of up to 10 inside shared memory.
// Natural order in and out: bit-reversal permutation, then radix-2 Cooley–Tukey (DIT) stages.
// The H pipeline skips the permutations: Gentleman–Sande (DIF) stages take natural order to
// bit-reversed, DIT stages take bit-reversed back to natural.
#pragma once
#include "field.cuh"

extern "C" __global__ void ntt_bitrev(Fr* x, uint32_t logn) {
    const uint64_t n = 1ull << logn;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t j = __brevll(i) >> (64 - logn);
        if (i < j) {
            Fr a = ld(x + i), b = ld(x + j);
            st(x + i, b);
            st(x + j, a);
        }
    }
}

// One group of stages s0 .. s0+k-1. A block owns 2^k "rows" (index bits s0..s0+k-1) times
// 2^lb consecutive "columns" (low index bits, lb <= s0) for one value of the high bits.
// tw[i] = w_N^i for the table's domain N = 2^logtw (i < N/2); w_n = w_N^(N/n): stage s's
// butterfly on an element whose index has low bits j < 2^s takes w_(2^(s+1))^j.

// Gentleman–Sande (dif) or Cooley–Tukey butterfly on (u, v) with twiddle w.
__device__ __forceinline__ void butterfly(Fr& u, Fr& v, const Fr& w, bool dif) {
    if (dif) {
        const Fr d = u - v;
        u = u + v;
        v = d * w;
    } else {
        const Fr t = v * w;
        v = u - t;
        u = u + t;
    }
}

// Local stages ls and ls + 1 (w = 2) or ls alone (w = 1) on every group of 2^w rows
// {r0 + j·2^ls} of the block: a thread holds a group in registers, so two stages cost one
// round trip through shared memory and one barrier. Top stage first when `dif`.
template <int W>
__device__ __forceinline__ void ntt_step(Fr* sm, const Fr* tw, uint32_t logtw, uint32_t s0,
                                         uint32_t ls, uint32_t lb, uint32_t E, uint64_t lo_base,
                                         bool dif) {
    const uint32_t lmask = (1u << lb) - 1;
    const uint32_t s = s0 + ls;
    const uint32_t h = 1u << (ls + lb);  // elements between a group's rows
    for (uint32_t q = threadIdx.x; q < (E >> W); q += blockDim.x) {
        const uint32_t t = q & lmask;
        const uint32_t mp = q >> lb;
        const uint32_t m_lo = mp & ((1u << ls) - 1);
        const uint32_t e0 = ((((mp >> ls) << (ls + W)) | m_lo) << lb) | t;
        // stage s's twiddle index: the index bits below s
        const uint64_t ka = ((uint64_t)m_lo << s0) | (lo_base + t);
        const Fr wa = ld(tw + (ka << (logtw - 1 - s)));
        Fr x[1 << W];
#pragma unroll
        for (int j = 0; j < (1 << W); j++) x[j] = sm[e0 + j * h];
        if constexpr (W == 1) {
            butterfly(x[0], x[1], wa, dif);
        } else {
            // stage s + 1 pairs rows 0-2 (bit ls clear) and 1-3 (bit ls set)
            const Fr wb0 = ld(tw + (ka << (logtw - 2 - s)));
            const Fr wb1 = ld(tw + ((ka | (1ull << (ls + s0))) << (logtw - 2 - s)));
            if (dif) {
                butterfly(x[0], x[2], wb0, true);
                butterfly(x[1], x[3], wb1, true);
            }
            butterfly(x[0], x[1], wa, dif);
            butterfly(x[2], x[3], wa, dif);
            if (!dif) {
                butterfly(x[0], x[2], wb0, false);
                butterfly(x[1], x[3], wb1, false);
            }
        }
#pragma unroll
        for (int j = 0; j < (1 << W); j++) sm[e0 + j * h] = x[j];
    }
    __syncthreads();
}

// The group's k stages, two at a time, an odd one alone last (DIT) or first (DIF, which runs
// the stages top down; the caller runs groups top down too).
__device__ __forceinline__ void ntt_stages(Fr* sm, const Fr* tw, uint32_t logtw, uint32_t s0,
                                           uint32_t k, uint32_t lb, uint64_t lo_base, bool dif) {
    const uint32_t E = 1u << (k + lb);
    const uint32_t pairs = k / 2;
    if (dif && (k & 1)) ntt_step<1>(sm, tw, logtw, s0, k - 1, lb, E, lo_base, dif);
    for (uint32_t p = 0; p < pairs; p++)
        ntt_step<2>(sm, tw, logtw, s0, 2 * (dif ? pairs - 1 - p : p), lb, E, lo_base, dif);
    if (!dif && (k & 1)) ntt_step<1>(sm, tw, logtw, s0, k - 1, lb, E, lo_base, dif);
}

#define NTT_DIF 1u
#define NTT_DIT 2u

// One group of stages on blocks of E = 2^(k+lb) elements in shared memory: DIF stages with
// `tw_dif` (mode & NTT_DIF), then, when `lo` is set, every element times lo[j & 4095] *
// hi[j >> 12] with j its index (its bit reversal over rev_bits bits when rev_bits != 0), then
// DIT stages with `tw_dit` (mode & NTT_DIT). The H pipeline runs the inverse transform's last
// group, the coset factors and the forward transform's first group as one pass.
extern "C" __global__ void __launch_bounds__(256)
    ntt_pass(Fr* x, const Fr* tw_dif, const Fr* tw_dit, uint32_t logtw, uint32_t s0, uint32_t k,
             uint32_t lb, uint32_t mode, const Fr* lo, const Fr* hi, uint32_t rev_bits) {
    extern __shared__ Fr sm[];
    const uint32_t E = 1u << (k + lb);
    const uint32_t tiles_bits = s0 - lb;
    const uint64_t blk = blockIdx.x;
    const uint64_t lo_base = (blk & ((1ull << tiles_bits) - 1)) << lb;
    const uint64_t hi_bits = blk >> tiles_bits;
    const uint32_t lmask = (1u << lb) - 1;
    const auto index = [&](uint32_t e) {
        return (hi_bits << (s0 + k)) | ((uint64_t)(e >> lb) << s0) | (lo_base + (e & lmask));
    };

    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) sm[e] = ld(x + index(e));
    __syncthreads();
    if (mode & NTT_DIF) ntt_stages(sm, tw_dif, logtw, s0, k, lb, lo_base, true);
    if (lo) {
        for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
            const uint64_t g = index(e);
            const uint64_t j = rev_bits ? __brevll(g) >> (64 - rev_bits) : g;
            sm[e] = sm[e] * (ld(lo + (j & 4095)) * ld(hi + (j >> 12)));
        }
        __syncthreads();
    }
    if (mode & NTT_DIT) ntt_stages(sm, tw_dit, logtw, s0, k, lb, lo_base, false);
    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) st(x + index(e), sm[e]);
}

// out[i] = lo[i & 4095] * hi[i >> 12]  (powers of a base, optionally times a constant in hi)
extern "C" __global__ void fr_powers(Fr* out, uint64_t n, const Fr* lo, const Fr* hi) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        st(out + i, ld(lo + (i & 4095)) * ld(hi + (i >> 12)));
}

// x[i] *= lo[i & 4095] * hi[i >> 12]
extern "C" __global__ void fr_mul_powers(Fr* x, uint64_t n, const Fr* lo, const Fr* hi) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        st(x + i, ld(x + i) * (ld(lo + (i & 4095)) * ld(hi + (i >> 12))));
}

// x[i] *= c
extern "C" __global__ void fr_scale(Fr* x, uint64_t n, const Fr* c) {
    const Fr k = ld(c);
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        st(x + i, ld(x + i) * k);
}

// a[i] *= b[i]: the product of A's and B's coset evaluations.
extern "C" __global__ void h_product(Fr* a, const Fr* b, uint64_t n) {
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x)
        st(a + i, ld(a + i) * ld(b + i));
}

// The H pipeline's last step on two vectors of coefficients in bit-reversed order:
// a[bitrev(i)] = a[i] - k * c[i], each pair (i, bitrev(i)) by one thread.
extern "C" __global__ void h_finish(Fr* a, const Fr* c, uint32_t logn, const Fr* kp) {
    const Fr k = ld(kp);
    const uint64_t n = 1ull << logn;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint64_t j = __brevll(i) >> (64 - logn);
        if (i <= j) {
            const Fr u = ld(a + i) - ld(c + i) * k, v = ld(a + j) - ld(c + j) * k;
            st(a + i, v);
            st(a + j, u);
        }
    }
}
