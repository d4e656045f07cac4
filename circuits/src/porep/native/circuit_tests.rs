//! Whole partitions: the native witness equals the gadget circuit's witness-only synthesis
//! element for element, and a perturbed generator is caught.

use blstrs::Scalar;
use cuzk_wire::witness::Witness;
use ff::Field;
use filecoin_hashers::Domain;
use filecoin_proofs::constants::{DefaultPieceDomain, SectorShapeBase};
use filecoin_proofs::{as_safe_commitment, MerkleTreeTrait, SealCommitPhase1Output};
use rand::SeedableRng;

use super::layout::Task;
use super::parts::{partition, Shape};
use super::tests::first_difference;
use super::{generate, Layout, Options};
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

/// Partition `k` of a sealed sector through the native generator.
fn native<Tree: 'static + MerkleTreeTrait>(
    sector: &SealedSector,
    k: usize,
    opts: Options,
) -> Witness {
    let c1: SealCommitPhase1Output<Tree> = serde_json::from_slice(&sector.c1_json).unwrap();
    let (shape, layout) = layout::<Tree>(sector.size);
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
    for (size, seed) in [(SectorSize::S2KiB, 11)] {
        let (_dir, sector) = sealed(size, seed);
        let f = family(&sector);
        for k in 0..f.partitions() {
            let native = native::<SectorShapeBase>(&sector, k, Options::new(true));
            let gadget = f.witness(&sector.c1_json, k, None).unwrap();
            let what = format!("{} partition {k}", size.name());
            assert_eq!(first_difference(&native, &gadget), None, "{what}");
        }
    }
}

/// A generator that flips one carry bit (the first addition of challenge 0's layer-1 label) is
/// caught by the equality check, at that bit.
#[test]
fn a_flipped_carry_bit_is_caught() {
    type Tree = SectorShapeBase;
    let (_dir, sector) = sealed(SectorSize::S2KiB, 13);
    let f = family(&sector);
    let honest = native::<Tree>(&sector, 0, Options::new(true));
    let gadget = f.witness(&sector.c1_json, 0, None).unwrap();
    assert_eq!(first_difference(&honest, &gadget), None);

    let opts = Options {
        checked: true,
        flip_carry: Some((0, 1)),
    };
    let perturbed = native::<Tree>(&sector, 0, opts);
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
