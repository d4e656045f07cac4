// Pippenger MSM: signed c-bit digits, counting sort of (point, sign) by (window, bucket),
// load-balanced bucket accumulation in XYZZ (tasks of at most T points), bucket sums,
// per-window weighted reduction (running sums over segments), window sums returned as
// Jacobian points; the host combines the windows.
#pragma once
#include "curve.cuh"

#define SKIP_DIGIT 0xffffffffu

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

// Signed digits of the (Montgomery-form) scalars; digit word = (|d|-1) | sign<<31 or SKIP.
extern "C" __global__ void msm_digits(const Fr* scalars, uint32_t n, uint32_t c, uint32_t nwin,
                                      uint32_t* digits, uint32_t* counts) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Fr s = ld(scalars + i).from_mont();
    uint32_t limbs[10];
#pragma unroll
    for (int j = 0; j < 8; j++) limbs[j] = s.v[j];
    limbs[8] = limbs[9] = 0;
    const uint32_t B = 1u << (c - 1);
    const uint32_t mask = (1u << c) - 1;
    uint32_t carry = 0;
    for (uint32_t w = 0; w < nwin; w++) {
        const uint32_t bit = w * c;
        const uint32_t l = bit >> 5, sh = bit & 31;
        const uint64_t word = (uint64_t)limbs[l] | ((uint64_t)limbs[l + 1] << 32);
        uint32_t d = (uint32_t)(word >> sh) & mask;
        d += carry;
        uint32_t sign = 0;
        if (d > B) {
            d = (1u << c) - d;
            carry = 1;
            sign = 1;
        } else {
            carry = 0;
        }
        uint32_t out = SKIP_DIGIT;
        if (d) {
            out = (d - 1) | (sign << 31);
            atomicAdd(counts + (size_t)w * B + (d - 1), 1u);
        }
        digits[(size_t)w * n + i] = out;
    }
}

extern "C" __global__ void msm_scatter(const uint32_t* digits, uint32_t n, uint32_t c,
                                       uint32_t nwin, uint32_t* cursor, uint32_t* sorted) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint32_t B = 1u << (c - 1);
    for (uint32_t w = 0; w < nwin; w++) {
        const uint32_t d = digits[(size_t)w * n + i];
        if (d == SKIP_DIGIT) continue;
        const uint32_t pos = atomicAdd(cursor + (size_t)w * B + (d & 0x7fffffffu), 1u);
        sorted[pos] = i | (d & 0x80000000u);
    }
}

extern "C" __global__ void msm_task_count(const uint32_t* counts, uint32_t nbt, uint32_t T,
                                          uint32_t* ntasks) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < nbt) ntasks[b] = (counts[b] + T - 1) / T;
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

template <class F>
__device__ void accumulate(const Affine<F>* bases, const uint32_t* sorted, const uint2* tasks,
                           uint32_t ntask, Xyzz<F>* out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= ntask) return;
    const uint2 tk = tasks[t];
    Xyzz<F> acc = Xyzz<F>::inf();
    for (uint32_t k = tk.x; k < tk.x + tk.y; k++) {
        const uint32_t e = sorted[k];
        const Affine<F> P = ld(bases + (e & 0x7fffffffu));
        if (P.is_inf()) continue;
        acc.add_affine(P.x, (e >> 31) ? P.y.neg() : P.y);
    }
    st(out + t, acc);
}

template <class F>
__device__ void bucket_sum(const Xyzz<F>* task_out, const uint32_t* task_off,
                           const uint32_t* counts, uint32_t T, uint32_t nbt, Xyzz<F>* buckets) {
    const uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nbt) return;
    const uint32_t nt = (counts[b] + T - 1) / T;
    const uint32_t t0 = task_off[b];
    Xyzz<F> acc = Xyzz<F>::inf();
    if (nt >= 1) acc = ld(task_out + t0);
    for (uint32_t k = 1; k < nt; k++) acc.add(ld(task_out + t0 + k));
    st(buckets + b, acc);
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
    extern "C" __global__ void msm_accumulate_##SUF(const Affine<F>* bases, const uint32_t* sorted, \
                                                    const uint2* tasks, uint32_t ntask,          \
                                                    Xyzz<F>* out) {                              \
        accumulate<F>(bases, sorted, tasks, ntask, out);                                         \
    }                                                                                            \
    extern "C" __global__ void msm_bucket_sum_##SUF(const Xyzz<F>* task_out,                     \
                                                    const uint32_t* task_off,                    \
                                                    const uint32_t* counts, uint32_t T,          \
                                                    uint32_t nbt, Xyzz<F>* buckets) {            \
        bucket_sum<F>(task_out, task_off, counts, T, nbt, buckets);                              \
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
