//! `cuzk-load soak`: a mixed job stream against a cluster of real processes for a set time while
//! nodes of every role are killed (SIGKILL) and restarted at random, then an idle wait; prints
//! what a farm's operator asks of a week: jobs lost, answered twice, answered wrongly, failed,
//! blobs and inputs leaked, and each node's resident memory over the run.
//!
//! Answers are counted where clients listen (a core subscription to `cuzk.results.>`) and on
//! the ledger's raw publications (`cuzk.ledger.results.>`), before the results stream
//! deduplicates them.

mod gateway_clients;
mod leaks;
mod memory;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use cuzk_circuits::ShapeCache;
use cuzk_cli::launcher::{ProcessCluster, Role};
use cuzk_common::config::{NatsArgs, Span};
use cuzk_common::topology::{ledger_results_subject, SUBJECT_SUBMIT, SUBJECT_SUBMIT_HIGH};
use cuzk_wire::job::{JobInput, JobResult, JobSpec, JobStatus, Priority, JOB_SPEC_VERSION};
use futures::StreamExt;
use rand::Rng;

use crate::cluster::{ClusterShape, Target};
use gateway_clients::{GatewayClients, GatewayTally};
use leaks::{leaks, Leaks};
use memory::{growth, sample_rss, Rss};

#[derive(Args)]
pub struct SoakArgs {
    /// How long to submit jobs and kill nodes (`2h`, `10m`, seconds).
    #[arg(long, env = "CUZK_SOAK_DURATION", default_value = "10m")]
    duration: Span,
    /// Jobs submitted per second (open loop), spread over the submitters.
    #[arg(long, env = "CUZK_SOAK_RATE", default_value_t = 3.0)]
    rate: f64,
    /// Client connections submitting side by side, each with its own job ids.
    #[arg(long, env = "CUZK_SOAK_SUBMITTERS", default_value_t = 3)]
    submitters: usize,
    /// Shortest time between two kills.
    #[arg(long, env = "CUZK_SOAK_KILL_MIN", default_value = "2m")]
    kill_min: Span,
    /// Longest time between two kills.
    #[arg(long, env = "CUZK_SOAK_KILL_MAX", default_value = "5m")]
    kill_max: Span,
    /// What a kill may hit, chosen at random among these (`server` alone: the cluster's
    /// restarts and its replicas catching up, every minute or two).
    #[arg(
        long,
        env = "CUZK_SOAK_KILL",
        value_delimiter = ',',
        default_value = "synth,gpu,server"
    )]
    kill: Vec<Victim>,
    /// How long a killed node or server stays down before it is started again.
    #[arg(long, env = "CUZK_SOAK_DOWN", default_value = "5s")]
    down: Span,
    /// After the last submission: how long every job has to be answered.
    #[arg(long, env = "CUZK_SOAK_DRAIN", default_value = "10m")]
    drain: Span,
    /// After the last answer: how long the cluster idles before leaks are counted.
    #[arg(long, env = "CUZK_SOAK_IDLE", default_value = "10m")]
    idle: Span,
    /// Resident memory before this point of the run is warm-up, not growth.
    #[arg(long, env = "CUZK_SOAK_WARMUP", default_value = "5m")]
    warmup: Span,
    /// Growth compares the median resident memory of this long a window right after each
    /// node's warm-up with the median of the last such window of load (a node of a few tens of
    /// MiB moves several MiB between two samples either way).
    #[arg(long, env = "CUZK_SOAK_RSS_WINDOW", default_value = "5m")]
    rss_window: Span,
    /// One job in this many is malformed (an unknown circuit) and must be answered failed.
    #[arg(long, env = "CUZK_SOAK_BAD_EVERY", default_value_t = 50)]
    bad_every: usize,
    /// One job in this many goes through a gateway over gRPC, as Curio submits: a request the
    /// synth nodes must turn down, sent twice under one request id and awaited with
    /// AwaitProof (0: none).
    #[arg(long, env = "CUZK_SOAK_GATEWAY_EVERY", default_value_t = 10)]
    gateway_every: usize,
    /// The job shapes: `standard`, or `light` (the same circuits and partition counts, smaller
    /// circuits: a long run's many jobs on a small box, where the nodes' control path and the
    /// cluster's records, not proving, are what it tests).
    #[arg(long, env = "CUZK_SOAK_MIX", value_enum, default_value = "standard")]
    mix: Mix,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    Standard,
    Light,
}

