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
use ff::Field;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::codec::{self, ClassCounts, CodecError};
use crate::witness::Witness;

mod compact;
#[cfg(test)]
mod tests;

pub use compact::{CompactAux, CompactWitness};

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
fn chunk_error(kind: VectorKind, chunk: usize, first: u64, e: CodecError) -> BlobError {
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
fn resize(v: &mut Vec<Scalar>, n: usize) {
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
