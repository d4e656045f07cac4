// Pippenger MSM: scalars 0 and 1 (most of a witness: bits) split off first, the ones straight
// into bucket 1 of window 0; for the rest, signed c-bit digits, a three-pass sort of (point,
// sign) by (window, bucket), bucket accumulation in XYZZ over equal-length chunks of the sorted
// entries, a per-bucket reduction of the partials of buckets that cross chunks, per-window
// weighted reduction (running sums over segments), window sums returned as Jacobian points; the
// host combines the windows.
#pragma once
#include "curve.cuh"

// *out = max(*out, max of v over the warp): one atomic per warp.
__device__ __forceinline__ void warp_max_to(uint32_t v, uint32_t* out) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
    if ((threadIdx.x & 31) == 0 && v) atomicMax(out, v);
}

// Exclusive scan of u32, 2048 elements per block of 1024 threads; block totals to sums.
extern "C" __global__ void __launch_bounds__(1024) scan_block(const uint32_t* in, uint32_t* out,
                                                              uint64_t n, uint32_t* sums) {
    __shared__ uint32_t warp_tot[32];
    const uint64_t base = (uint64_t)blockIdx.x * 2048 + 2 * threadIdx.x;
    uint32_t a = base < n ? in[base] : 0;
    uint32_t b = base + 1 < n ? in[base + 1] : 0;
    uint32_t v = a + b;
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        uint32_t y = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= (uint32_t)o) v += y;
    }
    if (lane == 31) warp_tot[warp] = v;
    __syncthreads();
    if (warp == 0) {
        uint32_t t = warp_tot[lane];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            uint32_t y = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= (uint32_t)o) t += y;
        }
        warp_tot[lane] = t;  // inclusive
    }
    __syncthreads();
    const uint32_t before = (warp ? warp_tot[warp - 1] : 0) + v - (a + b);
    if (base < n) out[base] = before;
    if (base + 1 < n) out[base + 1] = before + a;
    if (threadIdx.x == 1023 && sums) sums[blockIdx.x] = warp_tot[31];
}

extern "C" __global__ void scan_add(uint32_t* out, uint64_t n, const uint32_t* block_off) {
    const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] += block_off[i / 2048];
}

// one[i] = (s_i == 1), dense[i] = (s_i not 0 or 1) for i < n, 0 at n: scanned in place, they
// are each class's positions and counts. Scalars are canonical Montgomery forms, so 1 is R mod r.
extern "C" __global__ void msm_classify(const Fr* scalars, uint32_t n, uint32_t* one,
                                        uint32_t* dense) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > n) return;
    uint32_t o = 0, d = 0;
    if (i < n) {
        const Fr s = ld(scalars + i);
        o = s == Fr::one();
        d = !o && !s.is_zero();
    }
    one[i] = o;
    dense[i] = d;
}

// out[pos[i]] = i for each i < n of the class (pos: the class's scanned flags, n + 1 of them).
extern "C" __global__ void msm_compact(uint32_t n, const uint32_t* pos, uint32_t* out) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && pos[i + 1] != pos[i]) out[pos[i]] = i;
}

// The scalar's canonical limbs, zero-extended for the digit windows' 64-bit reads.
struct DigitLimbs {
    uint32_t v[10];
    DigitLimbs() = default;
    DEVI explicit DigitLimbs(const Fr* scalar) {
        const Fr s = ld(scalar).from_mont();
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = s.v[j];
        v[8] = v[9] = 0;
    }
    // Signed c-bit digit of window w given the carry out of window w - 1 (updated): |d| in
    // [0, 2^(c-1)], sign set when d is negative.
    DEVI uint32_t digit(uint32_t w, uint32_t c, uint32_t& carry, uint32_t& sign) const {
        const uint32_t bit = w * c;
        const uint32_t l = bit >> 5, sh = bit & 31;
        const uint64_t word = (uint64_t)v[l] | ((uint64_t)v[l + 1] << 32);
        uint32_t d = ((uint32_t)(word >> sh) & ((1u << c) - 1)) + carry;
        sign = d > (1u << (c - 1));
        carry = sign;
        return sign ? (1u << c) - d : d;
    }
};

