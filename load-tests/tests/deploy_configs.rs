//! The nats-server configurations in `deploy/nats` start and do what they promise: the dev
//! server and the auth server come up with JetStream, the three cluster nodes route to each
//! other, elect a JetStream meta leader and hold an R3 stream. Each config is used as written
//! except for its store directory and ports (moved to temporary ones so tests can run side by
//! side); the permissions themselves are tested in `cli/tests/permissions.rs`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use cuzk_common::local_nats::{free_port, nats_server_binary};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/nats")
}

/// A server process, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Copies `config` (and the users it includes) into `dir` with its store directory moved to
/// `store`, so the copy can be run as is. (nats-server 2.9 refuses `-sd` next to a `store_dir` in the file.)
fn with_store(config: &Path, dir: &Path, store: &Path) -> PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    assert!(
        text.contains("/var/lib/cuzk/nats"),
        "{} no longer has the expected store_dir",
        config.display()
    );
    let copy = dir.join(config.file_name().unwrap());
    if text
        .lines()
        .any(|line| line.trim() == "include ./accounts.conf")
    {
        let users = config.with_file_name("accounts.conf");
        std::fs::copy(users, dir.join("accounts.conf")).unwrap();
    }
    std::fs::write(
        &copy,
        text.replace("/var/lib/cuzk/nats", &store.display().to_string()),
    )
    .unwrap();
    copy
}

fn start(config: &Path, args: &[String], envs: &[(&str, &str)], port: u16) -> Server {
    let binary =
        nats_server_binary().expect("nats-server is installed (apt-get install nats-server)");
    let mut command = Command::new(binary);
    command
        .arg("-c")
        .arg(config)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in envs {
        command.env(key, value);
    }
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            panic!(
                "nats-server -c {} exited with {status}: {stderr}",
                config.display()
            );
        }
        assert!(
            Instant::now() < deadline,
            "nats-server -c {} did not listen on {port}",
            config.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Server(child)
}

/// Creates a stream with `replicas`, retrying while a fresh cluster elects its leaders.
async fn create_stream(js: &jetstream::Context, replicas: usize) -> stream::Stream {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let config = stream::Config {
            name: "DEPLOY_CHECK".into(),
            subjects: vec!["deploy.check".into()],
            num_replicas: replicas,
            ..Default::default()
        };
        match js.get_or_create_stream(config).await {
            Ok(stream) => return stream,
            Err(e) if Instant::now() < deadline => {
                eprintln!("retrying stream creation: {e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("creating an R{replicas} stream: {e}"),
        }
    }
}

#[tokio::test]
async fn single_server_config_runs_jetstream() {
    let dir = tempfile::tempdir().unwrap();
    let config = with_store(
        &deploy_dir().join("single.conf"),
        dir.path(),
        &dir.path().join("store"),
    );
    let port = free_port().unwrap();
    let _server = start(&config, &["-p".into(), port.to_string()], &[], port);
    let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
        .await
        .unwrap();
    let js = jetstream::new(client);
    let mut stream = create_stream(&js, 1).await;
    js.publish("deploy.check", "x".into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
}

#[tokio::test]
async fn auth_config_starts_and_admits_only_known_users() {
    let dir = tempfile::tempdir().unwrap();
    let config = with_store(
        &deploy_dir().join("auth.conf"),
        dir.path(),
        &dir.path().join("store"),
    );
    let port = free_port().unwrap();
    // A bcrypt hash as the admin's password: in an environment variable it must carry its own
    // quotes, or the server reads its `$2b$…` as another variable reference.
    let admin_hash = "\"$2b$11$4VgEM6ZrQva99IH5PV00yefSdkls6V44vVwmYVn2z1ALiTohBIA6y\"";
    let envs = [
        ("CUZK_ADMIN_PASSWORD", admin_hash),
        ("CUZK_SUBMITTER_PASSWORD", "submitter-pw"),
        ("CUZK_PRIORITY_PASSWORD", "priority-pw"),
        ("CUZK_SYNTH_PASSWORD", "synth-pw"),
        ("CUZK_GPU_PASSWORD", "gpu-pw"),
        ("CUZK_GATEWAY_PASSWORD", "gateway-pw"),
    ];
    let _server = start(&config, &["-p".into(), port.to_string()], &envs, port);
    let url = format!("nats://127.0.0.1:{port}");
    let admin =
        async_nats::ConnectOptions::with_user_and_password("admin".into(), "admin-pw".into())
            .connect(&url)
            .await
            .expect("admin logs in with the password behind the bcrypt hash");
    create_stream(&jetstream::new(admin), 1).await;
    let wrong = async_nats::ConnectOptions::with_user_and_password("synth".into(), "nope".into())
        .connect(&url);
    let wrong = tokio::time::timeout(Duration::from_secs(5), wrong)
        .await
        .expect("connect answers");
    assert!(wrong.is_err(), "a wrong password must not log in");
}

#[tokio::test]
async fn three_node_cluster_elects_a_leader_and_holds_r3_streams() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_ports: Vec<u16> = (0..3).map(|_| free_port().unwrap()).collect();
    let routes = cluster_ports
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut servers = Vec::new();
    let mut client_ports = Vec::new();
    let mut monitor_ports = Vec::new();
    for (index, cluster_port) in cluster_ports.iter().enumerate() {
        let node_dir = dir.path().join(format!("n{}", index + 1));
        std::fs::create_dir_all(&node_dir).unwrap();
        let source = deploy_dir().join(format!("cluster/n{}.conf", index + 1));
        let config = with_store(&source, &node_dir, &node_dir.join("store"));
        let (port, monitor) = (free_port().unwrap(), free_port().unwrap());
        // Ports and routes on loopback instead of the hosts cuzk-nats-1..3.
        let args = [
            "-p".to_owned(),
            port.to_string(),
            "-m".to_owned(),
            monitor.to_string(),
            "--cluster".to_owned(),
            format!("nats://127.0.0.1:{cluster_port}"),
            "--routes".to_owned(),
            routes.clone(),
        ];
        servers.push(start(&config, &args, &[], port));
        client_ports.push(port);
        monitor_ports.push(monitor);
    }
    let urls: Vec<async_nats::ServerAddr> = client_ports
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}").parse().unwrap())
        .collect();
    let client = async_nats::connect(urls).await.unwrap();
    let js = jetstream::new(client);
    let mut stream = create_stream(&js, 3).await;
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
    js.publish("deploy.check", "x".into())
        .await
        .unwrap()
        .await
        .unwrap();

    // Every server sees the same JetStream meta leader over its monitoring port.
    let mut leaders = Vec::new();
    for monitor in &monitor_ports {
        let jsz = http_get(*monitor, "/jsz").await;
        let jsz: serde_json::Value = serde_json::from_str(&jsz).unwrap();
        leaders.push(
            jsz["meta_cluster"]["leader"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    assert!(
        leaders[0].starts_with("cuzk-nats-") && leaders.iter().all(|l| *l == leaders[0]),
        "{leaders:?}"
    );
}

async fn http_get(port: u16, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}