/// The job shapes a soak cycles through: one to three partitions, two circuits, two sizes
/// of each.
fn mix(mix: Mix) -> Vec<(&'static str, serde_json::Value)> {
    use serde_json::json;
    let (blocks, rounds) = match mix {
        Mix::Standard => ([1, 2], [2000, 20000]),
        Mix::Light => ([1, 1], [100, 1000]),
    };
    vec![
        ("sha256", json!({"blocks": blocks[0], "partitions": 1})),
        ("mimc", json!({"rounds": rounds[0], "partitions": 3})),
        ("sha256", json!({"blocks": blocks[1], "partitions": 2})),
        ("mimc", json!({"rounds": rounds[1], "partitions": 2})),
    ]
}

/// What clients heard and what the ledger published, per job id.
#[derive(Default)]
struct Heard {
    answers: HashMap<String, (usize, JobResult)>,
    /// The ledger's publications per job: how many, how many differed from the first in their
    /// bytes (a publish retried after its acknowledgement was lost repeats the same bytes; a
    /// result published again from the job's record lacks the per-partition timings), and how
    /// many in their answer (status, proof or error).
    raw: HashMap<String, Published>,
}

#[derive(Default, Clone, Copy)]
struct Published {
    count: usize,
    other_bytes: usize,
    other_answer: usize,
}

/// What a client acts on in a result.
fn answer_of(result: &JobResult) -> (JobStatus, Option<&str>, Option<&str>) {
    (
        result.status,
        result.proof.as_deref(),
        result.error.as_deref(),
    )
}

