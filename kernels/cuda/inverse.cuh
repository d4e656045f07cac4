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

// Fp from the lane d below this one (UP) or above, in segments of WIDTH lanes (__shfl_*_sync's
// width).
template <int WIDTH, bool UP>
DEVI Fp shfl_fp(const Fp& a, int d) {
    Fp r;
#pragma unroll
    for (int i = 0; i < 12; i++)
        r.v[i] = UP ? __shfl_up_sync(0xffffffffu, a.v[i], d, WIDTH)
                    : __shfl_down_sync(0xffffffffu, a.v[i], d, WIDTH);
    return r;
}

// Per lane of a segment of WIDTH lanes (every lane of the warp calls it, as the shuffles need):
// the product of the other lanes' values; the segment's last lane writes the whole product to
// *all. Two scans of log2(WIDTH) steps, one after the other (side by side, they spill): a
// dependent chain of a few multiplications, not one of WIDTH.
template <int WIDTH>
DEVI Fp others_product(const Fp& v, Fp* all) {
    const int lane = threadIdx.x % WIDTH;
    Fp p = v;
#pragma unroll
    for (int d = 1; d < WIDTH; d <<= 1) {
        const Fp q = shfl_fp<WIDTH, true>(p, d);
        p = p * (lane >= d ? q : Fp::one());
    }
    // p: the product up to this lane's.
    if (threadIdx.x % 32 == WIDTH - 1) *all = p;
    const Fp up = shfl_fp<WIDTH, true>(p, 1);
    const Fp before = lane == 0 ? Fp::one() : up;
    p = v;
#pragma unroll
    for (int d = 1; d < WIDTH; d <<= 1) {
        const Fp q = shfl_fp<WIDTH, false>(p, d);
        p = p * (lane + d < WIDTH ? q : Fp::one());
    }
    // p: the product from this lane's on.
    const Fp after = shfl_fp<WIDTH, false>(p, 1);
    return lane == WIDTH - 1 ? before : before * after;
}

// Shared memory of block_inverse for blocks of BLOCK threads: a value per warp, and the block's.
template <int BLOCK>
struct BlockInverse {
    Fp warp[BLOCK / 32], block;
};

// The inverse of every thread's v (all nonzero; every thread of the block calls it) with one
// inversion INV for the block. Each lane takes the product of its warp's other lanes' values;
// warp 0 the same over the warps' products, inverts the block's and gives each warp the
// inverse of its product; a lane's inverse is that times its warp's other values. The block
// waits on one inversion and a few multiplications, not on one lane's chain through every value.
template <int BLOCK, Fp (*INV)(const Fp&)>
DEVI Fp block_inverse(const Fp& v, BlockInverse<BLOCK>& sh) {
    constexpr int WARPS = BLOCK / 32;
    static_assert(BLOCK % 32 == 0 && WARPS <= 32 && (WARPS & (WARPS - 1)) == 0, "warps of a block");
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const Fp others = others_product<32>(v, &sh.warp[w]);
    __syncthreads();
    if (w == 0) {
        const Fp warps = others_product<WARPS>(lane < WARPS ? sh.warp[lane] : Fp::one(), &sh.block);
        __syncwarp();
        if (lane < WARPS) sh.warp[lane] = INV(sh.block) * warps;
    }
    __syncthreads();
    const Fp r = sh.warp[w] * others;
    __syncthreads();
    return r;
}
