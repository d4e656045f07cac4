//! `cuzk-porep stats`: what one partition of a sector size costs to synthesize and to ship.

use std::time::Instant;

use anyhow::Result;
use cuzk_circuits::porep::SealedSector;
use cuzk_circuits::post::{PostKind, PostProof, SyntheticPost};
use cuzk_circuits::snap::SyntheticSnap;
use cuzk_circuits::CircuitError;
use cuzk_wire::blob::{
    decode_blob, encode_blob_with_stats, BlobHeaderInfo, DecodeLimits, EncodeOptions,
};
use cuzk_wire::witness::Witness;
use serde_json::json;

use crate::measure::cpu_seconds;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// The witness of one partition by the gadgets and by the native generator (every core, then
/// one), checked equal, each timed by wall clock and by this process's CPU time.
struct Witnesses {
    threads: usize,
    gadget_ms: f64,
    gadget_core_s: f64,
    native_ms: f64,
    native_core_s: f64,
    native_1t_ms: f64,
    witness: cuzk_wire::witness::Witness,
}

fn witnesses(
    gadget: impl Fn() -> Result<Witness, CircuitError>,
    native: impl Fn() -> Result<Witness, CircuitError> + Send + Sync,
) -> Result<Witnesses> {
    let cpu = || cpu_seconds("self").unwrap_or(f64::NAN);
    let (t, c) = (Instant::now(), cpu());
    let gadget = gadget()?;
    let (gadget_ms, gadget_core_s) = (ms(t), cpu() - c);
    // The native generator (what a synth node runs), on every core and on one.
    let (t, c) = (Instant::now(), cpu());
    let w = native()?;
    let (native_ms, native_core_s) = (ms(t), cpu() - c);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let t = Instant::now();
    let w1 = one.install(&native)?;
    let native_1t_ms = ms(t);
    anyhow::ensure!(
        w == gadget && w1 == gadget,
        "the native witness differs from the gadget witness"
    );
    Ok(Witnesses {
        threads: rayon::current_num_threads(),
        gadget_ms,
        gadget_core_s,
        native_ms,
        native_core_s,
        native_1t_ms,
        witness: w,
    })
}

/// `post-witness`: both witness paths of a synthetic PoSt partition (the proof's shape, random
/// contents), checked equal, as a table and one JSON object.
pub fn post_witness(
    kind: PostKind,
    size: cuzk_circuits::porep::SectorSize,
    sectors: Option<usize>,
) -> Result<()> {
    let proof = PostProof::current(kind, size);
    let partition = SyntheticPost::new(proof, sectors, 1)?;
    let w = witnesses(|| partition.gadget_witness(), || partition.native_witness())?;
    print_witnesses(&w, &proof.api_name(), "sectors", partition.sectors());
    Ok(())
}

/// `snap-witness`: both witness paths of a synthetic SnapDeals partition (the sector size's
/// circuit, random contents), checked equal, as a table and one JSON object.
pub fn snap_witness(
    size: cuzk_circuits::porep::SectorSize,
    challenges: Option<usize>,
) -> Result<()> {
    let partition = SyntheticSnap::new(size, challenges, 1)?;
    let w = witnesses(|| partition.gadget_witness(), || partition.native_witness())?;
    let proof = cuzk_circuits::snap::api_name(size);
    print_witnesses(&w, &proof, "challenges", partition.challenges());
    Ok(())
}

/// The witness paths of a synthetic partition of `proof` with `n` of `what` (its sectors or
/// challenges) as a table, then one JSON object.
fn print_witnesses(w: &Witnesses, proof: &str, what: &str, n: usize) {
    let ratio = w.gadget_core_s / w.native_core_s;
    println!("| {proof} | {what} | aux | ms | core-s |");
    println!("|---|---|---|---|---|");
    let aux = w.witness.aux.len();
    println!(
        "| gadgets (witness-only) | {n} | {aux} | {:.0} | {:.2} |",
        w.gadget_ms, w.gadget_core_s
    );
    println!(
        "| native, {} threads | {n} | {aux} | {:.0} | {:.2} |",
        w.threads, w.native_ms, w.native_core_s
    );
    println!(
        "| native, 1 thread | {n} | {aux} | {:.0} | |",
        w.native_1t_ms
    );
    // CPU time is read in clock ticks (10 ms): a small partition's native run may read zero.
    println!(
        "equal element for element; gadgets / native: wall {:.1}×, core-s {ratio:.1}×",
        w.gadget_ms / w.native_ms
    );
    println!(
        "{}",
        json!({
            "proof": proof,
            what: n,
            "threads": w.threads,
            "aux": aux,
            "witness_synth_ms": w.gadget_ms,
            "witness_synth_core_s": w.gadget_core_s,
            "native_witness_ms": w.native_ms,
            "native_witness_core_s": w.native_core_s,
            "native_witness_1t_ms": w.native_1t_ms,
            "witness_synth_over_native_core_s": ratio,
            "equal": true,
        })
    );
}

/// `--witness-only`: the witness paths alone, for shapes whose full synthesis and matrices are
/// too large to take along (a 32 GiB partition); one JSON object.
fn witness_only(sector: &SealedSector, family: &dyn cuzk_circuits::CircuitFamily) -> Result<()> {
    let c1 = &sector.c1_json;
    let w = witnesses(
        || family.gadget_witness(c1, 0, None),
        || family.witness(c1, 0, None),
    )?;
    println!(
        "{}",
        json!({
            "sector_size": sector.size.name(),
            "threads": w.threads,
            "aux": w.witness.aux.len(),
            "witness_synth_ms": w.gadget_ms,
            "witness_synth_core_s": w.gadget_core_s,
            "native_witness_ms": w.native_ms,
            "native_witness_core_s": w.native_core_s,
            "native_witness_1t_ms": w.native_1t_ms,
            "witness_synth_over_native_core_s": w.gadget_core_s / w.native_core_s,
            "equal": true,
        })
    );
    Ok(())
}