// counters[idx] += 1 for each calling lane, returning the old value. A warp whose lanes all
// share idx (a scalar repeated through the warp: all equal, or small values in window 0) takes
// consecutive values from one atomic, where lane by lane they would serialize on one address;
// any other warp takes an atomic a lane. Grouping equal lanes in every warp (__match_any_sync)
// kept the MIO queue full: most of msm_count's stalls at 2^27 (docs/gpu-runs.md, "Zeros and
// ones split off the MSMs").
DEVI uint32_t warp_inc(uint32_t* counters, uint32_t idx) {
    const uint32_t active = __activemask();
    const uint32_t lane = threadIdx.x & 31, leader = __ffs(active) - 1;
    if (!__all_sync(active, idx == __shfl_sync(active, idx, leader)))
        return atomicAdd(counters + idx, 1u);
    uint32_t first = 0;
    if (lane == leader) first = atomicAdd(counters + idx, __popc(active));
    first = __shfl_sync(active, first, leader);
    return first + __popc(active & ((1u << lane) - 1));
}

// The sort by (window, bucket) g = w·2^(c-1) + |d| - 1, in three passes, so that no pass writes
// at random over the whole output (one random 4-byte write per entry, each a partial sector in
// L2 and DRAM, was an eighth of a 2^27 MSM's time: docs/gpu-runs.md, "The MSM's sort in three
// passes"). msm_count counts each bucket's entries and gives each entry its rank
// among them (the atomic's old value). msm_coarse appends (place, entry) to the region of the
// entry's coarse bin (2^shift consecutive buckets of one window), reserving room once per
// block and bin. msm_fine walks that array in order and stores each entry at its place: the
// stores in flight fall inside one coarse bin's slice of the output, which stays in L2.
// Entries are point index | sign<<31. The passes walk the m scalars idx[0..m) (all n when idx
// is null); the ones' entries, already known, are the first of bucket 0, so its count starts at
// their number and the coarse pass leaves their room at the front.
extern "C" __global__ void msm_count(const Fr* scalars, const uint32_t* idx, uint32_t m,
                                     uint32_t c, uint32_t nwin, uint32_t* counts,
                                     uint32_t* ranks) {
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= m) return;
    const DigitLimbs s(scalars + (idx ? idx[j] : j));
    const uint32_t B = 1u << (c - 1);
    uint32_t carry = 0, sign;
    for (uint32_t w = 0; w < nwin; w++) {
        const uint32_t d = s.digit(w, c, carry, sign);
        if (d) ranks[(size_t)w * m + j] = warp_inc(counts, w * B + d - 1);
    }
}

#define COARSE_THREADS 512
#define COARSE_PER_THREAD 8
// Dynamic shared memory: one word per coarse bin of a window (2^(c-1-shift) of them).
extern "C" __global__ void __launch_bounds__(COARSE_THREADS) msm_coarse(
    const Fr* scalars, const uint32_t* idx, uint32_t m, uint32_t c, uint32_t nwin,
    uint32_t shift, const uint32_t* ranks, const uint32_t* offsets, uint32_t* cursors,
    uint2* coarse) {
    extern __shared__ uint32_t bins[];
    const uint32_t B = 1u << (c - 1), per = B >> shift;
    const uint32_t first = blockIdx.x * COARSE_THREADS * COARSE_PER_THREAD + threadIdx.x;
    const auto point = [&](uint32_t j) { return idx ? idx[j] : j; };
    DigitLimbs s[COARSE_PER_THREAD];
    uint32_t carry[COARSE_PER_THREAD];
#pragma unroll
    for (int k = 0; k < COARSE_PER_THREAD; k++) {
        const uint32_t j = first + k * COARSE_THREADS;
        s[k] = DigitLimbs(scalars + point(min(j, m - 1)));
        carry[k] = 0;
    }
    for (uint32_t w = 0; w < nwin; w++) {
        for (uint32_t q = threadIdx.x; q < per; q += COARSE_THREADS) bins[q] = 0;
        __syncthreads();
        uint32_t d[COARSE_PER_THREAD], sign[COARSE_PER_THREAD], local[COARSE_PER_THREAD];
#pragma unroll
        for (int k = 0; k < COARSE_PER_THREAD; k++) {
            d[k] = s[k].digit(w, c, carry[k], sign[k]);
            if (first + k * COARSE_THREADS >= m) d[k] = 0;
            if (d[k]) local[k] = atomicAdd(bins + ((d[k] - 1) >> shift), 1u);
        }
        __syncthreads();
        for (uint32_t q = threadIdx.x; q < per; q += COARSE_THREADS)
            if (bins[q]) bins[q] = atomicAdd(cursors + w * per + q, bins[q]);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < COARSE_PER_THREAD; k++) {
            if (!d[k]) continue;
            const uint32_t j = first + k * COARSE_THREADS, g = w * B + d[k] - 1;
            coarse[bins[(d[k] - 1) >> shift] + local[k]] =
                make_uint2(offsets[g] + ranks[(size_t)w * m + j], point(j) | (sign[k] << 31));
        }
        __syncthreads();
    }
}

