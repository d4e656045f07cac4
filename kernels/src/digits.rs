//! Host-side mirror of the MSM's scalar decomposition (kernels/cuda/msm.cuh `for_each_digit`):
//! window sizes, signed c-bit digits, and canonical-scalar validation of raw bytes.

use blstrs::Scalar;
use ff::PrimeField;

use crate::error::CudaError;

/// Scalars are < r < 2^255.
pub const SCALAR_BITS: u32 = 255;

/// Window widths the kernels take (`MAX_WINDOW`: 2^23 buckets per window).
pub const MIN_WINDOW: u32 = 6;
pub const MAX_WINDOW: u32 = 24;

/// Window width for an MSM of `n` points: about log2(n) - 5, at most 19 below 2^26 points and
/// 20 from there: at a 32 GiB partition's 2^27 - 1 H points, 20 bits was the fastest of the
/// widths timed side by side, before and after the sort changed (docs/gpu-runs.md, "The 2^27
/// kernels without parameters" and "The MSM's sort in three passes").
pub fn window_bits(n: usize) -> u32 {
    let log = usize::BITS - n.max(1).leading_zeros();
    log.saturating_sub(5)
        .clamp(MIN_WINDOW, if log >= 27 { 20 } else { 19 })
}

/// The window an MSM of `total` points in passes of `pass` points shares across its passes,
/// where that pays: its buckets at most half the pass's points, so that each bucket a pass
/// fills takes several points (else each pass takes its own window and is reduced alone).
pub fn shared_window(pass: usize, total: usize) -> Option<u32> {
    let c = window_bits(total);
    let buckets = (num_windows(c) as usize) << (c - 1);
    (pass < total && 2 * buckets <= pass).then_some(c)
}

/// Windows needed for signed c-bit digits of a 255-bit scalar: the top window's value plus the
/// incoming carry never exceeds 2^(c-1), so no digit is left over.
pub fn num_windows(c: u32) -> u32 {
    SCALAR_BITS / c + 1
}

/// `msm_coarse`'s block: threads, scalars per thread (kernels/cuda/msm.cuh).
pub const COARSE_THREADS: u32 = 512;
pub const COARSE_PER_THREAD: u32 = 8;

/// The coarse bins of the MSM's sort are 2^shift consecutive buckets of one window, fewer than
/// 2^13 in all for `nbt` buckets: a block's 4,096 scalars put several entries in each bin of a
/// window, and each bin's slice of the sorted output is small (a 2^27 MSM: 13 × 512 bins of
/// 1,024 buckets, ~1 MB each). A window's 2^(c-1) buckets are a multiple of 2^shift.
pub fn coarse_shift(nbt: u32) -> u32 {
    (u32::BITS - nbt.leading_zeros()).saturating_sub(13)
}

/// The XYZZ accumulation's chunk of sorted entries, one a thread (kernels/cuda/msm.cuh
/// `accumulate`): as long as keeps a few waves of threads in flight; long chunks leave fewer
/// buckets crossing them to reduce.
pub fn xyzz_chunk(entries: u64) -> u64 {
    (entries / 200_000).clamp(8, 128)
}

/// How the G1 MSMs accumulate their buckets (`Gpu::set_accumulation`,
/// `CudaBackend::set_accumulation`); G2's are XYZZ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accumulation {
    /// In affine coordinates with inversions shared by a block (kernels/cuda/msm_affine.cuh)
    /// where the MSM fills the device that way within its scratch ([`affine_chunks`]), else
    /// with XYZZ mixed additions. The default.
    BySize,
    /// XYZZ mixed additions (kernels/cuda/msm.cuh `accumulate`) at every size.
    Xyzz,
    /// Batch-affine at every size, with the kernel instance of `AFFINE_CHUNKS_PER_THREAD[i]`
    /// chunks a thread: checks of each instance on small MSMs.
    Affine(usize),
}

