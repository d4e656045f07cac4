//! Filecoin PoRep Commit-2 end to end, as an operator does it: a 2 KiB sector sealed through
//! filecoin-proofs-api, its C1 output in the lotus/Curio file form (`{"SectorNum",
//! "Phase1Out", "SectorSize"}`), proved with `cuzk submit --c1 FILE --miner t0… --out FILE`
//! against a local cluster; the proof bytes are accepted by filecoin-proofs-api's
//! `verify_seal`, which reads them as it reads what `seal_commit_phase2` returns (the partition
//! proofs concatenated, 192 compressed bytes each). The bytes themselves never equal another
//! prover's: Groth16 proofs are randomized (r, s). `seal_commit_phase2` itself is not run here:
//! on a small box it takes longer than the cluster's whole proof (docs/perf.md, "PoRep C2,
//! 2 KiB"), too much for a check of the length.
//! Bad C1 outputs fail their jobs cleanly, and `cuzk submit` exits non-zero for them. With r
//! and s fixed, our prover's proof of the partition (witness-only synthesis, the captured
//! constraint matrices, the CPU backend) equals bellperson's `create_proof_batch` byte for byte.
//!
//! Groth16 parameters: the parameter directory (`CUZK_PARAM_CACHE`, else
//! `FIL_PROOFS_PARAMETER_CACHE`, else `~/.cache/cuzk/params`), which filecoin-proofs is pointed
//! at too. Missing 2 KiB parameters are generated once (INSECURE, test-only, marked so) and
//! kept there for later runs.

#![cfg(feature = "porep")]

mod support;

use std::path::Path;

use base64::Engine;
use std::fs::File;
use std::io::BufReader;
use std::sync::Arc;

use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use cuzk_circuits::porep::{generate_test_parameters, parameter_path, PorepC2Family, SectorSize};
use cuzk_circuits::porep_c1;
use cuzk_circuits::CircuitFamily;
use cuzk_circuits::{ShapeCache, FILECOIN_CACHE_ENV};
use cuzk_prover::{proof_bytes, prove, Backend, CpuBackend, ProvingKey};
use cuzk_wire::job::{JobInput, JobSpec};
use ff::Field;
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output};
use filecoin_proofs_api::{PieceInfo, RegisteredSealProof, UnpaddedBytesAmount};
use rand::RngCore;
use serde_json::json;
use support::{cluster, job, TIMEOUT};

const PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
const MINER: u64 = 1234;
const SECTOR: u64 = 7;

/// A sector sealed up to C1 through filecoin-proofs-api, as lotus does it.
fn seal_c1(dir: &Path, sector: u64) -> SealCommitPhase1Output {
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let (staged, sealed) = (dir.join("staged"), dir.join("sealed"));
    let size = UnpaddedBytesAmount(2032);
    let mut piece = vec![0u8; size.0 as usize];
    rand::rngs::OsRng.fill_bytes(&mut piece);
    let mut staged_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)
        .unwrap();
    let (info, _): (PieceInfo, _) =
        seal::add_piece(PROOF, &piece[..], &mut staged_file, size, &[]).unwrap();
    drop(staged_file);
    std::fs::File::create(&sealed).unwrap();
    let prover_id = porep_c1::prover_id(MINER);
    let mut ticket = [0u8; 32];
    let mut seed = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut ticket);
    rand::rngs::OsRng.fill_bytes(&mut seed);
    // Field elements, as lotus' randomness is.
    ticket[31] &= 0x3f;
    seed[31] &= 0x3f;
    let pieces = [info];
    let pc1 = seal::seal_pre_commit_phase1(
        PROOF,
        &cache,
        &staged,
        &sealed,
        prover_id,
        sector.into(),
        ticket,
        &pieces,
    )
    .unwrap();
    let pc2 = seal::seal_pre_commit_phase2(pc1, &cache, &sealed).unwrap();
    seal::seal_commit_phase1(
        &cache,
        &sealed,
        prover_id,
        sector.into(),
        ticket,
        seed,
        pc2,
        &pieces,
    )
    .unwrap()
}

/// The C1 file lotus-bench and Curio write: the API's JSON, base64 in `Phase1Out`. `pad`
/// trailing spaces (still valid JSON) make it larger than a job carries inline.
fn lotus_file(c1: &SealCommitPhase1Output, sector: u64, pad: usize) -> Vec<u8> {
    let phase1 = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(c1).unwrap());
    let mut file = serde_json::to_vec(&json!({
        "SectorNum": sector, "Phase1Out": phase1, "SectorSize": 2048
    }))
    .unwrap();
    file.resize(file.len() + pad, b' ');
    file
}

/// Runs `cuzk submit --c1 FILE` against `url`; returns whether it succeeded, and its stderr.
async fn cuzk_submit_c1(url: &str, file: &Path, out: &Path, extra: &[&str]) -> (bool, String) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_cuzk"));
    command
        .args([
            "submit",
            "--nats-url",
            url,
            "--miner",
            &format!("t0{MINER}"),
        ])
        .arg("--c1")
        .arg(file)
        .arg("--out")
        .arg(out)
        .args(extra)
        .kill_on_drop(true);
    let output = tokio::time::timeout(TIMEOUT, command.output())
        .await
        .expect("cuzk submit finished in time")
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), stderr)
}

fn c1_job(job_id: &str, params: serde_json::Value, c1: &[u8]) -> JobSpec {
    let mut spec = job(job_id, "porep-c2", params, "");
    spec.input = JobInput::Base64(base64::engine::general_purpose::STANDARD.encode(c1));
    spec
}

