//! Device memory per proving step, from the same arithmetic the kernels' callers allocate with
//! (gpu/msm.rs, gpu/ntt.rs, backend.rs): a shape whose key and working memory do not fit the
//! budget is refused when its key is loaded, with the numbers, instead of running out of memory
//! in the middle of a proof.

use cuzk_wire::blob::MAX_CHUNK_ELEMENTS;
use cuzk_wire::codec::max_encoded_len;

use crate::digits::{num_windows, window_bits};

/// Bytes of a compact witness that go to the device at a time (gpu/expand.rs): the most a
/// chunk of a blob may take, so that every chunk fits one batch.
pub const EXPAND_BATCH: u64 = max_encoded_len(MAX_CHUNK_ELEMENTS as usize) as u64;

/// Bytes of an affine G1 and G2 point.
pub const G1: u64 = 96;
pub const G2: u64 = 192;

/// Scratch of one MSM of `n` points with affine points of `point_bytes` (an upper bound: every
/// buffer `msm_windows` holds at any time, summed).
pub fn msm_scratch(n: usize, point_bytes: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let c = window_bits(n);
    let nwin = num_windows(c) as u64;
    let nbt = nwin << (c - 1);
    let xyzz = 2 * point_bytes;
    let entries = n as u64 * nwin;
    let chunk = (entries / 200_000).clamp(8, 128);
    let partials = 2 * entries.div_ceil(chunk) * xyzz;
    // the coarse-sorted (bucket, entry) pairs (8 B) and the sorted entries (4 B) per (point,
    // window); the scalars' class flags, then the ones' and the other scalars' indices (8 B per
    // point); counts, offsets, cursors and the task tables (4 B) per bucket; the buckets; the
    // chunk partials. Scalars 0 and 1 make fewer entries and a narrower window, never more.
    entries * 12 + (n as u64 + 1) * 8 + nbt * 4 * 6 + nbt * xyzz + partials
}

/// What one partition of a shape needs beyond its key, at the peak of its steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Working {
    /// One witness on the device.
    pub witness: u64,
    /// Its compact form on the device while it is expanded (at most [`EXPAND_BATCH`]).
    pub expand: u64,
    /// Witnesses on the device at once: one per worker (one proving, the others uploaded and
    /// waiting for their turn).
    pub witnesses: u64,
    /// NTT twiddles, kept between partitions.
    pub twiddles: u64,
    /// A·w, B·w, C·w padded to the domain, while H runs.
    pub evaluations: u64,
    /// H, the packed A and B scalars and the largest MSM's scratch, while the MSMs run.
    pub msm_phase: u64,
}

impl Working {
    /// `vars` witness variables, a domain of `m`, `a_len`/`b_len` packed A/B scalars, `workers`
    /// proving on the device.
    pub fn new(vars: usize, m: usize, a_len: usize, b_len: usize, workers: usize) -> Self {
        let s = 32u64;
        let largest_msm = [
            msm_scratch(m - 1, G1),
            msm_scratch(vars, G1),
            msm_scratch(a_len, G1),
            msm_scratch(b_len, G2),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        Working {
            witness: vars as u64 * s,
            expand: (max_encoded_len(vars) as u64).min(EXPAND_BATCH),
            witnesses: workers.max(1) as u64,
            twiddles: m as u64 * s,
            evaluations: 3 * m as u64 * s,
            msm_phase: (m + a_len + b_len) as u64 * s + largest_msm,
        }
    }

    pub fn peak(&self) -> u64 {
        (self.witness + self.expand) * self.witnesses
            + self.twiddles
            + self.evaluations.max(self.msm_phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_with_the_shape() {
        // A 32 GiB PoRep partition: 2^27 domain, ~130 M variables.
        let big = Working::new(130_169_893 + 328, 1 << 27, 120_000_000, 60_000_000, 1);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        assert!(
            (30.0..60.0).contains(&gib(big.peak())),
            "{}",
            gib(big.peak())
        );
        let small = Working::new(2_685_713, 1 << 22, 2_500_000, 1_300_000, 1);
        assert!(small.peak() < big.peak() / 20);
        let two = Working::new(130_169_893 + 328, 1 << 27, 120_000_000, 60_000_000, 2);
        assert_eq!(two.peak() - big.peak(), big.witness + big.expand);
        assert_eq!(big.expand, EXPAND_BATCH);
        assert_eq!(small.expand, 33 * small.witness / 32);
        assert_eq!(msm_scratch(0, G1), 0);
        assert!(msm_scratch(1 << 20, G2) > msm_scratch(1 << 20, G1));
    }
}
