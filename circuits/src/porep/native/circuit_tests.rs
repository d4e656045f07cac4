//! Whole partitions: the native witness equals the gadget circuit's witness-only synthesis
//! element for element, for real sealed sectors (2 KiB, 8 MiB, every partition), synthetic ones
//! of every size, a perturbed generator is caught, and tampered C1s fail with their reason.

use bellperson::ConstraintSystem;
use blstrs::Scalar;
use cuzk_prover::witness_cs::WitnessCs;
use ff::Field;
use filecoin_proofs::constants::{SectorShape32GiB, SectorShape64GiB, SectorShapeBase};
use filecoin_proofs::{DefaultPieceHasher, MerkleTreeTrait, SealCommitPhase1Output};
use std::time::Instant;

use rand::SeedableRng;
use serde_json::{json, Value};
use storage_proofs_porep::stacked::StackedCircuit;

use super::layout::Task;
use super::parts::{partition, Shape};
use super::{generate, Layout, Options};
use crate::filecoin::{with_tree, SectorSize};
use crate::native::tests::first_difference;
use crate::porep::synthetic::{partition_proofs, random_domain};
use crate::porep::{seal_sector, PorepC2Family, SealedSector};
use crate::{CircuitError, CircuitFamily};

fn sealed(size: SectorSize, seed: u64) -> (tempfile::TempDir, SealedSector) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let sector = seal_sector(size, dir.path(), 42, [7; 32], &mut rng).unwrap();
    (dir, sector)
}

fn family(params: &Value) -> PorepC2Family {
    PorepC2Family::from_params(params).unwrap()
}

fn layout<Tree: MerkleTreeTrait>(size: SectorSize) -> (Shape, Layout) {
    let shape = Shape::of::<Tree>(&size.config()).unwrap();
    let layout = Layout::new(&shape).expect("the native generator knows every sector size");
    (shape, layout)
}

/// Every sector size has a native layout, of the measured length where it was measured.
#[test]
fn every_sector_size_has_a_native_layout() {
    for size in SectorSize::ALL {
        let (shape, layout) = with_tree!(size, Tree => layout::<Tree>(size));
        let per_challenge: usize = layout.tasks.iter().map(|(_, n)| n).sum();
        let aux = layout.prologue + shape.challenges * per_challenge;
        let measured = match size {
            SectorSize::S2KiB => Some(2_685_673),
            SectorSize::S8MiB => Some(3_842_449),
            SectorSize::S512MiB => Some(4_420_837),
            SectorSize::S32GiB => Some(130_169_893),
            SectorSize::S64GiB => None,
        };
        if let Some(m) = measured {
            assert_eq!(aux, m, "{}", size.name());
        }
    }
}

/// Real sealed sectors: every partition's native witness equals the gadget circuit's
/// witness-only synthesis, and is what the family's `witness` returns.
#[test]
fn real_sectors_equal_the_gadget_witness() {
    for (size, seed) in [(SectorSize::S2KiB, 11), (SectorSize::S8MiB, 12)] {
        let (_dir, sector) = sealed(size, seed);
        every_partition_equals_the_gadget_witness(&sector);
    }
}

/// Each partition of a real sector: the native witness equals the gadgets', and is what the
/// family's `witness` returns.
fn every_partition_equals_the_gadget_witness(sector: &SealedSector) {
    let f = family(&sector.job_params());
    let c1 = &sector.c1_json;
    assert!(f.partitions() >= 1);
    for k in 0..f.partitions() {
        let native = f.native_witness::<SectorShapeBase>(c1, k, Options::new(true));
        let native = native.unwrap().expect("a known shape");
        let gadget = f.gadget_witness(c1, k, None).unwrap();
        let what = format!("{} partition {k}", sector.size.name());
        assert_eq!(first_difference(&native, &gadget), None, "{what}");
        assert!(f.witness(c1, k, None).unwrap() == native, "{what}");
    }
}

/// A real 512 MiB sector, too slow to seal here (minutes on 16 cores): its C1 output as
/// `cuzk-porep fixture --sector-size 512MiB` wrote it, for prover
/// `87a37c6a…2bd0` and sector 1. Every partition's native witness equals the gadget circuit's.
#[test]
fn a_real_512mib_sector_equals_the_gadget_witness() {
    let packed = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/c1-512mib-sector1.json.zst"
    ));
    let prover_id = "87a37c6a9e269f680dd6e29662f8352e826ba525b233f610f0d1cb4a352a2bd0";
    let size = SectorSize::S512MiB;
    let sector = SealedSector {
        size,
        proof: crate::porep_c1::SealProof::v1_1(size),
        sector_id: 1,
        prover_id: std::array::from_fn(|i| {
            u8::from_str_radix(&prover_id[2 * i..2 * i + 2], 16).unwrap()
        }),
        c1_json: zstd::decode_all(&packed[..]).unwrap(),
    };
    every_partition_equals_the_gadget_witness(&sector);
}

