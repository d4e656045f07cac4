//! The native PoSt witness against the gadgets' witness-only synthesis, element for element:
//! real 2 KiB partitions (WindowPoSt with its two sectors and with one, padded; WinningPoSt),
//! synthetic partitions of every sector size's tree, a perturbed generator the comparison
//! catches, and tampered partitions the generator's own checks refuse.

use ff::Field;
use filecoin_proofs::SectorShape2KiB;
use serde_json::json;

use super::native::{self, NativeError, Options};
use super::tests::{params, proofs_for, sectors, RANDOMNESS};
use super::*;
use crate::native::tests::first_difference;
use crate::vanilla::input;

fn proof(kind: PostKind, size: SectorSize) -> PostProof {
    PostProof::current(kind, size)
}

#[test]
fn real_partitions_equal_the_gadget_witness() {
    let dir = tempfile::tempdir().unwrap();
    let sealed = sectors(dir.path());
    for kind in [PostKind::Window, PostKind::Winning] {
        let all = proofs_for(kind, &sealed, RANDOMNESS);
        let mut inputs = vec![input(&all)];
        if kind == PostKind::Window {
            inputs.push(input(&all[..1]));
        }
        let f = PostFamily::from_params(kind, &params(json!({}))).unwrap();
        for good in inputs {
            let native = f.witness(&good, 0, None).unwrap();
            let gadget = f.gadget_witness(&good, 0, None).unwrap();
            assert_eq!(first_difference(&native, &gadget), None, "{kind:?}");
        }
    }
}

/// Every sector size's tree (base levels of arity 8; 32 GiB adds a sub tree of 8, 64 GiB a top
/// tree of 2), two sectors, the proof's own challenge count.
#[test]
fn synthetic_partitions_of_every_size_equal_the_gadget_witness() {
    for size in [
        SectorSize::S2KiB,
        SectorSize::S8MiB,
        SectorSize::S512MiB,
        SectorSize::S32GiB,
        SectorSize::S64GiB,
    ] {
        for kind in [PostKind::Window, PostKind::Winning] {
            let p = SyntheticPost::new(proof(kind, size), Some(2), 3).unwrap();
            let (native, gadget) = (p.native_witness().unwrap(), p.gadget_witness().unwrap());
            assert_eq!(
                first_difference(&native, &gadget),
                None,
                "{kind:?} {}",
                size.name()
            );
        }
    }
}

/// The real 2 KiB WindowPoSt partition in the generator's form.
fn real_sectors() -> (Vec<native::Sector>, native::Layout) {
    let dir = tempfile::tempdir().unwrap();
    let sealed = sectors(dir.path());
    let good = input(&proofs_for(PostKind::Window, &sealed, RANDOMNESS));
    let f = PostFamily::from_params(PostKind::Window, &params(json!({}))).unwrap();
    let partition = f.partition::<SectorShape2KiB>(&good).unwrap();
    let pp = public_params::<SectorShape2KiB>(f.proof).unwrap();
    let arities = tree_arities::<SectorShape2KiB>(pp.sector_size as usize / NODE_SIZE);
    let sectors = native::sectors::<SectorShape2KiB>(
        &partition.pub_inputs.sectors,
        &partition.proof,
        &arities,
    )
    .unwrap();
    let layout = native::Layout::new(pp.sector_count, pp.challenge_count, &arities).unwrap();
    (sectors, layout)
}

/// Hashing comm_r's two halves in the wrong order keeps every count and changes values: the
/// comparison with the gadgets catches it (and the generator's own check refuses it).
#[test]
fn a_swapped_comm_r_hash_is_caught() {
    let p = SyntheticPost::new(proof(PostKind::Window, SectorSize::S2KiB), None, 4).unwrap();
    let gadget = p.gadget_witness().unwrap();
    let (sectors, layout) = real_sectors();
    let swapped = Options {
        unchecked: true,
        swap_pair: true,
    };
    let honest = Options {
        unchecked: true,
        swap_pair: false,
    };
    assert_eq!(
        first_difference(
            &native::generate(&p.sectors, &p.layout().unwrap(), honest).unwrap(),
            &gadget
        ),
        None
    );
    let diff = first_difference(
        &native::generate(&p.sectors, &p.layout().unwrap(), swapped).unwrap(),
        &gadget,
    );
    assert!(
        diff.as_ref().is_some_and(|d| d.starts_with("aux[")),
        "{diff:?}"
    );
    let checked = Options {
        swap_pair: true,
        ..Options::default()
    };
    assert_eq!(
        native::generate(&sectors, &layout, checked).unwrap_err(),
        NativeError::CommR { sector: 0 }
    );
}

/// A tampered partition fails with the reason, as the circuit's unsatisfied constraint would,
/// never a wrong witness.
#[test]
fn tampered_partitions_fail_with_their_reason() {
    let (sectors, layout) = real_sectors();
    assert!(native::generate(&sectors, &layout, Options::default()).is_ok());
    let tampered = |edit: &dyn Fn(&mut Vec<native::Sector>)| {
        let mut s = sectors.clone();
        edit(&mut s);
        native::generate(&s, &layout, Options::default()).unwrap_err()
    };
    assert_eq!(
        tampered(&|s| s[1].comm_c += Scalar::ONE),
        NativeError::CommR { sector: 1 }
    );
    assert_eq!(
        tampered(&|s| s[0].leaves[3].value += Scalar::ONE),
        NativeError::Path {
            sector: 0,
            challenge: 3
        }
    );
    assert_eq!(
        tampered(&|s| s[1].leaves[2].path[1].siblings[4] += Scalar::ONE),
        NativeError::Path {
            sector: 1,
            challenge: 2
        }
    );
    let e = tampered(&|s| s[0].leaves[0].path[0].index = 8);
    assert!(matches!(e, NativeError::Shape(_)), "{e}");
    let e = tampered(&|s| s.truncate(1));
    assert!(matches!(e, NativeError::Shape(_)), "{e}");
    let e = tampered(&|s| {
        s[0].leaves.pop();
    });
    assert!(matches!(e, NativeError::Shape(_)), "{e}");
}
