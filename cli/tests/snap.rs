//! Filecoin SnapDeals through the cluster, from what Curio sends: a 2 KiB sector sealed with
//! filecoin-proofs as the sector key, new data encoded into it (`encode_into`), its vanilla
//! partition proofs made with filecoin-proofs-api (`update::generate_partition_proofs`: bincode
//! `PartitionProof`s, Curio's `vanilla_proofs`), proved as a `snap-deals` job on a local
//! cluster; filecoin-proofs-api's `verify_empty_sector_update_proof` accepts the proof bytes and
//! rejects them for another update's commitments. Bad vanilla proofs (undecodable, too many,
//! another update's) fail their jobs with the reason, at synthesis, before any circuit is built.
//!
//! Byte identity: with r and s fixed, our prover's proof of the partition (witness-only
//! synthesis, the captured constraint matrices, the CPU backend, the installed parameter file)
//! equals bellperson's `create_proof_batch` on the circuit filecoin-proofs' `prove_with_vanilla`
//! builds, with the same parameters; filecoin-proofs-api's verifier accepts it too.
//!
//! Groth16 parameters: the parameter directory the cluster uses, which filecoin-proofs is pointed
//! at too; missing 2 KiB SnapDeals parameters are generated once (INSECURE, test-only, marked
//! so) and kept there for later runs.

#![cfg(feature = "porep")]

mod support;

use std::fs::File;
use std::io::BufReader;
use std::sync::Arc;

use base64::Engine;
use bellperson::groth16::Parameters;
use blstrs::{Bls12, Scalar};
use cuzk_circuits::porep::SectorSize;
use cuzk_circuits::snap::{self, UpdatedSector};
use cuzk_circuits::{CircuitFamily, ShapeCache, FILECOIN_CACHE_ENV};
use cuzk_cli::submit_and_wait;
use cuzk_prover::{proof_bytes, prove, Backend, CpuBackend, ProvingKey};
use cuzk_wire::job::{JobInput, JobSpec, JobStatus};
use ff::Field;
use filecoin_proofs_api::update;
use filecoin_proofs_api::RegisteredUpdateProof;
use rand::SeedableRng;
use serde_json::json;
use support::{cluster, job, TIMEOUT};

const PROOF: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;

/// The sector's vanilla proofs as filecoin-proofs-api makes them for Curio.
fn api_vanilla(sector: &UpdatedSector) -> Vec<Vec<u8>> {
    update::generate_partition_proofs(
        PROOF,
        sector.comm_r_old,
        sector.comm_r_new,
        sector.comm_d_new,
        &sector.key.replica,
        &sector.key.cache_dir,
        &sector.replica,
        &sector.replica_cache,
    )
    .unwrap()
    .into_iter()
    .map(|p| p.0)
    .collect()
}

fn input(proofs: &[Vec<u8>]) -> Vec<u8> {
    let b64 = &base64::engine::general_purpose::STANDARD;
    serde_json::to_vec(
        &json!({"vanilla_proofs": proofs.iter().map(|p| b64.encode(p)).collect::<Vec<_>>()}),
    )
    .unwrap()
}

fn snap_job(job_id: &str, sector: &UpdatedSector, proofs: &[Vec<u8>]) -> JobSpec {
    let mut spec = job(job_id, "snap-deals", sector.job_params(), "");
    spec.input = JobInput::Base64(base64::engine::general_purpose::STANDARD.encode(input(proofs)));
    spec
}

/// filecoin-proofs-api's verdict on `proof` for `sector`'s commitments.
fn verify(sector: &UpdatedSector, proof: &[u8]) -> bool {
    update::verify_empty_sector_update_proof(
        PROOF,
        proof,
        sector.comm_r_old,
        sector.comm_r_new,
        sector.comm_d_new,
    )
    .unwrap_or(false)
}

