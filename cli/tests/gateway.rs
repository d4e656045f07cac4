//! `cuzk gateway` as Curio meets it: a Python gRPC client generated at test time from the
//! proto (grpcio-tools; `tests/py/gateway_client.py`, not our Rust code) talks to the gateway
//! binary over a unix socket, in front of a local cluster on a real nats-server.
//!
//! The fast test checks the listing, GetStatus, GetMetrics, every refusal (kinds the cluster
//! lacks, malformed C1 outputs, the calls it cannot back), a Prove whose C1 is well-formed
//! but wrong (it fails in synthesis, before any parameters are needed), CancelProof, and
//! PreloadSRS/EvictSRS against the cluster's GPU node and a second one without parameters. The slow one proves a
//! real 2 KiB sector's C1 output in the lotus/Curio wrapper, larger than a job carries inline
//! (so it goes through the inputs bucket), and filecoin-proofs' `verify_seal` accepts the proof
//! bytes the Python client received. A third sends a WindowPoSt partition as Curio does (two
//! 2 KiB sectors' vanilla proofs in `vanilla_proofs`, randomness, miner, partition): the Python
//! client first sends it with one vanilla proof corrupted (FAILED), then as given, and
//! filecoin-proofs-api's `verify_window_post` accepts the proof bytes it received. Parameters
//! come from the parameter directory, generated once where missing, as in `porep.rs`.

#![cfg(feature = "porep")]

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use base64::Engine;
use cuzk_circuits::porep::{self, generate_test_parameters, SealedSector, SectorSize};
use cuzk_circuits::porep_c1::{self, SealProof};
use cuzk_circuits::post::{self, PostKind, PostProof, PostSector};
use cuzk_circuits::{ShapeCache, FILECOIN_CACHE_ENV};
use cuzk_wire::job::JobStatus;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const MINER: u64 = 1234;
const SECTOR: u64 = 7;

fn proto_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../gateway/proto")
}

/// `cuzk gateway` on a unix socket in `dir`, once it says it listens.
async fn start_gateway(nats_url: &str, dir: &Path) -> (Child, String) {
    let socket = format!("unix:{}", dir.join("gateway.sock").display());
    start_gateway_with(nats_url, &socket, &[]).await
}

/// `cuzk gateway` on `listen` with settings from the environment (a gateway that does not
/// know one ignores it), once it says it listens; the address it listens on.
async fn start_gateway_with(
    nats_url: &str,
    listen: &str,
    env: &[(&str, String)],
) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["gateway", "--nats-url", nats_url, "--listen", listen])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start cuzk gateway");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(support::TIMEOUT, lines.next_line())
        .await
        .expect("the gateway started in time")
        .unwrap()
        .expect("the gateway exited before listening");
    let address = line
        .split_once("listening on ")
        .map(|(_, address)| address.trim().to_owned())
        .unwrap_or_else(|| panic!("{line}"));
    (child, address)
}

async fn gpu_nodes(cluster: &cuzk_cli::LocalCluster) -> usize {
    let nodes = cuzk_common::nodes::list(&cluster.topology).await.unwrap();
    nodes.iter().filter(|n| n.role == "gpu").count()
}

/// Runs the Python client; returns its transcript, failing the test if it failed.
async fn python(address: &str, args: &[&str]) -> String {
    run_python("gateway_client.py", address, args).await
}

/// Runs the hostile Python client (`tests/py/gateway_hostile.py`) with its `options` (TLS CA,
/// token) and `args`; returns its transcript, failing the test if it failed.
async fn hostile(address: &str, options: &[&str], args: &[&str]) -> String {
    let all: Vec<&str> = options.iter().chain(args).copied().collect();
    run_python("gateway_hostile.py", address, &all).await
}