extern "C" __global__ void msm_fine(const uint2* coarse, uint32_t total, uint32_t* sorted) {
    const uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= total) return;
    const uint2 e = coarse[j];
    sorted[e.x] = e.y;
}

// out[k] = offsets[k << shift] for k < nbt / 2^shift: each coarse bin's first place; bin 0's
// first `reserved` places are the ones'.
extern "C" __global__ void msm_bin_starts(const uint32_t* offsets, uint32_t nbt, uint32_t shift,
                                          uint32_t reserved, uint32_t* out) {
    const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (((uint64_t)k << shift) < nbt) out[k] = offsets[(uint64_t)k << shift] + (k ? 0 : reserved);
}

// ntasks[b] = ceil(counts[b] / T); *max_tasks = max over b (zeroed by the caller).
extern "C" __global__ void msm_task_count(const uint32_t* counts, uint32_t nbt, uint32_t T,
                                          uint32_t* ntasks, uint32_t* max_tasks) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t t = 0;
    if (b < nbt) {
        t = (counts[b] + T - 1) / T;
        ntasks[b] = t;
    }
    warp_max_to(t, max_tasks);
}

extern "C" __global__ void msm_task_fill(const uint32_t* offsets, const uint32_t* counts,
                                         const uint32_t* task_off, uint32_t nbt, uint32_t T,
                                         uint2* tasks) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nbt) return;
    const uint32_t cnt = counts[b], off = offsets[b], t0 = task_off[b];
    for (uint32_t k = 0; k * T < cnt; k++)
        tasks[t0 + k] = make_uint2(off + k * T, min(T, cnt - k * T));
}

// The bucket accumulation gives every thread the same number of sorted entries, L, whatever
// the buckets' sizes (equal work per thread: no warp waits on its longest bucket). A bucket
// that lies inside one chunk is summed there; one that crosses chunk boundaries leaves a partial
// in the tail slot (2t + 1) of its first chunk and the head slots (2t) of the chunks it runs
// into. Its partials are then the contiguous slots [2 t0 + 1, 2 t1 + 1), which the per-bucket
// reduction (task planning + msm_sum_ranges) adds up; unused slots hold the identity.

// The last bucket whose offset is <= k: the non-empty bucket holding sorted entry k (empty
// buckets share the offset of the next one).
__device__ __forceinline__ uint32_t bucket_of(const uint32_t* offsets, uint32_t lo, uint32_t hi,
                                              uint32_t k) {
    while (hi - lo > 1) {
        const uint32_t mid = (lo + hi) / 2;
        if (offsets[mid] <= k) lo = mid;
        else hi = mid;
    }
    return lo;
}

// Per bucket: its partial slots (count, first) when it crosses a chunk boundary, else (0, 0);
// *max_cnt = the largest count (zeroed by the caller).
extern "C" __global__ void msm_partial_ranges(const uint32_t* offsets, const uint32_t* counts,
                                              uint32_t nbt, uint32_t L, uint32_t* pcnt,
                                              uint32_t* poff, uint32_t* max_cnt) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t c = 0;
    if (b < nbt) {
        uint32_t o = 0;
        const uint32_t n = counts[b];
        if (n) {
            const uint32_t t0 = offsets[b] / L, t1 = (offsets[b] + n - 1) / L;
            if (t1 > t0) {
                c = 2 * (t1 - t0);
                o = 2 * t0 + 1;
            }
        }
        pcnt[b] = c;
        poff[b] = o;
    }
    warp_max_to(c, max_cnt);
}