/// Synthetic C1s (random data, checks off): a whole 2 KiB partition through the family, and
/// one challenge of each larger size (512 MiB; 32 GiB's 11 layers and U8/U8 trees; 64 GiB's
/// U2 top tree) against the circuit synthesized over that challenge alone.
#[test]
fn synthetic_partitions_of_every_size_equal_the_gadget_witness() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
    let c1 = crate::porep::synthetic_c1(SectorSize::S2KiB, &mut rng).unwrap();
    let f = family(&json!({"sector_size": "2KiB", "sector_id": 5,
        "prover_id": "07".repeat(32), "synthetic": true}));
    let native = f.witness(&c1, 0, None).unwrap();
    let gadget = f.gadget_witness(&c1, 0, None).unwrap();
    assert_eq!(first_difference(&native, &gadget), None, "synthetic 2KiB");

    one_challenge::<SectorShapeBase>(SectorSize::S512MiB);
    one_challenge::<SectorShape32GiB>(SectorSize::S32GiB);
    one_challenge::<SectorShape64GiB>(SectorSize::S64GiB);
}

fn one_challenge<Tree: 'static + MerkleTreeTrait>(size: SectorSize) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(size.bytes());
    let proofs = partition_proofs::<Tree>(size, &mut rng).unwrap();
    let proofs = &proofs[..1];
    let replica_id = random_domain(&mut rng);
    let comm_d = random_domain(&mut rng);
    let comm_r = random_domain(&mut rng);

    let mut cs = WitnessCs::new();
    cs.alloc_input(|| "one", || Ok(Scalar::ONE)).unwrap();
    StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
        &mut cs,
        Some(replica_id),
        Some(comm_d),
        Some(comm_r),
        Some(proofs[0].comm_r_last()),
        Some(proofs[0].comm_c()),
        proofs.iter().cloned().map(Into::into).collect(),
    )
    .unwrap();
    let gadget = cs.finish();

    let (mut shape, _) = layout::<Tree>(size);
    shape.challenges = 1;
    let layout = Layout::new(&shape).unwrap();
    let p = partition::<Tree>(proofs, &replica_id, &comm_d, &comm_r, &shape).unwrap();
    let native = generate(&p, &layout, Options::new(false)).unwrap();
    assert_eq!(first_difference(&native, &gadget), None, "{}", size.name());
}

/// A generator that flips one carry bit (the first addition of challenge 0's layer-1 label) is
/// caught by the equality check, at that bit.
#[test]
fn a_flipped_carry_bit_is_caught() {
    type Tree = SectorShapeBase;
    let (_dir, sector) = sealed(SectorSize::S2KiB, 13);
    let f = family(&sector.job_params());
    let c1 = &sector.c1_json;
    let honest = f.witness(c1, 0, None).unwrap();
    let gadget = f.gadget_witness(c1, 0, None).unwrap();
    assert_eq!(first_difference(&honest, &gadget), None);

    let opts = Options {
        checked: true,
        flip_carry: Some((0, 1)),
    };
    let perturbed = f.native_witness::<Tree>(c1, 0, opts).unwrap().unwrap();
    let flipped: Vec<usize> = (0..honest.aux.len())
        .filter(|&i| honest.aux[i] != perturbed.aux[i])
        .collect();
    assert_eq!(flipped.len(), 1, "{flipped:?}");
    let i = flipped[0];
    assert_eq!(
        honest.aux[i] + perturbed.aux[i],
        Scalar::ONE,
        "a bit flipped"
    );
    let (_, layout) = layout::<Tree>(SectorSize::S2KiB);
    let pos = layout
        .tasks
        .iter()
        .position(|(t, _)| *t == Task::Label(1))
        .unwrap();
    let start = layout.prologue + layout.tasks[..pos].iter().map(|(_, n)| n).sum::<usize>();
    let label = start..start + layout.tasks[pos].1;
    assert!(
        label.contains(&i),
        "{i} is not in challenge 0's layer-1 label {label:?}"
    );

    let report = first_difference(&perturbed, &gadget).expect("the flip is caught");
    eprintln!("perturbed generator vs gadget: {report}");
    assert!(report.starts_with(&format!("aux[{i}] differs")), "{report}");
}