async fn run_python(script: &str, address: &str, args: &[&str]) -> String {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!("{}/../tests/py/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(python)
        .arg(script)
        .arg(address)
        .arg(proto_dir())
        .args(args)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(support::TIMEOUT, output)
        .await
        .expect("the Python client finished in time")
        .expect("run python3 (grpcio-tools: scripts/ensure-deps.sh --tests)");
    let transcript = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!("--- Python gRPC client {args:?} ---\n{transcript}");
    assert!(
        output.status.success(),
        "the Python client failed: {}\n{transcript}",
        String::from_utf8_lossy(&output.stderr)
    );
    transcript
}

/// Certificates made with openssl for one test: a CA, the gateway's (for localhost and
/// 127.0.0.1) and a client's, signed by it.
struct Certificates {
    ca: PathBuf,
    server: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
    /// The client certificate's SHA-256 fingerprint, as openssl prints it.
    client_sha256: String,
}

fn certificates(dir: &Path) -> Certificates {
    let openssl = |args: &[&str]| support::openssl(dir, args);
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &key,
            &["-days", "2", "-subj", "/CN=cuzk test CA"],
            &["-keyout", "ca.key", "-out", "ca.pem"],
        ]
        .concat(),
    );
    for (name, usage, names) in [
        (
            "server",
            "serverAuth",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        ),
        ("client", "clientAuth", ""),
    ] {
        let ext = format!("{names}extendedKeyUsage={usage}\n");
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let subject = format!("/CN=cuzk test {name}");
        openssl(
            &[
                &["req"][..],
                &key,
                &[
                    "-subj",
                    &subject,
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                ],
            ]
            .concat(),
        );
        openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.pem"),
        ]);
    }
    let fingerprint = openssl(&[
        "x509",
        "-in",
        "client.pem",
        "-noout",
        "-fingerprint",
        "-sha256",
    ]);
    let pair = |name: &str| {
        (
            dir.join(format!("{name}.pem")),
            dir.join(format!("{name}.key")),
        )
    };
    Certificates {
        ca: dir.join("ca.pem"),
        server: pair("server"),
        client: pair("client"),
        client_sha256: fingerprint.trim().rsplit('=').next().unwrap().to_owned(),
    }
}

/// The gateway's environment for TLS with `certs` and the clients in `clients` (TOML).
fn secured(dir: &Path, certs: &Certificates, clients: &str) -> Vec<(&'static str, String)> {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join("clients.toml");
    std::fs::write(&file, clients).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let path = |p: &Path| p.display().to_string();
    vec![
        ("CUZK_GATEWAY_TLS_CERT", path(&certs.server.0)),
        ("CUZK_GATEWAY_TLS_KEY", path(&certs.server.1)),
        ("CUZK_GATEWAY_TLS_CLIENT_CA", path(&certs.ca)),
        ("CUZK_GATEWAY_AUTH_FILE", path(&file)),
    ]
}

/// A 2 KiB sector sealed up to C1 through filecoin-proofs.
fn sealed(dir: &Path) -> SealedSector {
    let proof = SealProof::v1_1(SectorSize::S2KiB);
    porep::seal_sector(
        proof,
        dir,
        SECTOR,
        porep_c1::prover_id(MINER),
        &mut rand::rngs::OsRng,
    )
    .expect("2 KiB sector sealed to C1")
}

