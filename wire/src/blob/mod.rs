//! The per-partition witness blob a synth node publishes to the object store and a GPU node
//! decodes.
//!
//! ```text
//! offset 0   magic "CUZKBLOB" (8 bytes)
//!        8   format version, u16 LE (2: witness only)
//!       10   header length H, u32 LE (32 ..= MAX_HEADER_BYTES)
//!       14   header: bincode (fixed-width LE integers) of BlobHeader, checksum last
//!   14 + H   payload: chunk table, then zstd frames
//! ```
//!
//! A blob carries the assignment alone — the public inputs, then the aux variables. The A/B/C
//! evaluations and the MSM densities follow from the shape's constraint matrices, which GPU
//! nodes hold; `shape_hash` in the header names those matrices, so a node can refuse a blob that
//! was synthesized for other ones. (Format 1 also carried the evaluations; it is refused.)
//!
//! Both vectors are cut into chunks of `chunk_elements` elements, each encoded with the compact
//! codec of [`crate::codec`] and compressed as one zstd frame, so both ends run on every core.
//! The chunk table lists, per chunk (inputs first), the frame length and the decompressed length
//! (two u32 LE).
//!
//! The blake3 checksum covers the header bytes before it and the whole payload, so any changed
//! byte is caught before anything is decompressed. Every length is checked against
//! [`DecodeLimits`] before memory is allocated for it, and no zstd frame may produce more than its
//! declared, bounded size.

use std::ops::Range;

use bincode::Options;
use blstrs::Scalar;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::codec::{self, ClassCounts};

mod compact;
mod decode;
#[cfg(test)]
mod tests;

pub use compact::{CompactAux, CompactWitness};
use decode::{chunk_error, resize};
pub use decode::{decode_blob, decode_blob_compact_into, peek_header};

pub const MAGIC: [u8; 8] = *b"CUZKBLOB";
pub const FORMAT_VERSION: u16 = 2;
/// Magic, version and header length.
pub const PREFIX_LEN: usize = 14;
/// Ids and fixed fields fit in well under this; it bounds the header allocation.
pub const MAX_HEADER_BYTES: u32 = 64 * 1024;
/// Longest job id and shape key, in bytes.
pub const MAX_ID_LEN: usize = 256;
pub const MIN_CHUNK_ELEMENTS: u32 = 1 << 12;
pub const MAX_CHUNK_ELEMENTS: u32 = 1 << 24;
const CHECKSUM_LEN: usize = 32;
const TABLE_ENTRY_LEN: usize = 8;

/// The two vectors a blob carries, in payload order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorKind {
    Input,
    Aux,
}

impl std::fmt::Display for VectorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VectorKind::Input => "input",
            VectorKind::Aux => "aux",
        })
    }
}

/// The blob header, readable on its own with [`peek_header`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobHeader {
    pub job_id: String,
    pub partition: u32,
    /// Which circuit this partition is an instance of (selects parameters and matrices).
    pub shape_key: String,
    /// blake3 of the shape's constraint matrices the witness was synthesized against.
    pub shape_hash: [u8; 32],
    pub chunk_elements: u32,
    /// Public inputs, ONE included.
    pub inputs: u64,
    pub aux: u64,
    /// Payload length before zstd: the sum of the chunks' decompressed lengths.
    pub encoded_len: u64,
    /// Payload length on the wire: chunk table plus frames.
    pub payload_len: u64,
    /// blake3 of the header bytes before this field and of the payload. Must stay the last field:
    /// with fixed-width bincode it is then the last 32 bytes of the header.
    pub checksum: [u8; 32],
}

impl BlobHeader {
    /// Bytes the witness takes once decoded (32 per scalar).
    pub fn decoded_bytes(&self) -> u64 {
        self.inputs.saturating_add(self.aux).saturating_mul(32)
    }

    fn vectors(&self) -> [(VectorKind, u64); 2] {
        [
            (VectorKind::Input, self.inputs),
            (VectorKind::Aux, self.aux),
        ]
    }
}

/// What the synth node says about a blob; checked once, at construction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobHeaderInfo {
    job_id: String,
    partition: u32,
    shape_key: String,
    shape_hash: [u8; 32],
}

impl BlobHeaderInfo {
    pub fn new(
        job_id: impl Into<String>,
        partition: u32,
        shape_key: impl Into<String>,
        shape_hash: [u8; 32],
    ) -> Result<Self, BlobError> {
        let (job_id, shape_key) = (job_id.into(), shape_key.into());
        check_id("job id", &job_id)?;
        check_id("shape key", &shape_key)?;
        Ok(Self {
            job_id,
            partition,
            shape_key,
            shape_hash,
        })
    }

    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    pub fn partition(&self) -> u32 {
        self.partition
    }

    pub fn shape_key(&self) -> &str {
        &self.shape_key
    }
}

