//! Decoding a blob: its header parsed and checked against the limits before anything is
//! allocated, its checksum before anything is decompressed, then its chunks on every core.

use bincode::Options;
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::{
    bincode_options, check_id, chunk_ranges, BlobError, BlobHeader, CompactWitness, DecodeLimits,
    VectorKind, CHECKSUM_LEN, FORMAT_VERSION, MAGIC, MAX_CHUNK_ELEMENTS, MAX_HEADER_BYTES,
    MIN_CHUNK_ELEMENTS, PREFIX_LEN, TABLE_ENTRY_LEN,
};
use crate::codec::{self, CodecError};
use crate::witness::Witness;

/// Parses and validates the header from the start of a blob; `bytes` may stop right after the
/// header. Allocates nothing the limits have not bounded.
pub fn peek_header(bytes: &[u8], limits: &DecodeLimits) -> Result<BlobHeader, BlobError> {
    peek(bytes, limits).map(|(header, _)| header)
}

/// The header and its length in bytes.
fn peek(bytes: &[u8], limits: &DecodeLimits) -> Result<(BlobHeader, usize), BlobError> {
    let truncated = |expected: usize| BlobError::Truncated {
        expected: expected as u64,
        got: bytes.len() as u64,
    };
    if bytes.len() < MAGIC.len() {
        // A prefix of the magic is still a truncated blob; anything else is not a blob at all.
        return Err(if MAGIC.starts_with(bytes) {
            truncated(PREFIX_LEN)
        } else {
            BlobError::BadMagic
        });
    }
    if bytes[..8] != MAGIC {
        return Err(BlobError::BadMagic);
    }
    if bytes.len() < PREFIX_LEN {
        return Err(truncated(PREFIX_LEN));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != FORMAT_VERSION {
        return Err(BlobError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let header_len = u32::from_le_bytes(bytes[10..14].try_into().expect("4 bytes"));
    if !(CHECKSUM_LEN as u32..=MAX_HEADER_BYTES).contains(&header_len) {
        return Err(BlobError::HeaderLength {
            len: header_len,
            limit: MAX_HEADER_BYTES,
        });
    }
    let header_end = PREFIX_LEN + header_len as usize;
    let header_bytes = bytes
        .get(PREFIX_LEN..header_end)
        .ok_or_else(|| truncated(header_end))?;
    let header: BlobHeader = bincode_options(header_len as u64)
        .deserialize(header_bytes)
        .map_err(|e| BlobError::Header(e.to_string()))?;
    validate(&header, header_len as usize, limits)?;
    Ok((header, header_len as usize))
}

fn validate(h: &BlobHeader, header_len: usize, limits: &DecodeLimits) -> Result<(), BlobError> {
    check_id("job id", &h.job_id)?;
    check_id("shape key", &h.shape_key)?;
    if !h.chunk_elements.is_power_of_two()
        || !(MIN_CHUNK_ELEMENTS..=MAX_CHUNK_ELEMENTS).contains(&h.chunk_elements)
    {
        return Err(BlobError::Header(format!(
            "chunk size {} is not a power of two in range",
            h.chunk_elements
        )));
    }
    if h.inputs == 0 {
        return Err(BlobError::Header(
            "no public inputs (ONE is missing)".into(),
        ));
    }
    for (kind, elements) in h.vectors() {
        if elements > limits.max_elements_per_vector {
            return Err(BlobError::TooManyElements {
                kind,
                elements,
                limit: limits.max_elements_per_vector,
            });
        }
    }
    let decoded = h.decoded_bytes();
    if decoded > limits.max_decoded_bytes {
        return Err(BlobError::DecodedTooLarge {
            bytes: decoded,
            limit: limits.max_decoded_bytes,
        });
    }
    let blob_len = ((PREFIX_LEN + header_len) as u64).saturating_add(h.payload_len);
    if blob_len > limits.max_blob_bytes {
        return Err(BlobError::BlobTooLarge {
            bytes: blob_len,
            limit: limits.max_blob_bytes,
        });
    }
    Ok(())
}

/// A codec error of chunk `chunk` of `kind`, whose first element is `first`, as the blob's.
pub(super) fn chunk_error(kind: VectorKind, chunk: usize, first: u64, e: CodecError) -> BlobError {
    match e {
        CodecError::Decompress { reason, .. } => BlobError::Decompress {
            kind,
            chunk,
            reason,
        },
        CodecError::NonCanonical { index } => BlobError::NonCanonical {
            kind,
            index: first + index as u64,
        },
        other => BlobError::Corrupt(format!("{kind} chunk {chunk}: {other}")),
    }
}

/// Where a chunk goes: decoded into scalars (the inputs), or only decompressed (the aux, kept in
/// the codec's form).
enum ChunkOut<'a> {
    Scalars(&'a mut [Scalar]),
    Compact(&'a mut [u8]),
}

struct ChunkJob<'a> {
    kind: VectorKind,
    chunk: usize,
    /// Index of the chunk's first element in its vector.
    first: u64,
    frame: &'a [u8],
    raw_len: usize,
    out: ChunkOut<'a>,
}

impl ChunkJob<'_> {
    fn run(self, dec: &mut codec::FrameDecoder) -> Result<(), BlobError> {
        let err = |e| chunk_error(self.kind, self.chunk, self.first, e);
        match self.out {
            ChunkOut::Scalars(out) => {
                let raw = dec.decompress(self.frame, self.raw_len).map_err(err)?;
                codec::decode_into(raw, out).map_err(err)
            }
            ChunkOut::Compact(out) => dec.decompress_into(self.frame, out).map_err(err),
        }
    }
}

/// Decodes a blob into its header and a new witness: [`decode_blob_compact_into`], then
/// [`CompactWitness::expand`].
pub fn decode_blob(
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<(BlobHeader, Witness), BlobError> {
    let mut compact = CompactWitness::default();
    let header = decode_blob_compact_into(bytes, limits, &mut compact)?;
    Ok((header, compact.expand()?))
}

/// Resizes `v` to `n` elements, touching new memory on every core (a fresh 100 MB vector zeroed
/// on one thread costs more than the decode itself); existing elements are left to be
/// overwritten.
pub(super) fn resize(v: &mut Vec<Scalar>, n: usize) {
    if v.len() >= n {
        v.truncate(n);
        return;
    }
    let len = v.len();
    v.reserve(n - len);
    v.spare_capacity_mut()[..n - len]
        .par_chunks_mut(1 << 14)
        .for_each(|c| {
            c.iter_mut()
                .for_each(|x| *x = std::mem::MaybeUninit::new(Scalar::ZERO))
        });
    // SAFETY: the capacity is at least `n` (reserved above) and elements `len..n` were just
    // initialised.
    unsafe { v.set_len(n) };
}

/// Decodes a blob into `witness`, reusing its buffers (a node decoding partition after
/// partition of one shape allocates once): the inputs into scalars, the aux only decompressed.
/// Checks, in order: header and limits, the exact length, the checksum, the chunk table, then
/// each chunk's frame and the inputs' values; the aux's values are checked where they are
/// expanded. On an error `witness` holds garbage.
pub fn decode_blob_compact_into(
    bytes: &[u8],
    limits: &DecodeLimits,
    witness: &mut CompactWitness,
) -> Result<BlobHeader, BlobError> {
    if bytes.len() as u64 > limits.max_blob_bytes {
        return Err(BlobError::BlobTooLarge {
            bytes: bytes.len() as u64,
            limit: limits.max_blob_bytes,
        });
    }
    let (header, header_len) = peek(bytes, limits)?;
    let payload_start = PREFIX_LEN + header_len;
    // validate() bounded payload_len by max_blob_bytes, so this neither overflows nor truncates.
    let expected = payload_start as u64 + header.payload_len;
    if (bytes.len() as u64) < expected {
        return Err(BlobError::Truncated {
            expected,
            got: bytes.len() as u64,
        });
    }
    if bytes.len() as u64 > expected {
        return Err(BlobError::TrailingBytes {
            expected,
            got: bytes.len() as u64,
        });
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes[PREFIX_LEN..payload_start - CHECKSUM_LEN]);
    hasher.update_rayon(&bytes[payload_start..]);
    if *hasher.finalize().as_bytes() != header.checksum {
        return Err(BlobError::ChecksumMismatch);
    }

    // Vectors are sized only now, after every count was bounded and the checksum matched.
    let chunk = header.chunk_elements as usize;
    let payload = &bytes[payload_start..];
    let chunks: usize = header
        .vectors()
        .iter()
        .map(|(_, n)| (*n as usize).div_ceil(chunk))
        .sum();
    let table_len = chunks * TABLE_ENTRY_LEN;
    let (table, mut frames) = payload.split_at_checked(table_len).ok_or_else(|| {
        BlobError::Corrupt(format!(
            "payload of {} bytes cannot hold a {table_len}-byte chunk table",
            payload.len()
        ))
    })?;
    let mut entries = table.chunks_exact(TABLE_ENTRY_LEN);
    // (kind, chunk, first element, frame, decoded length) in payload order.
    let mut listed = Vec::with_capacity(chunks);
    for (kind, n) in header.vectors() {
        for (i, range) in chunk_ranges(n as usize, chunk).enumerate() {
            let corrupt =
                |reason: String| BlobError::Corrupt(format!("{kind} chunk {i}: {reason}"));
            let entry = entries
                .next()
                .expect("table length computed from the same chunk count");
            let frame_len = u32::from_le_bytes(entry[..4].try_into().expect("4 bytes")) as usize;
            let raw_len = u32::from_le_bytes(entry[4..].try_into().expect("4 bytes")) as usize;
            let allowed = range.len()..codec::max_encoded_len(range.len()) + 1;
            if !allowed.contains(&raw_len) {
                return Err(corrupt(format!(
                    "declares {raw_len} decoded bytes, allowed {allowed:?}"
                )));
            }
            let (frame, rest) = frames.split_at_checked(frame_len).ok_or_else(|| {
                corrupt(format!("frame of {frame_len} bytes overruns the payload"))
            })?;
            frames = rest;
            listed.push((kind, i, range.start as u64, frame, raw_len));
        }
    }
    if !frames.is_empty() {
        return Err(BlobError::Corrupt(format!(
            "{} bytes after the last frame",
            frames.len()
        )));
    }
    let encoded_len: u64 = listed.iter().map(|l| l.4 as u64).sum();
    if encoded_len != header.encoded_len {
        return Err(BlobError::Corrupt(format!(
            "chunks declare {encoded_len} decoded bytes, the header {}",
            header.encoded_len
        )));
    }
    resize(&mut witness.input, header.inputs as usize);
    let aux_lens: Vec<usize> = listed
        .iter()
        .filter(|l| l.0 == VectorKind::Aux)
        .map(|l| l.4)
        .collect();
    let outs = witness
        .input
        .chunks_mut(chunk)
        .map(ChunkOut::Scalars)
        .chain(
            witness
                .aux
                .layout(header.aux as usize, chunk, &aux_lens)
                .into_iter()
                .map(ChunkOut::Compact),
        );
    let jobs: Vec<ChunkJob> = listed
        .into_iter()
        .zip(outs)
        .map(|((kind, chunk, first, frame, raw_len), out)| ChunkJob {
            kind,
            chunk,
            first,
            frame,
            raw_len,
            out,
        })
        .collect();
    jobs.into_par_iter()
        .try_for_each_init(codec::FrameDecoder::new, |dec, job| match dec {
            Ok(dec) => job.run(dec),
            Err(e) => Err(BlobError::Decompress {
                kind: job.kind,
                chunk: job.chunk,
                reason: e.to_string(),
            }),
        })?;
    Ok(header)
}
