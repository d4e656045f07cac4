// Inversion in Fp: by Fermat (a^(p−2), a dependent chain of ~570 multiplications) or by a
// binary extended GCD (a few hundred short steps: faster on one thread), and one inversion
// shared by a block (Montgomery's trick), as the batch-affine accumulation uses it
// (kernels/cuda/msm_affine.cuh; kernels/bench/affine_bench.cu times the two inversions).
#pragma once
#include "curve.cuh"

// a^(p−2), a ≠ 0.
__device__ __noinline__ Fp inverse_fermat(const Fp& a) {
    Fp r = Fp::one();
    for (int w = 11; w >= 0; w--) {
        const uint32_t e = FpCfg::p(w) - (w == 0 ? 2u : 0u);  // p's low word ends in ...ab
        for (int b = 31; b >= 0; b--) {
            r = r.sqr();
            if ((e >> b) & 1) r = r * a;
        }
    }
    return r;
}

// R^3 mod p: the plain inverse of a Montgomery form aR, times it in Montgomery form, is a^−1·R.
__constant__ uint32_t FP_R3[12] = {0xd94ca1e0, 0xed48ac6b, 0x03a7adf8, 0x315f831e, 0x615e29dd, 0x9a53352a,
                                   0x921e1761, 0x34c04e5e, 0x65724728, 0x2512d435, 0x91755d4d, 0x0aa63460};

DEVI bool limbs_one(const uint32_t* a) {
    uint32_t acc = a[0] ^ 1;
    for (int i = 1; i < 12; i++) acc |= a[i];
    return acc == 0;
}
DEVI bool limbs_geq(const uint32_t* a, const uint32_t* b) {
    for (int i = 11; i >= 0; i--)
        if (a[i] != b[i]) return a[i] > b[i];
    return true;
}
// a −= b (a ≥ b); with `wrap`, a += p first where a < b (a, b < p).
DEVI void limbs_sub(uint32_t* a, const uint32_t* b, bool wrap) {
    if (wrap && !limbs_geq(a, b)) {
        uint64_t c = 0;
        for (int i = 0; i < 12; i++) {
            c += (uint64_t)a[i] + FpCfg::p(i);
            a[i] = (uint32_t)c;
            c >>= 32;
        }
    }
    int64_t br = 0;
    for (int i = 0; i < 12; i++) {
        br += (int64_t)a[i] - b[i];
        a[i] = (uint32_t)br;
        br >>= 32;
    }
}
// a /= 2; with `modp`, a/2 mod p (a + p first where a is odd; a < p, so a + p < 2^384).
DEVI void limbs_half(uint32_t* a, bool modp) {
    if (modp && (a[0] & 1)) {
        uint64_t c = 0;
        for (int i = 0; i < 12; i++) {
            c += (uint64_t)a[i] + FpCfg::p(i);
            a[i] = (uint32_t)c;
            c >>= 32;
        }
    }
    for (int i = 0; i < 11; i++) a[i] = __funnelshift_r(a[i], a[i + 1], 1);
    a[11] >>= 1;
}

// a^−1 by the binary extended Euclidean algorithm on a's Montgomery form (a ≠ 0).
__device__ __noinline__ Fp inverse_gcd(const Fp& a) {
    uint32_t u[12], v[12], x1[12], x2[12];
    for (int i = 0; i < 12; i++) u[i] = a.v[i], v[i] = FpCfg::p(i), x1[i] = i == 0, x2[i] = 0;
    while (!limbs_one(u) && !limbs_one(v)) {
        while (!(u[0] & 1)) limbs_half(u, false), limbs_half(x1, true);
        while (!(v[0] & 1)) limbs_half(v, false), limbs_half(x2, true);
        if (limbs_geq(u, v)) limbs_sub(u, v, false), limbs_sub(x1, x2, true);
        else limbs_sub(v, u, false), limbs_sub(x2, x1, true);
    }
    Fp r, r3;
    for (int i = 0; i < 12; i++) r.v[i] = limbs_one(u) ? x1[i] : x2[i], r3.v[i] = FP_R3[i];
    return r * r3;
}

// Shared memory of block_inverse for blocks of BLOCK threads.
template <int BLOCK>
struct BlockInverse {
    Fp v[BLOCK], prefix[BLOCK], lane[32], lane_prefix[32];
};

// The inverse of every thread's v (all nonzero; every thread of the block calls it) with one
// inversion INV for the block: warp 0's lanes take BLOCK / 32 values each, lane 0 their 32
// products.
template <int BLOCK, Fp (*INV)(const Fp&)>
DEVI Fp block_inverse(const Fp& v, BlockInverse<BLOCK>& sh) {
    constexpr int PER = BLOCK / 32;
    const int t = threadIdx.x;
    sh.v[t] = v;
    __syncthreads();
    if (t < 32) {
        Fp r = Fp::one();
        for (int i = 0; i < PER; i++) {
            sh.prefix[PER * t + i] = r;
            r = r * sh.v[PER * t + i];
        }
        sh.lane[t] = r;
        __syncwarp();
        if (t == 0) {
            Fp q = Fp::one();
            for (int i = 0; i < 32; i++) {
                sh.lane_prefix[i] = q;
                q = q * sh.lane[i];
            }
            Fp a = INV(q);
            for (int i = 31; i >= 0; i--) {
                const Fp b = a * sh.lane_prefix[i];
                a = a * sh.lane[i];
                sh.lane[i] = b;
            }
        }
        __syncwarp();
        Fp iv = sh.lane[t];
        for (int i = PER - 1; i >= 0; i--) {
            const Fp a = iv * sh.prefix[PER * t + i];
            iv = iv * sh.v[PER * t + i];
            sh.v[PER * t + i] = a;
        }
    }
    __syncthreads();
    const Fp r = sh.v[t];
    __syncthreads();
    return r;
}
