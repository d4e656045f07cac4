use std::sync::Arc;

use bellperson::groth16::{prepare_verifying_key, Parameters};
use blstrs::Bls12;
use cuzk_prover::setup::CpuFixedBase;
use cuzk_prover::{proof_bytes, prove, verify, Backend, CpuBackend, ProvingKey};
use ff::Field;
use rand::SeedableRng;
use serde_json::json;

use super::*;
use crate::vanilla::input;

pub(super) const RANDOMNESS: [u8; 32] = [0x2a; 32];
const MINER: u64 = 1234;

fn family(
    kind: PostKind,
    params: serde_json::Value,
) -> Result<Arc<dyn CircuitFamily>, CircuitError> {
    crate::resolve(kind.circuit(), &params)
}

pub(super) fn params(extra: serde_json::Value) -> serde_json::Value {
    let mut p =
        json!({"sector_size": "2KiB", "miner": MINER, "randomness": hex_string(&RANDOMNESS)});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

/// Two sealed 2 KiB sectors (a whole 2 KiB WindowPoSt partition) in `dir`.
pub(super) fn sectors(dir: &std::path::Path) -> Vec<PostSector> {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
    (0..2)
        .map(|i| {
            PostSector::seal(
                SectorSize::S2KiB,
                &dir.join(format!("s{i}")),
                10 + i,
                &mut rng,
            )
            .unwrap()
        })
        .collect()
}

pub(super) fn proofs_for(
    kind: PostKind,
    sectors: &[PostSector],
    randomness: [u8; 32],
) -> Vec<Vec<u8>> {
    let proof = PostProof::current(kind, SectorSize::S2KiB);
    let prover = crate::filecoin::prover_id(MINER);
    let sectors = match kind {
        PostKind::Window => sectors,
        PostKind::Winning => &sectors[..1],
    };
    vanilla_proofs(proof, sectors, randomness, prover).unwrap()
}

fn err(kind: PostKind, params: serde_json::Value, input: &[u8]) -> String {
    family(kind, params)
        .unwrap()
        .witness(input, 0, None)
        .unwrap_err()
        .to_string()
}

#[test]
fn params_are_validated() {
    let f = family(PostKind::Window, params(json!({}))).unwrap();
    assert_eq!(
        (f.shape_key().as_str(), f.partitions()),
        ("window-post-2KiB", 1)
    );
    let f = family(PostKind::Winning, params(json!({"sector_size": "32GiB"}))).unwrap();
    assert_eq!(f.shape_key(), "winning-post-32GiB");
    let bad = |kind, p| family(kind, p).err().unwrap().to_string();
    let e = bad(PostKind::Window, params(json!({"randomness": "abcd"})));
    assert!(e.contains("'randomness' must be 64 hex digits"), "{e}");
    // A parameter is echoed as a short excerpt, never whole.
    let e = bad(
        PostKind::Window,
        params(json!({"randomness": "f".repeat(1 << 20)})),
    );
    assert!(e.len() < 200 && e.contains("(1048576 bytes)"), "{e}");
    let e = bad(
        PostKind::Window,
        json!({"sector_size": "2KiB", "prover_id": "0".repeat(1 << 20), "randomness": hex_string(&RANDOMNESS)}),
    );
    assert!(e.len() < 200 && e.contains("(1048576 bytes)"), "{e}");
    let e = bad(PostKind::Winning, params(json!({"partition_index": 0})));
    assert!(e.contains("no 'partition_index'"), "{e}");
    let e = bad(
        PostKind::Window,
        params(json!({"proof": "StackedDrgWinning2KiBV1"})),
    );
    assert!(e.contains("not a window-post proof"), "{e}");
    let e = bad(
        PostKind::Window,
        params(json!({"proof": "StackedDrgWindow8MiBV1"})),
    );
    assert!(e.contains("for a 2KiB sector"), "{e}");
    let e = bad(
        PostKind::Window,
        json!({"sector_size": "2KiB", "randomness": hex_string(&RANDOMNESS)}),
    );
    assert!(e.contains("exactly one of 'miner'"), "{e}");
    let e = bad(PostKind::Window, params(json!({"extra": 1})));
    assert!(e.contains("unknown field `extra`"), "{e}");
    // The published parameter file, with its digest.
    let name = f.parameter_file().unwrap();
    assert!(
        crate::fil_params::is_published(name.to_str().unwrap()),
        "{name:?}"
    );
    assert!(f.published_digest().is_some());
    // No command writes PoSt test parameters: a missing file points to the published ones.
    let source = f.parameter_source();
    assert!(source.contains("lotus fetch-params"), "{source}");
    assert!(!source.contains("cuzk-porep"), "{source}");
    let window = family(PostKind::Window, params(json!({}))).unwrap();
    assert!(window
        .parameter_file()
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-0-0-"));
}

#[test]
fn partition_shapes_match_synthesis() {
    for kind in [PostKind::Window, PostKind::Winning] {
        let f = family(kind, params(json!({}))).unwrap();
        let m = f.capture_matrices().unwrap();
        let shape = f.partition_shape();
        assert_eq!(shape.constraints, m.constraints() as u64, "{kind:?}");
        assert_eq!(shape.variables, (m.inputs + m.aux) as u64, "{kind:?}");
    }
    // 32 GiB WindowPoSt: filecoin-proofs' comment on its sector count says 125,279,217.
    let big = family(PostKind::Window, params(json!({"sector_size": "32GiB"}))).unwrap();
    let c = big.partition_shape().constraints;
    assert!((125_000_000..125_600_000).contains(&c), "{c}");
}

/// Real vanilla proofs synthesize to the public inputs the verifier derives; bad ones are
/// refused before any circuit is built, with the reason.
#[test]
fn synthesizes_real_vanilla_proofs_and_refuses_bad_ones() {
    let dir = tempfile::tempdir().unwrap();
    let sectors = sectors(dir.path());
    for kind in [PostKind::Window, PostKind::Winning] {
        let good = input(&proofs_for(kind, &sectors, RANDOMNESS));
        let f = family(kind, params(json!({}))).unwrap();
        let asg = f.recording(&good, 0).unwrap();
        assert_eq!(
            asg.input[1..],
            f.public_inputs(&good, 0).unwrap()[..],
            "{kind:?}"
        );
        let m = f.capture_matrices().unwrap();
        let w = f.witness(&good, 0, Some((m.inputs, m.aux))).unwrap();
        let [a, b, c] = m.evaluate(&|j| w.value(j));
        assert!(a == asg.a && b == asg.b && c == asg.c, "{kind:?}");

        let e = err(kind, params(json!({})), b"\x00not json");
        assert!(e.contains("input is not {\"vanilla_proofs\""), "{e}");
        let e = err(kind, params(json!({})), br#"{"vanilla_proofs": ["***"]}"#);
        assert!(e.contains("vanilla proof 0 is not base64"), "{e}");
        let e = err(kind, params(json!({})), &input(&[vec![7; 40]]));
        assert!(
            e.contains("vanilla proof 0 is not a 2KiB sector proof"),
            "{e}"
        );
        let e = err(kind, params(json!({})), &input(&[]));
        assert!(e.contains("0 vanilla proofs"), "{e}");
        let other = [0x11; 32];
        let e = err(
            kind,
            params(json!({"randomness": hex_string(&other)})),
            &good,
        );
        assert!(
            e.contains("do not verify") || e.contains("does not verify"),
            "{e}"
        );
        let e = f.witness(&good, 1, None).unwrap_err().to_string();
        assert!(e.contains("partition 1 requested"), "{e}");
    }
    let window = proofs_for(PostKind::Window, &sectors, RANDOMNESS);
    let three = input(&[window[0].clone(), window[1].clone(), window[0].clone()]);
    let e = err(PostKind::Window, params(json!({})), &three);
    assert!(
        e.contains("3 vanilla proofs; StackedDrgWindow2KiBV1_2 takes 1 to 2"),
        "{e}"
    );
    let e = err(PostKind::Winning, params(json!({})), &input(&window));
    assert!(
        e.contains("2 vanilla proofs; StackedDrgWinning2KiBV1 takes 1"),
        "{e}"
    );
    // A flipped byte of comm_r still decodes, but no longer verifies.
    let mut flipped = window.clone();
    flipped[1][8] ^= 1;
    let e = err(PostKind::Window, params(json!({})), &input(&flipped));
    assert!(
        e.contains("WindowPoSt vanilla proofs do not verify for partition 0"),
        "{e}"
    );
    // One sector of the partition is a partition too (the circuit repeats the last sector).
    let one = input(&window[..1]);
    let f = family(PostKind::Window, params(json!({}))).unwrap();
    let w = f.witness(&one, 0, None).unwrap();
    assert_eq!(w.input[1..], f.public_inputs(&one, 0).unwrap()[..]);
}

/// The public inputs derived from the job, which the GPU node verifies proofs against, are
/// the circuit's own — its gadgets' and the shipped (native) witness's — for WindowPoSt
/// partitions 0 and 1 (the same sectors stand in either chunk: challenges of `V1_2` do not
/// depend on the partition) and for WinningPoSt.
#[test]
fn job_derived_inputs_are_the_circuits_own_in_each_partition() {
    let dir = tempfile::tempdir().unwrap();
    let sectors = sectors(dir.path());
    let jobs = [
        (PostKind::Window, json!({"partition_index": 0})),
        (PostKind::Window, json!({"partition_index": 1})),
        (PostKind::Winning, json!({})),
    ];
    for (kind, extra) in jobs {
        let good = input(&proofs_for(kind, &sectors, RANDOMNESS));
        let f = family(kind, params(extra.clone())).unwrap();
        let job = f.public_inputs(&good, 0).unwrap();
        let gadgets = f.gadget_witness(&good, 0, None).unwrap();
        let shipped = f.witness(&good, 0, None).unwrap();
        assert_eq!(gadgets.public_inputs(), &job[..], "{kind:?} {extra}");
        assert_eq!(shipped.public_inputs(), &job[..], "{kind:?} {extra}");
    }
}

/// Our prover (witness-only synthesis, captured matrices, CPU backend) gives bellperson's
/// `create_proof_batch` proof byte for byte with the same r, s — and another s gives another
/// proof, so the comparison can fail.
#[test]
fn proofs_equal_bellpersons_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let sectors = sectors(dir.path());
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
    for kind in [PostKind::Window, PostKind::Winning] {
        let good = input(&proofs_for(kind, &sectors, RANDOMNESS));
        let f = PostFamily::from_params(kind, &params(json!({}))).unwrap();
        let started = std::time::Instant::now();
        // Our generator (the one test parameters come from), which is quicker than
        // bellperson's; bellperson proves with whatever parameters it is given.
        let matrices = f.capture_matrices().unwrap();
        let mut bytes = std::io::Cursor::new(Vec::new());
        cuzk_prover::setup::generate(&matrices, &mut rng, &CpuFixedBase::new(), &mut bytes)
            .unwrap();
        let bytes = bytes.into_inner();
        let params = Arc::new(Parameters::<Bls12>::read(&bytes[..], false).unwrap());
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let theirs = f.bellperson_proof(&good, &params, r, s).unwrap();
        let key = ProvingKey::new(params.clone(), Arc::new(matrices)).unwrap();
        let key = CpuBackend.load_key(Arc::new(key)).unwrap();
        let w = f.witness(&good, 0, None).unwrap();
        let ours = prove(&CpuBackend, &key, &w, r, s).unwrap();
        assert_eq!(proof_bytes(&ours), proof_bytes(&theirs), "{kind:?}");
        let pvk = prepare_verifying_key(&params.vk);
        assert!(verify(&pvk, &ours, &f.public_inputs(&good, 0).unwrap()).unwrap());
        let other_s = prove(&CpuBackend, &key, &w, r, s + Scalar::ONE).unwrap();
        assert_ne!(proof_bytes(&other_s), proof_bytes(&theirs), "{kind:?}");
        eprintln!(
            "{kind:?}: {} constraints, {:.1} s",
            f.partition_shape().constraints,
            started.elapsed().as_secs_f64()
        );
    }
}
