//! Filecoin PoSt through the cluster, from what Curio sends: two 2 KiB sectors sealed with
//! filecoin-proofs, their WindowPoSt vanilla proofs made with filecoin-proofs-api
//! (`generate_fallback_sector_challenges`, `generate_single_vanilla_proof`: bincode
//! `FallbackPoStSectorProof`s, Curio's `vanilla_proofs`), proved as a `window-post` job on a
//! local cluster; filecoin-proofs-api's `verify_window_post` accepts the proof bytes and rejects
//! them for other randomness. A WinningPoSt job of one of the sectors likewise, checked with
//! `verify_winning_post`. Bad vanilla proofs (undecodable, too many, not verifying) fail their
//! jobs with the reason, at synthesis, before any circuit is built.
//!
//! Groth16 parameters: the parameter directory the cluster uses, which filecoin-proofs is pointed
//! at too; missing PoSt parameters are generated once (INSECURE, test-only, marked so).

#![cfg(feature = "porep")]

mod support;

use std::collections::BTreeMap;

use base64::Engine;
use cuzk_circuits::porep::SectorSize;
use cuzk_circuits::porep_c1;
use cuzk_circuits::post::{generate_test_parameters, PostKind, PostProof, PostSector};
use cuzk_circuits::{ShapeCache, FILECOIN_CACHE_ENV};
use cuzk_cli::submit_and_wait;
use cuzk_wire::job::{JobInput, JobSpec, JobStatus};
use filecoin_proofs_api::post;
use filecoin_proofs_api::{PrivateReplicaInfo, PublicReplicaInfo, RegisteredPoStProof, SectorId};
use rand::SeedableRng;
use serde_json::json;
use support::{cluster, job, TIMEOUT};

const MINER: u64 = 1234;
const WINDOW: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
const WINNING: RegisteredPoStProof = RegisteredPoStProof::StackedDrgWinning2KiBV1;

/// Field elements, as lotus' PoSt randomness is.
fn randomness(byte: u8) -> [u8; 32] {
    let mut r = [byte; 32];
    r[31] &= 0x3f;
    r
}

/// filecoin-proofs-api's vanilla proofs of `sectors` for `proof` and `randomness`.
fn vanilla(
    proof: RegisteredPoStProof,
    sectors: &[PostSector],
    randomness: [u8; 32],
) -> Vec<Vec<u8>> {
    let prover = porep_c1::prover_id(MINER);
    let ids: Vec<SectorId> = sectors
        .iter()
        .map(|s| SectorId::from(s.sector_id))
        .collect();
    let challenges =
        post::generate_fallback_sector_challenges(proof, &randomness, &ids, prover).unwrap();
    sectors
        .iter()
        .zip(&ids)
        .map(|(s, id)| {
            let replica =
                PrivateReplicaInfo::new(proof, s.comm_r, s.cache_dir.clone(), s.replica.clone());
            post::generate_single_vanilla_proof(proof, *id, &replica, &challenges[id]).unwrap()
        })
        .collect()
}

fn post_job(
    job_id: &str,
    kind: PostKind,
    params: serde_json::Value,
    proofs: &[Vec<u8>],
) -> JobSpec {
    let b64 = &base64::engine::general_purpose::STANDARD;
    let input = json!({"vanilla_proofs": proofs.iter().map(|p| b64.encode(p)).collect::<Vec<_>>()});
    let mut spec = job(job_id, kind.circuit(), params, "");
    spec.input = JobInput::Base64(b64.encode(serde_json::to_vec(&input).unwrap()));
    spec
}

fn params(randomness: [u8; 32]) -> serde_json::Value {
    json!({"sector_size": "2KiB", "miner": MINER, "randomness": hex::encode(randomness)})
}

fn replicas(
    proof: RegisteredPoStProof,
    sectors: &[PostSector],
) -> BTreeMap<SectorId, PublicReplicaInfo> {
    sectors
        .iter()
        .map(|s| {
            (
                SectorId::from(s.sector_id),
                PublicReplicaInfo::new(proof, s.comm_r),
            )
        })
        .collect()
}

