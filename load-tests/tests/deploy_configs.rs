//! The dev server's nats-server configuration, `deploy/nats/single.conf`, starts and does what
//! it promises: it comes up with JetStream. It is used as written except for its store
//! directory and port (moved to temporary ones so tests can run side by side). The permissions
//! of the role users are tested in `cli/tests/permissions.rs`; the configs that need
//! certificates and run a job, the one server of `deploy/nats/auth.conf` and the three-node
//! cluster of `deploy/nats/cluster`, in `cli/tests/secure_server.rs` and
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

/// Copies `config` into `dir` with its store directory moved to `store`, so the copy can be run
/// as is. (nats-server 2.9 refuses `-sd` next to a `store_dir` in the file.)
fn with_store(config: &Path, dir: &Path, store: &Path) -> PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    assert!(
        text.contains("/var/lib/cuzk/nats"),
        "{} no longer has the expected store_dir",
        config.display()
    );
    let copy = dir.join(config.file_name().unwrap());
    std::fs::write(
        &copy,
        text.replace("/var/lib/cuzk/nats", &store.display().to_string()),
    )
    .unwrap();
    copy
}

fn start(config: &Path, args: &[String], port: u16) -> Server {
    let binary =
        nats_server_binary().expect("nats-server is installed (apt-get install nats-server)");
    let mut command = Command::new(binary);
    command
        .arg("-c")
        .arg(config)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
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

/// Creates a one-replica stream, retrying while a fresh server's JetStream comes up.
async fn create_stream(js: &jetstream::Context) -> stream::Stream {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let config = stream::Config {
            name: "DEPLOY_CHECK".into(),
            subjects: vec!["deploy.check".into()],
            ..Default::default()
        };
        match js.get_or_create_stream(config).await {
            Ok(stream) => return stream,
            Err(e) if Instant::now() < deadline => {
                eprintln!("retrying stream creation: {e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("creating a stream: {e}"),
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
    let _server = start(&config, &["-p".into(), port.to_string()], port);
    let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
        .await
        .unwrap();
    let js = jetstream::new(client);
    let mut stream = create_stream(&js).await;
    js.publish("deploy.check", "x".into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
}