/// The C1 file Curio and lotus have: filecoin-proofs-api's JSON (the proof named, the vanilla
/// proofs keyed by tree shape) base64 in `Phase1Out`; `edit` changes the C1 first, `pad` adds
/// trailing spaces (still valid JSON).
fn lotus_c1(
    sector: &SealedSector,
    edit: impl FnOnce(&mut serde_json::Value),
    pad: usize,
) -> Vec<u8> {
    let mut c1: serde_json::Value = serde_json::from_slice(&sector.c1_json).unwrap();
    edit(&mut c1);
    let vanilla = c1["vanilla_proofs"].take();
    c1["vanilla_proofs"] = json!({ "StackedDrg2KiBV1": vanilla });
    c1["registered_proof"] = json!(sector.proof.api_name());
    let phase1 = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&c1).unwrap());
    let mut file = serde_json::to_vec(&json!({
        "SectorNum": sector.sector_id, "Phase1Out": phase1, "SectorSize": 2048
    }))
    .unwrap();
    file.resize(file.len() + pad, b' ');
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curio_client_sees_the_api_its_refusals_and_a_failed_prove() {
    let work = tempfile::tempdir().unwrap();
    let sector = sealed(&work.path().join("sector"));
    let corrupt = lotus_c1(
        &sector,
        |c1| {
            let byte = c1["comm_r"][0].as_u64().unwrap();
            c1["comm_r"][0] = json!(byte ^ 1);
        },
        0,
    );
    let corrupt_file = work.path().join("corrupt.json");
    std::fs::write(&corrupt_file, corrupt).unwrap();

    let cluster = support::cluster().await;
    let (mut gateway, address) = start_gateway(&cluster.url(), work.path()).await;
    let transcript = python(&address, &["checks"]).await;
    assert!(
        transcript.contains("rpc SubmitProof(cuzk.v1.SubmitProofRequest)"),
        "{transcript}"
    );
    let corrupt_path = corrupt_file.to_str().unwrap();
    let (miner, number) = (MINER.to_string(), SECTOR.to_string());
    python(&address, &["prove-fails", corrupt_path, &miner, &number]).await;

    // CancelProof: a job still running (its record exists) and one that is done.
    let done = support::job(
        "gw-done",
        "mimc",
        json!({"rounds": 64, "partitions": 1}),
        "",
    );
    let result = cuzk_cli::submit_and_wait(&cluster.client, &done, support::TIMEOUT)
        .await
        .unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    let running = support::job(
        "gw-running",
        "mimc",
        json!({"rounds": 20000, "partitions": 8}),
        "",
    );
    let js = &cluster.topology.js;
    cuzk_cli::submit::publish_job(js, None, &running)
        .await
        .unwrap();
    let ledger = cuzk_common::lifecycle::Ledger::new(&cluster.topology);
    while ledger.get("gw-running").await.unwrap().is_none() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    python(&address, &["cancel", "gw-running", "gw-done"]).await;

    // PreloadSRS / EvictSRS on the cluster's GPU node, then with a second one that lacks the
    // shape's parameters (an empty cache) and may not generate test parameters.
    let mimc = |rounds: u32| {
        json!({"circuit": "mimc", "params": {"rounds": rounds, "partitions": 1}}).to_string()
    };
    python(&address, &["srs", &mimc(96)]).await;
    let cache = work.path().join("empty-cache");
    let _strict = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "gpu-node",
            "--nats-url",
            &cluster.url(),
            "--gpu-backend",
            "cpu",
        ])
        .arg("--param-cache")
        .arg(&cache)
        .kill_on_drop(true)
        .spawn()
        .expect("start a second GPU node");
    while gpu_nodes(&cluster).await < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    python(&address, &["srs-refused", &mimc(97)]).await;
    gateway.kill().await.unwrap();
    cluster.stop().await.unwrap();
}

