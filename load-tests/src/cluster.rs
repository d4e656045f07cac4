//! The cluster under load: one given by URL, or one started here as real processes on loopback
//! (`cuzk_cli::launcher::ProcessCluster`) with a metrics endpoint on every node.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use async_nats::jetstream;
use cuzk_cli::launcher::{LaunchSpec, ProcessCluster, Role};
use cuzk_common::config::NatsArgs;
use cuzk_common::local_nats::free_port;
use cuzk_common::topology::jetstream_context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What `ProcessCluster` should start.
#[derive(Clone, Debug)]
pub struct ClusterShape {
    pub servers: usize,
    pub synth: usize,
    pub gpu: usize,
    pub ledger: usize,
    pub threads: usize,
    pub gpu_workers: usize,
    pub gpu_backend: String,
    pub synth_args: Vec<String>,
    pub gpu_args: Vec<String>,
    pub cuzk: PathBuf,
}

impl ClusterShape {
    /// Starts one node of `role` in `cluster` with this shape's arguments and a metrics
    /// endpoint on a port of its own.
    pub fn start_node(&self, cluster: &mut ProcessCluster, role: Role) -> anyhow::Result<Endpoint> {
        let addr = format!("127.0.0.1:{}", free_port()?);
        let metrics = vec!["--metrics-addr".to_owned(), addr.clone()];
        match role {
            Role::Synth => cluster.spec.synth_args = [self.synth_args.clone(), metrics].concat(),
            Role::Gpu => {
                let own = vec![
                    "--gpu-backend".to_owned(),
                    self.gpu_backend.clone(),
                    "--gpu-workers".to_owned(),
                    self.gpu_workers.to_string(),
                ];
                cluster.spec.gpu_args = [self.gpu_args.clone(), metrics, own].concat();
            }
            Role::Ledger => cluster.spec.ledger_args = metrics,
        }
        let node = cluster.add_node(role)?;
        Ok(Endpoint { node, addr })
    }

    pub fn describe(&self) -> String {
        format!(
            "{} nats-server(s), {} synth node(s), {} GPU node(s) × {} worker(s) ({} backend), {} ledger service(s), {} threads per node",
            self.servers, self.synth, self.gpu, self.gpu_workers, self.gpu_backend, self.ledger, self.threads
        )
    }
}

/// A GPU node's Prometheus endpoint.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub node: String,
    pub addr: String,
}

pub struct Target {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    /// GPU nodes to scrape for `cuzk_prover_busy_seconds_total`.
    pub gpu_metrics: Vec<Endpoint>,
    pub description: String,
    /// The tenant it submits as (`--nats-tenant`; `None`: the untenanted path).
    pub tenant: Option<String>,
    cluster: Option<ProcessCluster>,
}

impl Target {
    /// An existing cluster. Only a core connection is made (no provisioning), so a submitter
    /// account suffices; queue depths need `$JS.API.STREAM.INFO` and are skipped without it.
    pub async fn connect(nats: NatsArgs, metrics: &[String]) -> anyhow::Result<Target> {
        let config = nats.resolve("cuzk-load")?;
        let client = cuzk_common::nats::connect(&config).await?;
        let js = jetstream_context(client.clone(), config.timeout);
        let gpu_metrics = metrics
            .iter()
            .map(|addr| Endpoint {
                node: addr.clone(),
                addr: addr.clone(),
            })
            .collect();
        Ok(Target {
            client,
            js,
            gpu_metrics,
            description: format!("cluster at {}", config.urls.join(",")),
            tenant: config.tenant.clone(),
            cluster: None,
        })
    }

    /// Starts servers and nodes, waits until every node is ready (`/readyz`), and connects.
    pub async fn launch(shape: ClusterShape) -> anyhow::Result<Target> {
        let spec = LaunchSpec {
            servers: shape.servers,
            synth_nodes: 0,
            gpu_nodes: 0,
            threads: shape.threads,
            ..Default::default()
        };
        let mut cluster = ProcessCluster::start(spec, &shape.cuzk)?;
        // Started below, each with its metrics port; their number says the nodes go through them.
        cluster.spec.ledger_services = shape.ledger;
        // Nodes are added one by one so each gets its own metrics port; `spec.*_args` apply to
        // the next node started.
        let mut ready = Vec::new();
        for _ in 0..shape.ledger {
            ready.push(shape.start_node(&mut cluster, Role::Ledger)?);
        }
        for _ in 0..shape.synth {
            ready.push(shape.start_node(&mut cluster, Role::Synth)?);
        }
        let mut gpu_metrics = Vec::new();
        for _ in 0..shape.gpu {
            gpu_metrics.push(shape.start_node(&mut cluster, Role::Gpu)?);
        }
        ready.extend(gpu_metrics.iter().cloned());
        let deadline = Instant::now() + Duration::from_secs(60);
        for endpoint in &ready {
            loop {
                if matches!(http_get(&endpoint.addr, "/readyz").await, Ok((200, _))) {
                    break;
                }
                if let Err(exited) = cluster.all_nodes_running() {
                    anyhow::bail!("{exited}\n{}", cluster.log_tails(2000));
                }
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "{} not ready within 60 s\n{}",
                    endpoint.node,
                    cluster.log_tails(2000)
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let nats = NatsArgs {
            urls: Some(cluster.servers.iter().map(|s| s.url()).collect()),
            limits: Some(cuzk_common::config::LimitsProfile::Local),
            replicas: Some(cluster.replicas()),
            ..Default::default()
        };
        let config = nats.resolve("cuzk-load")?;
        let (client, topology) = cuzk_cli::connect(&config).await?;
        Ok(Target {
            client,
            js: topology.js,
            gpu_metrics,
            description: shape.describe(),
            tenant: None,
            cluster: Some(cluster),
        })
    }

    /// The started cluster's node logs, for error messages.
    pub fn log_tails(&self) -> String {
        self.cluster
            .as_ref()
            .map(|c| c.log_tails(2000))
            .unwrap_or_default()
    }

    /// The started cluster, to kill and restart its processes.
    pub fn cluster_mut(&mut self) -> Option<&mut ProcessCluster> {
        self.cluster.as_mut()
    }

    /// Stops a started cluster (processes are killed: the run is over).
    pub fn stop(self) {
        drop(self.cluster);
    }
}

/// A plain HTTP/1.0 GET on loopback: the nodes' endpoint answers one request per connection.
pub async fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        anyhow::Ok(String::from_utf8_lossy(&response).into_owned())
    };
    let response = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .with_context(|| format!("GET {addr}{path} timed out"))??;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    Ok((status, body.to_owned()))
}

/// `cuzk_prover_busy_seconds_total{worker="…"}` values of one scrape, by worker label.
pub fn prover_busy(metrics: &str) -> Vec<(String, f64)> {
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cuzk_prover_busy_seconds_total{")?;
            let (labels, value) = rest.split_once('}')?;
            let worker = labels
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("worker=\""))?
                .trim_end_matches('"')
                .to_owned();
            Some((worker, value.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_busy_counters() {
        let text = "# TYPE cuzk_prover_busy_seconds_total counter\n\
                    cuzk_prover_busy_seconds_total{worker=\"cpu.0\"} 0.113289699\n\
                    cuzk_prover_busy_seconds_total{otel_scope_name=\"cuzk\",worker=\"cuda0.1\"} 2\n\
                    cuzk_jobs_total{status=\"done\"} 2\n";
        assert_eq!(
            prover_busy(text),
            vec![
                ("cpu.0".to_owned(), 0.113289699),
                ("cuda0.1".to_owned(), 2.0)
            ]
        );
    }
}
