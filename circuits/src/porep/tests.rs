use blstrs::Scalar;
use rand::SeedableRng;
use serde_json::json;

use super::*;
use crate::filecoin::prover_id;
use crate::CircuitFamily;

fn sealed_2k() -> (tempfile::TempDir, SealedSector) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let sector = seal_sector(SectorSize::S2KiB, dir.path(), 42, [7; 32], &mut rng).unwrap();
    (dir, sector)
}

fn family(params: serde_json::Value) -> Result<std::sync::Arc<dyn CircuitFamily>, CircuitError> {
    crate::resolve(NAME, &params)
}

#[test]
fn params_are_validated() {
    let prover = "07".repeat(32);
    let f = family(json!({"sector_size": "2KiB", "sector_id": 1, "prover_id": prover})).unwrap();
    assert_eq!(
        (f.shape_key().as_str(), f.partitions()),
        ("porep-c2-2KiB", 1)
    );
    let f = family(json!({"sector_size": "32GiB", "sector_id": 1, "prover_id": prover})).unwrap();
    assert_eq!(
        (f.shape_key().as_str(), f.partitions()),
        ("porep-c2-32GiB", 10)
    );
    let e = family(json!({"sector_size": "4KiB", "sector_id": 1, "prover_id": prover}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("unknown variant `4KiB`"), "{e}");
    let e = family(json!({"sector_size": "2KiB", "sector_id": 1, "prover_id": "abc"}))
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("'prover_id' must be 64 hex digits"),
        "{e}"
    );
    let e = family(json!({"sector_size": "2KiB", "prover_id": prover}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("missing field `sector_id`"), "{e}");
    // A miner instead of the prover id; exactly one of them.
    for miner in [json!("f01234"), json!("t01234"), json!(1234), json!("1234")] {
        let f = family(json!({"sector_size": "2KiB", "sector_id": 1, "miner": miner}));
        assert!(f.is_ok(), "{miner}");
    }
    let e = family(json!({"sector_size": "2KiB", "sector_id": 1, "miner": "f1abc"}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("ID address"), "{e}");
    for both_or_none in [
        json!({"sector_size": "2KiB", "sector_id": 1, "miner": 1, "prover_id": prover}),
        json!({"sector_size": "2KiB", "sector_id": 1}),
    ] {
        let e = family(both_or_none).err().unwrap();
        assert!(e.to_string().contains("exactly one of 'miner'"), "{e}");
    }
    let e = family(json!({"sector_size": "2KiB", "sector_id": 1, "miner": 1,
        "proof": "StackedDrg32GiBV1_1_Feat_SyntheticPoRep"}))
    .err()
    .unwrap();
    assert!(e.to_string().contains("not for a 2KiB sector"), "{e}");
    assert_eq!("8mib".parse::<SectorSize>(), Ok(SectorSize::S8MiB));
    assert!(parameter_path(SectorSize::S2KiB)
        .unwrap()
        .ends_with("v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-0-0-sha256_hasher-032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f.params"));
    // The family names that file, relative to the parameter directory, with the digest
    // filecoin-proofs publishes for it (parameters.json).
    let f = family(json!({"sector_size": "2KiB", "sector_id": 1, "miner": 1})).unwrap();
    let name = f.parameter_file().unwrap();
    assert!(name.is_relative() && parameter_path(SectorSize::S2KiB).unwrap().ends_with(&name));
    assert!(is_published(name.to_str().unwrap()));
    assert_eq!(
        f.published_digest(),
        Some("434fb1338ecfaf0f59256f30dde4968f")
    );
    // A missing file points to the published ones and to the command writing test ones.
    let source = f.parameter_source();
    assert!(source.contains("lotus fetch-params"), "{source}");
    assert!(
        source.contains("cuzk-porep params --sector-size 2KiB"),
        "{source}"
    );
}

/// The synthesized circuit's public inputs are `get_seal_inputs`' (what `verify_seal`
/// checks), and bad C1 outputs are refused with clear errors, without panicking.
#[test]
fn synthesizes_a_real_c1_and_refuses_bad_ones() {
    let (_dir, sector) = sealed_2k();
    let f = family(sector.job_params()).unwrap();
    let asg = f.recording(&sector.c1_json, 0).unwrap();
    let inputs = f.public_inputs(&sector.c1_json, 0).unwrap();
    assert_eq!(asg.input[0], Scalar::from(1u64));
    assert_eq!(asg.input[1..], inputs[..]);
    assert!(
        asg.num_constraints() > 2_600_000,
        "{}",
        asg.num_constraints()
    );
    // The blank circuit's matrices are the real circuit's: evaluated on the witness-only
    // synthesis they give exactly the recorded A/B/C.
    let m = f.capture_matrices().unwrap();
    let w = f
        .witness(&sector.c1_json, 0, Some((m.inputs, m.aux)))
        .unwrap();
    assert_eq!((&w.input, &w.aux), (&asg.input, &asg.aux));
    let [a, b, c] = m.evaluate(&|j| w.value(j));
    assert!(a == asg.a && b == asg.b && c == asg.c);

    let bad = |input: &[u8], params: serde_json::Value| {
        family(params)
            .unwrap()
            .witness(input, 0, None)
            .unwrap_err()
            .to_string()
    };
    let c1 = &sector.c1_json;
    let e = bad(&c1[..c1.len() / 2], sector.job_params());
    assert!(e.contains("not a C1 output"), "{e}");
    let mut params = sector.job_params();
    params["sector_size"] = json!("8MiB");
    let e = bad(c1, params);
    assert!(e.contains("8MiB"), "{e}");
    let mut params = sector.job_params();
    params["sector_id"] = json!(43);
    let e = bad(c1, params);
    assert!(e.contains("was not sealed by prover"), "{e}");
    // A flipped comm_r keeps the JSON valid but the vanilla proofs no longer verify.
    let mut value: serde_json::Value = serde_json::from_slice(c1).unwrap();
    let byte = value["comm_r"][0].as_u64().unwrap();
    value["comm_r"][0] = json!(byte ^ 1);
    let e = bad(&serde_json::to_vec(&value).unwrap(), sector.job_params());
    assert!(e.contains("do not verify"), "{e}");
    let e = f.witness(c1, 1, None).unwrap_err().to_string();
    assert!(e.contains("partition 1 requested"), "{e}");
}

/// filecoin-proofs-api's form of a C1 output in filecoin-proofs' form: the proof's name, and
/// the vanilla proofs tagged with the tree shape.
fn api_form(sector: &SealedSector) -> Vec<u8> {
    let mut value: serde_json::Value = serde_json::from_slice(&sector.c1_json).unwrap();
    let proofs = value["vanilla_proofs"].take();
    value["vanilla_proofs"] = json!({ format!("StackedDrg{}V1", sector.size.name()): proofs });
    value["registered_proof"] = json!(sector.proof.api_name());
    serde_json::to_vec(&value).unwrap()
}

/// A synthetic-PoRep C1 synthesizes to `get_seal_inputs`' public inputs in all three forms;
/// in filecoin-proofs' own form (which does not name its proof) only when the job says so.
#[test]
fn synthetic_porep_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
    let proof = SealProof::from_api_name("StackedDrg2KiBV1_1_Feat_SyntheticPoRep").unwrap();
    let prover = prover_id(1000);
    let sector = seal_sector(proof, dir.path(), 42, prover, &mut rng).unwrap();

    let f = family(sector.job_params()).unwrap();
    let asg = f.witness(&sector.c1_json, 0, None).unwrap();
    assert_eq!(
        asg.input[1..],
        f.public_inputs(&sector.c1_json, 0).unwrap()[..]
    );

    let mut params = sector.job_params();
    params.as_object_mut().unwrap().remove("proof");
    let e = family(params.clone())
        .unwrap()
        .witness(&sector.c1_json, 0, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("StackedDrg2KiBV1_1 (replica id differs"), "{e}");

    let api = api_form(&sector);
    use base64::Engine;
    let lotus = serde_json::to_vec(&json!({
        "SectorNum": 42,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&api),
        "SectorSize": 2048,
    }))
    .unwrap();
    for input in [&api, &lotus] {
        let f = family(params.clone()).unwrap();
        let other = f.witness(input, 0, None).unwrap();
        assert_eq!((&other.input, &other.aux), (&asg.input, &asg.aux));
    }
    // The lotus file's sector number must be the job's.
    params["sector_id"] = json!(43);
    let e = family(params)
        .unwrap()
        .witness(&lotus, 0, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the C1 file is for sector 42, the job for sector 43"),
        "{e}"
    );
}

