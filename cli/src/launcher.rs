//! A whole cluster on loopback as separate processes: 1 or 3 nats-servers, S synth nodes and G
//! GPU nodes (`cuzk synth-node` / `cuzk gpu-node`), and L ledger services (`cuzk ledger`) the
//! nodes then go through. Used by `cuzk launch`, the fault tests and the load tests; every
//! process is stopped on drop.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use cuzk_common::local_nats::{start_cluster, NatsServer};

#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// 1 (standalone) or 3 (a JetStream cluster with R3 streams).
    pub servers: usize,
    pub synth_nodes: usize,
    pub gpu_nodes: usize,
    /// Ledger service processes, started first; with any, the synth and GPU nodes change
    /// records, publish results and delete objects through them (`--nats-ledger-service`).
    pub ledger_services: usize,
    /// Threads per synth node and per GPU node (CPU backend).
    pub threads: usize,
    pub ack_wait_secs: u64,
    /// Extra arguments for every GPU node (e.g. `--gpu-backend cpu`).
    pub gpu_args: Vec<String>,
    /// Extra arguments for every synth node.
    pub synth_args: Vec<String>,
    /// Extra arguments for every ledger service.
    pub ledger_args: Vec<String>,
}

impl Default for LaunchSpec {
    fn default() -> Self {
        LaunchSpec {
            servers: 1,
            synth_nodes: 1,
            gpu_nodes: 1,
            ledger_services: 0,
            threads: 1,
            ack_wait_secs: 30,
            gpu_args: Vec::new(),
            synth_args: Vec::new(),
            ledger_args: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Synth,
    Gpu,
    Ledger,
}

impl Role {
    fn command(self) -> &'static str {
        match self {
            Role::Synth => "synth-node",
            Role::Gpu => "gpu-node",
            Role::Ledger => "ledger",
        }
    }
}

struct NodeProcess {
    role: Role,
    name: String,
    child: Child,
}

pub struct ProcessCluster {
    pub spec: LaunchSpec,
    pub servers: Vec<NatsServer>,
    nodes: Vec<NodeProcess>,
    cuzk: PathBuf,
    pub dir: tempfile::TempDir,
    started: usize,
}

impl ProcessCluster {
    /// Starts the servers, then the nodes, using the `cuzk` binary at `cuzk`.
    pub fn start(spec: LaunchSpec, cuzk: &Path) -> anyhow::Result<ProcessCluster> {
        anyhow::ensure!(
            spec.servers == 1 || spec.servers == 3,
            "servers must be 1 or 3"
        );
        let dir = tempfile::Builder::new().prefix("cuzk-cluster-").tempdir()?;
        let servers = if spec.servers == 1 {
            vec![NatsServer::start()?]
        } else {
            start_cluster(spec.servers, dir.path())?
        };
        let mut cluster = ProcessCluster {
            spec: spec.clone(),
            servers,
            nodes: Vec::new(),
            cuzk: cuzk.to_owned(),
            dir,
            started: 0,
        };
        for _ in 0..spec.ledger_services {
            cluster.add_node(Role::Ledger)?;
        }
        for _ in 0..spec.synth_nodes {
            cluster.add_node(Role::Synth)?;
        }
        for _ in 0..spec.gpu_nodes {
            cluster.add_node(Role::Gpu)?;
        }
        Ok(cluster)
    }

