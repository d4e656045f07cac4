// Bucket accumulation in affine coordinates with shared inversions, timed against the XYZZ
// mixed addition the MSM's accumulation uses (kernels/cuda/msm.cuh), on the same chains of
// gathered points. An affine addition costs 3 multiplications once 1/(x2 − x1) is known;
// Montgomery's trick gets the inverses of a batch for 3 more each and one inversion, here one
// per block and step shared by every chain of the block (K chains a thread), by Fermat or by a
// binary GCD. Each chain's sum is checked against the XYZZ one (doublings and cancellations
// included: a table of four points with random signs makes them frequent); docs/gpu-runs.md has
// the results.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I../cuda affine_bench.cu -o affine_bench && ./affine_bench
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "inverse.cuh"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

constexpr int BLOCK = 256;

// BLS12-381's G1 generator in Montgomery form.
__constant__ uint32_t GX[12] = {0xfd530c16, 0x5cb38790, 0x9976fff5, 0x7817fc67, 0x143ba1c1, 0x154f95c7,
                                0xf3d0e747, 0xf0ae6acd, 0x21dbf440, 0xedce6ecc, 0x9e0bfb75, 0x12017741};
__constant__ uint32_t GY[12] = {0x0ce72271, 0xbaac93d5, 0x7918fd8e, 0x8c22631a, 0x570725ce, 0xdd595f13,
                                0x50405194, 0x51ac5829, 0xad0059c0, 0x0e1c8c3f, 0x5008a26a, 0x0bbc3efc};

// How a block inverts the product of its 32 lanes' products: Fermat, or the binary GCD.
enum Inv { FERMAT, GCD };

// Table point t: k·G for k = (t + 1)·0x9E3779B1 mod 2^32 (distinct, never 0), affine.
extern "C" __global__ void make_points(Fp* table, uint32_t n) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    Fp gx, gy;
    for (int i = 0; i < 12; i++) gx.v[i] = GX[i], gy.v[i] = GY[i];
    const uint32_t k = (t + 1) * 0x9E3779B1u;
    Xyzz<Fp> acc = Xyzz<Fp>::inf();
    for (int b = 31; b >= 0; b--) {
        acc.dbl();
        if ((k >> b) & 1) acc.add_affine(gx, gy);
    }
    st(table + 2 * t, acc.X * inverse_fermat(acc.ZZ));
    st(table + 2 * t + 1, acc.Y * inverse_fermat(acc.ZZZ));
}

// Step s of chain c: a table point's index, and whether it is negated (the MSM's signed digits).
DEVI uint32_t pick(uint32_t mask, uint64_t c, int s, bool& neg) {
    uint64_t h = ((c << 8) | (uint64_t)s) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    neg = (h >> 40) & 1;
    return (uint32_t)h & mask;
}

DEVI Fp point_y(const Fp* table, uint32_t i, bool neg) {
    const Fp y = ld(table + 2 * i + 1);
    return neg ? y.neg() : y;
}

// One chain a thread, summed in XYZZ with the mixed addition (accumulator in registers).
extern "C" __global__ void xyzz_chains(const Fp* table, uint32_t mask, Fp* out, uint32_t chains, int len) {
    const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= chains) return;
    Xyzz<Fp> acc = Xyzz<Fp>::inf();
    for (int s = 0; s < len; s++) {
        bool neg;
        const uint32_t i = pick(mask, c, s, neg);
        acc.add_affine(ld(table + 2 * i), point_y(table, i, neg));
    }
    st(out + 4 * (size_t)c, acc.X);
    st(out + 4 * (size_t)c + 1, acc.Y);
    st(out + 4 * (size_t)c + 2, acc.ZZ);
    st(out + 4 * (size_t)c + 3, acc.ZZZ);
}

extern "C" __global__ void xyzz_to_affine(const Fp* in, Fp* x, Fp* y, uint32_t chains) {
    const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= chains) return;
    const Fp ZZ = ld(in + 4 * (size_t)c + 2), ZZZ = ld(in + 4 * (size_t)c + 3);
    if (ZZ.is_zero()) {
        st(x + c, Fp::zero());
        st(y + c, Fp::zero());
        return;
    }
    st(x + c, ld(in + 4 * (size_t)c) * inverse_fermat(ZZ));
    st(y + c, ld(in + 4 * (size_t)c + 1) * inverse_fermat(ZZZ));
}

