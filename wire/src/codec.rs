//! Compact codec for BLS12-381 scalar vectors.
//!
//! Synthesized witnesses are mostly bits, small integers and small negatives (`r - k`, from
//! negated linear combinations), with a minority of full 255-bit values. One chunk of scalars is
//! encoded as two streams laid out back to back:
//!
//! ```text
//! tags:   one byte per element (the class, and for non-constant values the byte length)
//! values: the significant little-endian bytes of each non-constant value, in element order
//! ```
//!
//! Keeping the tags apart gives zstd a low-entropy byte stream (bit-heavy data compresses to about
//! one bit per element) that is not interrupted by the high-entropy bytes of full values, which sit
//! contiguous in the value stream where repeats still match as whole 32-byte runs.
//!
//! Tag values:
//!
//! | tag | meaning | value bytes |
//! |---|---|---|
//! | 0 | zero | 0 |
//! | 1 | one | 0 |
//! | 2 | minus one (`r - 1`) | 0 |
//! | 3..=34 | `v` with `tag - 2` bytes | `tag - 2` |
//! | 35..=66 | `r - v` with `tag - 34` bytes of `v` | `tag - 34` |
//!
//! The encoder picks the shorter of `v` and `r - v` (ties go to `v`). The decoder accepts any
//! length per tag but rejects every value that is not canonical (`>= r`), so a decoded `Scalar` is
//! always a field element exactly as the synth node held it.
//!
//! zstd is applied per chunk by the blob layer ([`crate::blob`]); [`compress`] and
//! [`FrameDecoder`] are the two primitives it uses, the latter with a hard output bound.

use blstrs::Scalar;
use ff::{Field, PrimeField};

const TAG_ZERO: u8 = 0;
const TAG_ONE: u8 = 1;
const TAG_MINUS_ONE: u8 = 2;
/// `TAG_POS_BASE + len` for a positive value of `len` (1..=32) significant bytes.
const TAG_POS_BASE: u8 = 2;
/// `TAG_NEG_BASE + len` for `r - v` where `v` has `len` (1..=32) significant bytes.
const TAG_NEG_BASE: u8 = 34;
const TAG_MAX: u8 = TAG_NEG_BASE + 32;

/// Values up to this many significant bytes (i.e. below 2^64) count as "small" in [`ClassCounts`].
const SMALL_BYTES: usize = 8;

/// The BLS12-381 scalar field modulus `r`, little-endian 64-bit limbs.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

/// The largest compact encoding of `n` scalars: a tag byte and 32 value bytes each.
pub const fn max_encoded_len(n: usize) -> usize {
    n.saturating_mul(33)
}

/// How many elements of each class a vector holds; the project reports these per circuit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounts {
    pub zero: u64,
    pub one: u64,
    /// Positive values from 2 up to 2^64 − 1.
    pub small: u64,
    /// `r − k` for 1 ≤ k < 2^64 (minus one included).
    pub neg_small: u64,
    /// Everything else (more than 8 significant bytes either way).
    pub full: u64,
}

impl ClassCounts {
    pub fn total(&self) -> u64 {
        self.zero + self.one + self.small + self.neg_small + self.full
    }

    pub fn add(&mut self, other: &ClassCounts) {
        self.zero += other.zero;
        self.one += other.one;
        self.small += other.small;
        self.neg_small += other.neg_small;
        self.full += other.full;
    }
}

/// Why a compact chunk could not be decoded. Indices are relative to the chunk.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("tag stream holds {got} bytes, {expected} elements declared")]
    TagsShort { expected: usize, got: usize },
    #[error("unknown tag {tag} at element {index}")]
    BadTag { index: usize, tag: u8 },
    #[error("value stream ends inside element {index}")]
    ValuesShort { index: usize },
    #[error("{extra} value bytes left over after the last element")]
    TrailingValues { extra: usize },
    #[error("element {index} is not a canonical field element (>= r)")]
    NonCanonical { index: usize },
    #[error("zstd frame does not decompress to the declared {expected} bytes: {reason}")]
    Decompress { expected: usize, reason: String },
}

