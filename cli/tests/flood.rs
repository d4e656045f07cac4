//! The flood, small enough for CI (`cuzk-load flood` runs it at full size, docs/reliability.md):
//! a burst of small jobs within one second, then maximum-size jobs at the synth node's size cap
//! and a few just over it. Every job gets exactly one answer where clients listen, over-cap
//! jobs are refused with the numbers, the synth node stays under its memory budget, and no
//! node exits.

use std::path::Path;
use std::time::Duration;

use cuzk_cli::flood::{self, FloodSpec};
use cuzk_cli::launcher::{LaunchSpec, ProcessCluster};
use cuzk_common::config::NatsArgs;
use cuzk_wire::job::{JobInput, JobSpec, Priority, JOB_SPEC_VERSION};
use serde_json::json;

const BUDGET: u64 = 384 << 20;

fn mimc(rounds: u32, partitions: u32) -> JobSpec {
    JobSpec {
        version: JOB_SPEC_VERSION,
        job_id: String::new(),
        circuit: "mimc".into(),
        params: json!({"rounds": rounds, "partitions": partitions}),
        input: JobInput::Utf8("flood".into()),
        priority: Priority::Normal,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_and_a_flood_of_maximum_size_jobs_lose_nothing() {
    cuzk_common::telemetry::init_logging();
    // 4 partitions × (2 × 3000 + 2) constraints: the cap.
    let cap = (4 * (2 * 3000 + 2)).to_string();
    let budget = BUDGET.to_string();
    let spec = LaunchSpec {
        synth_args: [
            "--synth-memory-budget",
            &budget,
            "--synth-max-job-constraints",
            &cap,
        ]
        .map(String::from)
        .to_vec(),
        gpu_args: vec!["--gpu-backend".into(), "cpu".into()],
        threads: 1,
        ..Default::default()
    };
    let mut cluster = ProcessCluster::start(spec, Path::new(env!("CARGO_BIN_EXE_cuzk"))).unwrap();
    let config = NatsArgs {
        urls: Some(vec![cluster.urls()]),
        limits: Some(cuzk_common::config::LimitsProfile::Local),
        ..Default::default()
    }
    .resolve("flood-test")
    .unwrap();
    let (client, _topology) = cuzk_cli::connect(&config).await.unwrap();
    let flood_spec = FloodSpec {
        small: mimc(16, 1),
        small_jobs: 100,
        burst: Duration::from_secs(1),
        big: mimc(3000, 4),
        big_jobs: 3,
        over_cap: mimc(3001, 4),
        over_cap_jobs: 2,
        timeout: Duration::from_secs(240),
    };
    let report = flood::run(&mut cluster, &client, &flood_spec)
        .await
        .unwrap();
    let table = report.table(BUDGET);
    eprintln!("{table}");
    assert!(
        report.passed(BUDGET),
        "{table}\n{}",
        cluster.log_tails(3000)
    );
    assert_eq!(report.done, 103, "{table}");
    assert_eq!(report.refused_over_cap, 2, "{table}");
}
