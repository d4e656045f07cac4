//! `cuzk`: run cluster nodes, submit jobs, inspect them, or run everything locally.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use cuzk_cli::{submit, submit_and_wait, timings_table, verify_job_proof, LocalCluster};
use cuzk_common::config::ConfigFile;
use cuzk_common::lifecycle::Ledger;
use cuzk_common::telemetry::{self, TelemetryArgs, TelemetryOptions};
use cuzk_common::topology::{jetstream_context, job_key, JOBS_BUCKET};
use cuzk_wire::job::{JobInput, JobSpec, JobStatus, JOB_SPEC_VERSION};
use tokio_util::sync::CancellationToken;
use tracing::{info, Instrument};

mod args;
mod bench;

use args::*;

// Every role's allocator: glibc's keeps freed memory in its per-thread arenas, so a synth
// node's resident set crept up job after job while its heap stayed flat (docs/reliability.md,
// "Memory over a long run"); jemalloc hands freed pages back after a few seconds.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
    let outcome = runtime.block_on(run(cli));
    // Export the spans and metrics still buffered.
    telemetry::shutdown();
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // The reason must reach stderr whatever the log configuration.
            eprintln!("cuzk: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let file = ConfigFile::load_optional(cli.config.as_deref())?;
    match cli.command {
        Command::Local(args) => local(args, file).await,
        Command::Submit(args) => submit(args, file).await,
        Command::Status(args) => status(args, file).await,
        Command::Provision(args) => {
            let nats = args.nats.merge(file.nats).resolve("cuzk-admin")?;
            let topology = cuzk_cli::provision_all(&nats).await?;
            println!("streams, buckets and consumers are in place");
            let (bytes, jobs) = topology.records_capacity().await?;
            let limits = &nats.stream_limits;
            println!(
                "job records: {bytes} bytes, the records of {jobs} finished 32 GiB jobs (sized \
                 for {} days at {} jobs/h: {}); a full bucket drops its oldest records",
                limits.retention_days,
                limits.jobs_per_hour,
                limits.retained_jobs()
            );
            Ok(())
        }
        Command::Watch(args) => watch(args, file).await,
        Command::Cancel(args) => cancel(args, file).await,
        Command::SynthNode(args) => {
            let nats = args.node.nats.merge(file.nats).resolve("cuzk-synth")?;
            let synth = args.synth.merge(file.synth).resolve()?;
            let params = args.node.params.merge(file.params).resolve(false)?;
            if args.node.check_config {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "nats": nats, "synth": synth, "params": params,
                        "metrics_addr": args.node.telemetry.metrics_addr()?
                    }))?
                );
                return Ok(());
            }
            init_telemetry("cuzk-synth", &args.node.telemetry).await?;
            let (_client, mut topology) = cuzk_cli::connect(&nats).await?;
            cuzk_cli::add_blob_connections(&mut topology, &nats).await?;
            let drain = synth.drain_timeout;
            let node = Arc::new(cuzk_synth_node::SynthNode::new(
                topology,
                synth,
                &params,
                nats.name.clone(),
            )?);
            run_until_drained(|token| node.run(token), drain).await
        }
        Command::GpuNode(args) => {
            let nats = args.node.nats.merge(file.nats).resolve("cuzk-gpu")?;
            let gpu = args.gpu.merge(file.gpu).resolve()?;
            let params = args.node.params.merge(file.params).resolve(false)?;
            if args.explain_plan {
                let (plans, all) = cuzk_gpu_node::explain_plans(&gpu, &params)?;
                print!("{plans}");
                anyhow::ensure!(all, "the budget cannot hold every shape");
                return Ok(());
            }
            if args.node.check_config {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "nats": nats, "gpu": gpu, "params": params,
                        "metrics_addr": args.node.telemetry.metrics_addr()?
                    }))?
                );
                return Ok(());
            }
            init_telemetry("cuzk-gpu", &args.node.telemetry).await?;
            let (_client, mut topology) = cuzk_cli::connect(&nats).await?;
            cuzk_cli::add_blob_connections(&mut topology, &nats).await?;
            let drain = gpu.drain_timeout;
            let node = Arc::new(cuzk_gpu_node::GpuNode::new(
                topology,
                gpu,
                &params,
                nats.name.clone(),
            )?);
            run_until_drained(|token| node.run(token), drain).await
        }
        Command::Bench(args) => bench::run(args, file).await,
        Command::Gateway(args) => gateway(args, file).await,
        Command::Ledger(args) => {
            let nats = args.nats.merge(file.nats).resolve("cuzk-ledger")?;
            if args.check_config {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&serde_json::json!({
                        "nats": nats, "metrics_addr": args.telemetry.metrics_addr()?
                    }))?
                );
                return Ok(());
            }
            init_telemetry("cuzk-ledger", &args.telemetry).await?;
            let (_client, topology) = cuzk_cli::connect(&nats).await?;
            cuzk_common::metrics::set_ready(true);
            cuzk_common::lifecycle::service::serve(topology, shutdown_on_signal()?)
                .await
                .map_err(|e| anyhow::anyhow!("ledger service: {e}"))
        }
        Command::Launch(args) => {
            let spec = cuzk_cli::launcher::LaunchSpec {
                servers: args.servers,
                synth_nodes: args.synth,
                gpu_nodes: args.gpu,
                ledger_services: args.ledger,
                threads: args.threads,
                ack_wait_secs: args.ack_wait_secs,
                ..Default::default()
            };
            let stop = cuzk_cli::launcher::stop_signal()?;
            let cluster =
                cuzk_cli::launcher::ProcessCluster::start(spec, &std::env::current_exe()?)?;
            println!("NATS: {}", cluster.urls());
            println!("logs: {}", cluster.dir.path().display());
            println!(
                "submit with: cuzk submit --nats-url {} --wait",
                cluster.urls()
            );
            stop.await;
            drop(cluster);
            Ok(())
        }
    }
}

