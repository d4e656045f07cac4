// BLS12-381 prime fields in Montgomery form, 32-bit limbs, PTX carry chains.
//   Fr: 8 limbs (R = 2^256), Fp: 12 limbs (R = 2^384), Fp2 = Fp[u]/(u^2 + 1).
// The limb constants are checked against blstrs by the crate's unit tests (src/consts.rs).
#pragma once
#include <stdint.h>

#define DEVI __device__ __forceinline__

struct FrCfg {
    static constexpr int N = 8;
    static constexpr uint32_t INV = 0xffffffffu;  // -r^-1 mod 2^32
    static DEVI uint32_t p(int i) {
        constexpr uint32_t P[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                                   0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
        return P[i];
    }
    static DEVI uint32_t one(int i) {
        constexpr uint32_t O[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                                   0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
        return O[i];
    }
    // R^2 mod r: a canonical value times it is its Montgomery form.
    static DEVI uint32_t r2(int i) {
        constexpr uint32_t R2[8] = {0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb,
                                    0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9};
        return R2[i];
    }
};

struct FpCfg {
    static constexpr int N = 12;
    static constexpr uint32_t INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    static DEVI uint32_t p(int i) {
        constexpr uint32_t P[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe,
                                    0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84,
                                    0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
        return P[i];
    }
    static DEVI uint32_t one(int i) {
        constexpr uint32_t O[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b,
                                    0x53c758ba, 0x5f489857, 0x70525745, 0x77ce5853,
                                    0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};
        return O[i];
    }
};

template <class C>
struct alignas(16) Mont {
    static constexpr int N = C::N;
    uint32_t v[N];

    static DEVI Mont zero() {
        Mont r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    static DEVI Mont one() {
        Mont r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = C::one(i);
        return r;
    }
    DEVI bool is_zero() const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    DEVI bool operator==(const Mont& o) const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }

    // t (N limbs + carry word) -> t mod p, given t < 2p.
    static DEVI void final_sub(uint32_t* out, const uint32_t* t, uint32_t hi) {
        uint32_t s[N];
        uint32_t bw;
        asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(s[0]) : "r"(t[0]), "r"(C::p(0)));
#pragma unroll
        for (int i = 1; i < N; i++)
            asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(s[i]) : "r"(t[i]), "r"(C::p(i)));
        asm volatile("subc.u32 %0, %1, 0;" : "=r"(bw) : "r"(hi));
        // bw == 0xffffffff: t < p, keep t.
#pragma unroll
        for (int i = 0; i < N; i++) out[i] = bw ? t[i] : s[i];
    }

    DEVI Mont operator+(const Mont& b) const {
        uint32_t t[N], hi;
        asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(t[0]) : "r"(v[0]), "r"(b.v[0]));
#pragma unroll
        for (int i = 1; i < N; i++)
            asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(t[i]) : "r"(v[i]), "r"(b.v[i]));
        asm volatile("addc.u32 %0, 0, 0;" : "=r"(hi));
        Mont r;
        final_sub(r.v, t, hi);
        return r;
    }

    DEVI Mont operator-(const Mont& b) const {
        uint32_t t[N], bw;
        asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(t[0]) : "r"(v[0]), "r"(b.v[0]));
#pragma unroll
        for (int i = 1; i < N; i++)
            asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(t[i]) : "r"(v[i]), "r"(b.v[i]));
        asm volatile("subc.u32 %0, 0, 0;" : "=r"(bw));
        Mont r;
        asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r.v[0]) : "r"(t[0]), "r"(C::p(0) & bw));
