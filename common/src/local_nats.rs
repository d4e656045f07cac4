//! Private nats-servers on ephemeral loopback ports with temporary stores, stopped on drop: the
//! embedded default of `cuzk local`, the process launcher, the benchmarks and the tests. A
//! server can be killed and restarted on the same port and store (fault tests).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum LocalNatsError {
    #[error("nats-server not found on PATH or in /usr/sbin (install it: apt-get install -y nats-server, or set NATS_SERVER)")]
    NotInstalled,
    #[error("starting nats-server: {0}")]
    Io(#[from] std::io::Error),
    #[error("nats-server exited at start: {0}")]
    Exited(String),
    #[error("nats-server did not listen on port {0} within 10 s")]
    NotListening(u16),
    #[error(
        "a private nats-server's store in {dir} would reserve {need_gib:.1} GiB for the streams and buckets, but nats-server grants three quarters of the {free_gib:.1} GiB free there: set TMPDIR to a directory on a disk with at least {want_gib:.1} GiB free",
        need_gib = *reserved as f64 / GIB,
        free_gib = *free as f64 / GIB,
        want_gib = *reserved as f64 / GIB / 0.75,
        dir = dir.display()
    )]
    NoSpace {
        dir: PathBuf,
        free: u64,
        reserved: u64,
    },
}

const GIB: f64 = (1u64 << 30) as f64;

/// Free bytes (for unprivileged users) on the disk private servers store their streams on.
pub fn store_free_bytes() -> Result<u64, LocalNatsError> {
    let stat = nix::sys::statvfs::statvfs(&std::env::temp_dir()).map_err(std::io::Error::from)?;
    // Both are u64 on 64-bit Linux; `as` keeps 32-bit targets building too.
    #[allow(clippy::unnecessary_cast)]
    Ok((stat.blocks_available() as u64).saturating_mul(stat.fragment_size() as u64))
}

/// The JetStream storage a private server's nats-server grants itself without a configured
/// limit: three quarters of the free space.
pub fn store_grant_bytes() -> Result<u64, LocalNatsError> {
    Ok(grant(store_free_bytes()?))
}

fn grant(free: u64) -> u64 {
    free / 4 * 3
}

/// Refuses at once, naming the free space and the setting, where a private server's store
/// (under the temporary directory) cannot hold `reserved` bytes of stream limits: without a
/// configured limit nats-server grants JetStream three quarters of the disk's free space and
/// refuses a stream that does not fit ("insufficient storage resources"), which would surface
/// only as a failed provisioning after the server started.
pub fn ensure_store_space(reserved: u64) -> Result<(), LocalNatsError> {
    let free = store_free_bytes()?;
    if reserved > grant(free) {
        let dir = std::env::temp_dir();
        return Err(LocalNatsError::NoSpace {
            dir,
            free,
            reserved,
        });
    }
    Ok(())
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

/// A loopback port free right now, for a server about to start. Drawn at random below Linux's
/// ephemeral range (32768 and up), where the kernel picks the source ports of outgoing
/// connections — one of those could otherwise take the port before the server binds it — and
/// never one this process has handed out before. Falls back to a kernel-chosen port.
pub fn free_port() -> std::io::Result<u16> {
    use rand::Rng;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = rand::thread_rng();
    for _ in 0..256 {
        let port = rng.gen_range(20_000..32_000);
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    given.insert(port);
    Ok(port)
}

/// Attempts at starting private servers on fresh ports when one exits at start (its port was
/// taken between choosing and binding it).
const START_ATTEMPTS: usize = 3;

/// One nats-server process; killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    binary: PathBuf,
    args: Vec<OsString>,
    log: Option<PathBuf>,
    pub port: u16,
    _store: Option<tempfile::TempDir>,
}

impl NatsServer {
    /// A standalone JetStream server with its own temporary store.
    pub fn start() -> Result<NatsServer, LocalNatsError> {
        retry_start(Self::start_once)
    }

    fn start_once() -> Result<NatsServer, LocalNatsError> {
        let store = tempfile::tempdir()?;
        let port = free_port()?;
        let args: Vec<OsString> = vec![
            "-js".into(),
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string().into(),
            "-sd".into(),
            store.path().into(),
        ];
        Self::spawn(args, port, None, Some(store))
    }

    /// A server from a config file that listens on `port`, logging to `log`.
    pub fn start_config(
        config: &Path,
        port: u16,
        log: &Path,
    ) -> Result<NatsServer, LocalNatsError> {
        Self::spawn(
            vec!["-c".into(), config.into()],
            port,
            Some(log.to_owned()),
            None,
        )
    }

    fn spawn(
        args: Vec<OsString>,
        port: u16,
        log: Option<PathBuf>,
        store: Option<tempfile::TempDir>,
    ) -> Result<NatsServer, LocalNatsError> {
        let binary = nats_server_binary().ok_or(LocalNatsError::NotInstalled)?;
        let mut server = NatsServer {
            child: None,
            binary,
            args,
            log,
            port,
            _store: store,
        };
        server.restart()?;
        Ok(server)
    }

    /// (Re)starts the process with the same arguments, port and store.
    pub fn restart(&mut self) -> Result<(), LocalNatsError> {
        self.kill();
        let mut command = Command::new(&self.binary);
        command.args(&self.args).stdout(Stdio::null());
        match &self.log {
            Some(log) => command.stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)?,
            ),
            None => command.stderr(Stdio::null()),
        };
        self.child = Some(command.spawn()?);
        self.wait_ready()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn wait_ready(&mut self) -> Result<(), LocalNatsError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
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
        self.kill();
    }
}

