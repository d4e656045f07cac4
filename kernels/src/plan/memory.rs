//! Device bytes of the buffers the kernels' callers allocate (gpu/msm.rs, gpu/ntt.rs,
//! gpu/expand.rs), the same arithmetic they allocate with: what a plan adds up.

use cuzk_wire::blob::MAX_CHUNK_ELEMENTS;
use cuzk_wire::codec::max_encoded_len;

use crate::digits::{
    num_windows, shared_window, window_bits, xyzz_partials, COARSE_ENTRY_BYTES, SORTED_ENTRY_BYTES,
};

/// Bytes of a compact witness that go to the device at a time (gpu/expand.rs): the most a
/// chunk of a blob may take, so that every chunk fits one batch.
pub const EXPAND_BATCH: u64 = max_encoded_len(MAX_CHUNK_ELEMENTS as usize) as u64;

/// Bytes of an affine G1 and G2 point.
pub const G1: u64 = 96;
pub const G2: u64 = 192;

/// Bytes of a field element.
pub const FR: u64 = 32;

/// Scratch of one pass of `n` points of an MSM of `total` points (whose window its passes
/// share), with affine points of `point_bytes` (an upper bound: every buffer `msm_accumulate`
/// and `msm_reduce` hold at any time, summed).
pub fn msm_scratch(n: usize, total: usize, point_bytes: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let shared = shared_window(n, total);
    let nbt = pass_buckets(n, total);
    let xyzz = 2 * point_bytes;
    let entries = n as u64 * num_windows(pass_window(n, total)) as u64;
    // the coarse-sorted (bucket, entry) pairs (8 B) and the sorted entries (4 B) per (point,
    // window); the scalars' class flags, then the ones' and the other scalars' indices (8 B per
    // point); counts, offsets, cursors and the task tables (4 B) per bucket; the buckets; the
    // chunk partials (or in the coarse pairs' room, the batch-affine accumulation's partials and
    // state: digits::affine_chunks). Scalars 0 and 1 make fewer entries and a narrower window,
    // never more.
    // A pass that shares the MSM's buckets holds them beside its own (gpu/msm.rs, MsmBuckets).
    let bucket_sets = if shared.is_some() { 2 } else { 1 };
    entries * (COARSE_ENTRY_BYTES + SORTED_ENTRY_BYTES)
        + (n as u64 + 1) * 8
        + nbt * 4 * 6
        + bucket_sets * nbt * xyzz
        + xyzz_partials(entries, xyzz)
}

/// The window a pass of `n` points of an MSM of `total` points sorts its digits by.
fn pass_window(n: usize, total: usize) -> u32 {
    shared_window(n, total).unwrap_or_else(|| window_bits(n))
}

/// Buckets a pass of `n` points of an MSM of `total` points fills, over all its windows.
pub fn pass_buckets(n: usize, total: usize) -> u64 {
    let c = pass_window(n, total);
    (num_windows(c) as u64) << (c - 1)
}

/// Device bytes of expanding a compact witness of `vars` variables: its bytes on the device, a
/// batch at a time.
pub fn expand_staging(vars: usize) -> u64 {
    (max_encoded_len(vars) as u64).min(EXPAND_BATCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_grows_with_the_points_and_the_curve() {
        assert_eq!(msm_scratch(0, 0, G1), 0);
        assert!(msm_scratch(1 << 20, 1 << 20, G2) > msm_scratch(1 << 20, 1 << 20, G1));
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        // A 32 GiB partition's H MSM in one pass: the sort's entries dominate.
        let n = (1 << 27) - 1;
        let whole = gib(msm_scratch(n, n, G1));
        assert!((15.0..30.0).contains(&whole), "{whole}");
        // In passes of 2^23 points it is a tenth of that.
        let chunk = gib(msm_scratch(1 << 23, n, G1));
        assert!(chunk < whole / 8.0, "{chunk}");
        // Passes of 2^24 share the whole MSM's buckets, more than a lone MSM of 2^24 needs.
        assert!(gib(msm_scratch(1 << 24, 1 << 24, G1)) < gib(msm_scratch(1 << 24, n, G1)));
        assert_eq!(expand_staging(1 << 30), EXPAND_BATCH);
        assert_eq!(expand_staging(1000), max_encoded_len(1000) as u64);
    }
}