pub async fn soak(args: SoakArgs, shape: ClusterShape) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rate > 0.0 && args.rate.is_finite(),
        "--rate must be positive"
    );
    anyhow::ensure!(args.submitters > 0, "--submitters must be positive");
    anyhow::ensure!(!args.kill.is_empty(), "--kill names nothing to kill");
    anyhow::ensure!(
        shape.ledger > 0 || !args.kill.contains(&Victim::Ledger),
        "--kill ledger needs --ledger 1 or more"
    );
    anyhow::ensure!(
        args.kill_min.0 <= args.kill_max.0,
        "--kill-min exceeds --kill-max"
    );
    let cache = ShapeCache::open_default(true)?;
    for (circuit, params) in mix(args.mix) {
        cache.proving_key(&*cuzk_circuits::resolve(circuit, &params)?)?;
    }
    let mut target = Target::launch(shape.clone()).await?;
    let urls = target.cluster_mut().context("a started cluster")?.urls();
    let nats = NatsArgs {
        urls: Some(urls.split(',').map(str::to_owned).collect()),
        limits: Some(cuzk_common::config::LimitsProfile::Local),
        replicas: Some(shape.servers),
        ..Default::default()
    };
    let config = nats.resolve("cuzk-soak")?;
    let (listener, topology) = cuzk_cli::connect(&config).await?;
    let mut submitters = Vec::new();
    for _ in 0..args.submitters {
        submitters.push(cuzk_cli::connect(&config).await?.1.js);
    }
    let heard = listen(&listener).await?;
    let mut gateway = match args.gateway_every {
        0 => None,
        _ => {
            let (client, topology) = cuzk_cli::connect(&config).await?;
            Some(GatewayClients::start(&client, &topology).await?)
        }
    };

    let start = Instant::now();
    let mut rss = Rss::new();
    let mut specs: HashMap<String, JobSpec> = HashMap::new();
    let mut kills: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut rng = rand::thread_rng();
    let between_kills = |rng: &mut rand::rngs::ThreadRng| {
        rng.gen_range(args.kill_min.0.as_secs_f64()..=args.kill_max.0.as_secs_f64())
    };
    let mut next_kill = start + Duration::from_secs_f64(between_kills(&mut rng));
    let mut next_sample = start;
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / args.rate));
    let templates = mix(args.mix);
    let tag = format!("{:08x}", rand::random::<u32>());
    let cluster = target.cluster_mut().context("a started cluster")?;
    let mut index = 0;
    while start.elapsed() < args.duration.0 {
        ticker.tick().await;
        // There is a gateway only when `gateway_every` is not zero.
        let every = args.gateway_every;
        if let Some(gateway) = gateway.as_mut().filter(|_| index % every == every / 2) {
            // Its answer may come as late as the end of the drain.
            let wait = args.duration.0.saturating_sub(start.elapsed()) + args.drain.0;
            for spec in gateway.submit(format!("soak-{tag}-{index}"), wait).await {
                specs.insert(spec.job_id.clone(), spec);
            }
            index += 1;
            continue;
        }
        let spec = job(&tag, index, &templates, args.bad_every);
        let js = &submitters[index % submitters.len()];
        index += 1;
        // Through JetStream, as `cuzk submit` sends: a job counts as submitted once the jobs
        // stream has acknowledged it (a core publish into a restarting server is simply gone).
        // An unacknowledged one is left out of the counts, and its id is never reused.
        let body = serde_json::to_vec(&spec)?;
        let subject = match spec.priority {
            Priority::High => SUBJECT_SUBMIT_HIGH,
            Priority::Normal => SUBJECT_SUBMIT,
        };
        if let Ok(ack) = js.publish(subject, body.into()).await {
            if ack.await.is_ok() {
                specs.insert(spec.job_id.clone(), spec);
            }
        }
        if Instant::now() >= next_kill {
            let victim = kill_one(cluster, &shape, (&args.kill, args.down.0), &mut rng).await?;
            *kills.entry(victim).or_default() += 1;
            next_kill = Instant::now() + Duration::from_secs_f64(between_kills(&mut rng));
        }
        if Instant::now() >= next_sample {
            sample_rss(cluster, start, &mut rss);
            next_sample += Duration::from_secs(10);
        }
    }
    let submitted_s = start.elapsed().as_secs_f64();
    eprintln!(
        "soak: {} jobs submitted in {submitted_s:.0} s; draining",
        specs.len()
    );
    let drain_until = Instant::now() + args.drain.0;
    while Instant::now() < drain_until && answered(&heard, &specs) < specs.len() {
        sample_rss(cluster, start, &mut rss);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let drained_s = start.elapsed().as_secs_f64();
    let gateway = match gateway {
        Some(clients) => clients.finish().await,
        None => GatewayTally::default(),
    };
    eprintln!(
        "soak: {} of {} answered; idling {:?} before counting leaks",
        answered(&heard, &specs),
        specs.len(),
        args.idle.0
    );
    let idle_until = Instant::now() + args.idle.0;
    while Instant::now() < idle_until {
        sample_rss(cluster, start, &mut rss);
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
    let leaks = leaks(&topology).await;
    let alive = cluster.all_nodes_running();
    let stored = stored_answers(&topology.js, &heard, &specs).await;
    let tally = tally(&heard, &stored, &specs, &gateway.jobs, &cache);
    let growth = growth(
        &rss,
        args.warmup.0.as_secs_f64(),
        args.rss_window.0.as_secs_f64(),
        submitted_s,
    );
    print!(
        "{}",
        report(
            &tally,
            &gateway,
            &kills,
            &leaks,
            &growth,
            submitted_s,
            drained_s
        )
    );
    if let Err(exited) = alive {
        println!("a node exited on its own: {exited}");
    }
    target.stop();
    Ok(())
}

fn job(
    tag: &str,
    index: usize,
    templates: &[(&str, serde_json::Value)],
    bad_every: usize,
) -> JobSpec {
    let (circuit, params) = &templates[index % templates.len()];
    let bad = bad_every > 0 && index % bad_every == bad_every - 1;
    JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: format!("soak-{tag}-{index}"),
        circuit: if bad { "no-such-circuit" } else { circuit }.to_owned(),
        params: params.clone(),
        input: JobInput::Utf8(format!("soak input {index}")),
        priority: if index.is_multiple_of(7) {
            Priority::High
        } else {
            Priority::Normal
        },
    }
}