fn check_id(what: &str, id: &str) -> Result<(), BlobError> {
    if id.len() > MAX_ID_LEN {
        return Err(BlobError::Header(format!(
            "{what} is {} bytes, at most {MAX_ID_LEN} allowed",
            id.len()
        )));
    }
    Ok(())
}

/// Encoder settings. Defaults were picked with `examples/codec_bench.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// zstd level. On SHA-like data (2^20 constraints, 16 cores) level 1 is as small as levels 3
    /// and 6 (within 0.4 %) and encodes 1.3× and 2.1× faster; level −1 is 2.3 % larger for no
    /// measurable gain, because the codec already removed most bytes before zstd sees them.
    pub level: i32,
    /// Elements per independently compressed chunk; rounded up to a power of two and clamped to
    /// [`MIN_CHUNK_ELEMENTS`]..=[`MAX_CHUNK_ELEMENTS`]. Chunks are the unit of parallel work at
    /// both ends: a 2 KiB PoRep witness (2.7 M variables) in 2^18-element chunks is 11 tasks for
    /// 16 cores; 2^16 makes 41, for about 2 % more bytes.
    pub chunk_elements: u32,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            level: 1,
            chunk_elements: 1 << 16,
        }
    }
}

impl EncodeOptions {
    fn effective_chunk_elements(&self) -> u32 {
        self.chunk_elements
            .clamp(MIN_CHUNK_ELEMENTS, MAX_CHUNK_ELEMENTS)
            .next_power_of_two()
    }
}

/// Bounds the decoder checks before allocating.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Whole blob, header included.
    pub max_blob_bytes: u64,
    /// Per vector. A 32 GiB PoRep partition has ~130.2 M aux variables.
    pub max_elements_per_vector: u64,
    /// Both vectors once decoded (32 bytes per scalar); a 32 GiB partition needs ~4.2 GB.
    pub max_decoded_bytes: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            // 33 bytes per element is the codec's worst case before zstd.
            max_blob_bytes: 10 << 30,
            max_elements_per_vector: 1 << 28,
            max_decoded_bytes: 9 << 30,
        }
    }
}

/// Sizes and value classes of one encoded vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorStats {
    pub kind: VectorKind,
    pub elements: u64,
    /// 32 bytes per scalar.
    pub raw_bytes: u64,
    /// After the compact codec, before zstd.
    pub encoded_bytes: u64,
    /// Sum of this vector's zstd frames.
    pub compressed_bytes: u64,
    pub classes: ClassCounts,
}

/// What one blob costs on the wire; reported for every circuit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobStats {
    pub raw_bytes: u64,
    pub encoded_bytes: u64,
    /// The whole blob as published: prefix, header, chunk table and frames.
    pub compressed_bytes: u64,
    pub vectors: Vec<VectorStats>,
}

impl BlobStats {
    /// Raw over compressed bytes.
    pub fn ratio(&self) -> f64 {
        self.raw_bytes as f64 / self.compressed_bytes.max(1) as f64
    }
}

/// Why a blob was rejected. Every variant is fatal: a blob is immutable content, and the object
/// store already verified the transfer, so decoding the same bytes again fails the same way.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BlobError {
    #[error("blob truncated: {got} bytes, at least {expected} needed")]
    Truncated { expected: u64, got: u64 },
    #[error("blob has {got} bytes, its header declares {expected}")]
    TrailingBytes { expected: u64, got: u64 },
    #[error("not a cuzk blob (bad magic)")]
    BadMagic,
    #[error("blob format version {found} is not supported (this build reads {supported}{hint})",
        hint = if *.found == 1 { ": version 1 carried constraint evaluations; run synth and GPU nodes of the same release" } else { "" })]
    UnsupportedVersion { found: u16, supported: u16 },
    #[error("blob header length {len} outside 32..={limit}")]
    HeaderLength { len: u32, limit: u32 },
    #[error("invalid blob header: {0}")]
    Header(String),
    #[error("blob of {bytes} bytes exceeds the limit of {limit}")]
    BlobTooLarge { bytes: u64, limit: u64 },
    #[error("{kind} declares {elements} elements, the limit is {limit}")]
    TooManyElements {
        kind: VectorKind,
        elements: u64,
        limit: u64,
    },
    #[error("blob decodes to {bytes} bytes, the limit is {limit}")]
    DecodedTooLarge { bytes: u64, limit: u64 },
    #[error("blob checksum mismatch")]
    ChecksumMismatch,
    #[error("corrupt blob payload: {0}")]
    Corrupt(String),
    #[error("{kind} chunk {chunk} does not decompress as declared: {reason}")]
    Decompress {
        kind: VectorKind,
        chunk: usize,
        reason: String,
    },
    #[error("{kind} element {index} is not a canonical field element")]
    NonCanonical { kind: VectorKind, index: u64 },
}