/// Points filecoin-proofs at the parameter directory the cluster uses (its default).
fn share_param_dir() {
    let dir = ShapeCache::default_dir().unwrap();
    // SAFETY: the first thing the test does, before it starts threads; filecoin-proofs reads
    // its settings once, on first use, which is after this.
    unsafe { std::env::set_var(FILECOIN_CACHE_ENV, &dir) };
}

#[test]
fn a_lotus_c1_file_is_proved_by_cuzk_submit_and_verify_seal_accepts_it() {
    share_param_dir();
    let engine = cuzk_prover::setup::CpuFixedBase::new();
    generate_test_parameters(
        SectorSize::S2KiB,
        &ShapeCache::open_default(true).unwrap(),
        &engine,
        false,
    )
    .expect("2 KiB parameters");

    let work = tempfile::tempdir().unwrap();
    let c1 = seal_c1(&work.path().join("sector"), SECTOR);
    // Larger than the inline limit: `cuzk submit` uploads it to the inputs bucket.
    let file = work.path().join("c1.json");
    std::fs::write(&file, lotus_file(&c1, SECTOR, 800 << 10)).unwrap();
    let api_json = serde_json::to_vec(&c1).unwrap();

    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let cluster = cluster().await;
            let url = cluster.url();

            // Bad C1 outputs fail in synthesis, before any parameters are needed.
            let params = json!({"sector_size": "2KiB", "sector_id": SECTOR, "miner": MINER});
            let mut wrong_size = params.clone();
            wrong_size["sector_size"] = json!("8MiB");
            let mut corrupt: serde_json::Value = serde_json::from_slice(&api_json).unwrap();
            let byte = corrupt["comm_r"][0].as_u64().unwrap();
            corrupt["comm_r"][0] = json!(byte ^ 1);
            let corrupt = serde_json::to_vec(&corrupt).unwrap();
            let bad = [
                (
                    c1_job(
                        "truncated",
                        params.clone(),
                        &api_json[..api_json.len() - 100],
                    ),
                    "not a C1 output",
                ),
                (
                    c1_job("garbage", params.clone(), b"\x00\xffnot json"),
                    "not a C1 output",
                ),
                (c1_job("wrong-size", wrong_size, &api_json), "8MiB"),
                (c1_job("corrupt", params.clone(), &corrupt), "do not verify"),
            ];
            support::each_fails(&cluster.client, &bad).await;

            // The CLI exits non-zero on a failed job, and writes no proof.
            let corrupt_c1: SealCommitPhase1Output = serde_json::from_slice(&corrupt).unwrap();
            let corrupt_file = work.path().join("corrupt.json");
            std::fs::write(&corrupt_file, lotus_file(&corrupt_c1, SECTOR, 0)).unwrap();
            let out = work.path().join("corrupt.proof");
            let (ok, stderr) = cuzk_submit_c1(&url, &corrupt_file, &out, &[]).await;
            assert!(!ok && stderr.contains("do not verify"), "{stderr}");
            assert!(!out.exists());

            let out = work.path().join("proof.bin");
            let (ok, stderr) =
                cuzk_submit_c1(&url, &file, &out, &["--job-id", "porep-lotus"]).await;
            assert!(ok, "cuzk submit --c1 failed: {stderr}");
            let proof = std::fs::read(&out).unwrap();
            assert_eq!(proof.len(), 192, "one partition proof");
            let prover_id = porep_c1::prover_id(MINER);
            let verify = |proof: &[u8]| {
                seal::verify_seal(
                    PROOF,
                    c1.comm_r,
                    c1.comm_d,
                    prover_id,
                    SECTOR.into(),
                    c1.ticket,
                    c1.seed,
                    proof,
                )
                .unwrap()
            };
            assert!(verify(&proof), "verify_seal rejected the cluster's proof");
            support::staged_input_released(&cluster.topology, "porep-lotus").await;

            // And a proof for another sector number is rejected.
            assert!(!seal::verify_seal(
                PROOF,
                c1.comm_r,
                c1.comm_d,
                prover_id,
                (SECTOR + 1).into(),
                c1.ticket,
                c1.seed,
                &proof,
            )
            .unwrap_or(false));
            cluster.stop().await.unwrap();
        });

    // Byte identity with bellperson on the same partition, r and s.
    let family = PorepC2Family::from_params(
        &json!({"sector_size": "2KiB", "sector_id": SECTOR, "miner": MINER}),
    )
    .unwrap();
    let file = File::open(parameter_path(SectorSize::S2KiB).unwrap()).unwrap();
    let params = Arc::new(Parameters::<Bls12>::read(BufReader::new(file), false).unwrap());
    let mut rng = rand::thread_rng();
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let theirs = family
        .bellperson_proof(&api_json, 0, &params, r, s)
        .unwrap();
    let matrices = Arc::new(family.capture_matrices().unwrap());
    let key = CpuBackend
        .load_key(Arc::new(ProvingKey::new(params, matrices).unwrap()))
        .unwrap();
    let witness = family.witness(&api_json, 0, None).unwrap();
    let ours = prove(&CpuBackend, &key, &witness, r, s).unwrap();
    assert_eq!(
        proof_bytes(&ours),
        proof_bytes(&theirs),
        "our proof differs from bellperson's create_proof_batch with the same r, s"
    );
}