#[test]
fn window_and_winning_post_jobs_are_proved_and_filecoin_proofs_verifies_them() {
    // SAFETY: the first thing the test does, before it starts threads; filecoin-proofs reads
    // its settings once, on first use, which is after this.
    unsafe { std::env::set_var(FILECOIN_CACHE_ENV, ShapeCache::default_dir().unwrap()) };
    let engine = cuzk_prover::setup::CpuFixedBase::new();
    let shapes = ShapeCache::open_default(true).unwrap();
    for kind in [PostKind::Window, PostKind::Winning] {
        generate_test_parameters(
            PostProof::current(kind, SectorSize::S2KiB),
            &shapes,
            &engine,
            false,
        )
        .expect("2 KiB PoSt parameters");
    }

    let work = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
    let sectors: Vec<PostSector> = (0..2)
        .map(|i| {
            PostSector::seal(
                SectorSize::S2KiB,
                &work.path().join(format!("s{i}")),
                20 + i,
                &mut rng,
            )
            .unwrap()
        })
        .collect();
    let rand = randomness(0x5c);
    let window = vanilla(WINDOW, &sectors, rand);
    let winning = vanilla(WINNING, &sectors[..1], rand);

    let (window_proof, winning_proof) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let cluster = cluster().await;
            let mut flipped = window.clone();
            flipped[1][8] ^= 1;
            let bad = [
                (
                    post_job(
                        "wpost-undecodable",
                        PostKind::Window,
                        params(rand),
                        &[vec![7; 40]],
                    ),
                    "vanilla proof 0 is not a 2KiB sector proof",
                ),
                (
                    post_job(
                        "wpost-three",
                        PostKind::Window,
                        params(rand),
                        &[window[0].clone(), window[1].clone(), window[0].clone()],
                    ),
                    "3 vanilla proofs; StackedDrgWindow2KiBV1_2 takes 1 to 2",
                ),
                (
                    post_job("wpost-flipped", PostKind::Window, params(rand), &flipped),
                    "WindowPoSt vanilla proofs do not verify for partition 0",
                ),
                (
                    post_job(
                        "winning-other-rand",
                        PostKind::Winning,
                        params(randomness(1)),
                        &winning,
                    ),
                    "WinningPoSt vanilla proof does not verify",
                ),
            ];
            support::each_fails(&cluster.client, &bad).await;

            let mut proofs = Vec::new();
            for (id, kind, vanilla) in [
                ("wpost", PostKind::Window, &window),
                ("winning", PostKind::Winning, &winning),
            ] {
                let spec = post_job(id, kind, params(rand), vanilla);
                let result = submit_and_wait(&cluster.client, &spec, TIMEOUT)
                    .await
                    .unwrap();
                assert_eq!(result.status, JobStatus::Done, "{id}: {:?}", result.error);
                assert!(result.verified, "{id}");
                proofs.push(hex::decode(result.proof.unwrap()).unwrap());
            }
            cluster.stop().await.unwrap();
            (proofs[0].clone(), proofs[1].clone())
        });

    assert_eq!(window_proof.len(), 192, "one partition proof");
    let prover = porep_c1::prover_id(MINER);
    let window_ok = |rand: [u8; 32]| {
        post::verify_window_post(
            &rand,
            &[(WINDOW, &window_proof[..])],
            &replicas(WINDOW, &sectors),
            prover,
        )
        .unwrap_or(false)
    };
    assert!(
        window_ok(rand),
        "verify_window_post rejected the cluster's proof"
    );
    assert!(
        !window_ok(randomness(0x33)),
        "verify_window_post accepted other randomness"
    );
    let winning_ok = |rand: [u8; 32]| {
        post::verify_winning_post(
            &rand,
            &winning_proof,
            &replicas(WINNING, &sectors[..1]),
            prover,
        )
        .unwrap_or(false)
    };
    assert!(
        winning_ok(rand),
        "verify_winning_post rejected the cluster's proof"
    );
    assert!(
        !winning_ok(randomness(0x33)),
        "verify_winning_post accepted other randomness"
    );
}