/// The batch-affine accumulation's block and the chunks each of its threads steps together,
/// one kernel instance each (kernels/cuda/msm_affine.cuh), largest first.
pub const AFFINE_BLOCK: u32 = 256;
pub const AFFINE_CHUNKS_PER_THREAD: [u32; 2] = [128, 64];
/// Device bytes of one chunk's state in the batch-affine accumulation: x, y, the running
/// product (48 bytes each) and a 16-byte word.
pub const AFFINE_STATE_BYTES: u64 = 160;
/// A G1 point in XYZZ coordinates (twice an affine one): the partial slots of either
/// accumulation.
const XYZZ_G1_BYTES: u64 = 2 * crate::plan::G1;
/// Device bytes per sorted entry of the MSM's sort (gpu/msm.rs): the coarse (bucket, entry)
/// pairs, freed before the accumulation, and the sorted entries it reads.
pub const COARSE_ENTRY_BYTES: u64 = 8;
pub const SORTED_ENTRY_BYTES: u64 = 4;
/// The shortest chunk the batch-affine accumulation takes: shorter ones end a bucket every few
/// entries, each end a write and a step without an addition.
const AFFINE_LEAST_CHUNK: u64 = 32;

/// Device bytes of the XYZZ accumulation's partial slots for `entries` sorted entries, with
/// points of `xyzz_bytes`: two for each chunk (the buckets crossing its ends).
pub fn xyzz_partials(entries: u64, xyzz_bytes: u64) -> u64 {
    2 * entries.div_ceil(xyzz_chunk(entries)) * xyzz_bytes
}

/// The batch-affine accumulation's launch for `entries` sorted entries, where `wave[i]` threads
/// of instance i run at once on the device: (instance, chunk length). One wave of threads, the
/// most chunks a thread (the inversions shared by the most additions) whose chunks are at least
/// [`AFFINE_LEAST_CHUNK`] long and whose partial slots and state fit where the XYZZ
/// accumulation's partial slots and the sort's coarse pairs (freed before either runs) were:
/// memory plan::memory::msm_scratch counts already. None where no instance is.
pub fn affine_chunks(entries: u64, wave: [u64; 2]) -> Option<(usize, u64)> {
    let room = xyzz_partials(entries, XYZZ_G1_BYTES) + entries * COARSE_ENTRY_BYTES;
    (0..wave.len()).find_map(|i| {
        let chunks = wave[i] * AFFINE_CHUNKS_PER_THREAD[i] as u64;
        let bytes = 2 * chunks * XYZZ_G1_BYTES + affine_state_bytes(i, wave[i]);
        (chunks > 0 && entries / chunks >= AFFINE_LEAST_CHUNK && bytes <= room)
            .then(|| (i, entries.div_ceil(chunks)))
    })
}

/// Device bytes of the batch-affine accumulation's state for instance `i` with `wave` threads.
pub fn affine_state_bytes(i: usize, wave: u64) -> u64 {
    wave * AFFINE_CHUNKS_PER_THREAD[i] as u64 * AFFINE_STATE_BYTES
}

/// [`affine_chunks`] at any size with instance `i` (checks of the kernels on small MSMs):
/// chunks of at least one entry.
pub fn affine_chunks_forced(entries: u64, wave: [u64; 2], i: usize) -> (usize, u64) {
    let i = i.min(wave.len() - 1);
    let chunks = (wave[i] * AFFINE_CHUNKS_PER_THREAD[i] as u64).max(1);
    (i, entries.div_ceil(chunks).max(1))
}