/// Flips the first byte of the node at `path` in a C1's JSON.
fn flip(c1: &mut Value, path: &[&str]) {
    let mut v = c1;
    for key in path {
        v = match key.parse::<usize>() {
            Ok(i) => &mut v[i],
            Err(_) => &mut v[*key],
        };
    }
    let byte = v[0]
        .as_u64()
        .unwrap_or_else(|| panic!("no node at {path:?}"));
    v[0] = json!(byte ^ 1);
}

/// Tampered C1s: the family refuses them (their vanilla proofs no longer verify), and the
/// native generator on its own fails each with the reason the circuit would be unsatisfied.
#[test]
fn tampered_c1s_fail_with_their_reason() {
    type Tree = SectorShapeBase;
    let (_dir, sector) = sealed(SectorSize::S2KiB, 14);
    let f = family(&sector.job_params());
    let (shape, layout) = layout::<Tree>(SectorSize::S2KiB);
    let original: Value = serde_json::from_slice(&sector.c1_json).unwrap();
    let challenge = ["vanilla_proofs", "0", "0"];
    let at = |rest: &[&'static str]| [&challenge[..], rest].concat();
    let cases = [
        (
            at(&["replica_column_proofs", "c_x", "column", "rows", "0"]),
            "challenge 0: the layer 1 label does not match the challenged column",
        ),
        (
            at(&[
                "comm_d_proofs",
                "data",
                "Single",
                "path",
                "path",
                "0",
                "hashes",
                "0",
            ]),
            "challenge 0: the tree D path of the data leaf does not hash to its root",
        ),
        (
            at(&["comm_r_last_proof", "data", "Single", "leaf"]),
            "challenge 0: the encoded node is not tree R's leaf (encoding mismatch)",
        ),
        (
            at(&[
                "replica_column_proofs",
                "drg_parents",
                "2",
                "column",
                "rows",
                "1",
            ]),
            "challenge 0: the tree C path of drg parent 2's column does not hash to its root",
        ),
        (vec!["comm_r"], "comm_r is not H(comm_c, comm_r_last)"),
    ];
    let one_thread = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for (path, reason) in cases {
        let mut c1 = original.clone();
        flip(&mut c1, &path);
        let e = f
            .witness(&serde_json::to_vec(&c1).unwrap(), 0, None)
            .unwrap_err();
        assert!(matches!(e, CircuitError::BadInput { .. }), "{path:?}: {e}");

        let parsed: SealCommitPhase1Output<Tree> = serde_json::from_value(c1).unwrap();
        let opts = Options::new(true);
        // On one thread the tasks run in aux order, so the first failing check is reported.
        let e = one_thread
            .install(|| f.native_partition(&parsed, 0, &shape, &layout, opts))
            .unwrap_err();
        assert!(matches!(e, CircuitError::BadInput { .. }), "{path:?}: {e}");
        assert_eq!(
            e.to_string(),
            format!("bad input for circuit 'porep-c2': partition 0: {reason}"),
            "{path:?}"
        );
    }
}

/// Partition 0 of a synthetic 32 GiB C1: the native generator on every core and on one, then
/// the gadgets (one thread), compared; prints the times. Needs ~9 GiB and minutes:
/// `cargo test -p cuzk-circuits --release --features porep -- --ignored synthetic_32gib`.
#[test]
#[ignore]
fn synthetic_32gib_partition_0() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(32);
    let c1 = crate::porep::synthetic_c1(SectorSize::S32GiB, &mut rng).unwrap();
    let f = family(&json!({"sector_size": "32GiB", "sector_id": 5,
        "prover_id": "07".repeat(32), "synthetic": true}));
    // Parse the C1 outside the timings.
    f.public_inputs(&c1, 0).unwrap();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    // A first run only warms the memory the timed ones reuse (first touches of fresh memory
    // dominate on some virtual machines).
    drop(f.witness(&c1, 0, None).unwrap());
    let t = Instant::now();
    drop(f.witness(&c1, 0, None).unwrap());
    let native_all = t.elapsed();
    let t = Instant::now();
    let native = one.install(|| f.witness(&c1, 0, None)).unwrap();
    let native_1t = t.elapsed();
    let capacity = Some((native.input.len(), native.aux.len()));
    let t = Instant::now();
    let gadget = f.gadget_witness(&c1, 0, capacity).unwrap();
    let gadget_1t = t.elapsed();
    eprintln!(
        "32GiB partition 0: {} aux; native {native_1t:.2?} on one thread, {native_all:.2?} on {}; gadget witness-only {gadget_1t:.2?}",
        native.aux.len(),
        rayon::current_num_threads()
    );
    assert_eq!(first_difference(&native, &gadget), None);
}
