//! The one-server nats-server configurations in `deploy/nats` start and do what they promise:
//! the dev server and the auth server come up with JetStream. Each config is used as written
//! except for its store directory and port (moved to temporary ones so tests can run side by
//! side); the permissions themselves are tested in `cli/tests/permissions.rs`, and the
//! three-node cluster of `deploy/nats/cluster`, which needs certificates and runs a job, in
//! `cli/tests/secure_cluster.rs`.

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