    /// Every server's URL, comma separated, as nodes are given them.
    pub fn urls(&self) -> String {
        self.servers
            .iter()
            .map(NatsServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn replicas(&self) -> usize {
        self.spec.servers
    }

    /// Starts one more node of `role`; returns its name.
    pub fn add_node(&mut self, role: Role) -> anyhow::Result<String> {
        let name = format!("{}-{}", role.command(), self.started);
        self.started += 1;
        let log = File::create(self.dir.path().join(format!("{name}.log")))?;
        let threads = self.spec.threads.to_string();
        let mut command = Command::new(&self.cuzk);
        command
            .arg(role.command())
            .args(["--nats-url", &self.urls(), "--nats-name", &name])
            .args(["--nats-replicas", &self.replicas().to_string()])
            .args(["--nats-ack-wait", &format!("{}s", self.spec.ack_wait_secs)])
            .args(["--nats-limits", "local"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if self.spec.ledger_services > 0 && role != Role::Ledger {
            command.arg("--nats-ledger-service");
        }
        match role {
            Role::Synth => command
                .args(["--synth-threads", &threads])
                .args(&self.spec.synth_args),
            // A launched cluster is a local test bed: shapes without parameters get test ones.
            Role::Gpu => command
                .args(["--gpu-cpu-threads", &threads, "--allow-test-params"])
                .args(&self.spec.gpu_args),
            Role::Ledger => command.args(&self.spec.ledger_args),
        };
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", self.cuzk.display()))?;
        self.nodes.push(NodeProcess {
            role,
            name: name.clone(),
            child,
        });
        Ok(name)
    }

    /// Names of the running nodes of `role`.
    pub fn nodes(&self, role: Role) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.role == role)
            .map(|n| n.name.clone())
            .collect()
    }

    /// A running node's process id.
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .map(|n| n.child.id())
    }

    /// Removes a node from the cluster's list, to stop it.
    fn take_node(&mut self, name: &str) -> anyhow::Result<NodeProcess> {
        let index = self
            .nodes
            .iter()
            .position(|n| n.name == name)
            .with_context(|| format!("no node {name}"))?;
        Ok(self.nodes.remove(index))
    }

    /// SIGKILLs a node, as a crash would.
    pub fn kill_node(&mut self, name: &str) -> anyhow::Result<()> {
        let mut node = self.take_node(name)?;
        node.child.kill()?;
        node.child.wait()?;
        Ok(())
    }

    /// Sends SIGTERM and waits up to `timeout` for the node to drain and exit.
    pub fn stop_node(
        &mut self,
        name: &str,
        timeout: Duration,
    ) -> anyhow::Result<std::process::ExitStatus> {
        let mut node = self.take_node(name)?;
        terminate(&mut node.child);
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = node.child.try_wait()? {
                return Ok(status);
            }
            if std::time::Instant::now() > deadline {
                node.child.kill()?;
                anyhow::bail!("{name} did not exit within {timeout:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A node's log so far (for test failure messages).
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.log"))).unwrap_or_default()
    }

    /// The last `tail` bytes of every node's log, for failure messages.
    pub fn log_tails(&self, tail: usize) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            let log = self.log(&node.name);
            let start = log.len().saturating_sub(tail);
            let start = (start..log.len())
                .find(|i| log.is_char_boundary(*i))
                .unwrap_or(log.len());
            out.push_str(&format!("==== {} ====\n{}\n", node.name, &log[start..]));
        }
        out
    }

    /// Each running node's peak resident memory so far (the kernel's `VmHWM`), in bytes.
    pub fn peak_rss(&self) -> Vec<(String, Role, u64)> {
        self.nodes
            .iter()
            .map(|node| {
                let status = std::fs::read_to_string(format!("/proc/{}/status", node.child.id()));
                let kib = status.ok().and_then(|text| {
                    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
                    line.split_whitespace().nth(1)?.parse::<u64>().ok()
                });
                (node.name.clone(), node.role, kib.unwrap_or(0) * 1024)
            })
            .collect()
    }

    /// Whether every node process is still running (none crashed or exited).
    pub fn all_nodes_running(&mut self) -> Result<(), String> {
        for node in &mut self.nodes {
            if let Ok(Some(status)) = node.child.try_wait() {
                return Err(format!("{} exited with {status}", node.name));
            }
        }
        Ok(())
    }
}

fn terminate(child: &mut Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
}

/// A future that resolves at SIGINT or SIGTERM with the signal's name; both are caught from
/// this call on. A command that owns a [`ProcessCluster`] selects on it, so a supervisor's
/// SIGTERM drops the cluster and stops its processes instead of leaving them behind.
pub fn stop_signal() -> std::io::Result<impl std::future::Future<Output = &'static str>> {
    use tokio::signal::unix::{signal, SignalKind};
    let (mut int, mut term) = (
        signal(SignalKind::interrupt())?,
        signal(SignalKind::terminate())?,
    );
    Ok(async move {
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    })
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.child.kill();
            let _ = node.child.wait();
        }
    }
}