/// Number of significant little-endian bytes of a 256-bit value (0 for zero).
fn significant_bytes(limbs: &[u64; 4]) -> usize {
    for i in (0..4).rev() {
        if limbs[i] != 0 {
            return i * 8 + 8 - limbs[i].leading_zeros() as usize / 8;
        }
    }
    0
}

/// `r - x` for `0 < x < r`, on canonical limbs (cheaper than negating in Montgomery form and
/// converting again).
fn modulus_minus(x: &[u64; 4]) -> [u64; 4] {
    let mut out = [0u64; 4];
    let mut borrow = false;
    for i in 0..4 {
        let (d, b1) = MODULUS[i].overflowing_sub(x[i]);
        let (d, b2) = d.overflowing_sub(borrow as u64);
        out[i] = d;
        borrow = b1 | b2;
    }
    out
}

fn limbs_to_bytes(limbs: &[u64; 4]) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (chunk, limb) in bytes.chunks_exact_mut(8).zip(limbs) {
        chunk.copy_from_slice(&limb.to_le_bytes());
    }
    bytes
}

/// Appends the compact encoding of `values` (tags, then value bytes) to `out` and returns the
/// class counts.
pub fn encode_into(values: &[Scalar], out: &mut Vec<u8>) -> ClassCounts {
    let minus_one = -Scalar::ONE;
    let tags_at = out.len();
    out.resize(tags_at + values.len(), 0);
    let mut counts = ClassCounts::default();
    for (i, v) in values.iter().enumerate() {
        // Montgomery-form equality is a limb compare: the constants never pay for `to_repr`.
        let tag = if *v == Scalar::ZERO {
            counts.zero += 1;
            TAG_ZERO
        } else if *v == Scalar::ONE {
            counts.one += 1;
            TAG_ONE
        } else if *v == minus_one {
            counts.neg_small += 1;
            TAG_MINUS_ONE
        } else {
            let repr = v.to_repr();
            let limbs: [u64; 4] = std::array::from_fn(|k| {
                u64::from_le_bytes(repr[k * 8..k * 8 + 8].try_into().unwrap())
            });
            let pos_len = significant_bytes(&limbs);
            let neg = modulus_minus(&limbs);
            let neg_len = significant_bytes(&neg);
            if neg_len < pos_len {
                if neg_len <= SMALL_BYTES {
                    counts.neg_small += 1;
                } else {
                    counts.full += 1;
                }
                out.extend_from_slice(&limbs_to_bytes(&neg)[..neg_len]);
                TAG_NEG_BASE + neg_len as u8
            } else {
                if pos_len <= SMALL_BYTES {
                    counts.small += 1;
                } else {
                    counts.full += 1;
                }
                out.extend_from_slice(&repr[..pos_len]);
                TAG_POS_BASE + pos_len as u8
            }
        };
        out[tags_at + i] = tag;
    }
    counts
}

/// Decodes a compact chunk produced by [`encode_into`] into `out`, whose length is the declared
/// element count. Every byte of `raw` must be consumed.
pub fn decode_into(raw: &[u8], out: &mut [Scalar]) -> Result<(), CodecError> {
    let n = out.len();
    if raw.len() < n {
        return Err(CodecError::TagsShort {
            expected: n,
            got: raw.len(),
        });
    }
    let (tags, values) = raw.split_at(n);
    let minus_one = -Scalar::ONE;
    let mut pos = 0usize;
    for (index, (&tag, slot)) in tags.iter().zip(out.iter_mut()).enumerate() {
        *slot = match tag {
            TAG_ZERO => Scalar::ZERO,
            TAG_ONE => Scalar::ONE,
            TAG_MINUS_ONE => minus_one,
            _ if tag <= TAG_MAX => {
                let negative = tag > TAG_NEG_BASE;
                let len = (tag - if negative { TAG_NEG_BASE } else { TAG_POS_BASE }) as usize;
                let bytes = values
                    .get(pos..pos + len)
                    .ok_or(CodecError::ValuesShort { index })?;
                pos += len;
                let mut repr = [0u8; 32];
                repr[..len].copy_from_slice(bytes);
                // Variable time is fine: the canonical check is the point, and a witness on the
                // wire is no secret from the node decoding it.
                let v =
                    Scalar::from_repr_vartime(repr).ok_or(CodecError::NonCanonical { index })?;
                if negative {
                    -v
                } else {
                    v
                }
            }
            _ => return Err(CodecError::BadTag { index, tag }),
        };
    }
    if pos != values.len() {
        return Err(CodecError::TrailingValues {
            extra: values.len() - pos,
        });
    }
    Ok(())
}

