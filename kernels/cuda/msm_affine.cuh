// G1 bucket accumulation in affine coordinates with shared inversions: the same chunks of
// sorted entries, partial slots and bucket outputs as msm.cuh's `accumulate`, but each thread
// steps K chunks together and each step's additions share one inversion per block (Montgomery's
// trick: the running product of every chunk's denominator, one inversion, the inverses
// recovered backwards). An affine addition then costs ~6 multiplications against the XYZZ mixed
// addition's 10 (kernels/bench/affine_bench.cu measures the trade). The accumulators cannot stay
// in registers: chunk c's accumulator, the running product before it and its word (bucket,
// bucket end, identity flag) are element c of four arrays, so that a warp's 32 chunks are 32
// adjacent elements (kept in the chunks' tail slots, 384 bytes apart, it moved more bytes and
// waited on them: docs/gpu-runs.md, "Batch-affine accumulation in the MSM").
// An accumulator that starts a bucket takes the point itself; equal x coordinates double or
// cancel.
#pragma once
#include "inverse.cuh"
#include "msm.cuh"

#define AFFINE_BLOCK 256

namespace affine {

struct State {
    uint32_t b, b_end, inf, pad;
};

// The chains' state: n elements each of x, y and the running product before it (Fp), then the
// n words (uint4), from `base`: digits::AFFINE_STATE_BYTES a chunk.
struct Chains {
    Fp* __restrict__ x;
    Fp* __restrict__ y;
    Fp* __restrict__ pre;
    uint4* __restrict__ word;
    DEVI Chains(Fp* base, size_t n)
        : x(base), y(base + n), pre(base + 2 * n), word(reinterpret_cast<uint4*>(base + 3 * n)) {}
    DEVI State load(uint32_t c) const {
        const uint4 w = word[c];
        return {w.x, w.y, w.z, 0};
    }
    DEVI void store(uint32_t c, const State& s) const { word[c] = make_uint4(s.b, s.b_end, s.inf, 0); }
    DEVI Xyzz<Fp> current(uint32_t c, const State& s) const {
        if (s.inf) return Xyzz<Fp>::inf();
        return Xyzz<Fp>::from_affine(ld(x + c), ld(y + c));
    }
};

enum Step { SKIP, START, ADD, DOUBLE, CANCEL };

// What adding the entry's point to the accumulator does, and the denominator whose inverse it
// needs (ADD, DOUBLE). y and the point's y are read only when the x coordinates agree (or the
// point's x is 0: the identity is (0, 0); no point of G1 has x = 0).
DEVI Step classify(const State& s, const Fp* ax, const Fp* ay, const Affine<Fp>* P, uint32_t sign,
                   Fp& x, Fp& px, Fp& d) {
    px = ld(&P->x);
    if (px.is_zero() && ld(&P->y).is_zero()) return SKIP;
    if (s.inf) return START;
    x = ld(ax);
    d = px - x;
    if (!d.is_zero()) return ADD;
    const Fp y = ld(ay), py = ld(&P->y);
    if ((sign ? py.neg() : py) == y) {
        d = y.dbl();
        return DOUBLE;
    }
    return CANCEL;
}

template <int K>
__device__ void accumulate(const Affine<Fp>* bases, const uint32_t* sorted, const uint32_t* offsets,
                           uint32_t nbt, uint32_t total, uint32_t L, Xyzz<Fp>* buckets,
                           Xyzz<Fp>* partials, Fp* state) {
    __shared__ BlockInverse<AFFINE_BLOCK> sh;
    const uint32_t threads = gridDim.x * AFFINE_BLOCK;
    const Chains ch(state, (size_t)threads * K);
    const uint32_t g = blockIdx.x * AFFINE_BLOCK + threadIdx.x;
    // Chunk k of this thread; chunks beyond the entries (c·L >= total) are idle.
    const auto chunk = [&](int k) { return (uint32_t)k * threads + g; };
    const auto first = [&](uint32_t c) { return (uint64_t)c * L; };
    const auto end_of = [&](uint32_t bk) { return bk + 1 < nbt ? offsets[bk + 1] : total; };
    for (int k = 0; k < K; k++) {
        const uint32_t c = chunk(k);
        if (first(c) >= total) break;
        const uint32_t start = (uint32_t)first(c);
        const uint32_t b = bucket_of(offsets, 0, nbt, start);
        if (offsets[b] == start) st(partials + 2 * (size_t)c, Xyzz<Fp>::inf());
        ch.store(c, {b, end_of(b), 1, 0});
    }
    for (uint32_t s = 0; s < L; s++) {
        // Forward: a bucket that ended is stored as msm.cuh's accumulate stores it; each
        // addition's denominator goes into the running product, the product before it kept.
        Fp run = Fp::one();
        for (int k = 0; k < K; k++) {
            const uint32_t c = chunk(k);
            const uint64_t i = first(c) + s;
            if (i >= total) break;
            State st_ = ch.load(c);
            if (i == st_.b_end) {
                const Xyzz<Fp> acc = ch.current(c, st_);
                st(offsets[st_.b] < first(c) ? partials + 2 * (size_t)c : buckets + st_.b, acc);
                uint32_t b = st_.b + 1, b_end = end_of(b);
                if (b_end <= i) {
                    b = bucket_of(offsets, b, nbt, (uint32_t)i);
                    b_end = end_of(b);
                }
                st_ = {b, b_end, 1, 0};
                ch.store(c, st_);
            }
            const uint32_t e = sorted[i];
            Fp x, px, d;
            const Step step = classify(st_, ch.x + c, ch.y + c,
                                       bases + (e & 0x7fffffffu), e >> 31, x, px, d);
            if (step == ADD || step == DOUBLE) {
                st(ch.pre + c, run);
                run = run * d;
            }
        }
        Fp inv = block_inverse<AFFINE_BLOCK, inverse_gcd>(run, sh);
        // Backward: each addition's inverse from the running products, then the addition.
        for (int k = K - 1; k >= 0; k--) {
            const uint32_t c = chunk(k);
            const uint64_t i = first(c) + s;
            if (i >= total) continue;
            State st_ = ch.load(c);
            const uint32_t e = sorted[i];
            const Affine<Fp>* P = bases + (e & 0x7fffffffu);
            Fp x, px, d;
            const Step step = classify(st_, ch.x + c, ch.y + c, P, e >> 31,
                                       x, px, d);
            if (step == SKIP) continue;
            if (step == CANCEL) {
                st_.inf = 1;
                ch.store(c, st_);
                continue;
            }
            const Fp py0 = ld(&P->y), py = e >> 31 ? py0.neg() : py0;
            if (step == START) {
                st(ch.x + c, px);
                st(ch.y + c, py);
                st_.inf = 0;
                ch.store(c, st_);
                continue;
            }
            const Fp ik = inv * ld(ch.pre + c);
            inv = inv * d;
            const Affine<Fp> sum =
                affine_sum(step == DOUBLE, x, ld(ch.y + c), px, py, ik);
            st(ch.x + c, sum.x);
            st(ch.y + c, sum.y);
        }
    }
    // The chunk's last bucket, as msm.cuh's accumulate ends.
    for (int k = 0; k < K; k++) {
        const uint32_t c = chunk(k);
        if (first(c) >= total) break;
        const uint32_t start = (uint32_t)first(c);
        const uint32_t end = (uint32_t)min(first(c) + L, (uint64_t)total);
        const State st_ = ch.load(c);
        const Xyzz<Fp> acc = ch.current(c, st_);
        const uint32_t b_begin = offsets[st_.b];
        const bool tail = b_begin >= start && st_.b_end > end;
        if (b_begin < start) st(partials + 2 * (size_t)c, acc);
        else if (!tail) st(buckets + st_.b, acc);
        st(partials + 2 * (size_t)c + 1, tail ? acc : Xyzz<Fp>::inf());
    }
}

}  // namespace affine

#define MSM_AFFINE_INSTANTIATE(K)                                                                 \
    extern "C" __global__ void __launch_bounds__(AFFINE_BLOCK, 2) msm_accumulate_affine_g1_k##K( \
        const Affine<Fp>* bases, const uint32_t* sorted, const uint32_t* offsets, uint32_t nbt,  \
        uint32_t total, uint32_t L, Xyzz<Fp>* buckets, Xyzz<Fp>* partials, Fp* state) {         \
        affine::accumulate<K>(bases, sorted, offsets, nbt, total, L, buckets, partials, state);  \
    }

MSM_AFFINE_INSTANTIATE(128)
MSM_AFFINE_INSTANTIATE(64)