/// Subscribes to the answers clients hear and to the ledger's raw publications.
async fn listen(client: &async_nats::Client) -> anyhow::Result<Arc<Mutex<Heard>>> {
    let mut answers = client.subscribe("cuzk.results.>").await?;
    let mut raw = client.subscribe(ledger_results_subject(">")).await?;
    client.flush().await?;
    let heard = Arc::new(Mutex::new(Heard::default()));
    let into = heard.clone();
    tokio::spawn(async move {
        while let Some(message) = answers.next().await {
            let Ok(result) = serde_json::from_slice::<JobResult>(&message.payload) else {
                continue;
            };
            let mut heard = into.lock().unwrap_or_else(|e| e.into_inner());
            let entry = heard
                .answers
                .entry(result.job_id.clone())
                .or_insert((0, result));
            entry.0 += 1;
        }
    });
    let into = heard.clone();
    let prefix = ledger_results_subject("");
    tokio::spawn(async move {
        let mut first: HashMap<String, bytes::Bytes> = HashMap::new();
        while let Some(message) = raw.next().await {
            let id = message.subject.trim_start_matches(&prefix).to_owned();
            let earlier = first.entry(id.clone()).or_insert(message.payload.clone());
            let same_bytes = earlier == &message.payload;
            let parse = |b: &[u8]| serde_json::from_slice::<JobResult>(b).ok();
            let same_answer = match (parse(earlier), parse(&message.payload)) {
                (Some(a), Some(b)) => answer_of(&a) == answer_of(&b),
                _ => same_bytes,
            };
            let mut heard = into.lock().unwrap_or_else(|e| e.into_inner());
            let entry = heard.raw.entry(id).or_default();
            entry.count += 1;
            entry.other_bytes += usize::from(!same_bytes);
            entry.other_answer += usize::from(!same_answer);
        }
    });
    Ok(heard)
}

fn answered(heard: &Mutex<Heard>, specs: &HashMap<String, JobSpec>) -> usize {
    specs.len() - unheard(heard, specs).len()
}

/// The jobs whose answer the core subscription has not heard.
fn unheard(heard: &Mutex<Heard>, specs: &HashMap<String, JobSpec>) -> Vec<String> {
    let heard = heard.lock().unwrap_or_else(|e| e.into_inner());
    let unheard = specs.keys().filter(|id| !heard.answers.contains_key(*id));
    unheard.cloned().collect()
}

/// What a kill may hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Victim {
    Synth,
    Gpu,
    Server,
    Ledger,
}

/// Kills one of `victims` at random — a synth node, a GPU node, a ledger service or a
/// nats-server — (SIGKILL),
/// waits `down` and starts it again. Returns the victim's role.
async fn kill_one(
    cluster: &mut ProcessCluster,
    shape: &ClusterShape,
    (victims, down): (&[Victim], Duration),
    rng: &mut rand::rngs::ThreadRng,
) -> anyhow::Result<&'static str> {
    let role = match victims[rng.gen_range(0..victims.len())] {
        Victim::Synth => Role::Synth,
        Victim::Gpu => Role::Gpu,
        Victim::Ledger => Role::Ledger,
        Victim::Server => {
            let index = rng.gen_range(0..cluster.servers.len());
            eprintln!("soak: killing nats-server {index}");
            cluster.servers[index].kill();
            tokio::time::sleep(down).await;
            cluster.servers[index]
                .restart()
                .context("restarting a nats-server")?;
            return Ok("nats-server");
        }
    };
    let nodes = cluster.nodes(role);
    let victim = &nodes[rng.gen_range(0..nodes.len())];
    eprintln!("soak: killing {victim}");
    cluster.kill_node(victim)?;
    tokio::time::sleep(down).await;
    shape.start_node(cluster, role)?;
    Ok(match role {
        Role::Synth => "synth node",
        Role::Gpu => "GPU node",
        Role::Ledger => "ledger service",
    })
}

#[derive(Default)]
struct Tally {
    submitted: usize,
    done: usize,
    failed_as_expected: usize,
    /// Answered in the job's record but never heard on the core subscription.
    unheard: Vec<String>,
    lost: Vec<String>,
    heard_twice: usize,
    published_twice: usize,
    published_other_bytes: usize,
    published_other_answer: usize,
    wrong: Vec<String>,
    failed: Vec<String>,
}

