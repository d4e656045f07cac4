//! The shipped 3-node cluster (deploy/nats/cluster/n*.conf and the users of
//! deploy/nats/accounts.conf they include) is secure as written, and a job runs through it. The
//! three servers start from those files with only their store directories, certificate
//! directories, ports and routes made local (certificates made here with openssl, one per server
//! as on three hosts). A plaintext client is refused even with the admin's password, routes
//! require a certificate from the CA, the monitoring port answers on loopback only, and then `cuzk
//! provision` as `admin`, the ledger service as `ledger`, a synth node as `synth`, a GPU node
//! on the CPU backend as `gpu` and `cuzk submit --wait` as `submitter`, all over TLS, run a job
//! whose proof verifies, in R3 streams led by one of the three servers. Mutual TLS for clients, turned on as docs/deploy.md
//! says, admits only clients with a certificate from the CA.

mod support;

use std::path::Path;

use cuzk_common::local_nats::free_port;
use cuzk_common::topology::JOBS_STREAM;
use support::shipped::{
    certificates, client_certificate, http_get, monitoring_on_loopback_only, refuses_plaintext,
    secret, shipped_config, start_server, varz, Deployment, Server, LOOPBACK,
};

/// Node `n`'s shipped config under `dir`, its store and certificates there too.
fn node_config(dir: &Path, n: usize, tls: &Path) -> std::path::PathBuf {
    let store = dir.join(format!("store-{n}"));
    shipped_config(dir, &format!("cluster/n{n}.conf"), &store, tls)
}

/// Starts server `n` from `config`, its routes listening on `route_port` and dialling
/// `route_urls`.
fn start_node(dir: &Path, n: usize, config: &Path, route_port: u16, route_urls: &str) -> Server {
    let routes = [
        "--cluster".to_owned(),
        format!("nats://127.0.0.1:{route_port}"),
        "--routes".to_owned(),
        route_urls.to_owned(),
    ];
    start_server(dir, &format!("nats-{n}"), config, &routes, secret)
}

/// Starts the three servers, ports and routes on loopback instead of the hosts cuzk-nats-1..3.
fn start_cluster(dir: &Path) -> Vec<Server> {
    let tls = certificates(dir, &["cuzk-nats-1", "cuzk-nats-2", "cuzk-nats-3"]);
    let routes: Vec<u16> = (0..3).map(|_| free_port().unwrap()).collect();
    let route_urls: Vec<String> = routes
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect();
    let route_urls = route_urls.join(",");
    (1..=3)
        .map(|n| {
            let config = node_config(dir, n, &tls[n - 1]);
            start_node(dir, n, &config, routes[n - 1], &route_urls)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_through_the_shipped_cluster_over_tls_only() {
    let dir = tempfile::tempdir().unwrap();
    let servers = start_cluster(dir.path());
    for server in &servers {
        refuses_plaintext(server.port).await;
        monitoring_on_loopback_only(server).await;
        // Routes take only servers that show a certificate from the CA.
        let routes = &varz(server).await["cluster"];
        assert_eq!(
            (&routes["tls_required"], &routes["tls_verify"]),
            (&true.into(), &true.into()),
            "{routes}"
        );
    }

    let deployment = Deployment::new(&servers, dir.path().join("ca.pem"), secret);
    deployment.provision();
    // Every server sees the same JetStream meta leader.
    let mut leaders = Vec::new();
    for server in &servers {
        let jsz = http_get((LOOPBACK, server.monitor), "/jsz").await.unwrap();
        let jsz: serde_json::Value = serde_json::from_str(&jsz).unwrap();
        leaders.push(
            jsz["meta_cluster"]["leader"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        );
    }
    assert!(
        leaders[0].starts_with("cuzk-nats-") && leaders.iter().all(|l| *l == leaders[0]),
        "{leaders:?}"
    );
    deployment.run_job(dir.path(), "secure-cluster");

    // The job went through R3 streams, led by one of the three servers.
    let js = async_nats::jetstream::new(deployment.admin().await);
    let mut stream = js.get_stream(JOBS_STREAM).await.unwrap();
    let info = stream.info().await.unwrap();
    let cluster = info
        .cluster
        .clone()
        .expect("an R3 stream reports its cluster");
    assert_eq!(cluster.name.as_deref(), Some("cuzk"));
    assert!(
        cluster
            .leader
            .as_deref()
            .is_some_and(|l| l.starts_with("cuzk-nats-")),
        "{cluster:?}"
    );
    assert_eq!(cluster.replicas.len(), 2, "{cluster:?}");
}

/// The mutual TLS that docs/deploy.md describes, `verify: true` uncommented in a node's `tls`:
/// a client with a certificate from the CA logs in, one without is refused, password or not.
#[tokio::test]
async fn mutual_tls_as_documented_admits_only_clients_with_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path(), &["cuzk-nats-1"]);
    let (cert, key) = client_certificate(dir.path());
    let config = node_config(dir.path(), 1, &tls[0]);
    let text = std::fs::read_to_string(&config).unwrap();
    assert_eq!(text.matches("# verify: true").count(), 1, "{text}");
    std::fs::write(&config, text.replace("# verify: true", "verify: true")).unwrap();
    // Alone: its routes go to itself, which a server ignores.
    let route = free_port().unwrap();
    let server = start_node(
        dir.path(),
        1,
        &config,
        route,
        &format!("nats://127.0.0.1:{route}"),
    );
    let deployment = Deployment::new(
        std::slice::from_ref(&server),
        dir.path().join("ca.pem"),
        secret,
    );
    let admin = deployment
        .nats_args("admin", Some((cert, key)))
        .resolve("mtls-test")
        .unwrap();
    let client = cuzk_common::nats::connect(&admin).await.unwrap();
    client
        .flush()
        .await
        .expect("the client with a certificate is served");

    assert!(
        deployment
            .refuses(server.port, "admin", &secret("admin"))
            .await,
        "a client without a certificate was admitted"
    );
}
