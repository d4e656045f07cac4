// Fp multiplication throughput on the device: many independent threads, each a dependent chain
// of multiplications, timed with events. Compares the kernels' Fp multiplication with
// instruction-count variants so the MSM's arithmetic ceiling is measured, not guessed.
//   nvcc -O3 -std=c++17 -arch=sm_90 -I../cuda fp_mul_bench.cu -o fp_mul_bench && ./fp_mul_bench
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include "curve.cuh"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

extern "C" __global__ void mul_chain(Fp* io, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    Fp a = ld(io + 2 * i), b = ld(io + 2 * i + 1);
    for (int k = 0; k < iters; k++) a = a * b;
    st(io + 2 * i, a);
}

extern "C" __global__ void sqr_chain(Fp* io, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    Fp a = ld(io + 2 * i);
    for (int k = 0; k < iters; k++) a = a.sqr();
    st(io + 2 * i, a);
}


// The textbook CIOS (separate lo and hi carry chains per limb of b): the reference the kernels'
// multiplication is checked against, and the baseline it is timed against.
template <class C>
__device__ __forceinline__ Mont<C> ref_mul(const Mont<C>& a, const Mont<C>& b) {
    constexpr int N = C::N;
    uint32_t t[N + 2];
#pragma unroll
    for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const uint32_t bi = b.v[i];
        asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(a.v[0]), "r"(bi));
#pragma unroll
        for (int j = 1; j < N; j++)
            asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(a.v[j]), "r"(bi));
        asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(t[N]));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
        asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(a.v[0]), "r"(bi));
#pragma unroll
        for (int j = 1; j < N; j++)
            asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[j + 1]) : "r"(a.v[j]), "r"(bi));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
        const uint32_t m = t[0] * C::INV;
        asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[0]) : "r"(m), "r"(C::p(0)));
#pragma unroll
        for (int j = 1; j < N; j++)
            asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(t[j]) : "r"(m), "r"(C::p(j)));
        asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(t[N]));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
        asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[1]) : "r"(m), "r"(C::p(0)));
#pragma unroll
        for (int j = 1; j < N; j++)
            asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(t[j + 1]) : "r"(m), "r"(C::p(j)));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(t[N + 1]));
#pragma unroll
        for (int j = 0; j < N + 1; j++) t[j] = t[j + 1];
        t[N + 1] = 0;
    }
    Mont<C> r;
    Mont<C>::final_sub(r.v, t, t[N]);
    return r;
}

// Counts products where the kernels' multiplication and the reference differ (Fp and Fr).
extern "C" __global__ void check_mul(const Fp* in, uint32_t* bad) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const Fp a = ld(in + 2 * i), b = ld(in + 2 * i + 1);
    if (!(a * b == ref_mul(a, b))) atomicAdd(bad, 1u);
    Fr x, y;
#pragma unroll
    for (int k = 0; k < 8; k++) { x.v[k] = a.v[k]; y.v[k] = b.v[k]; }
    x.v[7] &= 0x3fffffff;
    y.v[7] &= 0x3fffffff;
    if (!(x * y == ref_mul(x, y))) atomicAdd(bad + 1, 1u);
}

extern "C" __global__ void ref_mul_chain(Fp* io, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    Fp a = ld(io + 2 * i), b = ld(io + 2 * i + 1);
    for (int k = 0; k < iters; k++) a = ref_mul(a, b);
    st(io + 2 * i, a);
}

// Fp whose multiplication is a call, not inlined: the XYZZ addition's code then fits the
// instruction caches; timed against the inlined one.
struct alignas(16) FpCall : Fp {
    DEVI FpCall() {}
    DEVI FpCall(const Fp& f) : Fp(f) {}
    static DEVI FpCall zero() { return Fp::zero(); }
    static DEVI FpCall one() { return Fp::one(); }
    DEVI FpCall operator+(const FpCall& b) const { return Fp::operator+(b); }
    DEVI FpCall operator-(const FpCall& b) const { return Fp::operator-(b); }
    DEVI FpCall neg() const { return Fp::neg(); }
    DEVI FpCall dbl() const { return Fp::dbl(); }
    __device__ __noinline__ FpCall operator*(const FpCall& b) const { return Fp::operator*(b); }
    DEVI FpCall sqr() const { return *this * *this; }
};

template <class F>
__device__ void madd_chain_t(Fp* io, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    F x = ld(io + 2 * i), y = ld(io + 2 * i + 1);
    Xyzz<F> acc = Xyzz<F>::from_affine(y, x);
    for (int k = 0; k < iters; k++) {
        acc.add_affine(x, y);
        x = x + y;
    }
    st(io + 2 * i, (Fp)(acc.X + acc.Y + acc.ZZ + acc.ZZZ));
}
extern "C" __global__ void madd_chain(Fp* io, int iters) { madd_chain_t<Fp>(io, iters); }
extern "C" __global__ void madd_chain_call(Fp* io, int iters) { madd_chain_t<FpCall>(io, iters); }

template <class K>
float time_kernel(K kern, Fp* d, int blocks, int threads, int iters) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    kern<<<blocks, threads>>>(d, 4);
    CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(a));
        kern<<<blocks, threads>>>(d, iters);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t; CK(cudaEventElapsedTime(&t, a, b)); ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[2];
}

int main() {
    cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
    const int sms = p.multiProcessorCount;
    int clk_khz = 0; CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrClockRate, 0));
    printf("%s, %d SMs, %.2f GHz\n", p.name, sms, clk_khz / 1e6);
    const int threads = 128, blocks = sms * 16, n = blocks * threads;
    std::vector<uint32_t> h((size_t)n * 2 * 12);
    srand(12345);
    for (size_t i = 0; i < h.size(); i++) h[i] = (uint32_t)rand() * 2654435761u ^ (uint32_t)rand();
    for (size_t i = 11; i < h.size(); i += 12) h[i] &= 0x0fffffff;  // < p
    Fp* d; CK(cudaMalloc(&d, h.size() * 4));
    CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    const int iters = 2000;
    uint32_t* bad; CK(cudaMalloc(&bad, 8)); CK(cudaMemset(bad, 0, 8));
    check_mul<<<blocks / 2, threads>>>(d, bad);
    CK(cudaGetLastError());
    uint32_t hb[2]; CK(cudaMemcpy(hb, bad, 8, cudaMemcpyDeviceToHost));
    printf("%s: Fp mul vs reference CIOS: %u of %d differ; Fr: %u of %d differ\n",
           hb[0] || hb[1] ? "FAIL" : "PASS", hb[0], n / 2, hb[1], n / 2);
    struct { const char* name; void (*k)(Fp*, int); int muls; } ks[] = {
        {"Fp mul (reference CIOS)", ref_mul_chain, 1}, {"Fp mul", mul_chain, 1}, {"Fp sqr", sqr_chain, 1},
        {"XYZZ madd, inlined mul (10 mul-equiv)", madd_chain, 10},
        {"XYZZ madd, called mul (10 mul-equiv)", madd_chain_call, 10}};
    printf("| kernel | ms | Gop/s | mul-equiv/s/SM/clk |\n|---|---|---|---|\n");
    for (auto& k : ks) {
        float ms = time_kernel(k.k, d, blocks, threads, iters);
        double ops = (double)n * iters;
        double per_clk = ops * k.muls / (ms * 1e-3) / sms / (clk_khz * 1e3);
        printf("| %s | %.2f | %.2f | %.4f |\n", k.name, ms, ops / (ms * 1e6), per_clk);
    }
    return hb[0] || hb[1] ? 1 : 0;
}
