//! The shipped 3-node cluster (deploy/nats/cluster/n*.conf and the users of
//! deploy/nats/accounts.conf they include) is secure as written, and a job runs through it. The
//! three servers start from those files with only their store directories, certificate
//! directories, ports and routes made local (certificates made here with openssl, one per server
//! as on three hosts). A plaintext client is refused even with the admin's password, routes
//! require a certificate from the CA, the monitoring port answers on loopback only, and then `cuzk
//! provision` as `admin`, a synth node as `synth`, a GPU node on the CPU backend as `gpu` and
//! `cuzk submit --wait` as `submitter`, all over TLS, run a job whose proof verifies, in R3
//! streams led by one of the three servers. Mutual TLS for clients, turned on as docs/deploy.md
//! says, admits only clients with a certificate from the CA.

mod support;

use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cuzk_common::config::{LimitsProfile, NatsArgs, ParamArgs};
use cuzk_common::local_nats::{free_port, nats_server_binary};
use cuzk_common::topology::JOBS_STREAM;
use cuzk_wire::job::{JobInput, JobResult, JobSpec, JobStatus, Priority, JOB_SPEC_VERSION};
use support::openssl;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const CUZK: &str = env!("CARGO_BIN_EXE_cuzk");
const ROLES: [&str; 6] = ["admin", "submitter", "priority", "synth", "gpu", "gateway"];
/// Where the shipped configs expect the certificates.
const TLS_DIR: &str = "/etc/cuzk/nats/tls";

/// A process killed on drop.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A CA in `dir`, and for each server a directory laid out as the configs expect
/// (`ca.pem`, `server.pem`, `server-key.pem`) holding its own certificate, for both server and
/// client use (it serves clients and dials routes), naming its host and the loopback address.
fn certificates(dir: &Path, servers: usize) -> Vec<PathBuf> {
    let key = "ec_paramgen_curve:prime256v1";
    let new_key = ["-newkey", "ec", "-pkeyopt", key, "-nodes"];
    let ca = ["req", "-x509", "-days", "2", "-subj", "/CN=cuzk test CA"];
    let out = ["-keyout", "ca.key", "-out", "ca.pem"];
    openssl(dir, &[&ca[..], &new_key, &out].concat());
    (1..=servers)
        .map(|n| {
            let tls = dir.join(format!("tls-{n}"));
            std::fs::create_dir(&tls).unwrap();
            std::fs::copy(dir.join("ca.pem"), tls.join("ca.pem")).unwrap();
            let ext = format!(
                "subjectAltName=DNS:cuzk-nats-{n},IP:127.0.0.1\n\
                 extendedKeyUsage=serverAuth,clientAuth\n"
            );
            std::fs::write(tls.join("server.ext"), ext).unwrap();
            let subject = format!("/CN=cuzk-nats-{n}");
            let request = ["req", "-subj", &subject, "-keyout", "server-key.pem"];
            openssl(
                &tls,
                &[&request[..], &new_key, &["-out", "server.csr"]].concat(),
            );
            let sign = "x509 -req -in server.csr -CA ../ca.pem -CAkey ../ca.key -CAcreateserial \
                        -days 2 -extfile server.ext -out server.pem";
            openssl(&tls, &sign.split_whitespace().collect::<Vec<_>>());
            tls
        })
        .collect()
}

/// Node `n`'s shipped config, copied under `dir` as deploy/nats is laid out (it includes
/// `../accounts.conf`), with its store and certificates moved into `dir`.
fn node_config(dir: &Path, n: usize, tls: &Path) -> PathBuf {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats");
    std::fs::create_dir_all(dir.join("cluster")).unwrap();
    std::fs::copy(deploy.join("accounts.conf"), dir.join("accounts.conf")).unwrap();
    let text = std::fs::read_to_string(deploy.join(format!("cluster/n{n}.conf"))).unwrap();
    assert!(
        text.contains("/var/lib/cuzk/nats"),
        "n{n}.conf's store_dir moved"
    );
    let store = dir.join(format!("store-{n}"));
    let text = text
        .replace("/var/lib/cuzk/nats", store.to_str().unwrap())
        .replace(TLS_DIR, tls.to_str().unwrap());
    let config = dir.join(format!("cluster/n{n}.conf"));
    std::fs::write(&config, text).unwrap();
    config
}

struct Server {
    _process: Process,
    port: u16,
    monitor: u16,
}

/// Starts the three servers, ports and routes on loopback instead of the hosts cuzk-nats-1..3.
fn start_cluster(dir: &Path) -> Vec<Server> {
    let tls = certificates(dir, 3);
    let routes: Vec<u16> = (0..3).map(|_| free_port().unwrap()).collect();
    let route_urls: Vec<String> = routes
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect();
    let route_urls = route_urls.join(",");
    (1..=3)
        .map(|n| {
            let config = node_config(dir, n, &tls[n - 1]);
            start_server(dir, n, &config, routes[n - 1], &route_urls)
        })
        .collect()
}

