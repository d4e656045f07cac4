// Fixed-base scalar multiplication for parameter generation: [s_i]G for many scalars and one
// generator G, by windowed tables (table[w·2^c + d] = d·2^(c·w)·G, affine), then a batched
// conversion to affine (one field inversion per chunk of points).
#pragma once
#include "curve.cuh"

// x^(p-2) in Fp (Fermat); x != 0.
DEVI Fp inv(const Fp& x) {
    Fp r = Fp::one();
    for (int i = Fp::N - 1; i >= 0; i--) {
        const uint32_t e = FpCfg::p(i) - (i == 0 ? 2u : 0u);  // p's low limb is odd and > 2
        for (int b = 31; b >= 0; b--) {
            r = r.sqr();
            if ((e >> b) & 1) r = r * x;
        }
    }
    return r;
}

// (c0 + c1·u)^-1 = (c0 − c1·u) / (c0² + c1²), as u² = −1.
DEVI Fp2 inv(const Fp2& x) {
    const Fp n = inv(x.c0.sqr() + x.c1.sqr());
    return {x.c0 * n, (x.c1 * n).neg()};
}

template <class F>
DEVI void fixed_base_points(const Affine<F>* table, const Fr* scalars, uint64_t n, uint32_t c,
                            uint32_t nwin, Xyzz<F>* out) {
    const uint32_t mask = (1u << c) - 1;
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const Fr s = ld(scalars + i).from_mont();
        Xyzz<F> acc = Xyzz<F>::inf();
        for (uint32_t w = 0; w < nwin; w++) {
            const uint32_t bit = w * c, l = bit >> 5, sh = bit & 31;
            const uint64_t word = (uint64_t)s.v[l] | (l + 1 < 8 ? (uint64_t)s.v[l + 1] << 32 : 0);
            const uint32_t d = (uint32_t)(word >> sh) & mask;
            if (d) {
                const Affine<F> p = ld(table + ((uint64_t)w << c) + d);
                acc.add_affine(p.x, p.y);
            }
        }
        st(out + i, acc);
    }
}

// Each thread turns `k` consecutive points affine with one inversion (Montgomery's trick);
// `scratch` holds the prefix products. The identity becomes (0, 0), blst's affine identity.
template <class F>
DEVI void points_to_affine(const Xyzz<F>* pts, uint64_t n, uint32_t k, F* scratch,
                           Affine<F>* out) {
    const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    const uint64_t lo = t * k;
    if (lo >= n) return;
    const uint64_t hi = min(n, lo + k);
    F acc = F::one();
    for (uint64_t i = lo; i < hi; i++) {
        const Xyzz<F> p = ld(pts + i);
        st(scratch + i, acc);
        if (!p.is_inf()) acc = acc * (p.ZZ * p.ZZZ);
    }
    F r = inv(acc);
    for (uint64_t i = hi; i-- > lo;) {
        const Xyzz<F> p = ld(pts + i);
        if (p.is_inf()) {
            st(out + i, Affine<F>{F::zero(), F::zero()});
            continue;
        }
        const F d = p.ZZ * p.ZZZ;
        const F di = r * ld(scratch + i);  // 1 / (ZZ·ZZZ)
        r = r * d;
        st(out + i, Affine<F>{p.X * (p.ZZZ * di), p.Y * (p.ZZ * di)});
    }
}

// bellperson's uncompressed encoding, as blst serializes an affine point: each coordinate
// big-endian from canonical form, an Fp2 as c1 then c0; the identity all zero but the infinity
// flag (0x40 in the first byte). Words are stored byte-swapped, so memory holds the bytes in order.
DEVI void put_be(uint32_t* out, const Fp& a) {
    const Fp c = a.from_mont();
#pragma unroll
    for (int i = 0; i < Fp::N; i++) out[i] = __byte_perm(c.v[Fp::N - 1 - i], 0, 0x0123);
}
DEVI void put_be(uint32_t* out, const Fp2& a) {
    put_be(out, a.c1);
    put_be(out + Fp::N, a.c0);
}

template <class F>
DEVI void encode_uncompressed(const Affine<F>* in, uint64_t n, uint32_t* out) {
    constexpr int W = sizeof(F) / 4;  // words per coordinate
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const Affine<F> p = ld(in + i);
        uint32_t* o = out + 2 * W * i;
        if (p.is_inf()) {
#pragma unroll
            for (int k = 0; k < 2 * W; k++) o[k] = 0;
            o[0] = 0x40;  // the low byte of word 0 is the first byte
        } else {
            put_be(o, p.x);
            put_be(o + W, p.y);
        }
    }
}

extern "C" __global__ void fixed_base_g1(const Affine<Fp>* table, const Fr* scalars, uint64_t n,
                                         uint32_t c, uint32_t nwin, Xyzz<Fp>* out) {
    fixed_base_points(table, scalars, n, c, nwin, out);
}
extern "C" __global__ void fixed_base_g2(const Affine<Fp2>* table, const Fr* scalars, uint64_t n,
                                         uint32_t c, uint32_t nwin, Xyzz<Fp2>* out) {
    fixed_base_points(table, scalars, n, c, nwin, out);
}
extern "C" __global__ void to_affine_g1(const Xyzz<Fp>* pts, uint64_t n, uint32_t k, Fp* scratch,
                                        Affine<Fp>* out) {
    points_to_affine(pts, n, k, scratch, out);
}
extern "C" __global__ void to_affine_g2(const Xyzz<Fp2>* pts, uint64_t n, uint32_t k,
                                        Fp2* scratch, Affine<Fp2>* out) {
    points_to_affine(pts, n, k, scratch, out);
}
extern "C" __global__ void encode_uncompressed_g1(const Affine<Fp>* in, uint64_t n,
                                                 uint32_t* out) {
    encode_uncompressed(in, n, out);
}
extern "C" __global__ void encode_uncompressed_g2(const Affine<Fp2>* in, uint64_t n,
                                                 uint32_t* out) {
    encode_uncompressed(in, n, out);
}