/// One zstd frame of `raw` at `level`.
pub fn compress(raw: &[u8], level: i32) -> Vec<u8> {
    // `bulk::compress` sizes its output with ZSTD_compressBound, so it only fails if the library
    // cannot allocate its context, which Rust treats as fatal everywhere else too.
    zstd::bulk::compress(raw, level).expect("zstd compression into a bound-sized buffer")
}

/// Decompresses zstd frames whose exact output size the caller has bounded, reusing its context
/// and output buffer across frames: fresh buffers per chunk cost page faults that dominated
/// decoding and serialised the threads.
pub struct FrameDecoder {
    dctx: zstd::bulk::Decompressor<'static>,
    buf: Vec<u8>,
}

impl FrameDecoder {
    pub fn new() -> Result<Self, CodecError> {
        let dctx = zstd::bulk::Decompressor::new().map_err(|e| CodecError::Decompress {
            expected: 0,
            reason: e.to_string(),
        })?;
        Ok(Self {
            dctx,
            buf: Vec::new(),
        })
    }

    /// Decompresses `frame`, which must produce exactly `expected` bytes. zstd writes into a
    /// slice of exactly that length and fails rather than write past it, so a frame that expands
    /// to more (a bomb) costs no more memory than the bound the caller checked.
    pub fn decompress(&mut self, frame: &[u8], expected: usize) -> Result<&[u8], CodecError> {
        if self.buf.len() < expected {
            self.buf.resize(expected, 0);
        }
        let mut buf = std::mem::take(&mut self.buf);
        let done = self.decompress_into(frame, &mut buf[..expected]);
        self.buf = buf;
        done.map(|()| &self.buf[..expected])
    }