/// Trying again never helps; see the type's documentation.
impl crate::Retryable for BlobError {
    fn retryable(&self) -> bool {
        false
    }
}

fn bincode_options(limit: u64) -> impl Options {
    bincode::DefaultOptions::new()
        .with_limit(limit)
        .with_little_endian()
        .with_fixint_encoding()
        .reject_trailing_bytes()
}

fn chunk_ranges(elements: usize, chunk: usize) -> impl Iterator<Item = Range<usize>> {
    (0..elements.div_ceil(chunk)).map(move |i| i * chunk..((i + 1) * chunk).min(elements))
}

/// Encodes a witness; see [`encode_blob_with_stats`].
pub fn encode_blob(
    info: &BlobHeaderInfo,
    input: &[Scalar],
    aux: &[Scalar],
    opts: &EncodeOptions,
) -> Vec<u8> {
    encode_blob_with_stats(info, input, aux, opts).0
}

/// Encodes a witness (public inputs with ONE first, then aux) and reports its sizes and value
/// classes.
pub fn encode_blob_with_stats(
    info: &BlobHeaderInfo,
    input: &[Scalar],
    aux: &[Scalar],
    opts: &EncodeOptions,
) -> (Vec<u8>, BlobStats) {
    let vectors = [(VectorKind::Input, input), (VectorKind::Aux, aux)];
    let chunk = opts.effective_chunk_elements() as usize;
    let jobs: Vec<(usize, Range<usize>)> = vectors
        .iter()
        .enumerate()
        .flat_map(|(v, (_, values))| chunk_ranges(values.len(), chunk).map(move |r| (v, r)))
        .collect();
    let chunks: Vec<(usize, Vec<u8>, ClassCounts)> = jobs
        .par_iter()
        .map_init(Vec::new, |raw: &mut Vec<u8>, (v, range)| {
            raw.clear();
            let counts = codec::encode_into(&vectors[*v].1[range.clone()], raw);
            (raw.len(), codec::compress(raw, opts.level), counts)
        })
        .collect();

    let mut stats: Vec<VectorStats> = vectors
        .iter()
        .map(|(kind, values)| VectorStats {
            kind: *kind,
            elements: values.len() as u64,
            raw_bytes: values.len() as u64 * 32,
            encoded_bytes: 0,
            compressed_bytes: 0,
            classes: ClassCounts::default(),
        })
        .collect();
    let mut table = Vec::with_capacity(chunks.len() * TABLE_ENTRY_LEN);
    for ((v, _), (raw_len, frame, counts)) in jobs.iter().zip(&chunks) {
        // A chunk holds at most 2^24 elements, so both lengths fit in u32 (33 · 2^24 < 2^32).
        table.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        table.extend_from_slice(&(*raw_len as u32).to_le_bytes());
        let s = &mut stats[*v];
        s.encoded_bytes += *raw_len as u64;
        s.compressed_bytes += frame.len() as u64;
        s.classes.add(counts);
    }

    let frames_len: usize = chunks.iter().map(|c| c.1.len()).sum();
    let mut header = BlobHeader {
        job_id: info.job_id.clone(),
        partition: info.partition,
        shape_key: info.shape_key.clone(),
        shape_hash: info.shape_hash,
        chunk_elements: chunk as u32,
        inputs: input.len() as u64,
        aux: aux.len() as u64,
        encoded_len: stats.iter().map(|v| v.encoded_bytes).sum(),
        payload_len: (table.len() + frames_len) as u64,
        checksum: [0; CHECKSUM_LEN],
    };
    let mut hasher = blake3::Hasher::new();
    let header_bytes = bincode_options(MAX_HEADER_BYTES as u64)
        .serialize(&header)
        .expect("ids are bounded by BlobHeaderInfo, so the header fits MAX_HEADER_BYTES");
    hasher.update(&header_bytes[..header_bytes.len() - CHECKSUM_LEN]);
    hasher.update(&table);
    for (_, frame, _) in &chunks {
        hasher.update(frame);
    }
    header.checksum = *hasher.finalize().as_bytes();

    let mut blob =
        Vec::with_capacity(PREFIX_LEN + header_bytes.len() + header.payload_len as usize);
    blob.extend_from_slice(&MAGIC);
    blob.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    blob.extend_from_slice(&(header_bytes.len() as u32).to_le_bytes());
    blob.extend_from_slice(&header_bytes[..header_bytes.len() - CHECKSUM_LEN]);
    blob.extend_from_slice(&header.checksum);
    blob.extend_from_slice(&table);
    for (_, frame, _) in &chunks {
        blob.extend_from_slice(frame);
    }

    let stats = BlobStats {
        raw_bytes: stats.iter().map(|v| v.raw_bytes).sum(),
        encoded_bytes: header.encoded_len,
        compressed_bytes: blob.len() as u64,
        vectors: stats,
    };
    (blob, stats)
}
