//! Synthesis and CPU proving measurements for the sha256 circuit, against bellperson.
//!
//! `cargo run -p cuzk-circuits --example sha256_bench -- [SYNTH_BLOCKS,...] [PROVE_BLOCKS]`
//! e.g. `-- 1,4,16,38 4`. Proving uses (insecure) test parameters from the default shape cache,
//! generated there on first use.

use std::time::Instant;

use bellperson::groth16::create_proof_batch;
use blstrs::Scalar;
use cuzk_circuits::{CircuitFamily, Sha256Family, ShapeCache};
use cuzk_prover::{proof_bytes, prove_timed, Backend, CpuBackend};
use ff::Field;
use rand::SeedableRng;

fn main() {
    let mut args = std::env::args().skip(1);
    let synth: Vec<usize> = args
        .next()
        .unwrap_or_else(|| "1,4".into())
        .split(',')
        .map(|b| b.parse().expect("block counts are integers"))
        .collect();
    let prove_blocks: Option<usize> = args.next().map(|b| b.parse().expect("an integer"));
    let input = b"cuzk sha256 bench";

    println!("blocks constraints aux inputs synth_s witness_s");
    for blocks in synth {
        let family = Sha256Family::new(blocks, 1).unwrap();
        let start = Instant::now();
        let asg = family.recording(input, 0).unwrap();
        let t = start.elapsed().as_secs_f64();
        let start = Instant::now();
        family.witness(input, 0, None).unwrap();
        let w = start.elapsed().as_secs_f64();
        println!(
            "{blocks} {} {} {} {t:.3} {w:.3}",
            asg.num_constraints(),
            asg.aux.len(),
            asg.input.len()
        );
    }

    let Some(blocks) = prove_blocks else { return };
    let family = Sha256Family::new(blocks, 1).unwrap();
    let start = Instant::now();
    let key = ShapeCache::open_default(true)
        .unwrap()
        .proving_key(&family)
        .unwrap();
    let params = key.srs.parameters().unwrap();
    println!(
        "params for {}: {:.1}s",
        family.shape_key(),
        start.elapsed().as_secs_f64()
    );
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));

    let start = Instant::now();
    let w = family.witness(input, 0, None).unwrap();
    let synth_s = start.elapsed().as_secs_f64();
    let loaded = CpuBackend.load_key(key).unwrap();
    let (ours, t) = prove_timed(&CpuBackend, &loaded, &w, r, s).unwrap();
    println!(
        "cuzk: witness {synth_s:.2}s, prove {:.2}s (spmv {:.2}s, h {:.2}s, msm {:.2}s), total {:.2}s",
        t.total.as_secs_f64(),
        t.spmv.as_secs_f64(),
        t.h.as_secs_f64(),
        t.msm.as_secs_f64(),
        synth_s + t.total.as_secs_f64()
    );

    let circuit = family.circuit(input, 0).unwrap();
    let start = Instant::now();
    let theirs = create_proof_batch(vec![circuit], &*params, vec![r], vec![s]).unwrap();
    println!(
        "bellperson create_proof_batch (synth + prove): {:.2}s",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(proof_bytes(&ours), proof_bytes(&theirs[0]), "proofs differ");
    println!("proofs identical");
}
