//! `cuzk-porep drain`: a prefilled queue drained by a GPU node, as separate processes (the
//! `cuzk` binary beside this one): a synth node synthesizes every partition of a sector into the
//! work queue first — so synthesis does not hide the GPU — and stops; then a GPU node starts with
//! the shape's key preloaded on each device and proves the queue. Prints the per-partition stage
//! table, the sector's wall time from the GPU node's start of work to the result, GPU busy while
//! draining, device memory peak (nvidia-smi) and the GPU node's peak RSS; `--json` writes them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cuzk_circuits::porep::SealedSector;
use cuzk_cli::launcher::{LaunchSpec, ProcessCluster, Role};
use cuzk_common::lifecycle::Ledger;
use cuzk_common::objects;
use cuzk_common::timing::ms;
use cuzk_common::topology::{results_subject, SUBJECT_SUBMIT};
use cuzk_wire::job::{
    JobInput, JobRecord, JobResult, JobSpec, JobStatus, PartitionStatus, PartitionTimings, Stage,
};
use futures::StreamExt;
use serde_json::json;

use crate::measure::{cpu_seconds, GpuSampler, Rss};
use crate::{job_params, median};

pub struct Options {
    pub synth_in_flight: usize,
    pub gpu_args: Vec<String>,
    pub json: Option<PathBuf>,
    pub timeout: Duration,
}

fn cuzk_binary() -> Result<PathBuf> {
    let me = std::env::current_exe()?;
    let path = me.with_file_name("cuzk");
    ensure!(
        path.exists(),
        "the cuzk binary is expected beside {}",
        me.display()
    );
    Ok(path)
}

/// Watches the job's record in the jobs bucket from now on and notes when each partition is
/// first seen proved: the GPU node's completions, as they happen (a watch pushes every update).
fn watch_completions(
    runtime: &tokio::runtime::Runtime,
    kv: &async_nats::jetstream::kv::Store,
    job_id: &str,
) -> Result<Arc<Mutex<Vec<Instant>>>> {
    let mut updates = runtime.block_on(kv.watch(job_id))?;
    let done = Arc::new(Mutex::new(Vec::new()));
    let sink = done.clone();
    runtime.spawn(async move {
        let mut seen = Vec::new();
        while let Some(Ok(entry)) = updates.next().await {
            let at = Instant::now();
            let Ok(record) = serde_json::from_slice::<JobRecord>(&entry.value) else {
                continue;
            };
            seen.resize(record.partitions.len(), false);
            for (p, was) in record.partitions.iter().zip(seen.iter_mut()) {
                if p.status == PartitionStatus::Proved && !*was {
                    *was = true;
                    sink.lock().expect("completions").push(at);
                }
            }
        }
    });
    Ok(done)
}

/// Completions this close together finished in one batch (the GPU node's L, A and B MSMs).
const TOGETHER: Duration = Duration::from_millis(50);

/// Time per partition from the first completion to the last: what a partition costs a node
/// that is kept fed, without the first partition's fetch, decode and upload that a sector's
/// wall time holds. Partitions that finish with the first (one batch) are not counted.
fn steady_ms(completions: &[Instant]) -> f64 {
    let (Some(first), Some(last)) = (completions.iter().min(), completions.iter().max()) else {
        return f64::NAN;
    };
    let after = completions
        .iter()
        .filter(|&&c| c > *first + TOGETHER)
        .count();
    if after == 0 {
        return f64::NAN;
    }
    ms(*last - *first) / after as f64
}

