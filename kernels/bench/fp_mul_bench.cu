// Fp multiplication throughput on the device: many independent threads, each a dependent chain
// of multiplications, timed with events. Compares the kernels' Fp multiplication with
// variants (the textbook CIOS, Karatsuba's) so the MSM's arithmetic ceiling is measured, not
// guessed; docs/gpu-runs.md has the results.
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

// a·b (K limbs each, K even) into t[2K]: the products of a's even limbs summed in e as 64-bit
// pairs, those of its odd limbs in o one word up (each pair one IMAD.WIDE, as in field.cuh), a
// row's carry into a word no earlier row reached; then t = e + o.
template <int K>
__device__ __forceinline__ void mul_full(const uint32_t* a, const uint32_t* b, uint32_t* t) {
    uint32_t e[2 * K], o[2 * K + 1];
#pragma unroll
    for (int k = 0; k < 2 * K; k++) e[k] = o[k] = 0;
    o[2 * K] = 0;
#pragma unroll
    for (int i = 0; i < K; i++) {
        const uint32_t bi = b[i];
        asm volatile("mad.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
            : "+r"(e[i]), "+r"(e[i + 1]) : "r"(a[0]), "r"(bi));
#pragma unroll
        for (int k = 2; k < K; k += 2)
            asm volatile("madc.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
                : "+r"(e[i + k]), "+r"(e[i + k + 1]) : "r"(a[k]), "r"(bi));
        if (i + K < 2 * K) asm volatile("addc.u32 %0, %0, 0;" : "+r"(e[i + K]));
        asm volatile("mad.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
            : "+r"(o[i + 1]), "+r"(o[i + 2]) : "r"(a[1]), "r"(bi));
#pragma unroll
        for (int k = 3; k < K; k += 2)
            asm volatile("madc.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
                : "+r"(o[i + k]), "+r"(o[i + k + 1]) : "r"(a[k]), "r"(bi));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(o[i + K + 1]));
    }
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(t[0]) : "r"(e[0]), "r"(o[0]));
#pragma unroll
    for (int k = 1; k < 2 * K; k++)
        asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(t[k]) : "r"(e[k]), "r"(o[k]));
}

// Fp multiplication with Karatsuba's three half products (108 wide products against 144) and
// the Montgomery reduction after it (separated operand scanning, 144): 252 wide products
// against the kernels' 288, timed against them.
__device__ __forceinline__ Fp kara_mul(const Fp& x, const Fp& y) {
    constexpr int N = 12, H = 6;
    const uint32_t* a = x.v;
    const uint32_t* b = y.v;
    uint32_t t[2 * N + 1], z1[N + 1], sa[H], sb[H], ca, cb;
    mul_full<H>(a, b, t);
    mul_full<H>(a + H, b + H, t + N);
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(sa[0]) : "r"(a[0]), "r"(a[H]));
#pragma unroll
    for (int k = 1; k < H; k++) asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(sa[k]) : "r"(a[k]), "r"(a[H + k]));
    asm volatile("addc.u32 %0, 0, 0;" : "=r"(ca));
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(sb[0]) : "r"(b[0]), "r"(b[H]));
#pragma unroll
    for (int k = 1; k < H; k++) asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(sb[k]) : "r"(b[k]), "r"(b[H + k]));
    asm volatile("addc.u32 %0, 0, 0;" : "=r"(cb));
    // z1 = (sa + ca·2^192)(sb + cb·2^192) - a0·b0 - a1·b1, 13 words
    mul_full<H>(sa, sb, z1);
    z1[N] = ca & cb;
    asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(z1[H]) : "r"(sb[0] & (0u - ca)));
#pragma unroll
    for (int k = 1; k < H; k++) asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(z1[H + k]) : "r"(sb[k] & (0u - ca)));
    asm volatile("addc.u32 %0, %0, 0;" : "+r"(z1[N]));
    asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(z1[H]) : "r"(sa[0] & (0u - cb)));
#pragma unroll
    for (int k = 1; k < H; k++) asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(z1[H + k]) : "r"(sa[k] & (0u - cb)));
    asm volatile("addc.u32 %0, %0, 0;" : "+r"(z1[N]));
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const uint32_t* z = t + h * N;
        asm volatile("sub.cc.u32 %0, %0, %1;" : "+r"(z1[0]) : "r"(z[0]));
#pragma unroll
        for (int k = 1; k < N; k++) asm volatile("subc.cc.u32 %0, %0, %1;" : "+r"(z1[k]) : "r"(z[k]));
        asm volatile("subc.u32 %0, %0, 0;" : "+r"(z1[N]));
    }
    t[2 * N] = 0;
    asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(t[H]) : "r"(z1[0]));
#pragma unroll
    for (int k = 1; k <= N; k++) asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(t[H + k]) : "r"(z1[k]));
#pragma unroll
    for (int k = H + N + 1; k <= 2 * N; k++) asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(t[k]));
    // Reduction: step i adds m·p at word i, p's even limbs in one chain, its odd ones in another
    // one word up; their carries go to words past N - 1 in ce and co, which no m reads.
    uint32_t ce[N + 1], co[N + 2];
#pragma unroll
    for (int k = 0; k <= N; k++) ce[k] = 0;
#pragma unroll
    for (int k = 0; k <= N + 1; k++) co[k] = 0;