/// Runs a node until SIGINT/SIGTERM, then gives it `drain` to finish in-flight work; what is
/// still unfinished after that is redelivered to another node once its ack wait passes.
async fn run_until_drained<F, Fut>(node: F, drain: Duration) -> anyhow::Result<()>
where
    F: FnOnce(CancellationToken) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let token = shutdown_on_signal()?;
    let deadline = async {
        token.cancelled().await;
        tokio::time::sleep(drain).await;
    };
    tokio::select! {
        result = node(token.clone()) => result,
        _ = deadline => {
            tracing::warn!(?drain, "drain timeout passed; exiting with work in flight");
            Ok(())
        }
    }
}

/// Cancelled on SIGINT or SIGTERM: nodes stop pulling and hand back in-flight work.
fn shutdown_on_signal() -> std::io::Result<CancellationToken> {
    let token = CancellationToken::new();
    let trigger = token.clone();
    let stop = cuzk_cli::launcher::stop_signal()?;
    tokio::spawn(async move {
        let signal = stop.await;
        info!(signal, "shutdown requested");
        trigger.cancel();
    });
    Ok(token)
}

/// Logging, tracing and metrics for a command (flushed by `main` on exit), and the metrics and
/// health endpoints if asked for.
async fn init_telemetry(service: &str, args: &TelemetryArgs) -> anyhow::Result<()> {
    telemetry::init(TelemetryOptions::new(service, args));
    if let Some(addr) = args.metrics_addr()? {
        cuzk_common::metrics::serve(addr)
            .await
            .with_context(|| format!("--metrics-addr {addr}"))?;
    }
    Ok(())
}