/// Waits until `name`'s log contains `needle`, failing if the node exits first.
fn wait_for_log(
    cluster: &mut ProcessCluster,
    name: &str,
    needle: &str,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !cluster.log(name).contains(needle) {
        if let Err(e) = cluster.all_nodes_running() {
            bail!("{e}:\n{}", cluster.log_tails(4000));
        }
        ensure!(
            Instant::now() < deadline,
            "{name} did not log {needle:?} in {timeout:?}:\n{}",
            cluster.log_tails(4000)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The drain's blobs bucket, where a launched cluster's is 1 GiB: a 32 GiB sector's ten blobs
/// (0.8 GB) with room for one incompressible one (4.2 GB). No larger: nats-server reserves it on
/// a disk that the 32 GiB parameters and matrices (55 GB) leave 9 GB of on the one-GPU host.
const BLOBS_BUCKET_BYTES: u64 = 6 << 30;

pub fn run(sector: &SealedSector, opts: Options) -> Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let params = job_params(sector);
    let spec = LaunchSpec {
        servers: 1,
        synth_nodes: 1,
        gpu_nodes: 0,
        threads,
        ack_wait_secs: 120,
        synth_args: vec![
            "--allow-synthetic".into(),
            "--synth-partitions-in-flight".into(),
            opts.synth_in_flight.to_string(),
            // The whole sector queues: no backpressure short of the blobs bucket's own limit,
            // which must hold a 32 GiB sector's blobs with room for one incompressible one.
            "--synth-max-queued-bytes".into(),
            (1u64 << 40).to_string(),
            "--nats-blobs-max-bytes".into(),
            BLOBS_BUCKET_BYTES.to_string(),
        ],
        gpu_args: [
            "--allow-synthetic",
            "--nats-blobs-max-bytes",
            &BLOBS_BUCKET_BYTES.to_string(),
            "--gpu-preload",
            &json!([{"name": "porep-c2", "params": params}]).to_string(),
        ]
        .into_iter()
        .map(String::from)
        .chain(opts.gpu_args.iter().cloned())
        .collect(),
        ..Default::default()
    };
    let limits = cuzk_common::topology::Limits {
        blobs_max_bytes: BLOBS_BUCKET_BYTES as i64,
        ..cuzk_common::topology::Limits::local()
    };
    cuzk_common::local_nats::ensure_store_space(limits.reserved_bytes())?;
    let mut cluster = ProcessCluster::start(spec, &cuzk_binary()?)?;
    // The synth node creates the buckets with its limits before this client would with the
    // local ones.
    for name in cluster.nodes(Role::Synth) {
        wait_for_log(&mut cluster, &name, "synth node started", opts.timeout)?;
    }
    let runtime = tokio::runtime::Runtime::new()?;
    let (client, topology) = runtime.block_on(cuzk_cli::connect_url(&cluster.urls(), "drain"))?;
    let job_id = format!("drain-{}", rand::random::<u32>());
    let input_name = format!("{job_id}.c1.json");
    let spec = JobSpec {
        version: cuzk_wire::job::JOB_SPEC_VERSION,
        job_id: job_id.clone(),
        circuit: "porep-c2".into(),
        params,
        input: JobInput::Object(input_name.clone()),
        priority: cuzk_wire::job::Priority::Normal,
    };

    // 1. Synthesis fills the queue.
    let started = Instant::now();
    let mut results = runtime.block_on(async {
        objects::put(&topology.inputs, &input_name, &sector.c1_json).await?;
        let results = client.subscribe(results_subject(&job_id)).await?;
        client
            .publish(SUBJECT_SUBMIT, serde_json::to_vec(&spec)?.into())
            .await?;
        client.flush().await?;
        anyhow::Ok(results)
    })?;
    let partitions = sector.size.partitions();
    loop {
        let record = runtime.block_on(Ledger::new(&topology).get(&job_id))?;
        if let Some(r) = &record {
            ensure!(r.status != JobStatus::Failed, "job failed: {:?}", r.error);
            if r.partitions
                .iter()
                .all(|p| p.status == PartitionStatus::Queued)
            {
                break;
            }
        }
        if let Err(e) = cluster.all_nodes_running() {
            bail!("{e}:\n{}", cluster.log_tails(4000));
        }
        ensure!(
            started.elapsed() < opts.timeout,
            "synthesis did not finish in {:?}:\n{}",
            opts.timeout,
            cluster.log_tails(4000)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let synth_wall = started.elapsed().as_secs_f64();
    // Everything the synth node spent on the sector (intake, vanilla checks, witness, encode,
    // upload), read before it exits.
    let synth_cpu_s = cluster
        .nodes(Role::Synth)
        .iter()
        .filter_map(|name| cpu_seconds(&cluster.pid(name)?.to_string()))
        .sum::<f64>();
    for name in cluster.nodes(Role::Synth) {
        cluster.stop_node(&name, Duration::from_secs(60))?;
    }
    println!("{partitions} partitions synthesized into the queue in {synth_wall:.1} s");

    // 2. The GPU node loads the key on every device, then drains the queue.
    let sampler = GpuSampler::start();
    let completions = watch_completions(&runtime, &topology.jobs_kv, &job_id)?;
    let gpu = cluster.add_node(Role::Gpu)?;
    let loading = Instant::now();
    wait_for_log(&mut cluster, &gpu, "gpu node started", opts.timeout)?;
    let load_s = loading.elapsed().as_secs_f64();
    let draining = Instant::now();
    let message = runtime
        .block_on(async { tokio::time::timeout(opts.timeout, results.next()).await })
        .context("no result in time")?
        .context("results subscription closed")?;
    let sector_s = draining.elapsed().as_secs_f64();
    // The last partition's update may reach the watch just after the result.
    let seen = || completions.lock().expect("completions").len();
    let deadline = Instant::now() + Duration::from_secs(2);
    while seen() < sector.size.partitions() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let steady = steady_ms(&completions.lock().expect("completions"));
    let rss = cluster.pid(&gpu).and_then(Rss::of);
    let (mem_peak, util) = sampler
        .map(|s| s.stop(draining))
        .unwrap_or((f64::NAN, f64::NAN));
    let result: JobResult = serde_json::from_slice(&message.payload)?;
    ensure!(
        result.status == JobStatus::Done,
        "job failed: {:?}\n{}",
        result.error,
        cluster.log_tails(4000)
    );
    let gpu_log = cluster.log(&gpu);
    let gpus = gpu_count(&gpu_log);
    let h2d = h2d_per_partition(&gpu_log, sector.size.partitions());
    let plan = gpu_log
        .lines()
        .find(|l| l.contains("device memory plan"))
        .and_then(|l| field(l, "plan"))
        .unwrap_or_default();
    // The device steps that stalled (kernels/src/gpu/mod.rs `note_slow`), with their partitions,
    // each MSM's time (RUST_LOG=cuzk_kernels=debug), each blob's and stripe's read
    // (cuzk_common::objects=debug), and each partition's end with its stages' times: when each
    // worker took its turn, and what the device waited for between them.
    const SHOWN: [&str; 5] = [
        "slow device step",
        "MSM time",
        "object read",
        "stripe read",
        "partition proved",
    ];
    for line in gpu_log
        .lines()
        .filter(|l| SHOWN.iter().any(|s| l.contains(s)))
    {
        println!("{line}");
    }
    report(
        sector,
        &result,
        Report {
            synth_wall,
            synth_cpu_s,
            load_s,
            sector_s,
            steady_ms: steady,
            gpus,
            mem_peak_gib: mem_peak / 1024.0,
            util,
            rss,
            h2d,
            plan,
            msms: msm_summary(&gpu_log),
            json: opts.json.as_deref(),
        },
    )
}

/// A `key=value` or `key="value"` field of a log line.
fn field(line: &str, key: &str) -> Option<String> {
    let clean = strip_ansi(line);
    let at = clean.find(&format!("{key}="))? + key.len() + 1;
    let rest = &clean[at..];
    Some(match rest.strip_prefix('"') {
        Some(quoted) => quoted[..quoted.find('"')?].to_string(),
        None => rest.split_whitespace().next()?.to_string(),
    })
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... letter
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Host-to-device bytes per partition from the GPU node's log: each device's count at its last
/// proved partition, less what its key loading copied, over the partitions.
fn h2d_per_partition(log: &str, partitions: usize) -> Option<f64> {
    let bytes = |l: &str| field(l, "h2d_total_bytes").and_then(|v| v.parse::<u64>().ok());
    let loaded: u64 = log
        .lines()
        .filter(|l| l.contains("proving key preloaded"))
        .filter_map(bytes)
        .sum();
    let mut last = std::collections::BTreeMap::new();
    for l in log.lines().filter(|l| l.contains("partition proved")) {
        let (Some(b), Some(device)) = (bytes(l), device_of(l)) else {
            continue;
        };
        let e = last.entry(device).or_insert(0);
        *e = (*e).max(b);
    }
    if last.is_empty() {
        return None;
    }
    let total: u64 = last.values().sum();
    Some(total.saturating_sub(loaded) as f64 / partitions.max(1) as f64)
}

/// The device of a worker's log line (`cuda1.0` → 1).
fn device_of(line: &str) -> Option<u32> {
    let at = line.find("\"cuda")? + 5;
    let digits: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// Devices whose workers proved partitions (`worker="cuda1.0"` in the GPU node's log).
fn gpu_count(log: &str) -> usize {
    (0..64)
        .filter(|d| log.contains(&format!("\"cuda{d}.")))
        .count()
        .max(1)
}

struct Report<'a> {
    synth_wall: f64,
    /// CPU seconds of the synth node process over the whole sector.
    synth_cpu_s: f64,
    load_s: f64,
    sector_s: f64,
    steady_ms: f64,
    gpus: usize,
    mem_peak_gib: f64,
    util: f64,
    rss: Option<Rss>,
    /// Host-to-device bytes per partition, key loading left out.
    h2d: Option<f64>,
    /// The device memory plan the GPU node logged.
    plan: String,
    /// The GPU node's MSM times ([`msm_summary`]), where it logged them.
    msms: Option<String>,
    json: Option<&'a Path>,
}

/// The GPU node's MSM times (RUST_LOG=cuzk_kernels=debug): H's median per partition; L's,
/// A's and B's summed over the batches and divided by the partitions they served (a median per
/// batch would hide a sector's tail of small batches); the batches' sizes in order.
fn msm_summary(log: &str) -> Option<String> {
    let values = |what: &str, key: &str| -> Vec<f64> {
        log.lines()
            .filter(|l| l.contains(what))
            .filter_map(|l| field(l, key)?.parse().ok())
            .collect()
    };
    let h = values("H MSM time", "h_ms");
    let batch = values("MSM times", "batch");
    let served: f64 = batch.iter().sum();
    if h.is_empty() || served == 0.0 {
        return None;
    }
    let per_partition: Vec<String> = ["l_ms", "a_ms", "b_g1_ms", "b_g2_ms"]
        .iter()
        .map(|k| format!("{:.0}", values("MSM times", k).iter().sum::<f64>() / served))
        .collect();
    let sizes: Vec<String> = batch.iter().map(|b| format!("{b:.0}")).collect();
    Some(format!(
        "H {:.0}; L / A / B_G1 / B_G2 {} a partition (batches of {})",
        median(h),
        per_partition.join(" / "),
        sizes.join(", ")
    ))
}

fn report(sector: &SealedSector, result: &JobResult, r: Report<'_>) -> Result<()> {
    let parts = &result.partition_timings;
    println!("{}", cuzk_cli::timings_table(result));
    let med = |f: &dyn Fn(&PartitionTimings) -> f64| median(parts.iter().map(f).collect());
    let mbps = |bytes: f64, ms: f64| bytes / 1e6 / (ms / 1e3).max(1e-9);
    let blob = med(&|t| t.blob_bytes as f64);
    let (upload, fetch) = (med(&|t| t.upload_ms), med(&|t| t.fetch_ms));
    // One partition's latency through the GPU node: fetch, decode, then the prove (h2d to
    // assembly). Workers on a device overlap partitions, so what a partition costs a GPU is the
    // drain's wall time per partition per GPU.
    let node_ms = med(&|t| t.fetch_ms + t.decode_ms + t.prove_ms);
    let gpu_ms_per_partition = r.sector_s * 1e3 * r.gpus.max(1) as f64 / parts.len().max(1) as f64;
    let in_flight =
        parts.iter().map(|t| t.prove_ms).sum::<f64>() / 1e3 / (r.sector_s * r.gpus.max(1) as f64);
    let core_s: f64 = parts.iter().map(|t| t.synth_ms).sum::<f64>() / 1e3;
    let synth_cpu_s = r.synth_cpu_s / parts.len().max(1) as f64;
    println!("| stage (median of {} partitions) | value |", parts.len());
    println!("|---|---|");
    let head = [
        (
            "synth node CPU core-seconds per partition (all its work)",
            format!("{synth_cpu_s:.1}"),
        ),
        (
            "synth ms (wall of one partition)",
            format!("{:.0}", med(&|t| t.synth_ms)),
        ),
        ("encode ms", format!("{:.0}", med(&|t| t.encode_ms))),
        ("blob MB", format!("{:.1}", blob / 1e6)),
        (
            "upload ms (MB/s)",
            format!("{upload:.0} ({:.0})", mbps(blob, upload)),
        ),
        (
            "fetch ms (MB/s)",
            format!("{fetch:.0} ({:.0})", mbps(blob, fetch)),
        ),
    ];
    let stage_ms = |stage: Stage| med(&|t| t.get(stage).unwrap_or_default());
    let tail = [
        (
            "partition latency ms (fetch+decode+prove)",
            format!("{node_ms:.0}"),
        ),
        (
            "GPU time per partition ms (sector wall × GPUs / partitions)",
            format!("{gpu_ms_per_partition:.0}"),
        ),
        (
            "steady state ms (per partition, first completion to last)",
            format!("{:.0}", r.steady_ms),
        ),
        ("proofs in flight per GPU (mean)", format!("{in_flight:.2}")),
        (
            "sector wall s (queue prefilled, key loaded → last partition)",
            format!("{:.2} on {} GPU(s)", r.sector_s, r.gpus),
        ),
        (
            "GPU busy % while draining (nvidia-smi utilization)",
            format!("{:.0}", r.util),
        ),
        ("device memory peak GiB", format!("{:.1}", r.mem_peak_gib)),
        (
            "host-to-device GB per partition",
            r.h2d.map_or("-".into(), |b| format!("{:.2}", b / 1e9)),
        ),
        ("device memory plan", r.plan.clone()),
        (
            "MSM ms (H median; L, A, B summed per partition)",
            r.msms.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "GPU node peak RSS GiB (resident at the end: anonymous / file)",
            r.rss.map_or("-".into(), |m| {
                format!("{:.1} ({:.1} / {:.1})", m.peak, m.anon, m.file)
            }),
        ),
        ("key load s (all devices)", format!("{:.1}", r.load_s)),
        (
            "synthesis wall s (all partitions)",
            format!("{:.1}", r.synth_wall),
        ),
    ];
    for (what, v) in &head {
        println!("| {what} | {v} |");
    }
    // The GPU node's stages after the fetch (shown above with its rate), by their own labels
    // (turn: waiting while the device proves another partition).
    let after_fetch = Stage::ON_GPU_NODE
        .iter()
        .filter(|s| !matches!(s, Stage::QueueWait | Stage::Fetch));
    for &stage in after_fetch {
        println!("| {} ms | {:.0} |", stage.label(), stage_ms(stage));
    }
    for (what, v) in &tail {
        println!("| {what} | {v} |");
    }
    if let Some(path) = r.json {
        let mut j = json!({
            "sector_size": sector.size.name(),
            "synthetic": result.synthetic,
            "partitions": parts.len(),
            "gpus": r.gpus,
            "partition_ms": gpu_ms_per_partition,
            "partition_steady_ms": r.steady_ms,
            "partition_latency_ms": node_ms,
            "proofs_in_flight_per_gpu": in_flight,
            "wire_bytes": blob,
            "blob_upload_mb_s": mbps(blob, upload),
            "blob_fetch_mb_s": mbps(blob, fetch),
            "synth_core_s": core_s,
            "synth_node_cpu_s_per_partition": synth_cpu_s,
            "sector_s": r.sector_s,
            "gpu_busy_pct": r.util,
            "device_mem_peak_gib": r.mem_peak_gib,
            "h2d_bytes_per_partition": r.h2d,
            "plan": r.plan,
            "msms": r.msms,
            "gpu_node_rss_gib": r.rss.map(|m| m.peak),
            "gpu_node_rss_anon_gib": r.rss.map(|m| m.anon),
            "gpu_node_rss_file_gib": r.rss.map(|m| m.file),
            "key_load_s": r.load_s,
        });
        for &stage in Stage::ON_GPU_NODE {
            j[stage.field()] = json!(stage_ms(stage));
        }
        std::fs::write(path, serde_json::to_vec_pretty(&j)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_state_is_the_time_per_partition_after_the_first_completion() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // The first partition's time from the node's start is not counted, in any order.
        let done = [at(1900), at(400), at(1000), at(1450), at(2600)];
        assert!((steady_ms(&done) - 550.0).abs() < 1e-6);
        assert!(steady_ms(&done[..1]).is_nan());
        // Batches of two finish together: four partitions after the first batch in 2 s.
        let batched = [at(400), at(410), at(1400), at(1405), at(2395), at(2400)];
        assert!((steady_ms(&batched) - 500.0).abs() < 1e-6);
    }

    #[test]
    fn msm_times_are_summed_up_per_partition_and_per_batch() {
        let log = "\
DEBUG cuzk_kernels::backend: H MSM time device=H200 h_ms=1000.5
DEBUG cuzk_kernels::backend: H MSM time device=H200 h_ms=1040.0
DEBUG cuzk_kernels::backend: H MSM time device=H200 h_ms=1020.0
DEBUG cuzk_kernels::backend: MSM times device=H200 batch=2 l_ms=240.0 a_ms=230.0 b_g1_ms=60.0 b_g2_ms=120.0
DEBUG cuzk_kernels::backend: MSM times device=H200 batch=1 l_ms=200.0 a_ms=190.0 b_g1_ms=50.0 b_g2_ms=100.0
DEBUG cuzk_kernels::backend: MSM times device=H200 batch=2 l_ms=220.0 a_ms=210.0 b_g1_ms=55.0 b_g2_ms=110.0
";
        assert_eq!(
            msm_summary(log).unwrap(),
            "H 1020; L / A / B_G1 / B_G2 132 / 126 / 33 / 66 a partition (batches of 2, 1, 2)"
        );
        assert_eq!(msm_summary("nothing logged"), None);
    }

    #[test]
    fn host_to_device_bytes_per_partition_leave_the_key_out() {
        let log = "\
INFO proving key preloaded shape=porep h2d_total_bytes=1000
INFO prove{worker=\"cuda0.0\"}: partition proved h2d_ms=1 h2d_total_bytes=1200
INFO prove{worker=\"cuda0.1\"}: partition proved h2d_ms=1 h2d_total_bytes=1400
INFO proving key preloaded shape=porep h2d_total_bytes=1000
INFO prove{worker=\"cuda1.0\"}: partition proved h2d_total_bytes=1200
INFO device memory plan plan=\"lean H stage, streaming H\" chunk=8
";
        assert_eq!(h2d_per_partition(log, 3), Some(200.0));
        assert_eq!(h2d_per_partition("nothing", 3), None);
        let plan = log.lines().find(|l| l.contains("device memory plan"));
        assert_eq!(
            plan.and_then(|l| field(l, "plan")).as_deref(),
            Some("lean H stage, streaming H")
        );
        assert_eq!(
            field("\u{1b}[2mx\u{1b}[0m=5 y=6", "y").as_deref(),
            Some("6")
        );
    }
}