// What step s does to an affine accumulator (x, y), (0, 0) the identity (no point of G1 has
// x = 0), with the point (px, py): the denominator d whose inverse it needs (1 when it needs
// none). y and py are read only when the x coordinates agree.
enum Step { START, ADD, DOUBLE, CANCEL };
template <class Y, class PY>
DEVI Step classify(const Fp& x, Y y, const Fp& px, PY py, Fp& d) {
    d = Fp::one();
    if (x.is_zero()) return START;
    d = px - x;
    if (!d.is_zero()) return ADD;
    const Fp yy = y();
    if (py() == yy) {
        d = yy.dbl();
        return DOUBLE;
    }
    d = Fp::one();
    return CANCEL;
}

// K chains a thread, affine accumulators in memory (chain k of thread g at k·threads + g).
template <int K, Inv INV>
__global__ void __launch_bounds__(BLOCK) affine_chains(const Fp* table, uint32_t mask, Fp* ax, Fp* ay,
                                                       Fp* pre, int len) {
    __shared__ BlockInverse<BLOCK> sh;
    const uint32_t threads = gridDim.x * BLOCK;
    const uint32_t g = blockIdx.x * BLOCK + threadIdx.x;
    for (int k = 0; k < K; k++) {
        st(ax + (size_t)k * threads + g, Fp::zero());
        st(ay + (size_t)k * threads + g, Fp::zero());
    }
    for (int s = 0; s < len; s++) {
        // Forward: each chain's denominator, the running product before it kept.
        Fp run = Fp::one();
        for (int k = 0; k < K; k++) {
            const size_t c = (size_t)k * threads + g;
            bool neg;
            const uint32_t i = pick(mask, c, s, neg);
            Fp d;
            classify(ld(ax + c), [&] { return ld(ay + c); }, ld(table + 2 * i),
                     [&] { return point_y(table, i, neg); }, d);
            st(pre + c, run);
            run = run * d;
        }
        Fp inv = block_inverse<BLOCK, INV == GCD ? inverse_gcd : inverse_fermat>(run, sh);
        // Backward: each chain's inverse from the running products, then its addition.
        for (int k = K - 1; k >= 0; k--) {
            const size_t c = (size_t)k * threads + g;
            bool neg;
            const uint32_t i = pick(mask, c, s, neg);
            const Fp px = ld(table + 2 * i), py = point_y(table, i, neg);
            const Fp x = ld(ax + c), y = ld(ay + c);
            Fp d;
            const Step step = classify(x, [&] { return y; }, px, [&] { return py; }, d);
            const Fp ik = inv * ld(pre + c);
            inv = inv * d;
            Fp nx, ny;
            if (step == START) {
                nx = px;
                ny = py;
            } else if (step == CANCEL) {
                nx = ny = Fp::zero();
            } else {
                const Affine<Fp> sum = affine_sum(step == DOUBLE, x, y, px, py, ik);
                nx = sum.x;
                ny = sum.y;
            }
            st(ax + c, nx);
            st(ay + c, ny);
        }
    }
}

extern "C" __global__ void count_diff(const Fp* a, const Fp* b, uint32_t n, uint32_t* bad) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && !(ld(a + i) == ld(b + i))) atomicAdd(bad, 1u);
}

struct Run {
    float ms;
    uint32_t bad;
};

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
static float timed(F launch, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaGetLastError());
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    return median(ms);
}

struct Bufs {
    Fp *table, *xyzz, *rx, *ry, *ax, *ay, *pre;
    uint32_t* bad;
};

static uint32_t diff(const Bufs& m, uint32_t chains) {
    CK(cudaMemset(m.bad, 0, 4));
    const uint32_t blocks = (chains + BLOCK - 1) / BLOCK;
    count_diff<<<blocks, BLOCK>>>(m.ax, m.rx, chains, m.bad);
    count_diff<<<blocks, BLOCK>>>(m.ay, m.ry, chains, m.bad);
    uint32_t h;
    CK(cudaMemcpy(&h, m.bad, 4, cudaMemcpyDeviceToHost));
    return h;
}

// The XYZZ sums of `chains` chains as affine reference (rx, ry); returns the XYZZ time.
static float reference(const Bufs& m, uint32_t mask, uint32_t chains, int len, int reps) {
    const uint32_t blocks = (chains + BLOCK - 1) / BLOCK;
    const float ms = timed([&] { xyzz_chains<<<blocks, BLOCK>>>(m.table, mask, m.xyzz, chains, len); }, reps);
    xyzz_to_affine<<<blocks, BLOCK>>>(m.xyzz, m.rx, m.ry, chains);
    CK(cudaDeviceSynchronize());
    return ms;
}

