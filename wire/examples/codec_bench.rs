//! Sizes and speeds of the blob codec on synthetic witnesses.
//!
//! `cargo run --release -p cuzk-wire --example codec_bench [log2_aux]` (default 20).
//!
//! "sha-like" models a SHA-256-heavy witness: mostly bits, 32-bit words, small negatives and a
//! few full-width values. "random" is uniform full field elements, the codec's worst case.
//! Speeds are MB/s of raw witness (32 bytes per scalar), best of three, through `encode_blob`,
//! `decode_blob_compact_into` (decompression into a reused compact witness, what a GPU node does
//! on the host) and `CompactWitness::expand` (the expansion to scalars on the host, what the CPU
//! backend does and a GPU does on the device).

use std::time::Instant;

use blstrs::Scalar;
use cuzk_wire::blob::{
    decode_blob_compact_into, encode_blob_with_stats, BlobHeaderInfo, BlobStats, CompactWitness,
    DecodeLimits, EncodeOptions,
};
use cuzk_wire::codec;
use cuzk_wire::witness::Witness;
use ff::{Field, PrimeField};
use rand::{rngs::StdRng, Rng, SeedableRng};

fn bit(rng: &mut StdRng) -> Scalar {
    Scalar::from(rng.gen::<bool>() as u64)
}

fn sha_like(n: usize, rng: &mut StdRng) -> Witness {
    let mut input: Vec<Scalar> = (0..20).map(|_| Scalar::random(&mut *rng)).collect();
    input[0] = Scalar::ONE;
    let aux = (0..n)
        .map(|_| match rng.gen_range(0..100) {
            0..=84 => bit(rng),
            85..=92 => Scalar::from(rng.gen::<u32>() as u64),
            93..=94 => -Scalar::from(rng.gen_range(1..1000u64)),
            _ => Scalar::random(&mut *rng),
        })
        .collect();
    Witness { input, aux }
}

fn random(n: usize, rng: &mut StdRng) -> Witness {
    let mut v = |n: usize| {
        (0..n)
            .map(|_| Scalar::random(&mut *rng))
            .collect::<Vec<_>>()
    };
    Witness {
        input: v(20),
        aux: v(n),
    }
}

struct Run {
    stats: BlobStats,
    encode_s: f64,
    decompress_s: f64,
    expand_s: f64,
}

fn run(w: &Witness, opts: &EncodeOptions) -> Run {
    let info = BlobHeaderInfo::new("bench", 0, "synthetic", [0; 32]).unwrap();
    let limits = DecodeLimits::default();
    let (mut encode_s, mut decompress_s, mut expand_s) = (f64::MAX, f64::MAX, f64::MAX);
    let mut result = None;
    // Decoded into one reused witness, as a GPU node does partition after partition.
    let mut back = CompactWitness::default();
    for _ in 0..3 {
        let t = Instant::now();
        let (blob, stats) = encode_blob_with_stats(&info, &w.input, &w.aux, opts);
        encode_s = encode_s.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        decode_blob_compact_into(&blob, &limits, &mut back).expect("own blob decodes");
        decompress_s = decompress_s.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let expanded = back.expand().expect("own blob expands");
        expand_s = expand_s.min(t.elapsed().as_secs_f64());
        assert!(expanded == *w, "roundtrip mismatch");
        result = Some(stats);
    }
    Run {
        stats: result.unwrap(),
        encode_s,
        decompress_s,
        expand_s,
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn main() {
    let log_n: u32 = std::env::args()
        .nth(1)
        .map_or(20, |s| s.parse().expect("log2 of the aux count"));
    let n = 1usize << log_n;
    let threads = rayon::current_num_threads();
    let mut rng = StdRng::seed_from_u64(42);
    let data = [
        ("sha-like", sha_like(n, &mut rng)),
        ("random", random(n, &mut rng)),
    ];

    println!("2^{log_n} aux variables, {threads} threads available\n");
    println!(
        "| data | level | chunk | threads | raw MB | encoded MB | compressed MB | ratio | encode MB/s | decompress MB/s | expand MB/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let default = EncodeOptions::default();
    for (name, asg) in &data {
        let mut configs = vec![(default, 1), (default, threads)];
        for level in [-1, 3, 6] {
            configs.push((EncodeOptions { level, ..default }, threads));
        }
        for chunk_log in [16, 20] {
            configs.push((
                EncodeOptions {
                    chunk_elements: 1 << chunk_log,
                    ..default
                },
                threads,
            ));
        }
        for (opts, t) in configs {
            let r = if t == 1 {
                one.install(|| run(asg, &opts))
            } else {
                run(asg, &opts)
            };
            let s = &r.stats;
            println!(
                "| {name} | {} | 2^{} | {t} | {:.1} | {:.1} | {:.2} | {:.1} | {:.0} | {:.0} | {:.0} |",
                opts.level,
                opts.chunk_elements.trailing_zeros(),
                mb(s.raw_bytes),
                mb(s.encoded_bytes),
                mb(s.compressed_bytes),
                s.ratio(),
                mb(s.raw_bytes) / r.encode_s,
                mb(s.raw_bytes) / r.decompress_s,
                mb(s.raw_bytes) / r.expand_s,
            );
        }
    }

    // Per-vector breakdown and layout alternatives for the SHA-like data, single zstd frame per
    // vector at the default level so only the layout differs.
    let (_, asg) = &data[0];
    let (_, stats) = encode_blob_with_stats(
        &BlobHeaderInfo::new("bench", 0, "synthetic", [0; 32]).unwrap(),
        &asg.input,
        &asg.aux,
        &default,
    );
    println!("\n| vector | elements | zero | one | small | neg-small | full | raw MB | compressed MB | ratio |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for v in &stats.vectors {
        let c = v.classes;
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.1} |",
            v.kind,
            v.elements,
            c.zero,
            c.one,
            c.small,
            c.neg_small,
            c.full,
            mb(v.raw_bytes),
            mb(v.compressed_bytes),
            v.raw_bytes as f64 / v.compressed_bytes.max(1) as f64
        );
    }

    println!(
        "\nlayout alternatives, sha-like, one zstd level-{} frame per vector, 1 thread:",
        default.level
    );
    println!("| vector | raw 32 B + zstd: MB, ms | interleaved tag+value: MB | split tags / values (chosen): MB, ms |");
    println!("|---|---|---|---|");
    for (name, v) in [("aux", &asg.aux)] {
        let mut interleaved = Vec::new();
        let mut one = Vec::new();
        for s in v.iter() {
            one.clear();
            codec::encode_into(std::slice::from_ref(s), &mut one);
            interleaved.extend_from_slice(&one);
        }
        let z = |b: &[u8]| mb(codec::compress(b, default.level).len() as u64);
        // Time from scalars to compressed bytes, canonical conversion included in both.
        let t = Instant::now();
        let raw: Vec<u8> = v.iter().flat_map(|s| s.to_repr()).collect();
        let raw_mb = z(&raw);
        let raw_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let mut split = Vec::new();
        codec::encode_into(v, &mut split);
        let split_mb = z(&split);
        let split_ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "| {name} | {raw_mb:.3}, {raw_ms:.1} | {:.3} | {split_mb:.3}, {split_ms:.1} |",
            z(&interleaved)
        );
    }
}
