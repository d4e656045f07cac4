//! The `cuzk` command's building blocks: an all-in-one local cluster (private nats-server, a
//! synth node and a GPU node in one process), job submission and result reporting. The
//! integration tests drive the same pieces.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use async_nats::Client;
use base64::Engine;
use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof};
use cuzk_circuits::ShapeCache;
use cuzk_common::config::{GpuConfig, LimitsProfile, NatsArgs, ParamConfig, SynthConfig};
use cuzk_common::local_nats::NatsServer;
use cuzk_common::retry::{retry, RetryPolicy};
use cuzk_common::topology::{self, Topology};
use cuzk_wire::job::{JobInput, JobResult, JobSpec, JobStatus, PartitionTimings};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

#[cfg(feature = "porep")]
pub mod c1;
pub mod cancel;
pub mod flood;
pub mod gateway;
pub mod launcher;
pub mod status;
pub mod submit;

/// Connects with the default configuration to a private server at `url` and provisions the
/// topology with the limits for private servers.
pub async fn connect_url(url: &str, name: &str) -> anyhow::Result<(Client, Topology)> {
    connect(&local_config(url, name)?).await
}

fn local_config(url: &str, name: &str) -> anyhow::Result<cuzk_common::config::NatsConfig> {
    Ok(NatsArgs {
        urls: Some(vec![url.to_owned()]),
        limits: Some(LimitsProfile::Local),
        ..Default::default()
    }
    .resolve(name)?)
}

/// Connects and provisions the topology, retrying while a fresh cluster elects its JetStream
/// leaders.
pub async fn connect(
    config: &cuzk_common::config::NatsConfig,
) -> anyhow::Result<(Client, Topology)> {
    let client = cuzk_common::nats::connect(config).await?;
    let js = topology::jetstream_context(client.clone(), config.timeout);
    let policy = RetryPolicy {
        attempts: 10,
        initial: Duration::from_millis(250),
        max: Duration::from_secs(3),
    };
    let mut topology = retry("provision topology", policy, || {
        topology::provision(&js, config.replicas, config.ack_wait, config.stream_limits)
    })
    .await?;
    topology.ledger_service = config.ledger_service;
    Ok((client, topology))
}

/// Connections a node moves blobs through (`objects::read_bounded`, `objects::put_through`): one
/// connection's stripes share its socket, its client task and the one server goroutine that
/// reads it; past 2–4 the blob buckets' streams are the limit (nats-server 2.9 delivers all of a
/// stream's messages from one goroutine; docs/gpu-runs.md, "Blobs over four buckets").
pub const BLOB_CONNECTIONS: usize = 4;

/// Opens the further connections a node moves blobs through.
pub async fn add_blob_connections(
    topology: &mut Topology,
    config: &cuzk_common::config::NatsConfig,
) -> anyhow::Result<()> {
    for _ in 1..BLOB_CONNECTIONS {
        let client = cuzk_common::nats::connect(config).await?;
        let js = topology::jetstream_context(client, config.timeout);
        topology.add_blob_connection(js).await?;
    }
    Ok(())
}

/// Creates the whole topology including the durable consumers, which least-privilege worker
/// roles may use but not create.
pub async fn provision_all(config: &cuzk_common::config::NatsConfig) -> anyhow::Result<Topology> {
    let (_client, topology) = connect(config).await?;
    let (js, bucket) = (&topology.js, &config.inputs_bucket);
    topology::ensure_inputs_bucket(js, bucket, config.replicas, config.stream_limits).await?;
    topology.synth_consumer().await?;
    topology.gpu_consumers().await?;
    Ok(topology)
}

/// The local limits with the blobs bucket as large as the private server's disk allows beside
/// the other buckets, up to the production default: a synth node keeps room in the bucket for
/// one blob as large as its raw witness (4 GB at 32 GiB), so a shape that large queues nothing
/// in the local 256 MiB.
pub fn roomy_local_limits() -> anyhow::Result<topology::Limits> {
    let local = topology::Limits::local();
    let others = local.reserved_bytes() - local.blobs_max_bytes as u64;
    let room = cuzk_common::local_nats::store_grant_bytes()?.saturating_sub(others);
    let blobs = room.clamp(
        local.blobs_max_bytes as u64,
        topology::Limits::default().blobs_max_bytes as u64,
    );
    Ok(topology::Limits {
        blobs_max_bytes: i64::try_from(blobs)?,
        ..local
    })
}

/// A private nats-server plus in-process synth and GPU nodes, torn down by [`LocalCluster::stop`].
pub struct LocalCluster {
    pub server: NatsServer,
    pub client: Client,
    pub topology: Topology,
    shutdown: CancellationToken,
    nodes: JoinSet<anyhow::Result<()>>,
}

impl LocalCluster {
    pub async fn start(
        synth: SynthConfig,
        gpu: GpuConfig,
        params: ParamConfig,
    ) -> anyhow::Result<LocalCluster> {
        Self::start_with_limits(synth, gpu, params, topology::Limits::local()).await
    }