template <int K, Inv INV>
static Run affine(const Bufs& m, uint32_t mask, uint32_t chains, int len, int reps) {
    const uint32_t blocks = chains / K / BLOCK;
    const float ms = timed([&] { affine_chains<K, INV><<<blocks, BLOCK>>>(m.table, mask, m.ax, m.ay, m.pre, len); }, reps);
    return {ms, diff(m, chains)};
}

// The table's rows for one way of inverting, K = 16 … 128; whether any chain sum differs.
template <Inv INV>
static bool rows(const char* inv, const Bufs& m, uint32_t mask, uint32_t chains, int len, int reps, float xyzz) {
    const Run runs[] = {affine<16, INV>(m, mask, chains, len, reps), affine<32, INV>(m, mask, chains, len, reps),
                        affine<64, INV>(m, mask, chains, len, reps), affine<128, INV>(m, mask, chains, len, reps)};
    const int ks[] = {16, 32, 64, 128};
    const double points = (double)chains * len;
    bool bad = false;
    for (int i = 0; i < 4; i++) {
        printf("| affine, one inversion a block and step | %d | %s | %.2f | %.3f | %.2f | %u |\n", ks[i], inv,
               runs[i].ms, runs[i].ms * 1e6 / points, runs[i].ms / xyzz, runs[i].bad);
        bad |= runs[i].bad != 0;
    }
    return bad;
}

int main(int argc, char** argv) {
    // 2^log_chains chains of `len` points; 2^23 of 32 by default.
    const int log_chains = argc > 1 ? atoi(argv[1]) : 23;
    const int len = argc > 2 ? atoi(argv[2]) : 32;
    const uint32_t chains = 1u << log_chains;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    int clk_khz = 0;
    CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0));
    printf("%s, %d SMs, %.2f GHz; %u chains of %d points\n", p.name, p.multiProcessorCount, clk_khz / 1e6,
           chains, len);
    const uint32_t table_n = 1u << 20;
    Bufs m;
    CK(cudaMalloc(&m.table, (size_t)table_n * 2 * sizeof(Fp)));
    CK(cudaMalloc(&m.xyzz, (size_t)chains * 4 * sizeof(Fp)));
    CK(cudaMalloc(&m.rx, (size_t)chains * sizeof(Fp)));
    CK(cudaMalloc(&m.ry, (size_t)chains * sizeof(Fp)));
    CK(cudaMalloc(&m.ax, (size_t)chains * sizeof(Fp)));
    CK(cudaMalloc(&m.ay, (size_t)chains * sizeof(Fp)));
    CK(cudaMalloc(&m.pre, (size_t)chains * sizeof(Fp)));
    CK(cudaMalloc(&m.bad, 4));
    make_points<<<table_n / BLOCK, BLOCK>>>(m.table, table_n);
    CK(cudaDeviceSynchronize());

    // Checks: four table points with random signs (doublings and cancellations every few
    // steps), then the timed table of 2^20.
    bool fail = false;
    const uint32_t small = 1u << 16;
    reference(m, 3, small, len, 1);
    const Run checks[] = {affine<8, FERMAT>(m, 3, small, len, 1), affine<32, FERMAT>(m, 3, small, len, 1),
                          affine<8, GCD>(m, 3, small, len, 1), affine<32, GCD>(m, 3, small, len, 1)};
    printf("checks, 4 points: %u, %u, %u and %u of %u chain sums differ (K = 8, 32; Fermat, then binary GCD)\n",
           checks[0].bad, checks[1].bad, checks[2].bad, checks[3].bad, small);
    for (const Run& r : checks) fail |= r.bad != 0;

    const int reps = 3;
    const uint32_t mask = table_n - 1;
    const float xyzz = reference(m, mask, chains, len, reps);
    const double points = (double)chains * len;
    printf("| accumulation | K chains a thread | block inversion | ms | ns per point | ÷ XYZZ | chain sums that differ |\n|---|---|---|---|---|---|---|\n");
    printf("| XYZZ mixed addition, one chain a thread | 1 | – | %.2f | %.3f | 1.00 | reference |\n", xyzz, xyzz * 1e6 / points);
    fail |= rows<FERMAT>("Fermat", m, mask, chains, len, reps, xyzz);
    fail |= rows<GCD>("binary GCD", m, mask, chains, len, reps, xyzz);
    printf("%s\n", fail ? "FAIL" : "PASS");
    return fail ? 1 : 0;
}