#pragma unroll
    for (int i = 0; i < N; i++) {
        const uint32_t m = t[i] * FpCfg::INV;
        asm volatile("mad.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
            : "+r"(t[i]), "+r"(t[i + 1]) : "r"(m), "r"(FpCfg::p(0)));
#pragma unroll
        for (int k = 2; k < N; k += 2)
            asm volatile("madc.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
                : "+r"(t[i + k]), "+r"(t[i + k + 1]) : "r"(m), "r"(FpCfg::p(k)));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(ce[i + 1]));  // word i + N
        asm volatile("mad.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
            : "+r"(t[i + 1]), "+r"(t[i + 2]) : "r"(m), "r"(FpCfg::p(1)));
#pragma unroll
        for (int k = 3; k < N; k += 2)
            asm volatile("madc.lo.cc.u32 %0, %2, %3, %0; madc.hi.cc.u32 %1, %2, %3, %1;"
                : "+r"(t[i + k]), "+r"(t[i + k + 1]) : "r"(m), "r"(FpCfg::p(k)));
        asm volatile("addc.u32 %0, %0, 0;" : "+r"(co[i + 2]));  // word i + N + 1
    }
    // (t + ce + co) / 2^384, words N .. 2N: ce[j] and co[j] are carries into word N + j - 1.
    uint32_t r[N], hi;
    asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r[0]) : "r"(t[N]), "r"(ce[1]));
#pragma unroll
    for (int k = 1; k < N; k++) asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r[k]) : "r"(t[N + k]), "r"(ce[k + 1]));
    asm volatile("addc.u32 %0, %1, 0;" : "=r"(hi) : "r"(t[2 * N]));
    asm volatile("add.cc.u32 %0, %0, %1;" : "+r"(r[1]) : "r"(co[2]));
#pragma unroll
    for (int k = 2; k < N; k++) asm volatile("addc.cc.u32 %0, %0, %1;" : "+r"(r[k]) : "r"(co[k + 1]));
    asm volatile("addc.u32 %0, %0, %1;" : "+r"(hi) : "r"(co[N + 1]));
    Fp out;
    Fp::final_sub(out.v, r, hi);
    return out;
}

// Counts products where the kernels' multiplication and the reference differ (Fp and Fr).
extern "C" __global__ void check_mul(const Fp* in, uint32_t* bad) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const Fp a = ld(in + 2 * i), b = ld(in + 2 * i + 1);
    if (!(a * b == ref_mul(a, b))) atomicAdd(bad, 1u);
    if (!(kara_mul(a, b) == ref_mul(a, b))) atomicAdd(bad + 2, 1u);
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

extern "C" __global__ void kara_mul_chain(Fp* io, int iters) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    Fp a = ld(io + 2 * i), b = ld(io + 2 * i + 1);
    for (int k = 0; k < iters; k++) a = kara_mul(a, b);
    st(io + 2 * i, a);
}

// Fp multiplied by kara_mul, for the XYZZ addition.
struct alignas(16) FpKara : Fp {
    DEVI FpKara() {}
    DEVI FpKara(const Fp& f) : Fp(f) {}
    static DEVI FpKara zero() { return Fp::zero(); }
    static DEVI FpKara one() { return Fp::one(); }
    DEVI FpKara operator+(const FpKara& b) const { return Fp::operator+(b); }
    DEVI FpKara operator-(const FpKara& b) const { return Fp::operator-(b); }
    DEVI FpKara neg() const { return Fp::neg(); }
    DEVI FpKara dbl() const { return Fp::dbl(); }
    DEVI FpKara operator*(const FpKara& b) const { return kara_mul(*this, b); }
    DEVI FpKara sqr() const { return kara_mul(*this, *this); }
};

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
extern "C" __global__ void madd_chain_kara(Fp* io, int iters) { madd_chain_t<FpKara>(io, iters); }

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
    uint32_t* bad; CK(cudaMalloc(&bad, 12)); CK(cudaMemset(bad, 0, 12));
    check_mul<<<blocks / 2, threads>>>(d, bad);
    CK(cudaGetLastError());
    uint32_t hb[3]; CK(cudaMemcpy(hb, bad, 12, cudaMemcpyDeviceToHost));
    const bool fail = hb[0] || hb[1] || hb[2];
    printf("%s: Fp mul vs reference CIOS: %u of %d differ; Fr: %u of %d differ; Fp Karatsuba: %u of %d differ\n",
           fail ? "FAIL" : "PASS", hb[0], n / 2, hb[1], n / 2, hb[2], n / 2);
    struct { const char* name; void (*k)(Fp*, int); int muls; } ks[] = {
        {"Fp mul (reference CIOS)", ref_mul_chain, 1}, {"Fp mul", mul_chain, 1}, {"Fp sqr", sqr_chain, 1},
        {"XYZZ madd, inlined mul (10 mul-equiv)", madd_chain, 10},
        {"XYZZ madd, called mul (10 mul-equiv)", madd_chain_call, 10},
        {"Fp mul, Karatsuba", kara_mul_chain, 1},
        {"XYZZ madd, Karatsuba mul (10 mul-equiv)", madd_chain_kara, 10}};
    printf("| kernel | ms | Gop/s | mul-equiv/s/SM/clk |\n|---|---|---|---|\n");
    for (auto& k : ks) {
        float ms = time_kernel(k.k, d, blocks, threads, iters);
        double ops = (double)n * iters;
        double per_clk = ops * k.muls / (ms * 1e-3) / sms / (clk_khz * 1e3);
        printf("| %s | %.2f | %.2f | %.4f |\n", k.name, ms, ops / (ms * 1e6), per_clk);
    }
    return fail ? 1 : 0;
}