async fn local(args: LocalArgs, file: ConfigFile) -> anyhow::Result<()> {
    init_telemetry("cuzk-local", &args.telemetry).await?;
    let synth = args.synth.merge(file.synth).resolve()?;
    let gpu = args.gpu.merge(file.gpu).resolve()?;
    let params = args.params.merge(file.params).resolve(true)?;
    let spec = args.job.spec()?;
    let cache = cuzk_cli::shape_cache(&params)?;
    let cluster = LocalCluster::start(synth, gpu, params).await?;
    info!(url = %cluster.url(), job_id = %spec.job_id, circuit = %spec.circuit, params = %spec.params, "local cluster up; submitting");
    let outcome = submit_and_wait(
        &cluster.client,
        &spec,
        Duration::from_secs(args.timeout_secs),
    )
    .instrument(cuzk_cli::submit::send_span(None, &spec))
    .await;
    cluster.stop().await?;
    let result = outcome?;
    println!("job {}: {:?}", result.job_id, result.status);
    if result.status != JobStatus::Done {
        anyhow::bail!("job failed: {}", result.error.unwrap_or_default());
    }
    verify_job_proof(&spec, &result, &cache)?;
    println!("proof ({} partitions × 192 bytes, verified by the GPU node: {}, re-verified here with bellperson::verify_proof: true):",
        result.partitions, result.verified);
    println!("{}", result.proof.as_deref().unwrap_or_default());
    println!("\nstage timings (ms):\n{}", timings_table(&result));
    Ok(())
}

/// The job `cuzk submit` was asked for and its input bytes (staged once connected), checked
/// before anything touches the network.
fn submit_job(args: &SubmitArgs) -> anyhow::Result<(JobSpec, Vec<u8>)> {
    let Some(path) = &args.c1 else {
        let spec = args.job.spec()?;
        let input = cuzk_cli::inline_input(&spec.input)?;
        return Ok((spec, input));
    };
    #[cfg(feature = "porep")]
    {
        let c1 = cuzk_cli::c1::read_c1_file(path)?;
        let sector_size = args
            .sector_size
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e: String| anyhow::anyhow!("--sector-size: {e}"))?;
        let flags = cuzk_cli::c1::C1Flags {
            sector: args.sector,
            miner: args.miner.as_deref().context("--c1 needs --miner")?,
            sector_size,
            seal_proof: args.seal_proof.as_deref(),
        };
        let params = cuzk_cli::c1::porep_params(&c1, &flags)?;
        let spec = JobSpec {
            version: JOB_SPEC_VERSION,
            job_id: args.job.job_id.clone().unwrap_or_else(fresh_job_id),
            circuit: "porep-c2".into(),
            params,
            input: JobInput::None,
            priority: args.job.priority(),
        };
        Ok((spec, c1))
    }
    #[cfg(not(feature = "porep"))]
    anyhow::bail!(
        "--c1 {}: this cuzk was built without PoRep (feature `porep`)",
        path.display()
    )
}

async fn submit(args: SubmitArgs, file: ConfigFile) -> anyhow::Result<()> {
    let nats = args.nats.clone().merge(file.nats).resolve("cuzk-submit")?;
    // Only what OTEL_* asks for: with an endpoint the job's trace starts here.
    telemetry::init(TelemetryOptions {
        service_name: "cuzk-submit".into(),
        ..Default::default()
    });
    let (spec, input) = submit_job(&args)?;
    let client = cuzk_common::nats::connect(&nats).await?;
    let bucket = &nats.inputs_bucket;
    let input =
        cuzk_cli::submit::stage_input(&client, nats.timeout, bucket, &spec.job_id, &input).await?;
    let spec = JobSpec { input, ..spec };
    let tenant = nats.tenant.as_deref();
    let span = cuzk_cli::submit::send_span(tenant, &spec);
    let js = jetstream_context(client.clone(), nats.timeout);
    if !(args.wait || args.out.is_some() || args.c1.is_some()) {
        let accepted = submit::publish_job(&js, tenant, &spec)
            .instrument(span)
            .await?;
        match accepted {
            submit::Accepted::Stored(_) => println!("{}", spec.job_id),
            submit::Accepted::Duplicate => println!(
                "{} (a duplicate of a submission from the last minutes; the original stands)",
                spec.job_id
            ),
        }
        return Ok(());
    }
    // Progress from the job's record, where this user may read the jobs bucket.
    let progress = match js.get_key_value(JOBS_BUCKET).await {
        Ok(kv) => {
            let (ledger, key) = (Ledger::open(js.clone(), kv), job_key(tenant, &spec.job_id));
            Some(tokio::spawn(async move {
                cuzk_cli::status::follow(&ledger, &key).await
            }))
        }
        Err(e) => {
            eprintln!("(no progress: cannot read the jobs bucket: {e})");
            None
        }
    };
    let wait = Duration::from_secs(args.wait_secs);
    let result = submit::submit_and_wait(&client, tenant, &spec, submit::Via::JetStream, wait)
        .instrument(span)
        .await;
    if let Some(progress) = progress {
        // The record is final before the result is published: this ends at once.
        let _ = tokio::time::timeout(Duration::from_secs(2), progress).await;
    }
    let result = result?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    if result.status != JobStatus::Done {
        anyhow::bail!("job failed: {}", result.error.unwrap_or_default())
    }
    eprintln!("{}", timings_table(&result));
    if let Some(out) = &args.out {
        cuzk_cli::submit::write_proof(&result, out)?;
        eprintln!("proof written to {}", out.display());
    }
    Ok(())
}