/// Starts server `n` from `config`, its routes listening on `route_port` and dialling
/// `route_urls`, with the role passwords in its environment.
fn start_server(dir: &Path, n: usize, config: &Path, route_port: u16, route_urls: &str) -> Server {
    let binary = nats_server_binary().expect("nats-server is installed");
    let (port, monitor) = (free_port().unwrap(), free_port().unwrap());
    let mut command = Command::new(binary);
    command
        .arg("-c")
        .arg(config)
        .args(["-p", &port.to_string(), "-m", &monitor.to_string()])
        .args(["--cluster", &format!("nats://127.0.0.1:{route_port}")])
        .args(["--routes", route_urls])
        .stdout(Stdio::null())
        .stderr(log(dir, &format!("nats-{n}")));
    for role in ROLES {
        command.env(
            format!("CUZK_{}_PASSWORD", role.to_uppercase()),
            secret(role),
        );
    }
    let process = Process(command.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "n{n}.conf did not start: {}",
            std::fs::read_to_string(dir.join(format!("nats-{n}.log"))).unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Server {
        _process: process,
        port,
        monitor,
    }
}

fn secret(role: &str) -> String {
    format!("{role}-secret")
}

fn log(dir: &Path, name: &str) -> std::fs::File {
    std::fs::File::create(dir.join(format!("{name}.log"))).unwrap()
}

/// What the server answers a plaintext client that logs in as the admin and pings: its INFO
/// line, then `PONG` if admitted.
async fn plaintext_login(port: u16) -> (String, String) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut stream = BufReader::new(stream);
    let mut info = String::new();
    stream.read_line(&mut info).await.unwrap();
    let connect = format!(
        "CONNECT {{\"user\":\"admin\",\"pass\":\"{}\",\"verbose\":false,\"pedantic\":false}}\r\nPING\r\n",
        secret("admin")
    );
    stream
        .get_mut()
        .write_all(connect.as_bytes())
        .await
        .unwrap();
    let mut reply = String::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_line(&mut reply)).await;
    assert!(read.is_ok(), "the server neither admits nor refuses");
    (info, reply)
}

async fn http_get(address: (IpAddr, u16), path: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.0\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default())
}

