//! The native SnapDeals witness against the gadgets' witness-only synthesis, element for
//! element: a real 2 KiB partition, synthetic partitions of every sector size's circuit, a
//! perturbed generator the comparison catches, and tampered partitions the generator's own
//! checks refuse.

use ff::Field;
use filecoin_proofs::SectorShapeBase;
use rand::SeedableRng;

use super::native::{self, NativeError, Options, Partition};
use super::*;
use crate::native::tests::first_difference;
use crate::vanilla::input;

fn updated(dir: &std::path::Path, seed: u64) -> UpdatedSector {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    update_sector(SectorSize::S2KiB, dir, &mut rng).unwrap()
}

#[test]
fn a_real_partition_equals_the_gadget_witness() {
    let dir = tempfile::tempdir().unwrap();
    let sector = updated(dir.path(), 11);
    let good = input(&sector.vanilla_proofs);
    let f = sector.family();
    let native = f
        .native_witness::<SectorShapeBase>(&good, 0)
        .unwrap()
        .expect("2 KiB has a native generator");
    let gadget = f.gadget_witness(&good, 0, None).unwrap();
    assert_eq!(first_difference(&native, &gadget), None);
    assert_eq!(f.witness(&good, 0, None).unwrap(), native);
    assert_eq!(native.input[1..], f.public_inputs(&good, 0).unwrap()[..]);
}

/// Real 8 MiB partitions: a partition path of two levels and 128 apex leaves, from data.
#[test]
fn real_8mib_partitions_equal_the_gadget_witness() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(13);
    let started = std::time::Instant::now();
    let sector = update_sector(SectorSize::S8MiB, dir.path(), &mut rng).unwrap();
    eprintln!("8 MiB fixture: {:.1} s", started.elapsed().as_secs_f64());
    let good = input(&sector.vanilla_proofs);
    let f = sector.family();
    for k in [0, 3] {
        let native = f
            .native_witness::<SectorShapeBase>(&good, k)
            .unwrap()
            .expect("8 MiB has a native generator");
        let gadget = f.gadget_witness(&good, k, None).unwrap();
        assert_eq!(first_difference(&native, &gadget), None, "partition {k}");
        // What the GPU node verifies against: derived from the commitments alone.
        let job = f.public_inputs(&good, k).unwrap();
        assert_eq!(native.public_inputs(), &job[..], "partition {k}");
    }
    eprintln!(
        "8 MiB fixture and two partitions: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Every sector size's circuit (tree R of 8-ary base levels, 32 GiB with a sub tree of 8,
/// 64 GiB a top tree of 2 more; tree D from 6 to 31 levels; 8 or 128 apex leaves; 1, 4 or 16
/// partitions), cut to two challenges but for 2 KiB, which keeps its ten.
#[test]
fn synthetic_partitions_of_every_size_equal_the_gadget_witness() {
    for size in SectorSize::ALL {
        let challenges = (size != SectorSize::S2KiB).then_some(2);
        let p = SyntheticSnap::new(size, challenges, 3).unwrap();
        let (native, gadget) = (p.native_witness().unwrap(), p.gadget_witness().unwrap());
        assert_eq!(first_difference(&native, &gadget), None, "{}", size.name());
    }
}

/// The real 2 KiB partition in the generator's form.
fn real_partition() -> (Partition, native::Layout) {
    let dir = tempfile::tempdir().unwrap();
    let sector = updated(dir.path(), 12);
    let f = sector.family();
    f.native_partition::<SectorShapeBase>(&input(&sector.vanilla_proofs), 0)
        .unwrap()
        .unwrap()
}

/// Hashing phi's two commitments in the wrong order keeps every count and changes values: the
/// comparison with the gadgets catches it (and the generator's own check refuses it).
#[test]
fn a_swapped_phi_is_caught() {
    let p = SyntheticSnap::new(SectorSize::S2KiB, None, 4).unwrap();
    let gadget = p.gadget_witness().unwrap();
    let layout = p.layout().unwrap();
    let generate = |swap_phi| {
        let opts = Options {
            unchecked: true,
            swap_phi,
        };
        native::generate(&p.partition, &layout, opts).unwrap()
    };
    assert_eq!(first_difference(&generate(false), &gadget), None);
    let diff = first_difference(&generate(true), &gadget);
    eprintln!("swapped phi: {diff:?}");
    assert!(
        diff.as_ref().is_some_and(|d| d.starts_with("aux[")),
        "{diff:?}"
    );
    let (real, layout) = real_partition();
    let checked = Options {
        swap_phi: true,
        ..Options::default()
    };
    let e = native::generate(&real, &layout, checked).unwrap_err();
    assert!(matches!(e, NativeError::Encoding { .. }), "{e}");
}

/// A tampered partition fails with the reason, as the circuit's unsatisfied constraint would,
/// never a wrong witness.
#[test]
fn tampered_partitions_fail_with_their_reason() {
    let (real, layout) = real_partition();
    assert!(native::generate(&real, &layout, Options::default()).is_ok());
    let tampered = |edit: &dyn Fn(&mut Partition)| {
        let mut p = real.clone();
        edit(&mut p);
        native::generate(&p, &layout, Options::default()).unwrap_err()
    };
    let one = Scalar::ONE;
    assert_eq!(tampered(&|p| p.comm_c += one), NativeError::CommROld);
    assert_eq!(
        tampered(&|p| p.challenges[3].leaf_r_new += one),
        NativeError::Encoding { challenge: 3 }
    );
    assert_eq!(
        tampered(&|p| p.challenges[4].leaf_d_new += one),
        NativeError::Encoding { challenge: 4 }
    );
    assert_eq!(
        tampered(&|p| p.challenges[2].path_r_old[1][5] += one),
        NativeError::PathROld { challenge: 2 }
    );
    assert_eq!(
        tampered(&|p| p.challenges[7].path_r_new[0][0] += one),
        NativeError::PathRNew { challenge: 7 }
    );
    assert_eq!(
        tampered(&|p| p.challenges[1].path_d[2] += one),
        NativeError::PathD { challenge: 1 }
    );
    // Every challenge and the apex tree depend on these: one of their checks fails.
    let e = tampered(&|p| p.apex_leaves[5] += one);
    assert!(
        matches!(e, NativeError::CommD | NativeError::PathD { .. }),
        "{e}"
    );
    let e = tampered(&|p| p.comm_d_new += one);
    assert!(
        matches!(e, NativeError::CommD | NativeError::Encoding { .. }),
        "{e}"
    );
    let e = tampered(&|p| p.root_r_new += one);
    assert!(
        matches!(e, NativeError::CommRNew | NativeError::PathRNew { .. }),
        "{e}"
    );
    let shape = |edit: &dyn Fn(&mut Partition)| {
        let e = tampered(edit);
        assert!(matches!(e, NativeError::Shape(_)), "{e}");
    };
    shape(&|p| {
        p.challenges.pop();
    });
    shape(&|p| {
        p.apex_leaves.pop();
    });
    shape(&|p| {
        p.challenges[0].path_r_old[1].pop();
    });
    shape(&|p| {
        p.challenges[9].path_d.pop();
    });
    shape(&|p| p.k = 1);
}