    /// Decompresses `frame` into `out`, which it must fill exactly.
    pub fn decompress_into(&mut self, frame: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
        let expected = out.len();
        let err = |reason: String| CodecError::Decompress { expected, reason };
        let written = self
            .dctx
            .decompress_to_buffer(frame, out)
            .map_err(|e| err(e.to_string()))?;
        if written != expected {
            return Err(err(format!("got {written} bytes")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    fn roundtrip(values: &[Scalar]) -> (Vec<u8>, ClassCounts) {
        let mut raw = Vec::new();
        let counts = encode_into(values, &mut raw);
        assert!(raw.len() <= max_encoded_len(values.len()));
        let mut back = vec![Scalar::ZERO; values.len()];
        decode_into(&raw, &mut back).unwrap();
        assert_eq!(back, values);
        assert_eq!(counts.total(), values.len() as u64);
        (raw, counts)
    }

    /// Every class and every byte length, both signs, plus the extremes of the field.
    fn structured() -> Vec<Scalar> {
        let mut v = vec![
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            -Scalar::ZERO,
            Scalar::from(2),
        ];
        for bits in 1..255u32 {
            let p = Scalar::from(2).pow_vartime([bits as u64]);
            v.extend([p, p - Scalar::ONE, p + Scalar::ONE, -p, -(p + Scalar::ONE)]);
        }
        v.push(-Scalar::from(2)); // r - 2, the largest value after r - 1
        v.push(Scalar::ROOT_OF_UNITY);
        v
    }

    #[test]
    fn classes_and_lengths() {
        let (raw, c) = roundtrip(&[
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::from(300),
            -Scalar::from(300),
            Scalar::from(u64::MAX),
            -Scalar::from(u64::MAX) - Scalar::ONE,
            Scalar::ROOT_OF_UNITY,
        ]);
        assert_eq!(
            c,
            ClassCounts {
                zero: 1,
                one: 1,
                small: 2,
                neg_small: 2,
                full: 2
            }
        );
        // 8 tags; 300 and -300 take 2 bytes each, u64::MAX 8, -(2^64) 9, the root of unity 32.
        assert_eq!(raw.len(), 8 + 2 + 2 + 8 + 9 + 32);
        assert_eq!(
            &raw[..5],
            &[
                TAG_ZERO,
                TAG_ONE,
                TAG_MINUS_ONE,
                TAG_POS_BASE + 2,
                TAG_NEG_BASE + 2
            ]
        );
    }

    #[test]
    fn roundtrip_structured_and_random() {
        roundtrip(&[]);
        roundtrip(&structured());
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..20 {
            let n = rng.gen_range(0..2000);
            let v: Vec<Scalar> = (0..n)
                .map(|_| match rng.gen_range(0..6) {
                    0 => Scalar::ZERO,
                    1 => Scalar::ONE,
                    2 => Scalar::from(rng.gen::<u64>() >> rng.gen_range(0..64)),
                    3 => -Scalar::from(rng.gen::<u64>() >> rng.gen_range(0..64)),
                    _ => Scalar::random(&mut rng),
                })
                .collect();
            roundtrip(&v);
        }
    }

    #[test]
    fn rejects_non_canonical() {
        let r = limbs_to_bytes(&MODULUS);
        for (tag, bytes) in [
            (TAG_POS_BASE + 32, r),
            (TAG_NEG_BASE + 32, r),
            (TAG_POS_BASE + 32, [0xff; 32]),
        ] {
            let mut raw = vec![TAG_ONE, tag];
            raw.extend_from_slice(&bytes);
            let mut out = [Scalar::ZERO; 2];
            assert_eq!(
                decode_into(&raw, &mut out),
                Err(CodecError::NonCanonical { index: 1 })
            );
        }
        // r - 1 is the largest canonical value, written out in full rather than as tag 2.
        let mut raw = vec![TAG_POS_BASE + 32];
        raw.extend_from_slice(&limbs_to_bytes(&modulus_minus(&[1, 0, 0, 0])));
        let mut out = [Scalar::ZERO];
        decode_into(&raw, &mut out).unwrap();
        assert_eq!(out[0], -Scalar::ONE);
    }

    #[test]
    fn rejects_malformed_streams() {
        let mut out = [Scalar::ZERO; 2];
        assert_eq!(
            decode_into(&[0], &mut out),
            Err(CodecError::TagsShort {
                expected: 2,
                got: 1
            })
        );
        assert_eq!(
            decode_into(&[0, TAG_MAX + 1], &mut out),
            Err(CodecError::BadTag {
                index: 1,
                tag: TAG_MAX + 1
            })
        );
        assert_eq!(
            decode_into(&[0, TAG_POS_BASE + 3, 1, 2], &mut out),
            Err(CodecError::ValuesShort { index: 1 })
        );
        assert_eq!(
            decode_into(&[0, 1, 9], &mut out),
            Err(CodecError::TrailingValues { extra: 1 })
        );
    }

    #[test]
    fn decompression_is_bounded() {
        let frame = compress(&vec![7u8; 1 << 20], 3);
        let mut dec = FrameDecoder::new().unwrap();
        assert_eq!(
            dec.decompress(&frame, 1 << 20).unwrap(),
            &vec![7u8; 1 << 20][..]
        );
        // The buffer is now 1 MiB long, but a smaller declared size still bounds the output.
        assert!(matches!(
            dec.decompress(&frame, 1000),
            Err(CodecError::Decompress { .. })
        ));
        assert!(matches!(
            dec.decompress(&frame, (1 << 20) + 1),
            Err(CodecError::Decompress { .. })
        ));
        assert!(dec.decompress(&frame[..frame.len() - 1], 1 << 20).is_err());
        assert!(dec.decompress(b"not zstd", 8).is_err());
        assert_eq!(dec.decompress(&compress(b"abc", 1), 3).unwrap(), b"abc");
    }
}