    /// As [`LocalCluster::start`], the streams and buckets under `limits` (see
    /// [`roomy_local_limits`]); refused at once where the disk cannot hold them.
    pub async fn start_with_limits(
        synth: SynthConfig,
        gpu: GpuConfig,
        params: ParamConfig,
        limits: topology::Limits,
    ) -> anyhow::Result<LocalCluster> {
        cuzk_common::local_nats::ensure_store_space(limits.reserved_bytes())?;
        let server = NatsServer::start()?;
        let mut config = local_config(&server.url(), "cuzk-local")?;
        config.stream_limits = limits;
        let (client, topology) = connect(&config).await?;
        let shutdown = CancellationToken::new();
        let mut nodes = JoinSet::new();
        let mut synth_topology = topology.clone();
        add_blob_connections(&mut synth_topology, &config).await?;
        let synth_node = Arc::new(cuzk_synth_node::SynthNode::new(
            synth_topology,
            synth,
            &params,
            "synth-local".into(),
        )?);
        nodes.spawn(synth_node.run(shutdown.clone()));
        let mut gpu_topology = topology.clone();
        add_blob_connections(&mut gpu_topology, &config).await?;
        let gpu_node = Arc::new(cuzk_gpu_node::GpuNode::new(
            gpu_topology,
            gpu,
            &params,
            "gpu-local".into(),
        )?);
        nodes.spawn(gpu_node.run(shutdown.clone()));
        Ok(LocalCluster {
            server,
            client,
            topology,
            shutdown,
            nodes,
        })
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Stops the nodes (in-flight work is handed back) and then the server.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        // A node that does not drain in time is a bug worth a loud log, not a hung caller: a
        // test once hung here, in `stop`, under the full test suite's load.
        let drained = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(node) = self.nodes.join_next().await {
                node??;
            }
            anyhow::Ok(())
        })
        .await;
        match drained {
            Ok(result) => result?,
            Err(_) => {
                tracing::error!("a node did not stop within 60 s of shutdown; aborting it");
                self.nodes.abort_all();
            }
        }
        // Close our connection before the server goes, so it does not try to reconnect.
        if tokio::time::timeout(Duration::from_secs(10), self.client.drain())
            .await
            .is_err()
        {
            tracing::warn!("draining the client connection timed out");
        }
        Ok(())
    }
}

/// Submits a job exactly as `nats pub cuzk.jobs.submit '<json>'` does (a plain core publish)
/// and waits for its one answer (see [`submit::submit_and_wait`]).
pub async fn submit_and_wait(
    client: &Client,
    spec: &JobSpec,
    timeout: Duration,
) -> anyhow::Result<JobResult> {
    submit::submit_and_wait(client, None, spec, submit::Via::Core, timeout).await
}

/// The job's input bytes, for inputs carried in the job itself.
pub fn inline_input(input: &JobInput) -> anyhow::Result<Vec<u8>> {
    Ok(match input {
        JobInput::None => Vec::new(),
        JobInput::Utf8(text) => text.as_bytes().to_vec(),
        JobInput::Base64(text) => base64::engine::general_purpose::STANDARD.decode(text)?,
        JobInput::Object(name) | JobInput::ObjectIn { name, .. } => {
            bail!("input object {name} is not available locally")
        }
    })
}

/// The shape cache a command's parameter settings describe.
pub fn shape_cache(params: &ParamConfig) -> anyhow::Result<ShapeCache> {
    let dir = match &params.cache {
        Some(dir) => dir.clone(),
        None => ShapeCache::default_dir()?,
    };
    Ok(ShapeCache::new(
        dir,
        params.allow_test,
        params.host_cache_bytes,
    ))
}

/// Checks a finished job's proof independently of the cluster: each 192-byte partition proof
/// against the verifying key and the public inputs recomputed from the job's input.
pub fn verify_job_proof(
    spec: &JobSpec,
    result: &JobResult,
    cache: &ShapeCache,
) -> anyhow::Result<()> {
    if result.status != JobStatus::Done {
        bail!(
            "job {} did not succeed: {}",
            spec.job_id,
            result.error.as_deref().unwrap_or("?")
        );
    }
    let family = cuzk_circuits::resolve(&spec.circuit, &spec.params)?;
    let pvk = prepare_verifying_key(&cache.verifying_key(&*family)?);
    let input = inline_input(&spec.input)?;
    let proof = hex::decode(result.proof.as_deref().context("result has no proof")?)?;
    if proof.len() != 192 * family.partitions() {
        bail!(
            "proof has {} bytes; {} partitions need {}",
            proof.len(),
            family.partitions(),
            192 * family.partitions()
        );
    }
    for (index, bytes) in proof.chunks(192).enumerate() {
        let proof = Proof::read(bytes)
            .with_context(|| format!("partition {index} proof is not a valid encoding"))?;
        let inputs = family.public_inputs(&input, index)?;
        if !verify_proof(&pvk, &proof, &inputs)? {
            bail!("partition {index} proof does not verify");
        }
    }
    Ok(())
}

/// A table of per-partition stage timings, and the job's totals.
pub fn timings_table(result: &JobResult) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:>4}{} {:>9} {:>7}\n",
        "part",
        PartitionTimings::stage_header(),
        "blob KiB",
        "ratio"
    ));
    let row = |label: &str, t: &PartitionTimings| {
        format!(
            "{label:>4}{} {:>9.1} {:>7.1}\n",
            t.stage_cells(),
            t.blob_bytes as f64 / 1024.0,
            t.raw_bytes as f64 / t.blob_bytes.max(1) as f64,
        )
    };
    for (index, t) in result.partition_timings.iter().enumerate() {
        out.push_str(&row(&index.to_string(), t));
    }
    out.push_str(&row("sum", &result.timings.stages));
    out.push_str(&format!(
        "(ms) job queue {:.1} · assemble {:.1} · submit→result {:.1}\n",
        result.timings.job_queue_ms, result.timings.assemble_ms, result.timings.total_ms
    ));
    out
}