/// The answers in the records of the jobs the core subscription did not hear. A result published
/// while the listener's server was down never reaches a core subscription; a client finds it in
/// the job's record (`submit --wait` and `AwaitProof` look there), so a job is lost only when
/// its record has no answer either.
async fn stored_answers(
    js: &async_nats::jetstream::Context,
    heard: &Mutex<Heard>,
    specs: &HashMap<String, JobSpec>,
) -> HashMap<String, JobResult> {
    let mut out = HashMap::new();
    for id in unheard(heard, specs) {
        if let Some(result) = cuzk_cli::submit::stored_result(js, &id).await {
            out.insert(id, result);
        }
    }
    out
}

/// `stored`: answers found in the records of jobs not heard ([`stored_answers`]); `refused`:
/// jobs whose input the synth nodes must turn down (the gateway's).
fn tally(
    heard: &Mutex<Heard>,
    stored: &HashMap<String, JobResult>,
    specs: &HashMap<String, JobSpec>,
    refused: &HashSet<String>,
    cache: &ShapeCache,
) -> Tally {
    let heard = heard.lock().unwrap_or_else(|e| e.into_inner());
    let mut t = Tally {
        submitted: specs.len(),
        ..Default::default()
    };
    for (id, spec) in specs {
        if let Some(published) = heard.raw.get(id) {
            t.published_twice += usize::from(published.count > 1);
            t.published_other_bytes += usize::from(published.other_bytes > 0);
            t.published_other_answer += usize::from(published.other_answer > 0);
        }
        let (count, result) = match (heard.answers.get(id), stored.get(id)) {
            (Some((count, result)), _) => (*count, result),
            (None, Some(result)) => {
                t.unheard.push(id.clone());
                (1, result)
            }
            (None, None) => {
                t.lost.push(id.clone());
                continue;
            }
        };
        t.heard_twice += usize::from(count > 1);
        let bad = spec.circuit == "no-such-circuit" || refused.contains(id);
        match (result.status, bad) {
            (JobStatus::Done, false) => match cuzk_cli::verify_job_proof(spec, result, cache) {
                Ok(()) => t.done += 1,
                Err(why) => t.wrong.push(format!("{id}: {why:#}")),
            },
            (JobStatus::Done, true) => t.wrong.push(format!("{id}: a job to refuse answered done")),
            (_, true) => t.failed_as_expected += 1,
            (_, false) => t
                .failed
                .push(format!("{id}: {:?} {:?}", result.status, result.error)),
        }
    }
    t
}