pub fn run(sector: &SealedSector, as_json: bool, only_witness: bool) -> Result<()> {
    let family = cuzk_circuits::resolve("porep-c2", &crate::job_params(sector))?;
    let c1 = &sector.c1_json;
    // The C1 is parsed and its vanilla proofs verified once per family; keep that out of every
    // synthesis time.
    family.public_inputs(c1, 0)?;
    if only_witness {
        return witness_only(sector, family.as_ref());
    }

    let t = Instant::now();
    let matrices = family.capture_matrices()?;
    let capture_ms = ms(t);
    let t = Instant::now();
    let full = family.recording(c1, 0)?;
    let synth_ms = ms(t);
    // What the evaluations-carrying blob of format 1 held: the witness, A/B/C and three
    // densities (one bit per variable).
    let old_raw = 32 * (full.input.len() + full.aux.len() + 3 * full.num_constraints()) as u64;
    drop(full);
    let capacity = Some((matrices.inputs, matrices.aux));
    let ws = witnesses(
        || family.gadget_witness(c1, 0, capacity),
        || family.witness(c1, 0, capacity),
    )?;
    let (threads, witness_synth_ms, native_witness_ms, native_witness_1t_ms, w) = (
        ws.threads,
        ws.gadget_ms,
        ws.native_ms,
        ws.native_1t_ms,
        ws.witness,
    );

    let info = BlobHeaderInfo::new("stats", 0, family.shape_key(), matrices.hash())?;
    let t = Instant::now();
    let (blob, stats) = encode_blob_with_stats(&info, &w.input, &w.aux, &EncodeOptions::default());
    let encode_ms = ms(t);
    let t = Instant::now();
    decode_blob(&blob, &DecodeLimits::default())?;
    let decode_ms = ms(t);

    let out = json!({
        "sector_size": sector.size.name(),
        "threads": threads,
        "constraints": matrices.constraints(),
        "inputs": matrices.inputs,
        "aux": matrices.aux,
        "matrix_nonzeros": matrices.nnz(),
        "matrix_nonzeros_abc": [matrices.a.nnz(), matrices.b.nnz(), matrices.c.nnz()],
        "matrix_coefficients": matrices.coeffs.len(),
        "matrix_bytes": matrices.bytes(),
        "matrix_capture_ms": capture_ms,
        "raw_bytes": stats.raw_bytes,
        "encoded_bytes": stats.encoded_bytes,
        "blob_bytes": stats.compressed_bytes,
        "evaluations_raw_bytes": old_raw,
        "synth_ms": synth_ms,
        "witness_synth_ms": witness_synth_ms,
        "witness_over_full_synth": witness_synth_ms / synth_ms,
        "native_witness_ms": native_witness_ms,
        "native_witness_1t_ms": native_witness_1t_ms,
        "witness_synth_core_s": ws.gadget_core_s,
        "native_witness_core_s": ws.native_core_s,
        "witness_synth_over_native": witness_synth_ms / native_witness_ms,
        "witness_synth_over_native_1t": witness_synth_ms / native_witness_1t_ms,
        "encode_ms": encode_ms,
        "decode_ms": decode_ms,
    });
    if as_json {
        println!("{out}");
        return Ok(());
    }
    println!(
        "{} partition 0: {} constraints, {} inputs, {} aux; matrices {} non-zeros (A/B/C {}/{}/{}), {} coefficients, {:.1} MB, captured in {capture_ms:.0} ms",
        sector.size.name(),
        matrices.constraints(),
        matrices.inputs,
        matrices.aux,
        matrices.nnz(),
        matrices.a.nnz(),
        matrices.b.nnz(),
        matrices.c.nnz(),
        matrices.coeffs.len(),
        matrices.bytes() as f64 / 1e6
    );
    println!(
        "synthesis ({threads} threads available; one partition runs on one): full {synth_ms:.0} ms, witness-only {witness_synth_ms:.0} ms ({:.2}×)",
        witness_synth_ms / synth_ms
    );
    println!(
        "native witness (equal to the gadgets'): {native_witness_ms:.0} ms on {threads} threads ({:.1}× faster than witness-only), {native_witness_1t_ms:.0} ms on one ({:.1}×)",
        witness_synth_ms / native_witness_ms,
        witness_synth_ms / native_witness_1t_ms
    );
    println!("| vector | elements | 0 | 1 | small | −small | full | raw MB | codec MB | zstd MB |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mb = |b: u64| b as f64 / 1e6;
    for v in &stats.vectors {
        let c = &v.classes;
        let pct = |n: u64| format!("{:.1} %", 100.0 * n as f64 / c.total().max(1) as f64);
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
            v.kind,
            v.elements,
            pct(c.zero),
            pct(c.one),
            pct(c.small),
            pct(c.neg_small),
            pct(c.full),
            mb(v.raw_bytes),
            mb(v.encoded_bytes),
            mb(v.compressed_bytes)
        );
    }
    println!(
        "| blob | | | | | | | {:.2} | {:.2} | {:.3} (×{:.1}) |",
        mb(stats.raw_bytes),
        mb(stats.encoded_bytes),
        mb(stats.compressed_bytes),
        stats.ratio()
    );
    println!(
        "encode {encode_ms:.1} ms, decode {decode_ms:.1} ms; format 1 (with A/B/C and densities) held {:.1} MB raw",
        mb(old_raw)
    );
    Ok(())
}
