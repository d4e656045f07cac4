//! The per-partition blob a synth node publishes to the object store and a GPU node decodes
//! (design §2, §3.4, §4, §5).
//!
//! ```text
//! offset 0   magic "CUZKBLOB" (8 bytes)
//!        8   format version, u16 LE
//!       10   header length H, u32 LE (32 ..= MAX_HEADER_BYTES)
//!       14   header: bincode (fixed-width LE integers) of BlobHeader, checksum last
//!   14 + H   payload: chunk table, then zstd frames
//! ```
//!
//! Every vector is cut into chunks of `chunk_elements` elements (a density chunk holds that many
//! bits); chunks of all vectors are encoded and compressed independently, one zstd frame each, so
//! both ends run on every core. The chunk table lists, per chunk in header order, the frame length
//! and the decompressed length (two u32 LE). Scalar chunks use the compact codec of
//! [`crate::codec`]; density chunks are their `u64` words, little-endian.
//!
//! The header says which vectors the blob carries, so a witness-only blob (input and aux alone,
//! design §4) is the same format with fewer entries; [`decode_blob`] needs all of them today and
//! names the missing ones.
//!
//! The blake3 checksum covers the header bytes before it and the whole payload, so any changed
//! byte is caught before anything is decompressed. Every length is checked against
//! [`DecodeLimits`] before memory is allocated for it, and no zstd frame may produce more than its
//! declared, bounded size.

use std::fmt;
use std::ops::Range;

use bincode::Options;
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::codec::{self, ClassCounts, CodecError};
use crate::witness::{Assignment, Density};

pub const MAGIC: [u8; 8] = *b"CUZKBLOB";
pub const FORMAT_VERSION: u16 = 1;
/// Magic, version and header length.
pub const PREFIX_LEN: usize = 14;
/// Ids, the vector list and fixed fields fit in well under this; it bounds the header allocation.
pub const MAX_HEADER_BYTES: u32 = 64 * 1024;
/// Longest job id and shape key, in bytes.
pub const MAX_ID_LEN: usize = 256;
pub const MIN_CHUNK_ELEMENTS: u32 = 1 << 12;
pub const MAX_CHUNK_ELEMENTS: u32 = 1 << 24;
const CHECKSUM_LEN: usize = 32;
const TABLE_ENTRY_LEN: usize = 8;

/// A vector a blob may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum VectorKind {
    Input,
    Aux,
    A,
    B,
    C,
    AAuxDensity,
    BInputDensity,
    BAuxDensity,
}

impl VectorKind {
    /// Every kind, in the order a blob stores them.
    pub const ALL: [VectorKind; 8] = [
        VectorKind::Input,
        VectorKind::Aux,
        VectorKind::A,
        VectorKind::B,
        VectorKind::C,
        VectorKind::AAuxDensity,
        VectorKind::BInputDensity,
        VectorKind::BAuxDensity,
    ];

    /// Densities are bit vectors; the others are scalar vectors.
    pub fn is_density(self) -> bool {
        matches!(
            self,
            VectorKind::AAuxDensity | VectorKind::BInputDensity | VectorKind::BAuxDensity
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            VectorKind::Input => "input",
            VectorKind::Aux => "aux",
            VectorKind::A => "a",
            VectorKind::B => "b",
            VectorKind::C => "c",
            VectorKind::AAuxDensity => "a_aux_density",
            VectorKind::BInputDensity => "b_input_density",
            VectorKind::BAuxDensity => "b_aux_density",
        }
    }

    /// Decoded size of `elements` of this kind: 32 bytes per scalar, whole words for densities.
    fn raw_bytes(self, elements: u64) -> u64 {
        if self.is_density() {
            elements.div_ceil(64).saturating_mul(8)
        } else {
            elements.saturating_mul(32)
        }
    }

    /// Range of the decompressed length of one chunk of `elements` elements.
    fn encoded_len_range(self, elements: usize) -> Range<usize> {
        if self.is_density() {
            let words = elements.div_ceil(64) * 8;
            words..words + 1
        } else {
            elements..codec::max_encoded_len(elements) + 1
        }
    }
}

impl fmt::Display for VectorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One vector carried by a blob; `elements` counts bits for densities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VectorInfo {
    pub kind: VectorKind,
    pub elements: u64,
}

/// The blob header, readable on its own with [`peek_header`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobHeader {
    pub job_id: String,
    pub partition: u32,
    /// Which circuit this partition is an instance of (selects parameters and, later, the R1CS).
    pub shape_key: String,
    pub chunk_elements: u32,
    /// The vectors carried, strictly in [`VectorKind::ALL`] order.
    pub vectors: Vec<VectorInfo>,
    /// Payload length before zstd: the sum of the chunks' decompressed lengths.
    pub encoded_len: u64,
    /// Payload length on the wire: chunk table plus frames.
    pub payload_len: u64,
    /// blake3 of the header bytes before this field and of the payload. Must stay the last field:
    /// with fixed-width bincode it is then the last 32 bytes of the header.
    pub checksum: [u8; 32],
}