fn report(
    t: &Tally,
    g: &GatewayTally,
    kills: &BTreeMap<&'static str, usize>,
    leaks: &Leaks,
    growth: &[(String, u64, u64)],
    submitted_s: f64,
    drained_s: f64,
) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let mut out = String::new();
    let kills_text = kills
        .iter()
        .map(|(role, n)| format!("{n} {role}"))
        .collect::<Vec<_>>()
        .join(", ");
    out.push_str(&format!(
        "\n| soak | |\n|---|---|\n\
         | submitted | {} jobs in {submitted_s:.0} s ({:.2}/s); answers awaited until {drained_s:.0} s |\n\
         | kills (SIGKILL, then restarted) | {} |\n\
         | done, proof verified here | {} |\n\
         | malformed or refused, answered failed | {} |\n\
         | through the gateway: requests accepted (refused or unanswered) / retries given the same job / the next attempt / AwaitProof answered FAILED | {} ({}) / {} / {} / {} |\n\
         | answered in the job's record, not heard by the core subscription (published while its server was down) | {} |\n\
         | **lost** (no answer, none in the record) | **{}** |\n\
         | **answered twice** (core subscription) | **{}** |\n\
         | **published more than once** (ledger, before deduplication): all / other bytes / another answer | **{}** / {} / **{}** |\n\
         | **wrong answers** | **{}** |\n\
         | **gateway clients not answered FAILED** (AwaitProof) | **{}** |\n\
         | **failed** (good jobs) | **{}** |\n\
         | **leaked** after idle: live objects / chunk messages | **{} / {}** |\n",
        t.submitted,
        t.submitted as f64 / submitted_s.max(1e-9),
        if kills_text.is_empty() { "none".into() } else { kills_text },
        t.done,
        t.failed_as_expected,
        g.submitted,
        g.submit_errors,
        g.retry_same_job,
        g.retry_next_attempt,
        g.awaited_failed,
        t.unheard.len(),
        t.lost.len(),
        t.heard_twice,
        t.published_twice,
        t.published_other_bytes,
        t.published_other_answer,
        t.wrong.len(),
        g.await_problems.len(),
        t.failed.len(),
        leaks.objects,
        leaks.chunks,
    ));
    let lost = t.lost.iter().map(|id| format!("{id}: lost"));
    let unheard = t
        .unheard
        .iter()
        .map(|id| format!("{id}: not heard, in its record"));
    // Lost jobs first: the report quotes twenty reasons at most.
    for why in lost
        .chain(t.wrong.iter().cloned())
        .chain(t.failed.iter().cloned())
        .chain(unheard)
        .chain(g.await_problems.iter().cloned())
        .chain(leaks.errors.iter().cloned())
        .take(20)
    {
        out.push_str(&format!("  {why}\n"));
    }
    out.push_str("\n| node (under load past its warm-up and two windows) | RSS median, first window after warm-up, MiB | last window of load, MiB | growth |\n|---|---|---|---|\n");
    for (name, after, last) in growth {
        let pct = (*last as f64 / (*after).max(1) as f64 - 1.0) * 100.0;
        out.push_str(&format!(
            "| {name} | {:.0} | {:.0} | {pct:+.1} % |\n",
            mib(*after),
            mib(*last)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_job_in_bad_every_is_malformed_and_the_mix_cycles() {
        let templates = mix(Mix::Standard);
        let jobs: Vec<JobSpec> = (0..100).map(|i| job("t", i, &templates, 50)).collect();
        let bad = jobs.iter().filter(|j| j.circuit == "no-such-circuit");
        assert_eq!(bad.count(), 2);
        assert_eq!(jobs[0].circuit, "sha256");
        assert_eq!(jobs[1].circuit, "mimc");
        assert_ne!(jobs[0].job_id, jobs[4].job_id);
    }

    fn answer(id: &str, status: JobStatus) -> JobResult {
        JobResult {
            version: 1,
            job_id: id.into(),
            status,
            circuit: None,
            proof: None,
            partitions: 1,
            verified: false,
            synthetic: false,
            error: None,
            timings: Default::default(),
            partition_timings: Vec::new(),
        }
    }

    #[test]
    fn lost_twice_wrong_and_failed_are_told_apart() {
        let templates = mix(Mix::Standard);
        let specs: HashMap<String, JobSpec> = (0..50)
            .map(|i| job("t", i, &templates, 50))
            .map(|j| (j.job_id.clone(), j))
            .collect();
        let mut heard = Heard::default();
        // Job 0 lost; job 1 heard twice and failed; job 2 published twice and failed; the
        // malformed job 49 answered done (wrong); every other one failed.
        for i in 1..50 {
            let id = format!("soak-t-{i}");
            let status = if i == 49 {
                JobStatus::Done
            } else {
                JobStatus::Failed
            };
            heard
                .answers
                .insert(id.clone(), (1 + usize::from(i == 1), answer(&id, status)));
            let published = Published {
                count: 1 + usize::from(i == 2),
                ..Default::default()
            };
            heard.raw.insert(id, published);
        }
        let cache = ShapeCache::new(std::env::temp_dir(), false, 0);
        let heard = Mutex::new(heard);
        let none = HashMap::new();
        let t = tally(&heard, &none, &specs, &HashSet::new(), &cache);
        assert_eq!(
            (t.submitted, t.lost.len(), t.heard_twice, t.published_twice),
            (50, 1, 1, 1)
        );
        assert_eq!((t.wrong.len(), t.failed.len(), t.done), (1, 48, 0));
        assert!(t.unheard.is_empty());
        // Job 0's answer found in its record instead: not lost, told apart, and judged.
        let stored =
            HashMap::from([("soak-t-0".to_owned(), answer("soak-t-0", JobStatus::Failed))]);
        let t = tally(&heard, &stored, &specs, &HashSet::new(), &cache);
        assert_eq!((t.lost.len(), t.unheard.len(), t.failed.len()), (0, 1, 49));
        assert!(t.wrong[0].contains("to refuse"), "{:?}", t.wrong);
    }
}