async fn gateway(args: GatewayCommandArgs, file: ConfigFile) -> anyhow::Result<()> {
    if args.describe {
        print!("{}", cuzk_gateway::describe()?);
        return Ok(());
    }
    let nats = args.nats.merge(file.nats).resolve("cuzk-gateway")?;
    let config = args.gateway.merge(file.gateway).resolve()?;
    let access =
        cuzk_gateway::Access::load(config.auth_file.as_deref(), config.tls_client_ca.is_some())?;
    if args.check_config {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "nats": nats, "gateway": config,
                "metrics_addr": args.telemetry.metrics_addr()?
            }))?
        );
        return Ok(());
    }
    init_telemetry("cuzk-gateway", &args.telemetry).await?;
    let (client, topology) = cuzk_cli::connect(&nats).await?;
    let (bucket, tenant) = (nats.inputs_bucket.clone(), nats.tenant.clone());
    let cluster =
        cuzk_cli::gateway::NatsCluster::new(client, topology, nats.timeout, bucket, tenant);
    let listen = config.listen.clone();
    let gateway = cuzk_gateway::Gateway::new(Arc::new(cluster), config, access);
    cuzk_gateway::serve(&listen, gateway, shutdown_on_signal()?, |addr| {
        // The line scripts and tests wait for.
        println!("cuzk gateway listening on {addr}");
    })
    .await?;
    Ok(())
}

async fn status(args: StatusArgs, file: ConfigFile) -> anyhow::Result<()> {
    let nats = args.nats.merge(file.nats).resolve("cuzk-status")?;
    let (_client, topology) = cuzk_cli::connect(&nats).await?;
    match args.job_id {
        Some(job_id) => {
            let key = job_key(nats.tenant.as_deref(), &job_id);
            let record = Ledger::reader(&topology)
                .get(&key)
                .await?
                .with_context(|| format!("no job {key}"))?;
            println!(
                "job {} ({}): {:?}",
                record.key(),
                record.circuit,
                record.status
            );
            if let Some(error) = &record.error {
                println!("error: {error}");
            }
            for (index, partition) in record.partitions.iter().enumerate() {
                println!(
                    "  partition {index}: {:?} attempts={} prover={}",
                    partition.status,
                    partition.attempts,
                    partition.prover.as_deref().unwrap_or("-")
                );
            }
        }
        None => println!("{}", cuzk_cli::status::cluster_status(&topology).await?),
    }
    Ok(())
}

async fn watch(args: WatchArgs, file: ConfigFile) -> anyhow::Result<()> {
    let nats = args.nats.merge(file.nats).resolve("cuzk-watch")?;
    let client = cuzk_common::nats::connect(&nats).await?;
    let js = jetstream_context(client, nats.timeout);
    let ledger = Ledger::open(js.clone(), js.get_key_value(JOBS_BUCKET).await?);
    let timeout = Duration::from_secs(args.wait_secs);
    let key = job_key(nats.tenant.as_deref(), &args.job_id);
    let record = tokio::time::timeout(timeout, cuzk_cli::status::follow(&ledger, &key))
        .await
        .with_context(|| format!("job {key} did not end within {timeout:?}"))??;
    match record.result {
        Some(result) if result.status == JobStatus::Done => {
            println!(
                "job {}: done, {} partitions, verified: {}",
                result.job_id, result.partitions, result.verified
            );
            println!("{}", timings_table(&result));
            Ok(())
        }
        _ => anyhow::bail!(
            "job {} failed: {}",
            record.job_id,
            record.error.unwrap_or_default()
        ),
    }
}