impl BlobHeader {
    pub fn elements(&self, kind: VectorKind) -> Option<u64> {
        self.vectors
            .iter()
            .find(|v| v.kind == kind)
            .map(|v| v.elements)
    }

    pub fn constraints(&self) -> Option<u64> {
        self.elements(VectorKind::A)
    }

    /// Bytes the carried vectors take once decoded.
    pub fn decoded_bytes(&self) -> u64 {
        self.vectors.iter().fold(0u64, |acc, v| {
            acc.saturating_add(v.kind.raw_bytes(v.elements))
        })
    }
}

/// What the synth node says about a blob; checked once, at construction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobHeaderInfo {
    job_id: String,
    partition: u32,
    shape_key: String,
}

impl BlobHeaderInfo {
    pub fn new(
        job_id: impl Into<String>,
        partition: u32,
        shape_key: impl Into<String>,
    ) -> Result<Self, BlobError> {
        let (job_id, shape_key) = (job_id.into(), shape_key.into());
        check_id("job id", &job_id)?;
        check_id("shape key", &shape_key)?;
        Ok(Self {
            job_id,
            partition,
            shape_key,
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
    /// [`MIN_CHUNK_ELEMENTS`]..=[`MAX_CHUNK_ELEMENTS`]. At 2^20 constraints on 16 cores, 2^20
    /// chunks leave cores idle (encode 2.4× slower) and 2^16 chunks cost 1.9 % in size.
    pub chunk_elements: u32,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            level: 1,
            chunk_elements: 1 << 18,
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
    /// Per vector (bits for densities). A 32 GiB PoRep partition has ~130.3 M constraints.
    pub max_elements_per_vector: u64,
    /// All carried vectors once decoded (32 bytes per scalar); a 32 GiB partition needs ~16.7 GB.
    pub max_decoded_bytes: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            max_blob_bytes: 20 << 30,
            max_elements_per_vector: 1 << 28,
            max_decoded_bytes: 20 << 30,
        }
    }
}

/// Sizes and value classes of one encoded vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorStats {
    pub kind: VectorKind,
    pub elements: u64,
    /// 32 bytes per scalar, or the density's words.
    pub raw_bytes: u64,
    /// After the compact codec, before zstd.
    pub encoded_bytes: u64,
    /// Sum of this vector's zstd frames.
    pub compressed_bytes: u64,
    /// `None` for densities.
    pub classes: Option<ClassCounts>,
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
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob truncated: {got} bytes, at least {expected} needed")]
    Truncated { expected: u64, got: u64 },
    #[error("blob has {got} bytes, its header declares {expected}")]
    TrailingBytes { expected: u64, got: u64 },
    #[error("not a cuzk blob (bad magic)")]
    BadMagic,
    #[error("blob format version {found} is not supported (this build reads {supported})")]
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
    #[error("blob lacks vectors needed for an assignment: {}", list(.0))]
    MissingVectors(Vec<VectorKind>),
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
    #[error("{kind} has bits set past its length")]
    BadDensity { kind: VectorKind },
    #[error("decoded assignment is inconsistent: {0}")]
    Shape(String),
}