/// This host's address on its default route, if it has one.
fn non_loopback_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("198.51.100.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// `cuzk <command>` logged in as `role` over TLS to every server.
fn cuzk(command: &str, role: &str, urls: &str, ca: &Path) -> Command {
    let mut cuzk = Command::new(CUZK);
    cuzk.arg(command)
        .args(["--nats-url", urls, "--nats-tls-ca", ca.to_str().unwrap()])
        .args(["--nats-user", role, "--nats-password", &secret(role)])
        .args(["--nats-inbox-prefix", &format!("_INBOX_{role}")])
        .args(["--nats-replicas", "3", "--nats-limits", "local"])
        .stdin(Stdio::null());
    // A client user is a tenant of its own name (deploy/nats/accounts.conf).
    if ["submitter", "priority", "gateway"].contains(&role) {
        cuzk.args(["--nats-tenant", role]);
    }
    cuzk
}

/// `cuzk provision` as the admin, retried while the fresh cluster elects its leaders.
fn provision(urls: &str, ca: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let output = cuzk("provision", "admin", urls, ca).output().unwrap();
        if output.status.success() {
            return;
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(Instant::now() < deadline, "cuzk provision: {stderr}");
        eprintln!("retrying cuzk provision: {stderr}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_through_the_shipped_cluster_over_tls_only() {
    let dir = tempfile::tempdir().unwrap();
    let servers = start_cluster(dir.path());
    let ca = dir.path().join("ca.pem");
    let loopback = IpAddr::from([127, 0, 0, 1]);

    // A plaintext client is refused, whatever its password.
    for server in &servers {
        let (info, reply) = plaintext_login(server.port).await;
        assert!(
            !reply.starts_with("PONG"),
            "a plaintext client was admitted on port {}: {reply}",
            server.port
        );
        assert!(info.contains("\"tls_required\":true"), "{info}");
    }
    // Monitoring answers on loopback, and not on the host's other address, where the client
    // port does answer (so the address is reachable).
    for server in &servers {
        let varz = http_get((loopback, server.monitor), "/varz").await.unwrap();
        let varz: serde_json::Value = serde_json::from_str(&varz).unwrap();
        assert_eq!(varz["http_host"], "127.0.0.1", "{varz}");
        // Routes take only servers that show a certificate from the CA.
        let routes = &varz["cluster"];
        assert_eq!(
            (&routes["tls_required"], &routes["tls_verify"]),
            (&true.into(), &true.into()),
            "{routes}"
        );
        let Some(ip) = non_loopback_address() else {
            eprintln!("no address besides loopback: monitoring checked on loopback only");
            continue;
        };
        assert!(
            TcpStream::connect((ip, server.port)).is_ok(),
            "{ip} is reachable"
        );
        let monitoring = http_get((ip, server.monitor), "/varz").await;
        assert!(monitoring.is_err(), "monitoring answers on {ip}");
    }

    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("tls://127.0.0.1:{}", s.port))
        .collect();
    let urls = urls.join(",");
    provision(&urls, &ca);
    // Every server sees the same JetStream meta leader.
    let mut leaders = Vec::new();
    for server in &servers {
        let jsz = http_get((loopback, server.monitor), "/jsz").await.unwrap();
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
    let synth = cuzk("synth-node", "synth", &urls, &ca)
        .args(["--synth-threads", "1"])
        .stdout(log(dir.path(), "synth"))
        .stderr(log(dir.path(), "synth-err"))
        .spawn()
        .unwrap();
    let _synth = Process(synth);
    let gpu = cuzk("gpu-node", "gpu", &urls, &ca)
        .args([
            "--gpu-backend",
            "cpu",
            "--gpu-cpu-threads",
            "1",
            "--allow-test-params",
        ])
        .stdout(log(dir.path(), "gpu"))
        .stderr(log(dir.path(), "gpu-err"))
        .spawn()
        .unwrap();
    let _gpu = Process(gpu);

    let spec = JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: "secure-cluster".into(),
        circuit: "mimc".into(),
        params: serde_json::json!({"rounds": 300, "partitions": 2}),
        input: JobInput::Utf8("over tls".into()),
        priority: Priority::Normal,
    };
    let output = cuzk("submit", "submitter", &urls, &ca)
        .args([
            "--circuit",
            &spec.circuit,
            "--params",
            &spec.params.to_string(),
        ])
        .args(["--input", "over tls", "--job-id", &spec.job_id])
        .args(["--wait", "--timeout-secs", "240"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cuzk submit: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: JobResult = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result.status, JobStatus::Done, "{:?}", result.error);
    let params = ParamArgs::default().resolve(true).unwrap();
    let cache = cuzk_cli::shape_cache(&params).unwrap();
    cuzk_cli::verify_job_proof(&spec, &result, &cache).expect("the proof verifies");

    // The job went through R3 streams, led by one of the three servers.
    let admin = NatsArgs {
        urls: Some(urls.split(',').map(str::to_owned).collect()),
        limits: Some(LimitsProfile::Local),
        user: Some("admin".into()),
        password: Some(secret("admin").into()),
        tls_ca: Some(ca.clone()),
        ..Default::default()
    }
    .resolve("secure-cluster-test")
    .unwrap();
    let admin = cuzk_common::nats::connect(&admin).await.unwrap();
    let js = async_nats::jetstream::new(admin);
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

/// A client certificate signed by the CA in `dir` (as docs/deploy.md makes one for mutual TLS).
fn client_certificate(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    let request = "req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
                   -subj /CN=cuzk-client -keyout client-key.pem -out client.csr";
    openssl(dir, &request.split_whitespace().collect::<Vec<_>>());
    let sign = "x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
                -extfile client.ext -out client.pem";
    openssl(dir, &sign.split_whitespace().collect::<Vec<_>>());
    (dir.join("client.pem"), dir.join("client-key.pem"))
}

/// The mutual TLS that docs/deploy.md describes, `verify: true` uncommented in a node's `tls`:
/// a client with a certificate from the CA logs in, one without is refused, password or not.
#[tokio::test]
async fn mutual_tls_as_documented_admits_only_clients_with_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let tls = certificates(dir.path(), 1);
    let (cert, key) = client_certificate(dir.path());
    let config = node_config(dir.path(), 1, &tls[0]);
    let text = std::fs::read_to_string(&config).unwrap();
    assert_eq!(text.matches("# verify: true").count(), 1, "{text}");
    std::fs::write(&config, text.replace("# verify: true", "verify: true")).unwrap();
    // Alone: its routes go to itself, which a server ignores.
    let route = free_port().unwrap();
    let server = start_server(
        dir.path(),
        1,
        &config,
        route,
        &format!("nats://127.0.0.1:{route}"),
    );
    let url = format!("tls://127.0.0.1:{}", server.port);
    let ca = dir.path().join("ca.pem");

    let admin = NatsArgs {
        urls: Some(vec![url.clone()]),
        user: Some("admin".into()),
        password: Some(secret("admin").into()),
        tls_ca: Some(ca.clone()),
        tls_cert: Some(cert),
        tls_key: Some(key),
        ..Default::default()
    }
    .resolve("mtls-test")
    .unwrap();
    let client = cuzk_common::nats::connect(&admin).await.unwrap();
    client
        .flush()
        .await
        .expect("the client with a certificate is served");

    let without =
        async_nats::ConnectOptions::with_user_and_password("admin".into(), secret("admin"))
            .add_root_certificates(ca)
            .require_tls(true)
            .connect(url.as_str());
    let without = tokio::time::timeout(Duration::from_secs(5), without).await;
    assert!(
        without.expect("connect answers").is_err(),
        "a client without a certificate was admitted"
    );
}
