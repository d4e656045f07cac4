//! Filecoin PoRep Commit-2 end to end: a 2 KiB sector sealed with filecoin-proofs' real API,
//! its C1 output submitted as a `porep-c2` job to a local cluster, and the returned proof
//! accepted by `filecoin_proofs::verify_seal`; bad C1 outputs fail their jobs cleanly.
//!
//! Groth16 parameters: filecoin-proofs' parameter cache, `$FIL_PROOFS_PARAMETER_CACHE`
//! (default here `~/.cache/cuzk/filecoin-params`). Missing 2 KiB parameters are generated once
//! (INSECURE, test-only; ~14 min and 5.2 GB on 2 cores) and kept there for later runs.

#![cfg(feature = "porep")]

mod support;

use base64::Engine;
use cuzk_circuits::porep::{generate_test_parameters, seal_sector, verify_seal, SectorSize};
use cuzk_circuits::ShapeCache;
use cuzk_cli::{submit_and_wait, verify_job_proof};
use cuzk_wire::job::{JobInput, JobSpec, JobStatus};
use rand::SeedableRng;
use serde_json::json;
use support::{cluster, job, TIMEOUT};

fn c1_job(job_id: &str, params: serde_json::Value, c1: &[u8]) -> JobSpec {
    let mut spec = job(job_id, "porep-c2", params, "");
    spec.input = JobInput::Base64(base64::engine::general_purpose::STANDARD.encode(c1));
    spec
}

#[test]
fn a_real_2kib_c1_is_proved_and_verify_seal_accepts_it() {
    const PARAM_CACHE: &str = "FIL_PROOFS_PARAMETER_CACHE";
    if std::env::var_os(PARAM_CACHE).is_none() {
        let home = std::env::var_os("HOME").expect("HOME is set");
        let dir = std::path::Path::new(&home).join(".cache/cuzk/filecoin-params");
        // SAFETY: the only test in this binary, and no other thread exists yet; filecoin-proofs
        // reads its settings once, on first use, which is after this.
        unsafe { std::env::set_var(PARAM_CACHE, dir) };
    }
    generate_test_parameters(
        SectorSize::S2KiB,
        &ShapeCache::open_default(true).unwrap(),
        &cuzk_prover::setup::CpuFixedBase::new(),
    )
    .expect("2 KiB parameters");

    let work = tempfile::tempdir().unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::from_entropy();
    let sector = seal_sector(SectorSize::S2KiB, work.path(), 7, [3; 32], &mut rng).expect("sealed");
    let c1 = &sector.c1_json;

    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let cluster = cluster().await;

            // Bad C1 outputs fail in synthesis, before any parameters are needed.
            let mut wrong_size = sector.job_params();
            wrong_size["sector_size"] = json!("8MiB");
            let mut corrupt: serde_json::Value = serde_json::from_slice(c1).unwrap();
            let byte = corrupt["comm_r"][0].as_u64().unwrap();
            corrupt["comm_r"][0] = json!(byte ^ 1);
            let bad = [
                (
                    c1_job("truncated", sector.job_params(), &c1[..c1.len() - 100]),
                    "not a C1 output",
                ),
                (
                    c1_job("garbage", sector.job_params(), b"\x00\xffnot json"),
                    "not a C1 output",
                ),
                (c1_job("wrong-size", wrong_size, c1), "8MiB"),
                (
                    c1_job(
                        "corrupt",
                        sector.job_params(),
                        &serde_json::to_vec(&corrupt).unwrap(),
                    ),
                    "do not verify",
                ),
            ];
            for (spec, expected) in &bad {
                let result = submit_and_wait(&cluster.client, spec, TIMEOUT)
                    .await
                    .unwrap();
                assert_eq!(result.status, JobStatus::Failed, "{}", spec.job_id);
                let error = result.error.unwrap_or_default();
                assert!(error.contains(expected), "{}: {error}", spec.job_id);
            }

            let spec = c1_job("porep-2k", sector.job_params(), c1);
            let result = submit_and_wait(&cluster.client, &spec, TIMEOUT)
                .await
                .unwrap();
            assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
            assert!(result.verified);
            let proof = hex::decode(result.proof.as_deref().unwrap()).unwrap();
            assert_eq!(proof.len(), 192);
            assert!(
                verify_seal(&sector, &proof).unwrap(),
                "verify_seal rejected the cluster's proof"
            );
            // Our own verifier agrees: public inputs from `get_seal_inputs`, VK from the same file.
            verify_job_proof(&spec, &result, &ShapeCache::open_default(true).unwrap()).unwrap();
            // And a proof for another sector is rejected.
            let other = seal_sector(
                SectorSize::S2KiB,
                &work.path().join("other"),
                8,
                [3; 32],
                &mut rng,
            )
            .unwrap();
            assert!(!verify_seal(&other, &proof).unwrap_or(false));
            cluster.stop().await.unwrap();
        });
}