template <class F>
__device__ void accumulate(const Affine<F>* bases, const uint32_t* sorted, const uint32_t* offsets,
                           uint32_t nbt, uint32_t total, uint32_t L, Xyzz<F>* buckets,
                           Xyzz<F>* partials) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t start = t * L;
    if (start >= total) return;
    const uint32_t end = min(start + L, total);
    // Bucket b holds entries [b_begin, b_end); next_end is where bucket b + 1 ends, loaded
    // ahead so that moving to the next bucket (each thread at its own k, so the warp waits for
    // every thread's move) costs no memory round trip. Empty buckets are rare where buckets
    // are many; a run of them is skipped by a search.
    // end of bucket bk; any bk at or past the last bucket ends at total
    const auto end_of = [&](uint32_t bk) { return bk + 1 < nbt ? offsets[bk + 1] : total; };
    uint32_t b = bucket_of(offsets, 0, nbt, start);
    uint32_t b_begin = offsets[b];
    uint32_t b_end = end_of(b);
    uint32_t next_end = end_of(b + 1);
    if (b_begin == start) st(partials + 2 * t, Xyzz<F>::inf());
    Xyzz<F> acc = Xyzz<F>::inf();
    // software pipelining: the next point's load is in flight during this point's addition
    uint32_t e = sorted[start];
    Affine<F> next = ld(bases + (e & 0x7fffffffu));
    for (uint32_t k = start; k < end; k++) {
        if (k == b_end) {
            // bucket b ended inside the chunk: complete unless it began in an earlier chunk
            st(b_begin < start ? partials + 2 * t : buckets + b, acc);
            acc = Xyzz<F>::inf();
            b++;
            b_begin = b_end;
            b_end = next_end;
            if (b_end <= k) {
                b = bucket_of(offsets, b, nbt, k);
                b_begin = offsets[b];
                b_end = end_of(b);
            }
            next_end = end_of(b + 1);
        }
        const Affine<F> P = next;
        const uint32_t sign = e >> 31;
        if (k + 1 < end) {
            e = sorted[k + 1];
            next = ld(bases + (e & 0x7fffffffu));
        }
        if (P.is_inf()) continue;
        acc.add_affine(P.x, sign ? P.y.neg() : P.y);
    }
    const bool tail = b_begin >= start && b_end > end;
    if (b_begin < start) st(partials + 2 * t, acc);
    else if (!tail) st(buckets + b, acc);
    st(partials + 2 * t + 1, tail ? acc : Xyzz<F>::inf());
}

// out[t] = sum of in[tasks[t].x .. +tasks[t].y] (one level of the per-bucket partial-sum tree)
template <class F>
__device__ void sum_ranges(const Xyzz<F>* in, const uint2* tasks, uint32_t ntask, Xyzz<F>* out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntask) return;
    const uint2 tk = tasks[t];
    Xyzz<F> acc = ld(in + tk.x);
    for (uint32_t k = tk.x + 1; k < tk.x + tk.y; k++) acc.add(ld(in + k));
    st(out + t, acc);
}

// buckets[b] = the crossing bucket's single remaining partial (other buckets are already set).
template <class F>
__device__ void gather(const Xyzz<F>* in, const uint32_t* off, const uint32_t* cnt, uint32_t nbt,
                       Xyzz<F>* buckets) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < nbt && cnt[b]) st(buckets + b, ld(in + off[b]));
}

// total[b] += pass[b] for every bucket a pass of an MSM in passes filled (counts[b] > 0: its
// other buckets hold an earlier pass's sums).
template <class F>
__device__ void bucket_add(Xyzz<F>* total, const Xyzz<F>* pass, const uint32_t* counts,
                           uint32_t nbt) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nbt || !counts[b]) return;
    Xyzz<F> t = ld(total + b);
    t.add(ld(pass + b));
    st(total + b, t);
}