fn list(kinds: &[VectorKind]) -> String {
    kinds
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
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

/// One vector to encode.
enum Section<'a> {
    Scalars(VectorKind, &'a [Scalar]),
    Density(VectorKind, &'a Density),
}

impl Section<'_> {
    fn kind(&self) -> VectorKind {
        match self {
            Section::Scalars(kind, _) | Section::Density(kind, _) => *kind,
        }
    }

    fn elements(&self) -> usize {
        match self {
            Section::Scalars(_, v) => v.len(),
            Section::Density(_, d) => d.len(),
        }
    }

    /// Compact encoding of elements `range`, compressed. Returns (decompressed length, frame).
    fn encode_chunk(
        &self,
        range: Range<usize>,
        level: i32,
        raw: &mut Vec<u8>,
    ) -> (usize, Vec<u8>, ClassCounts) {
        raw.clear();
        let counts = match self {
            Section::Scalars(_, v) => codec::encode_into(&v[range], raw),
            Section::Density(_, d) => {
                // Chunks are multiples of 64 elements, so a chunk starts on a word boundary.
                for w in &d.words()[range.start / 64..range.end.div_ceil(64)] {
                    raw.extend_from_slice(&w.to_le_bytes());
                }
                ClassCounts::default()
            }
        };
        (raw.len(), codec::compress(raw, level), counts)
    }
}

fn chunk_ranges(elements: usize, chunk: usize) -> impl Iterator<Item = Range<usize>> {
    (0..elements.div_ceil(chunk)).map(move |i| i * chunk..((i + 1) * chunk).min(elements))
}

/// Encodes a full assignment; see [`encode_blob_with_stats`].
pub fn encode_blob(
    info: &BlobHeaderInfo,
    assignment: &Assignment,
    opts: &EncodeOptions,
) -> Vec<u8> {
    encode_blob_with_stats(info, assignment, opts).0
}

/// Encodes a full assignment and reports its sizes and value classes.
pub fn encode_blob_with_stats(
    info: &BlobHeaderInfo,
    assignment: &Assignment,
    opts: &EncodeOptions,
) -> (Vec<u8>, BlobStats) {
    let sections = [
        Section::Scalars(VectorKind::Input, &assignment.input),
        Section::Scalars(VectorKind::Aux, &assignment.aux),
        Section::Scalars(VectorKind::A, &assignment.a),
        Section::Scalars(VectorKind::B, &assignment.b),
        Section::Scalars(VectorKind::C, &assignment.c),
        Section::Density(VectorKind::AAuxDensity, &assignment.a_aux_density),
        Section::Density(VectorKind::BInputDensity, &assignment.b_input_density),
        Section::Density(VectorKind::BAuxDensity, &assignment.b_aux_density),
    ];
    encode_sections(info, &sections, opts)
}

/// Encodes `sections`, which must be in [`VectorKind::ALL`] order without repeats.
fn encode_sections(
    info: &BlobHeaderInfo,
    sections: &[Section<'_>],
    opts: &EncodeOptions,
) -> (Vec<u8>, BlobStats) {
    let chunk = opts.effective_chunk_elements() as usize;
    let jobs: Vec<(usize, Range<usize>)> = sections
        .iter()
        .enumerate()
        .flat_map(|(s, section)| chunk_ranges(section.elements(), chunk).map(move |r| (s, r)))
        .collect();
    let chunks: Vec<(usize, Vec<u8>, ClassCounts)> = jobs
        .par_iter()
        .map_init(Vec::new, |raw, (s, range)| {
            sections[*s].encode_chunk(range.clone(), opts.level, raw)
        })
        .collect();

    let mut vectors: Vec<VectorStats> = sections
        .iter()
        .map(|s| VectorStats {
            kind: s.kind(),
            elements: s.elements() as u64,
            raw_bytes: s.kind().raw_bytes(s.elements() as u64),
            encoded_bytes: 0,
            compressed_bytes: 0,
            classes: (!s.kind().is_density()).then(ClassCounts::default),
        })
        .collect();
    let mut table = Vec::with_capacity(chunks.len() * TABLE_ENTRY_LEN);
    for ((s, _), (raw_len, frame, counts)) in jobs.iter().zip(&chunks) {
        // A chunk holds at most 2^24 elements, so both lengths fit in u32 (33 · 2^24 < 2^32).
        table.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        table.extend_from_slice(&(*raw_len as u32).to_le_bytes());
        let v = &mut vectors[*s];
        v.encoded_bytes += *raw_len as u64;
        v.compressed_bytes += frame.len() as u64;
        if let Some(c) = v.classes.as_mut() {
            c.add(counts);
        }
    }

    let frames_len: usize = chunks.iter().map(|c| c.1.len()).sum();
    let mut header = BlobHeader {
        job_id: info.job_id.clone(),
        partition: info.partition,
        shape_key: info.shape_key.clone(),
        chunk_elements: chunk as u32,
        vectors: vectors
            .iter()
            .map(|v| VectorInfo {
                kind: v.kind,
                elements: v.elements,
            })
            .collect(),
        encoded_len: vectors.iter().map(|v| v.encoded_bytes).sum(),
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
        raw_bytes: vectors.iter().map(|v| v.raw_bytes).sum(),
        encoded_bytes: header.encoded_len,
        compressed_bytes: blob.len() as u64,
        vectors,
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
    if !h.vectors.windows(2).all(|w| w[0].kind < w[1].kind) {
        return Err(BlobError::Header("vectors repeated or out of order".into()));
    }
    for v in &h.vectors {
        if v.elements > limits.max_elements_per_vector {
            return Err(BlobError::TooManyElements {
                kind: v.kind,
                elements: v.elements,
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

/// One vector being decoded.
enum Decoded {
    Scalars(Vec<Scalar>),
    Words(Vec<u64>),
}

/// Where one chunk's decoded elements go.
enum Out<'a> {
    Scalars(&'a mut [Scalar]),
    Words(&'a mut [u64]),
}

struct ChunkJob<'a> {
    kind: VectorKind,
    chunk: usize,
    /// Index of the chunk's first element in its vector.
    first: u64,
    frame: &'a [u8],
    raw_len: usize,
    out: Out<'a>,
}

impl ChunkJob<'_> {
    fn run(self, dec: &mut codec::FrameDecoder) -> Result<(), BlobError> {
        let (kind, chunk) = (self.kind, self.chunk);
        let raw = dec
            .decompress(self.frame, self.raw_len)
            .map_err(|e| match e {
                CodecError::Decompress { reason, .. } => BlobError::Decompress {
                    kind,
                    chunk,
                    reason,
                },
                other => BlobError::Corrupt(format!("{kind} chunk {chunk}: {other}")),
            })?;
        match self.out {
            Out::Scalars(out) => codec::decode_into(raw, out).map_err(|e| match e {
                CodecError::NonCanonical { index } => BlobError::NonCanonical {
                    kind,
                    index: self.first + index as u64,
                },
                other => BlobError::Corrupt(format!("{kind} chunk {chunk}: {other}")),
            }),
            Out::Words(out) => {
                // The table check fixed raw_len at exactly 8 bytes per word.
                for (w, b) in out.iter_mut().zip(raw.chunks_exact(8)) {
                    *w = u64::from_le_bytes(b.try_into().expect("8 bytes"));
                }
                Ok(())
            }
        }
    }
}

/// Decodes a blob carrying a full assignment. Checks, in order: header and limits, that every
/// vector is present, the exact length, the checksum, the chunk table, then each chunk; the
/// result passes [`Assignment::check_shape`].
pub fn decode_blob(
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<(BlobHeader, Assignment), BlobError> {
    if bytes.len() as u64 > limits.max_blob_bytes {
        return Err(BlobError::BlobTooLarge {
            bytes: bytes.len() as u64,
            limit: limits.max_blob_bytes,
        });
    }
    let (header, header_len) = peek(bytes, limits)?;
    let missing: Vec<VectorKind> = VectorKind::ALL
        .into_iter()
        .filter(|k| header.elements(*k).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(BlobError::MissingVectors(missing));
    }

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
    hasher.update(&bytes[payload_start..]);
    if *hasher.finalize().as_bytes() != header.checksum {
        return Err(BlobError::ChecksumMismatch);
    }

    // Vectors are allocated only now, after every count was bounded and the checksum matched.
    let chunk = header.chunk_elements as usize;
    let mut decoded: Vec<Decoded> = header
        .vectors
        .iter()
        .map(|v| {
            let n = v.elements as usize;
            if v.kind.is_density() {
                Decoded::Words(vec![0; n.div_ceil(64)])
            } else {
                Decoded::Scalars(vec![Scalar::ZERO; n])
            }
        })
        .collect();

    let payload = &bytes[payload_start..];
    let chunks: usize = header
        .vectors
        .iter()
        .map(|v| (v.elements as usize).div_ceil(chunk))
        .sum();
    let table_len = chunks * TABLE_ENTRY_LEN;
    let (table, mut frames) = payload.split_at_checked(table_len).ok_or_else(|| {
        BlobError::Corrupt(format!(
            "payload of {} bytes cannot hold a {table_len}-byte chunk table",
            payload.len()
        ))
    })?;
    let mut entries = table.chunks_exact(TABLE_ENTRY_LEN);
    let mut encoded_len = 0u64;
    let mut jobs = Vec::with_capacity(chunks);
    for (v, out) in header.vectors.iter().zip(decoded.iter_mut()) {
        let outs: Vec<Out<'_>> = match out {
            Decoded::Scalars(s) => s.chunks_mut(chunk).map(Out::Scalars).collect(),
            Decoded::Words(w) => w.chunks_mut(chunk / 64).map(Out::Words).collect(),
        };
        for ((i, range), out) in chunk_ranges(v.elements as usize, chunk)
            .enumerate()
            .zip(outs)
        {
            let corrupt =
                |reason: String| BlobError::Corrupt(format!("{} chunk {i}: {reason}", v.kind));
            let entry = entries
                .next()
                .expect("table length computed from the same chunk count");
            let frame_len = u32::from_le_bytes(entry[..4].try_into().expect("4 bytes")) as usize;
            let raw_len = u32::from_le_bytes(entry[4..].try_into().expect("4 bytes")) as usize;
            let allowed = v.kind.encoded_len_range(range.len());
            if !allowed.contains(&raw_len) {
                return Err(corrupt(format!(
                    "declares {raw_len} decoded bytes, allowed {allowed:?}"
                )));
            }
            let (frame, rest) = frames.split_at_checked(frame_len).ok_or_else(|| {
                corrupt(format!("frame of {frame_len} bytes overruns the payload"))
            })?;
            frames = rest;
            encoded_len += raw_len as u64;
            jobs.push(ChunkJob {
                kind: v.kind,
                chunk: i,
                first: range.start as u64,
                frame,
                raw_len,
                out,
            });
        }
    }
    if !frames.is_empty() {
        return Err(BlobError::Corrupt(format!(
            "{} bytes after the last frame",
            frames.len()
        )));
    }
    if encoded_len != header.encoded_len {
        return Err(BlobError::Corrupt(format!(
            "chunks declare {encoded_len} decoded bytes, the header {}",
            header.encoded_len
        )));
    }
    jobs.into_par_iter()
        .try_for_each_init(codec::FrameDecoder::new, |dec, job| match dec {
            Ok(dec) => job.run(dec),
            Err(e) => Err(BlobError::Decompress {
                kind: job.kind,
                chunk: job.chunk,
                reason: e.to_string(),
            }),
        })?;

    let mut take = |kind: VectorKind| {
        let i = header
            .vectors
            .iter()
            .position(|v| v.kind == kind)
            .expect("presence checked above");
        std::mem::replace(&mut decoded[i], Decoded::Words(Vec::new()))
    };
    let mut scalars = |kind| match take(kind) {
        Decoded::Scalars(s) => s,
        Decoded::Words(_) => unreachable!("{kind} is a scalar vector"),
    };
    let (input, aux, a, b, c) = (
        scalars(VectorKind::Input),
        scalars(VectorKind::Aux),
        scalars(VectorKind::A),
        scalars(VectorKind::B),
        scalars(VectorKind::C),
    );
    let mut density = |kind: VectorKind| match take(kind) {
        Decoded::Words(w) => Density::from_words(w, header.elements(kind).unwrap_or(0) as usize)
            .ok_or(BlobError::BadDensity { kind }),
        Decoded::Scalars(_) => unreachable!("{kind} is a density"),
    };
    let assignment = Assignment {
        input,
        aux,
        a,
        b,
        c,
        a_aux_density: density(VectorKind::AAuxDensity)?,
        b_input_density: density(VectorKind::BInputDensity)?,
        b_aux_density: density(VectorKind::BAuxDensity)?,
    };
    assignment.check_shape().map_err(BlobError::Shape)?;
    Ok((header, assignment))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Retryable;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    fn value(rng: &mut StdRng) -> Scalar {
        match rng.gen_range(0..10) {
            0..=3 => Scalar::ZERO,
            4..=6 => Scalar::ONE,
            7 => Scalar::from(rng.gen::<u64>() >> rng.gen_range(0..64)),
            8 => -Scalar::from(rng.gen::<u64>() >> rng.gen_range(0..64)),
            _ => Scalar::random(&mut *rng),
        }
    }

    fn density(rng: &mut StdRng, n: usize) -> Density {
        let mut d = Density::new();
        (0..n).for_each(|_| d.push(rng.gen_bool(0.7)));
        d
    }

    fn assignment(rng: &mut StdRng, inputs: usize, aux: usize, constraints: usize) -> Assignment {
        let mut scalars = |n: usize| (0..n).map(|_| value(rng)).collect::<Vec<_>>();
        let (input, aux_v, a, b, c) = (
            scalars(inputs),
            scalars(aux),
            scalars(constraints),
            scalars(constraints),
            scalars(constraints),
        );
        Assignment {
            input,
            aux: aux_v,
            a,
            b,
            c,
            a_aux_density: density(rng, aux),
            b_input_density: density(rng, inputs),
            b_aux_density: density(rng, aux),
        }
    }

    fn info() -> BlobHeaderInfo {
        BlobHeaderInfo::new("job-7", 3, "porep-2k").unwrap()
    }

    fn small_opts() -> EncodeOptions {
        EncodeOptions {
            chunk_elements: MIN_CHUNK_ELEMENTS,
            ..Default::default()
        }
    }

    fn roundtrip(a: &Assignment, opts: &EncodeOptions) -> (Vec<u8>, BlobStats) {
        let (blob, stats) = encode_blob_with_stats(&info(), a, opts);
        let (header, back) = decode_blob(&blob, &DecodeLimits::default()).unwrap();
        assert_eq!(&back, a);
        assert_eq!(
            (
                header.job_id.as_str(),
                header.partition,
                header.shape_key.as_str()
            ),
            ("job-7", 3, "porep-2k")
        );
        assert_eq!(
            peek_header(&blob, &DecodeLimits::default()).unwrap(),
            header
        );
        assert_eq!(stats.compressed_bytes, blob.len() as u64);
        assert_eq!(stats.encoded_bytes, header.encoded_len);
        (blob, stats)
    }

    /// A blob with `header` (checksum recomputed) and `payload`, for forging what the encoder
    /// never writes.
    fn forge(header: &BlobHeader, payload: &[u8]) -> Vec<u8> {
        let mut h = header.clone();
        h.payload_len = payload.len() as u64;
        let bytes = bincode_options(u64::MAX).serialize(&h).unwrap();
        let body = &bytes[..bytes.len() - CHECKSUM_LEN];
        let mut hasher = blake3::Hasher::new();
        hasher.update(body);
        hasher.update(payload);
        let mut blob = MAGIC.to_vec();
        blob.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        blob.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        blob.extend_from_slice(body);
        blob.extend_from_slice(hasher.finalize().as_bytes());
        blob.extend_from_slice(payload);
        blob
    }

    /// Chunk table and frames for `(decoded length, frame)` pairs.
    fn payload(chunks: &[(usize, Vec<u8>)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (raw_len, frame) in chunks {
            p.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            p.extend_from_slice(&(*raw_len as u32).to_le_bytes());
        }
        chunks.iter().for_each(|(_, f)| p.extend_from_slice(f));
        p
    }

    /// The smallest legal assignment: ONE as the only input, one constraint, no aux.
    fn minimal() -> Assignment {
        Assignment {
            input: vec![Scalar::ONE],
            a: vec![Scalar::ONE],
            b: vec![Scalar::ZERO],
            c: vec![Scalar::ZERO],
            b_input_density: Density::zeros(1),
            ..Default::default()
        }
    }

    /// A header for `minimal()` whose payload the test supplies.
    fn minimal_header() -> BlobHeader {
        let blob = encode_blob(&info(), &minimal(), &small_opts());
        peek_header(&blob, &DecodeLimits::default()).unwrap()
    }

    fn decode(blob: &[u8]) -> Result<Assignment, BlobError> {
        decode_blob(blob, &DecodeLimits::default()).map(|(_, a)| a)
    }

    #[test]
    fn roundtrips() {
        let mut rng = StdRng::seed_from_u64(1);
        roundtrip(&minimal(), &EncodeOptions::default());
        // Sizes that are not multiples of the chunk, vectors of one and of zero elements.
        let a = assignment(&mut rng, 5, 3 * 4096 + 17, 2 * 4096 + 1);
        let (_, stats) = roundtrip(&a, &small_opts());
        roundtrip(
            &a,
            &EncodeOptions {
                level: 9,
                chunk_elements: 1 << 20,
            },
        );
        let classes = stats.vectors.iter().filter_map(|v| v.classes).fold(
            ClassCounts::default(),
            |mut acc, c| {
                acc.add(&c);
                acc
            },
        );
        assert_eq!(
            classes.total(),
            (5 + 3 * 4096 + 17 + 3 * (2 * 4096 + 1)) as u64
        );
        assert!(
            classes.zero > 0
                && classes.one > 0
                && classes.small > 0
                && classes.neg_small > 0
                && classes.full > 0
        );
        assert_eq!(stats.raw_bytes, 32 * classes.total() + 8 * (2 * 193 + 1));
        // Seeded property loop over shapes and chunk sizes.
        for _ in 0..12 {
            let (inputs, aux, extra) = (
                rng.gen_range(1..40),
                rng.gen_range(0..9000),
                rng.gen_range(0..9000),
            );
            let a = assignment(&mut rng, inputs, aux, inputs + extra);
            let chunk_elements = 1 << rng.gen_range(10..15);
            roundtrip(
                &a,
                &EncodeOptions {
                    level: rng.gen_range(-3..5),
                    chunk_elements,
                },
            );
        }
    }

    #[test]
    fn peek_needs_only_the_header() {
        let mut rng = StdRng::seed_from_u64(2);
        let blob = encode_blob(&info(), &assignment(&mut rng, 2, 5000, 5000), &small_opts());
        let header_len = u32::from_le_bytes(blob[10..14].try_into().unwrap()) as usize;
        let header =
            peek_header(&blob[..PREFIX_LEN + header_len], &DecodeLimits::default()).unwrap();
        assert_eq!(header.constraints(), Some(5000));
        assert_eq!(header.elements(VectorKind::BInputDensity), Some(2));
        assert_eq!(
            header.decoded_bytes(),
            32 * (2 + 4 * 5000) + 8 * (2 * 79 + 1)
        );
        assert!(matches!(
            peek_header(
                &blob[..PREFIX_LEN + header_len - 1],
                &DecodeLimits::default()
            ),
            Err(BlobError::Truncated { .. })
        ));
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_rejected() {
        let blob = encode_blob(&info(), &minimal(), &small_opts());
        for len in 0..blob.len() {
            match decode(&blob[..len]) {
                Err(BlobError::Truncated { .. }) => {}
                other => panic!("prefix of {len} bytes: {other:?}"),
            }
        }
        for i in 0..blob.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut bad = blob.clone();
                bad[i] ^= mask;
                assert!(
                    decode(&bad).is_err(),
                    "flipping byte {i} with {mask:#x} went unnoticed"
                );
            }
        }
        let mut long = blob.clone();
        long.push(0);
        assert!(matches!(
            decode(&long),
            Err(BlobError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn rejects_prefix_errors() {
        let blob = encode_blob(&info(), &minimal(), &small_opts());
        let mut bad = blob.clone();
        bad[0] = b'X';
        assert!(matches!(decode(&bad), Err(BlobError::BadMagic)));
        assert!(matches!(decode(b"PK\x03\x04"), Err(BlobError::BadMagic)));
        let mut bad = blob.clone();
        bad[8..10].copy_from_slice(&2u16.to_le_bytes());
        assert!(matches!(
            decode(&bad),
            Err(BlobError::UnsupportedVersion {
                found: 2,
                supported: 1
            })
        ));
        let mut bad = blob.clone();
        bad[10..14].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode(&bad), Err(BlobError::HeaderLength { .. })));
        let mut bad = blob.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(matches!(decode(&bad), Err(BlobError::ChecksumMismatch)));
        let tight = DecodeLimits {
            max_blob_bytes: blob.len() as u64 - 1,
            ..Default::default()
        };
        assert!(matches!(
            decode_blob(&blob, &tight),
            Err(BlobError::BlobTooLarge { .. })
        ));
        assert!(!BlobError::ChecksumMismatch.retryable());
    }

    #[test]
    fn rejects_bad_headers() {
        let h = minimal_header();
        let mut forged = h.clone();
        forged.vectors[1].elements = 1 << 40;
        match decode(&forge(&forged, &[])) {
            Err(BlobError::TooManyElements {
                kind: VectorKind::Aux,
                elements,
                ..
            }) => assert_eq!(elements, 1 << 40),
            other => panic!("{other:?}"),
        }
        let limits = DecodeLimits {
            max_decoded_bytes: 1000,
            ..Default::default()
        };
        forged.vectors[1].elements = 100;
        assert!(matches!(
            decode_blob(&forge(&forged, &[]), &limits),
            Err(BlobError::DecodedTooLarge { .. })
        ));
        let mut forged = h.clone();
        forged.vectors.swap(0, 1);
        assert!(matches!(
            decode(&forge(&forged, &[])),
            Err(BlobError::Header(_))
        ));
        let mut forged = h.clone();
        forged.chunk_elements = 5000;
        assert!(matches!(
            decode(&forge(&forged, &[])),
            Err(BlobError::Header(_))
        ));
        let mut forged = h.clone();
        forged.job_id = "j".repeat(MAX_ID_LEN + 1);
        assert!(matches!(
            decode(&forge(&forged, &[])),
            Err(BlobError::Header(_))
        ));
        assert!(BlobHeaderInfo::new("j".repeat(MAX_ID_LEN + 1), 0, "s").is_err());
        // An unknown vector kind (variant 8) and a string length claiming 2^60 bytes.
        let mut blob = forge(&h, &[]);
        // Fixed-width layout: job id, partition, shape key, chunk size, vector count, then
        // (kind u32, elements u64) per vector.
        let last_kind =
            PREFIX_LEN + (8 + h.job_id.len()) + 4 + (8 + h.shape_key.len()) + 4 + 8 + 7 * 12;
        assert_eq!(blob[last_kind..last_kind + 4], 7u32.to_le_bytes());
        blob[last_kind] = 8;
        match decode(&blob) {
            Err(BlobError::Header(msg)) => assert!(msg.contains("variant"), "{msg}"),
            other => panic!("{other:?}"),
        }
        let mut blob = forge(&h, &[]);
        blob[PREFIX_LEN..PREFIX_LEN + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(matches!(decode(&blob), Err(BlobError::Header(_))));
    }

    #[test]
    fn names_missing_vectors() {
        let a = minimal();
        let sections = [
            Section::Scalars(VectorKind::Input, &a.input),
            Section::Scalars(VectorKind::Aux, &a.aux),
        ];
        let (blob, _) = encode_sections(&info(), &sections, &small_opts());
        let header = peek_header(&blob, &DecodeLimits::default()).unwrap();
        assert_eq!(header.elements(VectorKind::Aux), Some(0));
        let err = decode(&blob).unwrap_err();
        assert_eq!(
            err.to_string(),
            "blob lacks vectors needed for an assignment: a, b, c, a_aux_density, b_input_density, b_aux_density"
        );
    }

    /// Frames for `minimal()`'s eight vectors, with the aux chunk replaced by `aux`.
    fn minimal_payload(
        aux: Option<(usize, Vec<u8>)>,
        b_input_density: (usize, Vec<u8>),
    ) -> Vec<u8> {
        let one = (1, codec::compress(&[1], 1));
        let zero = (1, codec::compress(&[0], 1));
        let mut chunks = vec![one.clone()];
        chunks.extend(aux);
        chunks.extend([one, zero.clone(), zero, b_input_density]);
        payload(&chunks)
    }

    #[test]
    fn rejects_bad_payloads() {
        let h = minimal_header();
        let density_ok = (8, codec::compress(&[0; 8], 1));
        assert!(decode(&forge(&h, &minimal_payload(None, density_ok.clone()))).is_ok());

        // Density with a bit past its one-bit length.
        let bad_density = (8, codec::compress(&[2, 0, 0, 0, 0, 0, 0, 0], 1));
        assert!(matches!(
            decode(&forge(&h, &minimal_payload(None, bad_density))),
            Err(BlobError::BadDensity {
                kind: VectorKind::BInputDensity
            })
        ));

        // Aux with 4100 elements, the last one written as r itself.
        let mut h_aux = h.clone();
        h_aux.vectors[1].elements = 4100;
        h_aux.vectors[5].elements = 4100;
        h_aux.vectors[7].elements = 4100;
        let mut raw = vec![1u8; 3];
        raw.push(34); // a 32-byte positive value
        raw.extend_from_slice(&ff::PrimeField::to_repr(&-Scalar::ONE));
        raw[4] += 1; // r - 1 + 1 = r: its low byte is 0 before the increment
        let aux_chunks = [
            (4096, codec::compress(&[0; 4096], 1)),
            (raw.len(), codec::compress(&raw, 1)),
        ];
        let dens = |n: usize| {
            (
                n.div_ceil(64) * 8,
                codec::compress(&vec![0; n.div_ceil(64) * 8], 1),
            )
        };
        let chunks: Vec<(usize, Vec<u8>)> = [(1, codec::compress(&[1], 1))]
            .into_iter()
            .chain(aux_chunks)
            .chain([
                (1, codec::compress(&[1], 1)),
                (1, codec::compress(&[0], 1)),
                (1, codec::compress(&[0], 1)),
            ])
            .chain([dens(4096), dens(4)])
            .chain([dens(1)])
            .chain([dens(4096), dens(4)])
            .collect();
        h_aux.encoded_len = chunks.iter().map(|c| c.0 as u64).sum();
        match decode(&forge(&h_aux, &payload(&chunks))) {
            Err(BlobError::NonCanonical {
                kind: VectorKind::Aux,
                index: 4099,
            }) => {}
            other => panic!("{other:?}"),
        }

        // Decompression bomb: 64 MiB of zero tags declared as a one-element aux chunk.
        let mut h_bomb = h.clone();
        h_bomb.vectors[1].elements = 1;
        h_bomb.vectors[5].elements = 1;
        h_bomb.vectors[7].elements = 1;
        let mut enc = zstd::stream::Encoder::new(Vec::new(), 19).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            std::io::Write::write_all(&mut enc, &zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        let chunks = [
            (1, codec::compress(&[1], 1)),
            (1, bomb),
            (1, codec::compress(&[1], 1)),
            (1, codec::compress(&[0], 1)),
            (1, codec::compress(&[0], 1)),
            dens(1),
            dens(1),
            dens(1),
        ];
        h_bomb.encoded_len = chunks.iter().map(|c| c.0 as u64).sum();
        match decode(&forge(&h_bomb, &payload(&chunks))) {
            Err(BlobError::Decompress {
                kind: VectorKind::Aux,
                chunk: 0,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }

        // A chunk declaring more decoded bytes than its elements can need.
        let mut chunks = chunks.to_vec();
        chunks[1] = (34, codec::compress(&[0; 34], 1));
        assert!(matches!(
            decode(&forge(&h_bomb, &payload(&chunks))),
            Err(BlobError::Corrupt(_))
        ));
        // Garbage that is not zstd, and a table claiming more frame bytes than exist.
        chunks[1] = (1, b"garbage!".to_vec());
        assert!(matches!(
            decode(&forge(&h_bomb, &payload(&chunks))),
            Err(BlobError::Decompress { .. })
        ));
        let mut p = payload(&chunks);
        p[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&forge(&h_bomb, &p)),
            Err(BlobError::Corrupt(_))
        ));
        assert!(matches!(
            decode(&forge(&h_bomb, &p[..20])),
            Err(BlobError::Corrupt(_))
        ));
    }

    #[test]
    fn garbage_never_panics() {
        let mut rng = StdRng::seed_from_u64(3);
        let valid = encode_blob(&info(), &assignment(&mut rng, 3, 300, 400), &small_opts());
        for _ in 0..300 {
            let mut bytes: Vec<u8> = (0..rng.gen_range(0..600)).map(|_| rng.gen()).collect();
            if rng.gen_bool(0.5) {
                // Start like a real blob so the header parser, not the magic check, sees the noise.
                let keep = rng.gen_range(0..valid.len()).min(bytes.len());
                bytes[..keep].copy_from_slice(&valid[..keep]);
            }
            assert!(decode(&bytes).is_err());
        }
    }

    #[test]
    fn rejects_inconsistent_shape() {
        let mut a = minimal();
        a.c.push(Scalar::ONE);
        let blob = encode_blob(&info(), &a, &small_opts());
        assert!(matches!(decode(&blob), Err(BlobError::Shape(_))));
    }
}