/// Signed digits d_w in [-(2^(c-1) - 1), 2^(c-1)] with sum d_w 2^(c w) = s; `limbs` is the
/// canonical little-endian value. Exactly the kernel's algorithm.
pub fn signed_digits(limbs: &[u32; 8], c: u32) -> Vec<i64> {
    let nwin = num_windows(c);
    let mut ext = [0u32; 10];
    ext[..8].copy_from_slice(limbs);
    let b = 1u32 << (c - 1);
    let mask = (1u32 << c) - 1;
    let mut carry = 0u32;
    let mut out = Vec::with_capacity(nwin as usize);
    for w in 0..nwin {
        let bit = w * c;
        let (l, sh) = ((bit >> 5) as usize, bit & 31);
        let word = ext[l] as u64 | (ext[l + 1] as u64) << 32;
        let mut d = ((word >> sh) as u32 & mask) + carry;
        let mut neg = false;
        if d > b {
            d = (1u32 << c) - d;
            carry = 1;
            neg = true;
        } else {
            carry = 0;
        }
        out.push(if neg { -(d as i64) } else { d as i64 });
    }
    assert_eq!(carry, 0, "scalar wider than 255 bits");
    out
}

/// Canonical little-endian limbs of a scalar.
pub fn canonical_limbs(s: &Scalar) -> [u32; 8] {
    let r = s.to_repr();
    std::array::from_fn(|i| u32::from_le_bytes(r.as_ref()[4 * i..4 * i + 4].try_into().unwrap()))
}

