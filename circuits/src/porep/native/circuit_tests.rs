//! Whole partitions: the native witness equals the gadget circuit's witness-only synthesis
//! element for element, for real sealed sectors (2 KiB, 8 MiB, every partition) and synthetic
//! ones of every size, and a perturbed generator is caught.

use bellperson::ConstraintSystem;
use blstrs::Scalar;
use cuzk_prover::witness_cs::WitnessCs;
use cuzk_wire::witness::Witness;
use ff::Field;
use filecoin_hashers::Domain;
use filecoin_proofs::constants::{
    DefaultPieceDomain, SectorShape32GiB, SectorShape64GiB, SectorShapeBase,
};
use filecoin_proofs::{
    as_safe_commitment, DefaultPieceHasher, MerkleTreeTrait, SealCommitPhase1Output,
};
use rand::SeedableRng;
use serde_json::json;
use storage_proofs_porep::stacked::StackedCircuit;

use super::layout::Task;
use super::parts::{partition, Shape};
use super::tests::first_difference;
use super::{generate, Layout, Options};
use crate::porep::synthetic::{partition_proofs, random_domain};
use crate::porep::{seal_sector, PorepC2Family, SealedSector, SectorSize};
use crate::CircuitFamily;

fn sealed(size: SectorSize, seed: u64) -> (tempfile::TempDir, SealedSector) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let sector = seal_sector(size, dir.path(), 42, [7; 32], &mut rng).unwrap();
    (dir, sector)
}

fn family(sector: &SealedSector) -> PorepC2Family {
    PorepC2Family::from_params(&sector.job_params()).unwrap()
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
        let aux = layout.prologue + shape.challenges * layout.per_challenge();
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

/// Partition `k` of a C1 through the native generator.
fn native<Tree: 'static + MerkleTreeTrait>(
    c1: &[u8],
    size: SectorSize,
    k: usize,
    opts: Options,
) -> Witness {
    let c1: SealCommitPhase1Output<Tree> = serde_json::from_slice(c1).unwrap();
    let (shape, layout) = layout::<Tree>(size);
    let comm_r = as_safe_commitment(&c1.comm_r, "comm_r").unwrap();
    let comm_d = DefaultPieceDomain::try_from_bytes(&c1.comm_d).unwrap();
    let p = partition::<Tree>(
        &c1.vanilla_proofs[k],
        &c1.replica_id,
        &comm_d,
        &comm_r,
        &shape,
    );
    generate(&p.unwrap(), &layout, opts).unwrap()
}

/// Real sealed sectors: every partition's native witness equals the gadget circuit's
/// witness-only synthesis.
#[test]
fn real_sectors_equal_the_gadget_witness() {
    for (size, seed) in [(SectorSize::S2KiB, 11), (SectorSize::S8MiB, 12)] {
        let (_dir, sector) = sealed(size, seed);
        let f = family(&sector);
        for k in 0..f.partitions() {
            let native = native::<SectorShapeBase>(&sector.c1_json, size, k, Options::new(true));
            let gadget = f.witness(&sector.c1_json, k, None).unwrap();
            let what = format!("{} partition {k}", size.name());
            assert_eq!(first_difference(&native, &gadget), None, "{what}");
        }
    }
}

/// Synthetic C1s (random data, checks off): a whole 2 KiB partition, and
/// one challenge of each larger size (512 MiB; 32 GiB's 11 layers and U8/U8 trees; 64 GiB's
/// U2 top tree) against the circuit synthesized over that challenge alone.
#[test]
fn synthetic_partitions_of_every_size_equal_the_gadget_witness() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
    let c1 = crate::porep::synthetic_c1(SectorSize::S2KiB, &mut rng).unwrap();
    let f = PorepC2Family::from_params(&json!({"sector_size": "2KiB", "sector_id": 5,
        "prover_id": "07".repeat(32), "synthetic": true}))
    .unwrap();
    let native = native::<SectorShapeBase>(&c1, SectorSize::S2KiB, 0, Options::new(false));
    let gadget = f.witness(&c1, 0, None).unwrap();
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
    let f = family(&sector);
    let honest = native::<Tree>(&sector.c1_json, SectorSize::S2KiB, 0, Options::new(true));
    let gadget = f.witness(&sector.c1_json, 0, None).unwrap();
    assert_eq!(first_difference(&honest, &gadget), None);

    let opts = Options {
        checked: true,
        flip_carry: Some((0, 1)),
    };
    let perturbed = native::<Tree>(&sector.c1_json, SectorSize::S2KiB, 0, opts);
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