/// What a careless or hostile client sends, from `tests/py/gateway_hostile.py`: huge ids
/// (refused within 1 s, the gateway's peak RSS grown by at most 300 MiB), more calls at once
/// than the gateway serves (refused, not queued), a call past the gateway's longest deadline
/// (DEADLINE_EXCEEDED), a request id sent twice (one job). Then over TLS with a clients file:
/// callers without credentials or the powers refused for CRITICAL, EvictSRS and cancelling
/// another client's job; a token client and a client certificate served end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_client_is_refused_quickly_and_cheaply() {
    let work = tempfile::tempdir().unwrap();
    let sector = sealed(&work.path().join("sector"));
    // Well-formed but wrong: its job fails in synthesis, before any parameters are needed.
    let corrupt = lotus_c1(
        &sector,
        |c1| {
            let byte = c1["comm_r"][0].as_u64().unwrap();
            c1["comm_r"][0] = json!(byte ^ 1);
        },
        0,
    );
    let c1 = work.path().join("corrupt.json");
    std::fs::write(&c1, corrupt).unwrap();
    let (c1, miner, number) = (c1.to_str().unwrap(), MINER.to_string(), SECTOR.to_string());
    let cluster = support::cluster().await;

    let limits = [
        ("CUZK_GATEWAY_MAX_CALLS", "8".to_owned()),
        ("CUZK_GATEWAY_MAX_STREAMS_PER_CONNECTION", "4".to_owned()),
        ("CUZK_GATEWAY_DEFAULT_DEADLINE_SECS", "1".to_owned()),
        ("CUZK_GATEWAY_MAX_DEADLINE_SECS", "3".to_owned()),
    ];
    let (mut gateway, address) = start_gateway_with(&cluster.url(), "127.0.0.1:0", &limits).await;
    let pid = gateway.id().unwrap().to_string();
    hostile(&address, &[], &["huge-ids", &pid]).await;
    hostile(&address, &[], &["flood", "8"]).await;
    hostile(&address, &[], &["deadline"]).await;
    hostile(&address, &[], &["idempotent", c1, &miner, &number]).await;
    gateway.kill().await.unwrap();

    let certs = certificates(work.path());
    let clients = format!(
        "[[client]]\nname = \"curio\"\ntoken = \"{CURIO_TOKEN}\"\npowers = [\"submit\"]\n\
         [[client]]\nname = \"other\"\ntoken = \"{OTHER_TOKEN}\"\npowers = [\"submit\"]\n\
         [[client]]\nname = \"ops\"\ncert_sha256 = \"{}\"\npowers = [\"srs_admin\", \"cancel_any\"]\n",
        certs.client_sha256
    );
    let env = secured(work.path(), &certs, &clients);
    let (mut gateway, address) = start_gateway_with(&cluster.url(), "127.0.0.1:0", &env).await;
    let ca = certs.ca.to_str().unwrap();
    let (cert, key) = (
        certs.client.0.to_str().unwrap(),
        certs.client.1.to_str().unwrap(),
    );
    let args = [
        "auth",
        CURIO_TOKEN,
        OTHER_TOKEN,
        cert,
        key,
        c1,
        &miner,
        &number,
    ];
    hostile(&address, &["--ca", ca], &args).await;
    gateway.kill().await.unwrap();
    cluster.stop().await.unwrap();
}

const CURIO_TOKEN: &str = "curio-token-0123456789abcdef0123456789";
const OTHER_TOKEN: &str = "other-token-0123456789abcdef0123456789";

#[test]
fn a_curio_porep_request_is_proved_and_verify_seal_accepts_it() {
    // SAFETY: the first thing the test does, before it starts threads; filecoin-proofs reads
    // its settings once, on first use, which is after this.
    unsafe { std::env::set_var(FILECOIN_CACHE_ENV, ShapeCache::default_dir().unwrap()) };
    let engine = cuzk_prover::setup::CpuFixedBase::new();
    let shapes = ShapeCache::open_default(true).unwrap();
    generate_test_parameters(SectorSize::S2KiB, &shapes, &engine, false).expect("2 KiB parameters");

    let work = tempfile::tempdir().unwrap();
    let sector = sealed(&work.path().join("sector"));
    // Larger than a job carries inline: the gateway stages it in the inputs bucket.
    let file = work.path().join("c1.json");
    std::fs::write(&file, lotus_c1(&sector, |_| {}, 800 << 10)).unwrap();
    let out = work.path().join("proof.bin");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let certs = certificates(work.path());
    runtime.block_on(async {
        let cluster = support::cluster().await;
        // Over TLS, Curio's token, beside hostile calls (tests/py/gateway_hostile.py).
        let clients = format!(
            "[[client]]\nname = \"curio\"\ntoken = \"{CURIO_TOKEN}\"\npowers = [\"submit\"]\n"
        );
        let mut env = secured(work.path(), &certs, &clients);
        env.push(("CUZK_GATEWAY_MAX_CALLS", "8".into()));
        let (mut gateway, address) = start_gateway_with(&cluster.url(), "127.0.0.1:0", &env).await;
        let (miner, number) = (MINER.to_string(), SECTOR.to_string());
        let pid = gateway.id().unwrap().to_string();
        let options = ["--ca", certs.ca.to_str().unwrap(), "--token", CURIO_TOKEN];
        let args = [
            "prove-beside",
            &pid,
            file.to_str().unwrap(),
            &miner,
            &number,
            out.to_str().unwrap(),
        ];
        let transcript = hostile(&address, &options, &args).await;
        gateway.kill().await.unwrap();
        let job_id = transcript
            .split("job_id=")
            .nth(1)
            .and_then(|rest| rest.split([',', ' ']).next())
            .expect("the transcript names the job");
        // The request id sent twice made one job.
        let records = cuzk_common::lifecycle::Ledger::new(&cluster.topology)
            .recent(100)
            .await
            .unwrap();
        let jobs: Vec<_> = records.iter().map(|r| r.job_id.as_str()).collect();
        assert_eq!(jobs, [job_id], "one job for one request id");
        // The C1 went through the inputs bucket, and was deleted when the job was done.
        support::staged_input_released(&cluster.topology, job_id).await;
        cluster.stop().await.unwrap();
    });

    let proof = std::fs::read(&out).unwrap();
    assert!(
        porep::verify_seal(&sector, &proof).unwrap(),
        "verify_seal rejected the proof"
    );
    // The proof is for this sector only.
    let other = SealedSector {
        sector_id: SECTOR + 1,
        ..sector
    };
    assert!(!porep::verify_seal(&other, &proof).unwrap_or(false));
}