/// Points filecoin-proofs at the cluster's parameter directory and installs the 2 KiB
/// SnapDeals parameters there if missing.
fn parameters() {
    // SAFETY: the first thing each test does, before it starts threads; filecoin-proofs reads
    // its settings once, on first use, which is after this.
    unsafe { std::env::set_var(FILECOIN_CACHE_ENV, ShapeCache::default_dir().unwrap()) };
    let started = std::time::Instant::now();
    snap::generate_test_parameters(
        SectorSize::S2KiB,
        &ShapeCache::open_default(true).unwrap(),
        &cuzk_prover::setup::CpuFixedBase::new(),
        false,
    )
    .expect("2 KiB SnapDeals parameters");
    eprintln!(
        "parameters ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn updated(dir: &std::path::Path) -> UpdatedSector {
    let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
    snap::update_sector(SectorSize::S2KiB, dir, &mut rng).unwrap()
}

#[test]
fn a_snap_deals_job_is_proved_and_filecoin_proofs_verifies_it() {
    parameters();
    let work = tempfile::tempdir().unwrap();
    let sector = updated(&work.path().join("a"));
    let other = updated(&work.path().join("b"));
    let vanilla = api_vanilla(&sector);

    let proof = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let cluster = cluster().await;
            let bad = [
                (
                    snap_job("snap-undecodable", &sector, &[vec![7; 40]]),
                    "vanilla proof 0 is not a 2KiB partition proof",
                ),
                (
                    snap_job(
                        "snap-two",
                        &sector,
                        &[vanilla[0].clone(), vanilla[0].clone()],
                    ),
                    "2 vanilla proofs; a 2KiB sector's update proof has 1 partitions",
                ),
                (
                    snap_job("snap-other", &sector, &api_vanilla(&other)),
                    "vanilla proof of partition 0 does not verify",
                ),
            ];
            support::each_fails(&cluster.client, &bad).await;

            let started = std::time::Instant::now();
            let result = submit_and_wait(
                &cluster.client,
                &snap_job("snap", &sector, &vanilla),
                TIMEOUT,
            )
            .await
            .unwrap();
            assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
            assert!(result.verified);
            eprintln!(
                "2 KiB SnapDeals job proved in {:.1} s",
                started.elapsed().as_secs_f64()
            );
            cluster.stop().await.unwrap();
            hex::decode(result.proof.unwrap()).unwrap()
        });

    assert_eq!(proof.len(), 192, "one partition proof");
    assert!(
        verify(&sector, &proof),
        "verify_empty_sector_update_proof rejected the cluster's proof"
    );
    assert!(
        !verify(&other, &proof),
        "verify_empty_sector_update_proof accepted another update's commitments"
    );
}

#[test]
fn with_fixed_r_s_our_proof_is_bellpersons_and_filecoin_proofs_verifies_it() {
    parameters();
    let work = tempfile::tempdir().unwrap();
    let sector = updated(work.path());
    let vanilla = input(&api_vanilla(&sector));
    let family = sector.family();
    let file = File::open(snap::parameter_path(SectorSize::S2KiB)).unwrap();
    let params = Arc::new(Parameters::<Bls12>::read(BufReader::new(file), false).unwrap());
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(17);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let theirs = family.bellperson_proof(&vanilla, 0, &params, r, s).unwrap();
    let matrices = Arc::new(family.capture_matrices().unwrap());
    let key = CpuBackend
        .load_key(Arc::new(ProvingKey::new(params, matrices).unwrap()))
        .unwrap();
    let started = std::time::Instant::now();
    let witness = family.witness(&vanilla, 0, None).unwrap();
    let synthesized = started.elapsed();
    let ours = proof_bytes(&prove(&CpuBackend, &key, &witness, r, s).unwrap());
    eprintln!(
        "2 KiB SnapDeals partition: synthesis {:.2} s, CPU proof {:.2} s",
        synthesized.as_secs_f64(),
        (started.elapsed() - synthesized).as_secs_f64()
    );
    assert_eq!(
        ours,
        proof_bytes(&theirs),
        "our proof differs from bellperson's create_proof_batch with the same r, s"
    );
    assert!(
        verify(&sector, &ours),
        "verify_empty_sector_update_proof rejected our proof"
    );
    // Another s gives another proof, so the comparison can fail.
    let other_s = proof_bytes(&prove(&CpuBackend, &key, &witness, r, s + Scalar::ONE).unwrap());
    assert_ne!(other_s, ours);
}