/// Parses canonical little-endian 32-byte scalars, rejecting any value >= r.
pub fn scalars_from_le_bytes(bytes: &[u8]) -> Result<Vec<Scalar>, CudaError> {
    if !bytes.len().is_multiple_of(32) {
        return Err(CudaError::Shape(format!(
            "{} bytes is not a whole number of scalars",
            bytes.len()
        )));
    }
    bytes
        .chunks_exact(32)
        .enumerate()
        .map(|(i, c)| {
            Option::from(Scalar::from_bytes_le(c.try_into().unwrap()))
                .ok_or(CudaError::NonCanonicalScalar(i))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_chunks_fill_one_wave_within_the_memory_the_xyzz_accumulation_had() {
        // 132 SMs, two blocks of 256 an SM.
        let wave = [132 * 2 * 256u64; 2];
        let fits = |entries: u64, (i, len): (usize, u64)| {
            let room = xyzz_partials(entries, 192) + entries * COARSE_ENTRY_BYTES;
            let chunks = entries.div_ceil(len);
            chunks <= wave[i] * AFFINE_CHUNKS_PER_THREAD[i] as u64
                && 2 * chunks * 192 + affine_state_bytes(i, wave[i]) <= room
        };
        // A 32 GiB partition's H in one pass: 13 windows of 2^27 - 1 points, 128 chunks a thread.
        let h = 13 * ((1u64 << 27) - 1);
        let one = affine_chunks(h, wave).unwrap();
        assert_eq!(one.0, 0);
        assert!(fits(h, one));
        // In passes of 2^25 points (an 80 GB card's budget) still 128 chunks a thread; in passes
        // of 2^24 (the smaller budgets') 128 would not fit: 64, chunks of 51 entries.
        let pass = |log: u32| 13u64 << log;
        assert_eq!(affine_chunks(pass(25), wave).map(|c| c.0), Some(0));
        let p24 = affine_chunks(pass(24), wave).unwrap();
        assert_eq!(p24, (1, 51));
        assert!(fits(pass(24), p24));
        // Passes of 2^23: chunks too short to pay; nothing at all: never.
        assert_eq!(affine_chunks(pass(23), wave), None);
        assert_eq!(affine_chunks(0, wave), None);
        // No wave (the instance cannot run): never.
        assert_eq!(affine_chunks(h, [0, 0]), None);
        // Forced: either instance at any size, every entry in a chunk of the wave.
        for n in [1u64, 5, 1 << 20, h] {
            for want in [0, 1] {
                let (i, len) = affine_chunks_forced(n, wave, want);
                assert_eq!(i, want);
                let k = AFFINE_CHUNKS_PER_THREAD[i] as u64;
                assert!(len >= 1 && n.div_ceil(len) <= wave[i] * k);
            }
        }
    }

    #[test]
    fn passes_share_a_window_only_where_each_bucket_takes_several_points() {
        let n = (1usize << 27) - 1;
        // A 32 GiB partition's H in passes of 2^24 or 2^25: the one-pass window, c = 20.
        assert_eq!(shared_window(1 << 24, n), Some(20));
        assert_eq!(shared_window(1 << 25, n), Some(20));
        // 2^23 points a pass for 13 windows of 2^19 buckets: too few; one pass: nothing shared.
        assert_eq!(shared_window(1 << 23, n), None);
        assert_eq!(shared_window(n, n), None);
    }
    use ff::Field;
    use rand::SeedableRng;

    fn reconstruct(digits: &[i64], c: u32) -> Scalar {
        let two_c = Scalar::from(1u64 << c);
        let mut acc = Scalar::ZERO;
        for &d in digits.iter().rev() {
            acc *= two_c;
            let m = Scalar::from(d.unsigned_abs());
            acc += if d < 0 { -m } else { m };
        }
        acc
    }

    #[test]
    fn digits_reconstruct_and_stay_in_range() {
        let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
        let minus_one = -Scalar::ONE;
        let mut cases = vec![Scalar::ZERO, Scalar::ONE, minus_one, Scalar::from(u64::MAX)];
        for _ in 0..200 {
            cases.push(Scalar::random(&mut rng));
        }
        for c in 6..=19 {
            for s in &cases {
                let d = signed_digits(&canonical_limbs(s), c);
                assert_eq!(d.len() as u32, num_windows(c));
                let half = 1i64 << (c - 1);
                assert!(
                    d.iter().all(|&x| x > -half && x <= half),
                    "c={c} digits {d:?}"
                );
                assert_eq!(reconstruct(&d, c), *s, "c={c}");
            }
        }
    }

    #[test]
    fn window_choice() {
        assert_eq!(window_bits(1), 6);
        assert_eq!(window_bits(1 << 20), 16);
        assert_eq!(window_bits(1 << 24), 19);
        assert_eq!(window_bits((1 << 26) - 1), 19);
        assert_eq!(window_bits((1 << 27) - 1), 20);
        assert_eq!(num_windows(20), 13);
        assert_eq!(num_windows(16), 16);
        assert_eq!(num_windows(19), 14);
        assert_eq!(num_windows(15), 18);
    }

    #[test]
    fn rejects_non_canonical_bytes() {
        let mut r = [0u8; 32];
        for (i, l) in crate::consts::FR_P.iter().enumerate() {
            r[4 * i..4 * i + 4].copy_from_slice(&l.to_le_bytes());
        }
        let mut r_minus_1 = r;
        r_minus_1[0] -= 1; // r ends in ...01
        assert_eq!(
            scalars_from_le_bytes(&r_minus_1).unwrap(),
            vec![-Scalar::ONE]
        );
        let mut two = r_minus_1.to_vec();
        two.extend_from_slice(&r);
        assert!(matches!(
            scalars_from_le_bytes(&two),
            Err(CudaError::NonCanonicalScalar(1))
        ));
        assert!(scalars_from_le_bytes(&[0xff; 32]).is_err());
        assert!(scalars_from_le_bytes(&[0; 31]).is_err());
    }

    #[test]
    fn coarse_bins_tile_the_windows() {
        for c in MIN_WINDOW..=MAX_WINDOW {
            let buckets = 1u32 << (c - 1);
            let nbt = num_windows(c) * buckets;
            let shift = coarse_shift(nbt);
            assert_eq!(
                buckets % (1 << shift),
                0,
                "c = {c}: a bin straddles two windows"
            );
            assert!(nbt >> shift < 1 << 13, "c = {c}: {} bins", nbt >> shift);
            // one shared-memory word per bin of a window, under the 48 KiB default
            assert!((buckets >> shift) * 4 <= 48 << 10, "c = {c}");
        }
    }
}
