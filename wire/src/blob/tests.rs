use super::*;
use crate::witness::Witness;
use crate::Retryable;
use ff::Field;
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

fn witness(rng: &mut StdRng, inputs: usize, aux: usize) -> Witness {
    let mut scalars = |n: usize| (0..n).map(|_| value(rng)).collect::<Vec<_>>();
    Witness {
        input: scalars(inputs),
        aux: scalars(aux),
    }
}

const HASH: [u8; 32] = [7; 32];

fn info() -> BlobHeaderInfo {
    BlobHeaderInfo::new("job-7", 3, "porep-2k", HASH).unwrap()
}

fn small_opts() -> EncodeOptions {
    EncodeOptions {
        chunk_elements: MIN_CHUNK_ELEMENTS,
        ..Default::default()
    }
}

fn encode(w: &Witness, opts: &EncodeOptions) -> (Vec<u8>, BlobStats) {
    encode_blob_with_stats(&info(), &w.input, &w.aux, opts)
}

fn roundtrip(w: &Witness, opts: &EncodeOptions) -> (Vec<u8>, BlobStats) {
    let (blob, stats) = encode(w, opts);
    let (header, back) = decode_blob(&blob, &DecodeLimits::default()).unwrap();
    assert_eq!(&back, w);
    assert_eq!(
        (
            header.job_id.as_str(),
            header.partition,
            header.shape_key.as_str(),
            header.shape_hash
        ),
        ("job-7", 3, "porep-2k", HASH)
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

/// The smallest legal witness: ONE as the only input, no aux.
fn minimal() -> Witness {
    Witness {
        input: vec![Scalar::ONE],
        aux: Vec::new(),
    }
}

/// A header for `minimal()` whose payload the test supplies.
fn minimal_header() -> BlobHeader {
    let (blob, _) = encode(&minimal(), &small_opts());
    peek_header(&blob, &DecodeLimits::default()).unwrap()
}

fn decode(blob: &[u8]) -> Result<Witness, BlobError> {
    decode_blob(blob, &DecodeLimits::default()).map(|(_, w)| w)
}

#[test]
fn roundtrips() {
    let mut rng = StdRng::seed_from_u64(1);
    roundtrip(&minimal(), &EncodeOptions::default());
    // Sizes that are not multiples of the chunk, and an empty aux.
    let w = witness(&mut rng, 5, 3 * 4096 + 17);
    let (_, stats) = roundtrip(&w, &small_opts());
    roundtrip(
        &w,
        &EncodeOptions {
            level: 9,
            chunk_elements: 1 << 20,
        },
    );
    let classes = stats
        .vectors
        .iter()
        .fold(ClassCounts::default(), |mut acc, v| {
            acc.add(&v.classes);
            acc
        });
    assert_eq!(classes.total(), (5 + 3 * 4096 + 17) as u64);
    assert!(
        classes.zero > 0
            && classes.one > 0
            && classes.small > 0
            && classes.neg_small > 0
            && classes.full > 0
    );
    assert_eq!(stats.raw_bytes, 32 * classes.total());
    // Seeded property loop over shapes and chunk sizes.
    for _ in 0..12 {
        let (inputs, aux) = (rng.gen_range(1..40), rng.gen_range(0..9000));
        let w = witness(&mut rng, inputs, aux);
        let chunk_elements = 1 << rng.gen_range(10..15);
        roundtrip(
            &w,
            &EncodeOptions {
                level: rng.gen_range(-3..5),
                chunk_elements,
            },
        );
    }
}

/// A node decodes blob after blob into one compact witness: a smaller one reuses its memory in
/// place, and each expands to what was encoded.
#[test]
fn compact_witnesses_reuse_their_memory() {
    let mut rng = StdRng::seed_from_u64(4);
    let limits = DecodeLimits::default();
    let big = witness(&mut rng, 3, 5 * 4096 + 9);
    let small = witness(&mut rng, 2, 2 * 4096);
    let mut compact = CompactWitness::default();
    let (blob, stats) = encode(&big, &small_opts());
    decode_blob_compact_into(&blob, &limits, &mut compact).unwrap();
    assert_eq!(compact.expand().unwrap(), big);
    let aux = &compact.aux;
    assert_eq!(
        (aux.len(), aux.chunks(), aux.chunk_elements()),
        (5 * 4096 + 9, 6, 4096)
    );
    assert_eq!(aux.starts()[0], 0);
    assert_eq!(aux.bytes().len() as u64, stats.vectors[1].encoded_bytes);
    assert_eq!(aux.chunk(5).0, 5 * 4096..5 * 4096 + 9);
    let memory = (aux.memory().as_ptr(), aux.memory().len());
    let (blob, _) = encode(&small, &small_opts());
    decode_blob_compact_into(&blob, &limits, &mut compact).unwrap();
    assert_eq!(compact.expand().unwrap(), small);
    assert_eq!(compact.public_inputs(), &small.input[1..]);
    assert_eq!(
        (compact.aux.memory().as_ptr(), compact.aux.memory().len()),
        memory
    );
    assert!(compact.aux.bytes().len() < memory.1);
}

#[test]
fn peek_needs_only_the_header() {
    let mut rng = StdRng::seed_from_u64(2);
    let (blob, _) = encode(&witness(&mut rng, 2, 5000), &small_opts());
    let header_len = u32::from_le_bytes(blob[10..14].try_into().unwrap()) as usize;
    let header = peek_header(&blob[..PREFIX_LEN + header_len], &DecodeLimits::default()).unwrap();
    assert_eq!((header.inputs, header.aux), (2, 5000));
    assert_eq!(header.decoded_bytes(), 32 * 5002);
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
    let mut w = minimal();
    w.aux.push(Scalar::from(5u64));
    let (blob, _) = encode(&w, &small_opts());
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
    let (blob, _) = encode(&minimal(), &small_opts());
    let mut bad = blob.clone();
    bad[0] = b'X';
    assert!(matches!(decode(&bad), Err(BlobError::BadMagic)));
    assert!(matches!(decode(b"PK\x03\x04"), Err(BlobError::BadMagic)));
    // A blob of the evaluations-carrying format 1 is refused with a reason.
    let mut bad = blob.clone();
    bad[8..10].copy_from_slice(&1u16.to_le_bytes());
    let err = decode(&bad).unwrap_err();
    assert!(matches!(
        err,
        BlobError::UnsupportedVersion {
            found: 1,
            supported: 2
        }
    ));
    assert!(err.to_string().contains("constraint evaluations"), "{err}");
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
    forged.aux = 1 << 40;
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
    forged.aux = 100;
    assert!(matches!(
        decode_blob(&forge(&forged, &[]), &limits),
        Err(BlobError::DecodedTooLarge { .. })
    ));
    let mut forged = h.clone();
    forged.inputs = 0;
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
    assert!(BlobHeaderInfo::new("j".repeat(MAX_ID_LEN + 1), 0, "s", HASH).is_err());
    // A string length claiming 2^60 bytes.
    let mut blob = forge(&h, &[]);
    blob[PREFIX_LEN..PREFIX_LEN + 8].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(matches!(decode(&blob), Err(BlobError::Header(_))));
}

#[test]
fn rejects_bad_payloads() {
    let h = minimal_header();
    let one = (1, codec::compress(&[1], 1));
    assert!(decode(&forge(&h, &payload(std::slice::from_ref(&one)))).is_ok());

    // Aux with 4100 elements, the last one written as r itself.
    let mut h_aux = h.clone();
    h_aux.aux = 4100;
    let mut raw = vec![1u8; 3];
    raw.push(34); // a 32-byte positive value
    raw.extend_from_slice(&ff::PrimeField::to_repr(&-Scalar::ONE));
    raw[4] += 1; // r - 1 + 1 = r: its low byte is 0 before the increment
    let chunks = [
        one.clone(),
        (4096, codec::compress(&[0; 4096], 1)),
        (raw.len(), codec::compress(&raw, 1)),
    ];
    h_aux.encoded_len = chunks.iter().map(|c| c.0 as u64).sum();
    let blob = forge(&h_aux, &payload(&chunks));
    match decode(&blob) {
        Err(BlobError::NonCanonical {
            kind: VectorKind::Aux,
            index: 4099,
        }) => {}
        other => panic!("{other:?}"),
    }
    // Kept compact, the aux's values are checked where it is expanded: the chunk that holds r
    // fails alone, with the element's index in the vector.
    let mut compact = CompactWitness::default();
    decode_blob_compact_into(&blob, &DecodeLimits::default(), &mut compact).unwrap();
    compact.aux.check_chunk(0).unwrap();
    assert!(matches!(
        compact.aux.check_chunk(1),
        Err(BlobError::NonCanonical { index: 4099, .. })
    ));

    // Decompression bomb: 64 MiB of zero tags declared as a one-element aux chunk.
    let mut h_bomb = h.clone();
    h_bomb.aux = 1;
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 19).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
    }
    let bomb = enc.finish().unwrap();
    let mut chunks = vec![one.clone(), (1, bomb)];
    h_bomb.encoded_len = 2;
    match decode(&forge(&h_bomb, &payload(&chunks))) {
        Err(BlobError::Decompress {
            kind: VectorKind::Aux,
            chunk: 0,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }

    // A chunk declaring more decoded bytes than its elements can need.
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
        decode(&forge(&h_bomb, &p[..12])),
        Err(BlobError::Corrupt(_))
    ));
}

#[test]
fn garbage_never_panics() {
    let mut rng = StdRng::seed_from_u64(3);
    let (valid, _) = encode(&witness(&mut rng, 3, 300), &small_opts());
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