fn retry_start<T>(
    mut start: impl FnMut() -> Result<T, LocalNatsError>,
) -> Result<T, LocalNatsError> {
    let mut attempt = 1;
    loop {
        match start() {
            Err(LocalNatsError::Exited(why)) if attempt < START_ATTEMPTS => {
                tracing::warn!(%why, attempt, "nats-server exited at start; trying fresh ports");
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// `n` JetStream servers routed into one cluster on loopback, each with its own store under
/// `dir` (kept across restarts).
pub fn start_cluster(n: usize, dir: &Path) -> Result<Vec<NatsServer>, LocalNatsError> {
    let mut attempt = 0;
    retry_start(|| {
        attempt += 1;
        let dir = dir.join(format!("attempt-{attempt}"));
        std::fs::create_dir_all(&dir)?;
        start_cluster_once(n, &dir)
    })
}

fn start_cluster_once(n: usize, dir: &Path) -> Result<Vec<NatsServer>, LocalNatsError> {
    let client_ports = (0..n).map(|_| free_port()).collect::<Result<Vec<_>, _>>()?;
    let route_ports = (0..n).map(|_| free_port()).collect::<Result<Vec<_>, _>>()?;
    let mut configs = Vec::new();
    for i in 0..n {
        let routes: Vec<String> = (0..n)
            .filter(|j| *j != i)
            .map(|j| format!("nats://127.0.0.1:{}", route_ports[j]))
            .collect();
        let store = dir.join(format!("n{i}-store"));
        std::fs::create_dir_all(&store)?;
        let config = format!(
            "server_name: n{i}\nlisten: 127.0.0.1:{}\njetstream {{ store_dir: {:?} }}\ncluster {{\n  name: cuzk-local\n  listen: 127.0.0.1:{}\n  routes: [{}]\n}}\n",
            client_ports[i],
            store.display().to_string(),
            route_ports[i],
            routes.join(", ")
        );
        let path = dir.join(format!("n{i}.conf"));
        std::fs::write(&path, config)?;
        configs.push(path);
    }
    configs
        .iter()
        .enumerate()
        .map(|(i, config)| {
            NatsServer::start_config(config, client_ports[i], &dir.join(format!("n{i}.log")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_without_room_is_refused_naming_the_space_and_the_setting() {
        ensure_store_space(0).unwrap();
        let err = ensure_store_space(u64::MAX / 2).unwrap_err();
        assert!(matches!(err, LocalNatsError::NoSpace { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("GiB free there") && text.contains("TMPDIR"),
            "{text}"
        );
    }
}