/// A synthetic C1 has the real shape: its witness has exactly the real circuit's length.
/// It is refused unless the job says synthetic, and a real C1 is refused as synthetic.
#[test]
fn synthetic_c1_has_the_real_shape() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
    let c1 = synthetic_c1(SectorSize::S2KiB, &mut rng).unwrap();
    let prover = "07".repeat(32);
    let params = |synthetic: bool| json!({"sector_size": "2KiB", "sector_id": 5, "prover_id": prover, "synthetic": synthetic});
    let f = family(params(true)).unwrap();
    assert!(f.synthetic());
    let m = blank_matrices(SectorSize::S2KiB).unwrap();
    let w = f.witness(&c1, 0, None).unwrap();
    assert_eq!((w.input.len(), w.aux.len()), (m.inputs, m.aux));
    let e = family(params(false))
        .unwrap()
        .witness(&c1, 0, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("synthetic"), "{e}");
    let (_dir, sector) = sealed_2k();
    let mut real = sector.job_params();
    real["synthetic"] = json!(true);
    let e = family(real)
        .unwrap()
        .witness(&sector.c1_json, 0, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not synthetic"), "{e}");
    // The 32 GiB shape: 10 partitions of 18 challenges, parsed back by filecoin's types.
    let big = synthetic_c1(SectorSize::S32GiB, &mut rng).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&big).unwrap();
    assert_eq!(v["vanilla_proofs"].as_array().unwrap().len(), 10);
    assert_eq!(v["vanilla_proofs"][0].as_array().unwrap().len(), 18);
    let parsed: SealCommitPhase1Output<filecoin_proofs::constants::SectorShape32GiB> =
        serde_json::from_value(v).unwrap();
    assert_eq!(parsed.vanilla_proofs[9][17].labeling_proofs.len(), 11);
}
