// A witness's aux expanded on the device from the blob's compact codec (wire/src/codec.rs): per
// chunk, one byte per element (its class and value length), then the elements' significant
// little-endian value bytes back to back. The host copies those bytes, a sixteenth of the
// scalars for a PoRep witness, instead of expanding 4.2 GB per 32 GiB partition and copying it.
#pragma once
#include "field.cuh"

namespace expand {

constexpr uint32_t THREADS = 256;
// Elements a thread takes per tile: their value offsets come from one block scan per tile.
constexpr uint32_t PER_THREAD = 8;
constexpr uint32_t TILE = THREADS * PER_THREAD;

// The codec's tags: 0, 1, r - 1; v with (tag - 2) bytes; r - v with (tag - 34) bytes.
constexpr uint32_t POS_BASE = 2, NEG_BASE = 34, TAG_MAX = NEG_BASE + 32;

// Value bytes of `tag`, or -1 for a tag the codec does not have.
DEVI int value_len(uint32_t tag) {
    if (tag <= POS_BASE) return 0;
    if (tag <= NEG_BASE) return tag - POS_BASE;
    if (tag <= TAG_MAX) return tag - NEG_BASE;
    return -1;
}

DEVI bool below_r(const Fr& x) {
#pragma unroll
    for (int i = Fr::N - 1; i >= 0; i--)
        if (x.v[i] != FrCfg::p(i)) return x.v[i] < FrCfg::p(i);
    return false;
}

// Exclusive prefix sum of v over the block; *total gets the block's sum.
DEVI uint32_t block_scan(uint32_t v, uint32_t* total) {
    __shared__ uint32_t warp_sum[THREADS / 32];
    const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint32_t x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint32_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= (uint32_t)o) x += y;
    }
    if (lane == 31) warp_sum[warp] = x;
    __syncthreads();
    uint32_t before = 0, all = 0;
#pragma unroll
    for (uint32_t w = 0; w < THREADS / 32; w++) {
        before += w < warp ? warp_sum[w] : 0;
        all += warp_sum[w];
    }
    __syncthreads();  // warp_sum is rewritten by the next tile's scan
    *total = all;
    return before + x - v;
}

}  // namespace expand

// Block b expands chunk first_chunk + b: elements [c·chunk_elements, ...) of the aux, its bytes
// at bytes[starts[c] - base ...], element j in [out_first, out_end) to out[j - out_first] (a
// window of the aux, a batch's pass at a time), or nowhere when out is null (the codec's checks
// only). Per tile, the tags go to shared memory, each thread scans the
// value lengths of 8 adjacent elements (a block scan joins them) and leaves their offsets there,
// then the threads expand the tile's elements strided, so a warp's stores are contiguous. A
// chunk whose tags, value lengths or values the codec refuses (a value >= r, a bad tag, value
// bytes short or left over) lowers *bad_chunk to its index; the host then decodes that chunk
// itself for the exact error.
extern "C" __global__ void __launch_bounds__(expand::THREADS) witness_expand(
    const uint8_t* __restrict__ bytes, uint64_t base, const uint64_t* __restrict__ starts,
    uint32_t first_chunk, uint32_t chunk_elements, uint64_t n, Fr* __restrict__ out,
    uint64_t out_first, uint64_t out_end, uint32_t* bad_chunk) {
    using namespace expand;
    __shared__ int bad;
    __shared__ uint8_t tag_s[TILE];
    __shared__ uint32_t off_s[TILE];  // value offset of each element from the tile's first
    const uint32_t c = first_chunk + blockIdx.x;
    const uint64_t first = (uint64_t)c * chunk_elements;
    const uint32_t elems = (uint32_t)min((uint64_t)chunk_elements, n - first);
    const uint8_t* tags = bytes + (starts[c] - base);
    const uint64_t raw_len = starts[c + 1] - starts[c];
    if (threadIdx.x == 0) bad = raw_len < elems;
    __syncthreads();
    if (bad) {
        if (threadIdx.x == 0) atomicMin(bad_chunk, c);
        return;
    }
    const uint8_t* values = tags + elems;
    const uint64_t values_len = raw_len - elems;
    Fr r2;
#pragma unroll
    for (int i = 0; i < Fr::N; i++) r2.v[i] = FrCfg::r2(i);
    const Fr minus_one = Fr::one().neg();
    uint64_t carry = 0;  // value bytes of the tiles before
    bool ok = true;
    for (uint32_t tile = 0; tile < elems; tile += TILE) {
#pragma unroll
        for (uint32_t k = 0; k < PER_THREAD; k++) {
            const uint32_t e = k * THREADS + threadIdx.x;
            tag_s[e] = tile + e < elems ? tags[tile + e] : 0;
        }
        __syncthreads();
        const uint32_t mine0 = threadIdx.x * PER_THREAD;
        uint32_t mine = 0;
#pragma unroll
        for (uint32_t k = 0; k < PER_THREAD; k++) {
            const int len = value_len(tag_s[mine0 + k]);
            ok &= len >= 0;
            mine += len < 0 ? 0 : len;
        }
        uint32_t tile_bytes;
        uint32_t off = block_scan(mine, &tile_bytes);
#pragma unroll
        for (uint32_t k = 0; k < PER_THREAD; k++) {
            off_s[mine0 + k] = off;
            const int len = value_len(tag_s[mine0 + k]);
            off += len < 0 ? 0 : len;
        }
        __syncthreads();
#pragma unroll
        for (uint32_t k = 0; k < PER_THREAD; k++) {
            const uint32_t e = k * THREADS + threadIdx.x;
            if (tile + e >= elems) break;
            const uint32_t tag = tag_s[e];
            const int len = value_len(tag);
            const uint64_t at = carry + off_s[e];
            Fr x = Fr::zero();
            if (tag == 1) {
                x = Fr::one();
            } else if (tag == 2) {
                x = minus_one;
            } else if (len > 0) {
                if (at + len > values_len) {
                    ok = false;
                } else {
#pragma unroll
                    for (int j = 0; j < 32; j++)
                        if (j < len) x.v[j >> 2] |= (uint32_t)values[at + j] << (8 * (j & 3));
                    ok &= below_r(x);
                    x = x * r2;  // to Montgomery form: x·R² / R
                    if (tag > NEG_BASE) x = x.neg();
                }
            }
            const uint64_t j = first + tile + e;
            if (out != nullptr && j >= out_first && j < out_end) st(out + (j - out_first), x);
        }
        carry += tile_bytes;
        __syncthreads();  // tag_s and off_s are rewritten by the next tile
    }
    ok &= carry == values_len;
    if (!ok) bad = 1;
    __syncthreads();
    if (threadIdx.x == 0 && bad) atomicMin(bad_chunk, c);
}