async fn cancel(args: CancelArgs, file: ConfigFile) -> anyhow::Result<()> {
    use cuzk_wire::control::CancelOutcome;
    let nats = args.nats.merge(file.nats).resolve("cuzk-cancel")?;
    let client = cuzk_common::nats::connect(&nats).await?;
    let tenant = nats.tenant.as_deref();
    let reply = cuzk_cli::cancel::cancel(&client, tenant, &args.job_id, nats.timeout).await?;
    let status = reply.status.map(JobStatus::name).unwrap_or("unknown");
    match reply.outcome {
        CancelOutcome::Cancelled => println!("job {}: cancelled", reply.job_id),
        // A retried request whose first attempt did it finds its own cancellation.
        CancelOutcome::AlreadyEnded if reply.status == Some(JobStatus::Cancelled) => {
            println!("job {}: cancelled", reply.job_id)
        }
        CancelOutcome::AlreadyEnded => {
            anyhow::bail!(
                "job {} had already ended ({status}); nothing changed",
                reply.job_id
            )
        }
        CancelOutcome::Unknown => anyhow::bail!(
            "no job {} (never submitted, or no synth node has taken it yet)",
            reply.job_id
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Each flag of `command` and its subcommands without an environment twin, and each twin
    /// with the flags it stands for.
    fn twins(
        command: &clap::Command,
        path: &str,
        missing: &mut Vec<String>,
        envs: &mut std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    ) {
        for arg in command.get_arguments() {
            let long = arg.get_long().unwrap_or_default();
            if arg.is_positional() || ["help", "version"].contains(&long) {
                continue;
            }
            match arg.get_env() {
                Some(env) => {
                    envs.entry(env.to_string_lossy().into_owned())
                        .or_default()
                        .insert(long.to_owned());
                }
                None => missing.push(format!("{path} --{long}")),
            }
        }
        for sub in command.get_subcommands() {
            twins(sub, &format!("{path} {}", sub.get_name()), missing, envs);
        }
    }

    /// clap checks a command line's definition only in debug builds, as it parses: a clash
    /// there makes a subcommand panic in a debug build alone.
    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// `cuzk local` takes the synth and GPU tables together, and each budget reaches its own
    /// node: both were `memory_budget` to clap, so one flag set the other node's budget too.
    #[test]
    fn local_keeps_each_tables_settings_apart() {
        let argv = ["cuzk", "local", "--synth-memory-budget", "1GiB"];
        let Command::Local(local) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not the local command");
        };
        assert_eq!(local.synth.memory_budget.map(|b| b.0), Some(1 << 30));
        assert_eq!(local.gpu.memory_budget.map(|b| b.0), None);
    }

    /// The README: every flag has an environment twin (`CUZK_*`), one variable per flag name.
    #[test]
    fn every_flag_has_an_environment_twin() {
        let (mut missing, mut envs) = (Vec::new(), Default::default());
        twins(&Cli::command(), "cuzk", &mut missing, &mut envs);
        assert!(missing.is_empty(), "flags without an env twin: {missing:?}");
        assert!(envs.len() > 40, "{envs:?}");
        for (env, flags) in &envs {
            assert!(env.starts_with("CUZK_"), "{env}");
            assert_eq!(flags.len(), 1, "{env} stands for several flags: {flags:?}");
        }

        // The walk does find a flag without one.
        let without = clap::Command::new("x")
            .subcommand(clap::Command::new("y").arg(clap::Arg::new("z").long("z")));
        let (mut missing, mut envs) = (Vec::new(), Default::default());
        twins(&without, "x", &mut missing, &mut envs);
        assert_eq!(missing, ["x y --z"]);
    }
}