#pragma unroll
        for (int i = 1; i < N - 1; i++)
            asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r.v[i]) : "r"(t[i]), "r"(C::p(i) & bw));
        asm volatile("addc.u32 %0, %1, %2;" : "=r"(r.v[N - 1]) : "r"(t[N - 1]), "r"(C::p(N - 1) & bw));
        return r;
    }

    DEVI Mont neg() const { return zero() - *this; }
    DEVI Mont dbl() const { return *this + *this; }

    // acc[k], acc[k+1] += src(k + OFF) · x for even k < N, one carry chain; carry into acc[N].
    template <int OFF, class Src>
    static DEVI void mad_pairs(uint32_t* acc, Src src, uint32_t x) {
        asm volatile("mad.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
                     : "+r"(acc[0]), "+r"(acc[1]) : "r"(src(OFF)), "r"(x));
#pragma unroll
        for (int k = 2; k < N; k += 2)
            asm volatile("madc.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
                         : "+r"(acc[k]), "+r"(acc[k + 1]) : "r"(src(k + OFF)), "r"(x));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(acc[N]));
    }

    // Montgomery multiplication (CIOS), per limb b_i of b: the products of a's even limbs go into
    // E as 64-bit pairs on (2k, 2k+1), those of the odd limbs into O one word up, so every
    // product is a mad.lo/madc.hi pair on adjacent words, which ptxas issues as one
    // IMAD.WIDE.U32(.X) — a quarter of the instructions of separate lo and hi chains. The same
    // for m·p; then E[0] is zero and (E + O·2^32) / 2^32 is merged back into E with one add chain.
    DEVI Mont operator*(const Mont& b) const {
        static_assert(N % 2 == 0, "limb pairs");
        uint32_t e[N + 1], o[N + 1];
#pragma unroll
        for (int k = 0; k <= N; k++) e[k] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            const uint32_t bi = b.v[i];
#pragma unroll
            for (int k = 0; k < N; k += 2)
                asm("mul.lo.u32 %0, %2, %3; mul.hi.u32 %1, %2, %3;"
                    : "=r"(o[k]), "=r"(o[k + 1]) : "r"(v[k + 1]), "r"(bi));
            o[N] = 0;
            mad_pairs<0>(e, [&](int k) { return v[k]; }, bi);
            const uint32_t m = e[0] * C::INV;
            mad_pairs<0>(e, C::p, m);
            mad_pairs<1>(o, C::p, m);
            asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(e[0]) : "r"(e[1]), "r"(o[0]));
#pragma unroll
            for (int k = 1; k < N; k++)
                asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(e[k]) : "r"(e[k + 1]), "r"(o[k]));
            asm volatile("addc.u32 %0, %1, 0;" : "=r"(e[N]) : "r"(o[N]));
        }
        Mont r;
        final_sub(r.v, e, e[N]);
        return r;
    }

    DEVI Mont sqr() const { return (*this) * (*this); }

    // Montgomery -> canonical: multiply by 1 (raw).
    DEVI Mont from_mont() const {
        Mont one_raw = zero();
        one_raw.v[0] = 1;
        return (*this) * one_raw;
    }
};

typedef Mont<FrCfg> Fr;
typedef Mont<FpCfg> Fp;

struct alignas(16) Fp2 {
    Fp c0, c1;
    static DEVI Fp2 zero() { return {Fp::zero(), Fp::zero()}; }
    static DEVI Fp2 one() { return {Fp::one(), Fp::zero()}; }
    DEVI bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    DEVI Fp2 operator+(const Fp2& b) const { return {c0 + b.c0, c1 + b.c1}; }
    DEVI Fp2 operator-(const Fp2& b) const { return {c0 - b.c0, c1 - b.c1}; }
    DEVI Fp2 neg() const { return {c0.neg(), c1.neg()}; }
    DEVI Fp2 dbl() const { return {c0.dbl(), c1.dbl()}; }
    // Karatsuba: 3 Fp multiplications. Not inlined: keeps the G2 kernels' code size (and
    // ptxas time) in check; the call is cheap next to three 12-limb multiplications.
    __device__ __noinline__ Fp2 operator*(const Fp2& b) const {
        Fp t0 = c0 * b.c0;
        Fp t1 = c1 * b.c1;
        Fp t2 = (c0 + c1) * (b.c0 + b.c1);
        return {t0 - t1, t2 - t0 - t1};
    }
    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u: 2 Fp multiplications.
    __device__ __noinline__ Fp2 sqr() const {
        Fp t = c0 * c1;
        return {(c0 + c1) * (c0 - c1), t.dbl()};
    }
};

// 16-byte vector loads/stores of plain limb structs (all our types are multiples of 16 bytes).
template <class T>
DEVI T ld(const T* p) {
    static_assert(sizeof(T) % 16 == 0, "vector load");
    T r;
    const uint4* s = reinterpret_cast<const uint4*>(p);
    uint4* d = reinterpret_cast<uint4*>(&r);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 16); i++) d[i] = s[i];
    return r;
}
template <class T>
DEVI void st(T* p, const T& v) {
    static_assert(sizeof(T) % 16 == 0, "vector store");
    uint4* d = reinterpret_cast<uint4*>(p);
    const uint4* s = reinterpret_cast<const uint4*>(&v);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 16); i++) d[i] = s[i];
}