// Per (window, segment of L buckets): sum_j (j+1)·bucket_j over the segment's buckets.
template <class F>
__device__ void reduce_segments(const Xyzz<F>* buckets, uint32_t B, uint32_t nwin, uint32_t L,
                                uint32_t nseg, Xyzz<F>* out) {
    const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nwin * nseg) return;
    const uint32_t w = tid / nseg, s = tid % nseg;
    const uint32_t start = s * L;
    const uint32_t end = min(start + L, B);
    const Xyzz<F>* bw = buckets + (size_t)w * B;
    Xyzz<F> R = Xyzz<F>::inf(), S = Xyzz<F>::inf();
    for (uint32_t j = end; j > start; j--) {
        R.add(ld(bw + j - 1));
        S.add(R);
    }
    if (start && !R.is_inf()) {
        Xyzz<F> acc = Xyzz<F>::inf();
        for (int bit = 31 - __clz(start); bit >= 0; bit--) {
            acc.dbl();
            if ((start >> bit) & 1) acc.add(R);
        }
        S.add(acc);
    }
    st(out + tid, S);
}

template <class F>
__device__ void sum_groups(const Xyzz<F>* in, uint32_t per_in, uint32_t G, uint32_t per_out,
                           uint32_t nwin, Xyzz<F>* out) {
    const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= nwin * per_out) return;
    const uint32_t w = tid / per_out, g = tid % per_out;
    Xyzz<F> acc = Xyzz<F>::inf();
    for (uint32_t j = g * G; j < min(g * G + G, per_in); j++) acc.add(ld(in + (size_t)w * per_in + j));
    st(out + tid, acc);
}

template <class F>
__device__ void to_jacobian(const Xyzz<F>* in, uint32_t count, F* out) {
    const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= count) return;
    ld(in + tid).to_jacobian(out + 3 * (size_t)tid);
}

#define MSM_INSTANTIATE(SUF, F)                                                                   \
    extern "C" __global__ void msm_accumulate_##SUF(                                             \
        const Affine<F>* bases, const uint32_t* sorted, const uint32_t* offsets, uint32_t nbt,   \
        uint32_t total, uint32_t L, Xyzz<F>* buckets, Xyzz<F>* partials) {                       \
        accumulate<F>(bases, sorted, offsets, nbt, total, L, buckets, partials);                 \
    }                                                                                            \
    extern "C" __global__ void msm_sum_ranges_##SUF(const Xyzz<F>* in, const uint2* tasks,      \
                                                    uint32_t ntask, Xyzz<F>* out) {              \
        sum_ranges<F>(in, tasks, ntask, out);                                                    \
    }                                                                                            \
    extern "C" __global__ void msm_gather_##SUF(const Xyzz<F>* in, const uint32_t* off,         \
                                                const uint32_t* cnt, uint32_t nbt,               \
                                                Xyzz<F>* buckets) {                              \
        gather<F>(in, off, cnt, nbt, buckets);                                                   \
    }                                                                                            \
    extern "C" __global__ void msm_bucket_add_##SUF(Xyzz<F>* total, const Xyzz<F>* pass,        \
                                                    const uint32_t* counts, uint32_t nbt) {      \
        bucket_add<F>(total, pass, counts, nbt);                                                 \
    }                                                                                            \
    extern "C" __global__ void msm_reduce_segments_##SUF(const Xyzz<F>* buckets, uint32_t B,     \
                                                         uint32_t nwin, uint32_t L,             \
                                                         uint32_t nseg, Xyzz<F>* out) {         \
        reduce_segments<F>(buckets, B, nwin, L, nseg, out);                                      \
    }                                                                                            \
    extern "C" __global__ void msm_sum_groups_##SUF(const Xyzz<F>* in, uint32_t per_in,         \
                                                    uint32_t G, uint32_t per_out, uint32_t nwin, \
                                                    Xyzz<F>* out) {                              \
        sum_groups<F>(in, per_in, G, per_out, nwin, out);                                        \
    }                                                                                            \
    extern "C" __global__ void msm_to_jacobian_##SUF(const Xyzz<F>* in, uint32_t count, F* out) { \
        to_jacobian<F>(in, count, out);                                                          \
    }

MSM_INSTANTIATE(g1, Fp)
MSM_INSTANTIATE(g2, Fp2)