#[test]
fn a_curio_window_post_request_is_proved_and_verify_window_post_accepts_it() {
    use filecoin_proofs_api::{PublicReplicaInfo, RegisteredPoStProof, SectorId};
    // SAFETY: as above.
    unsafe { std::env::set_var(FILECOIN_CACHE_ENV, ShapeCache::default_dir().unwrap()) };
    let proof = PostProof::current(PostKind::Window, SectorSize::S2KiB);
    let engine = cuzk_prover::setup::CpuFixedBase::new();
    let shapes = ShapeCache::open_default(true).unwrap();
    post::generate_test_parameters(proof, &shapes, &engine, false)
        .expect("2 KiB WindowPoSt parameters");

    let work = tempfile::tempdir().unwrap();
    let sectors: Vec<PostSector> = (0..2)
        .map(|i| {
            let dir = work.path().join(format!("s{i}"));
            PostSector::seal(SectorSize::S2KiB, &dir, 30 + i, &mut rand::rngs::OsRng).unwrap()
        })
        .collect();
    let mut randomness = [0x77; 32];
    randomness[31] &= 0x3f;
    let prover = porep_c1::prover_id(MINER);
    let vanilla = post::vanilla_proofs(proof, &sectors, randomness, prover).unwrap();
    let b64 = &base64::engine::general_purpose::STANDARD;
    // lotus' number of StackedDrgWindow2KiBV1_1, filecoin-proofs-api's V1_2.
    let request = json!({
        "proof_kind": "WINDOW_POST_PARTITION", "registered_proof": 10, "miner_id": MINER,
        "partition_index": 0, "randomness": hex::encode(randomness),
        "vanilla_proofs": vanilla.iter().map(|p| b64.encode(p)).collect::<Vec<_>>(),
    });
    let request_file = work.path().join("post.json");
    std::fs::write(&request_file, serde_json::to_vec(&request).unwrap()).unwrap();
    let out = work.path().join("post.proof");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let cluster = support::cluster().await;
            let (mut gateway, address) = start_gateway(&cluster.url(), work.path()).await;
            let args = [
                "post",
                request_file.to_str().unwrap(),
                out.to_str().unwrap(),
            ];
            python(&address, &args).await;
            gateway.kill().await.unwrap();
            cluster.stop().await.unwrap();
        });

    let bytes = std::fs::read(&out).unwrap();
    let registered = RegisteredPoStProof::StackedDrgWindow2KiBV1_2;
    let replicas = sectors
        .iter()
        .map(|s| {
            (
                SectorId::from(s.sector_id),
                PublicReplicaInfo::new(registered, s.comm_r),
            )
        })
        .collect();
    let verify = |randomness: &[u8; 32]| {
        filecoin_proofs_api::post::verify_window_post(
            randomness,
            &[(registered, &bytes[..])],
            &replicas,
            prover,
        )
        .unwrap_or(false)
    };
    assert!(verify(&randomness), "verify_window_post rejected the proof");
    assert!(
        !verify(&[0x12; 32]),
        "verify_window_post accepted other randomness"
    );
}
