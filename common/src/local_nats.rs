//! A private nats-server on an ephemeral loopback port with a temporary store, stopped on drop:
//! the embedded default of `cuzk local`, the benchmarks and the integration tests.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct NatsServer {
    child: Child,
    pub port: u16,
    _store: tempfile::TempDir,
}

/// The nats-server binary: `$NATS_SERVER`, else the first on PATH or in /usr/sbin.
pub fn nats_server_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NATS_SERVER") {
        return Some(path.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|dir| dir.join("nats-server"))
        .find(|candidate| candidate.is_file())
}

fn free_port() -> std::io::Result<u16> {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port())
}

#[derive(Debug, thiserror::Error)]
pub enum LocalNatsError {
    #[error("nats-server not found on PATH or in /usr/sbin (install it: apt-get install -y nats-server, or set NATS_SERVER)")]
    NotInstalled,
    #[error("starting nats-server: {0}")]
    Io(std::io::Error),
    #[error("nats-server exited at start: {0}")]
    Exited(String),
    #[error("nats-server did not listen on port {0} within 10 s")]
    NotListening(u16),
}

impl NatsServer {
    /// Starts nats-server with JetStream.
    pub fn start() -> Result<NatsServer, LocalNatsError> {
        let binary = nats_server_binary().ok_or(LocalNatsError::NotInstalled)?;
        let store = tempfile::tempdir().map_err(LocalNatsError::Io)?;
        let port = free_port().map_err(LocalNatsError::Io)?;
        let child = Command::new(&binary)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(LocalNatsError::Io)?;
        let mut server = NatsServer { child, port, _store: store };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<(), LocalNatsError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LocalNatsError::Exited(status.to_string()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(LocalNatsError::NotListening(self.port))
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
