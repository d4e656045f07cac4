use std::sync::Arc;

use rand::SeedableRng;
use serde_json::json;

use super::*;
use crate::vanilla::input;

fn family(params: serde_json::Value) -> Result<Arc<dyn CircuitFamily>, CircuitError> {
    crate::resolve(NAME, &params)
}

fn updated(dir: &std::path::Path, seed: u64) -> UpdatedSector {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    update_sector(SectorSize::S2KiB, dir, &mut rng).unwrap()
}

fn with(params: &serde_json::Value, key: &str, value: serde_json::Value) -> serde_json::Value {
    let mut p = params.clone();
    p[key] = value;
    p
}

#[test]
fn params_are_validated() {
    let good = json!({"sector_size": "2KiB", "comm_r_old": "01".repeat(32),
        "comm_r_new": "02".repeat(32), "comm_d_new": "03".repeat(32)});
    let f = family(good.clone()).unwrap();
    assert_eq!(
        (f.shape_key().as_str(), f.partitions()),
        ("snap-deals-2KiB", 1)
    );
    for (size, partitions) in [("8MiB", 4), ("512MiB", 16), ("32GiB", 16), ("64GiB", 16)] {
        let f = family(with(&good, "sector_size", json!(size))).unwrap();
        assert_eq!(f.partitions(), partitions, "{size}");
    }
    let bad = |p| family(p).err().unwrap().to_string();
    let e = bad(with(&good, "comm_r_new", json!("abcd")));
    assert!(e.contains("'comm_r_new' must be 64 hex digits"), "{e}");
    // Above the field modulus, and zero: not commitments.
    let e = bad(with(&good, "comm_d_new", json!("ff".repeat(32))));
    assert!(
        e.contains("'comm_d_new'") && e.contains("not a commitment"),
        "{e}"
    );
    let e = bad(with(&good, "comm_r_old", json!("00".repeat(32))));
    assert!(
        e.contains("'comm_r_old'") && e.contains("not a commitment"),
        "{e}"
    );
    let e = bad(with(&good, "extra", json!(1)));
    assert!(e.contains("unknown field `extra`"), "{e}");
    let e = bad(json!({"sector_size": "2KiB"}));
    assert!(e.contains("missing field"), "{e}");
    // The published parameter files, with their digests, for every size.
    for size in SectorSize::ALL {
        let f = family(with(&good, "sector_size", json!(size.name()))).unwrap();
        let name = f.parameter_file().unwrap();
        let name = name.to_str().unwrap();
        assert!(crate::fil_params::is_published(name), "{name}");
        assert!(name.starts_with("v28-empty-sector-update-merkletree-poseidon_hasher-8-"));
        assert!(f.published_digest().is_some(), "{name}");
    }
    assert_eq!(size_of_update_proof(3), Ok(SectorSize::S32GiB));
    assert_eq!(
        api_name(size_of_update_proof(0).unwrap()),
        "StackedDrg2KiBV1"
    );
    assert!(size_of_update_proof(5).unwrap_err().contains("5"));
}

/// `size`'s blank circuit cut to its first `challenges` challenges.
fn blank_with<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    challenges: usize,
) -> Circuit<Tree> {
    let mut circuit = Compound::<Tree>::blank_circuit(&public_params(size));
    circuit.pub_params.challenge_count = challenges;
    circuit.priv_inputs.challenge_proofs.truncate(challenges);
    circuit
}

/// How `shape_of`'s table was measured (every row; the test runs the 2 KiB one, the others
/// take ~9 s each): constraints and variables are linear in the challenges.
fn measure(size: SectorSize) -> PartitionShape {
    let count = |challenges: usize| -> [u64; 2] {
        let m = with_tree!(size, Tree => cuzk_prover::r1cs::capture(blank_with::<Tree>(size, challenges)))
            .unwrap();
        [m.constraints() as u64, (m.inputs + m.aux) as u64]
    };
    let (one, two) = (count(1), count(2));
    let challenges = public_params(size).challenge_count as u64;
    let total = |i: usize| one[i] + (challenges - 1) * (two[i] - one[i]);
    PartitionShape {
        constraints: total(0),
        variables: total(1),
    }
}

#[test]
fn partition_shape_matches_synthesis() {
    let f = SnapFamily::new(SectorSize::S2KiB, [1; 32], [1; 32], [1; 32]);
    let m = f.capture_matrices().unwrap();
    let shape = f.partition_shape();
    assert_eq!(shape.constraints, m.constraints() as u64);
    assert_eq!(shape.variables, (m.inputs + m.aux) as u64);
    assert_eq!(measure(SectorSize::S2KiB), shape);
}

/// Real vanilla proofs synthesize to the public inputs the verifier derives; bad ones are
/// refused before any circuit is built, with the reason.
#[test]
fn synthesizes_real_vanilla_proofs_and_refuses_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let sector = updated(dir.path(), 5);
    eprintln!("fixture: {:.2} s", started.elapsed().as_secs_f64());
    let good = input(&sector.vanilla_proofs);
    let f = family(sector.job_params()).unwrap();
    let started = std::time::Instant::now();
    let asg = f.recording(&good, 0).unwrap();
    eprintln!(
        "recording synthesis: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(asg.input[1..], f.public_inputs(&good, 0).unwrap()[..]);
    let m = f.capture_matrices().unwrap();
    let started = std::time::Instant::now();
    let w = f.witness(&good, 0, Some((m.inputs, m.aux))).unwrap();
    eprintln!(
        "witness synthesis: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let [a, b, c] = m.evaluate(&|j| w.value(j));
    assert!(a == asg.a && b == asg.b && c == asg.c);

    let params = sector.job_params();
    let err = |params: &serde_json::Value, input: &[u8]| {
        family(params.clone())
            .unwrap()
            .witness(input, 0, None)
            .unwrap_err()
            .to_string()
    };
    let e = err(&params, b"\x00not json");
    assert!(e.contains("input is not {\"vanilla_proofs\""), "{e}");
    let e = err(&params, br#"{"vanilla_proofs": ["***"]}"#);
    assert!(e.contains("vanilla proof 0 is not base64"), "{e}");
    let e = err(&params, &input(&[vec![7; 40]]));
    assert!(
        e.contains("vanilla proof 0 is not a 2KiB partition proof"),
        "{e}"
    );
    let e = err(&params, &input(&[]));
    assert!(
        e.contains("0 vanilla proofs; a 2KiB sector's update proof has 1 partitions"),
        "{e}"
    );
    // The proofs of another update do not verify for these commitments.
    let other = updated(&dir.path().join("other"), 6);
    let e = err(&params, &input(&other.vanilla_proofs));
    assert!(
        e.contains("vanilla proof of partition 0 does not verify for this 2KiB sector's"),
        "{e}"
    );
    // Nor do these proofs for another comm_d_new.
    let e = err(
        &with(&params, "comm_d_new", json!(hex_string(&other.comm_d_new))),
        &good,
    );
    assert!(e.contains("does not verify"), "{e}");
    // A flipped byte of comm_c (the proof's first bytes) still decodes, but no longer verifies.
    let mut flipped = sector.vanilla_proofs.clone();
    flipped[0][0] ^= 1;
    let e = err(&params, &input(&flipped));
    assert!(e.contains("does not verify"), "{e}");
    let e = f.witness(&good, 1, None).unwrap_err().to_string();
    assert!(e.contains("partition 1 requested but the job has 1"), "{e}");
    assert!(f.public_inputs(&good, 1).is_err());
}
