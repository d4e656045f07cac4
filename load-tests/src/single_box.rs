//! Today's single box, as the baseline of the thundering-herd comparison: per job, synthesize
//! every partition at once (rayon over partitions, all cores), then prove the partitions one by
//! one with the CPU backend. The prover idles while a job synthesizes; its busy fraction is the
//! time inside `prove_timed` over the wall time.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bellperson::groth16::prepare_verifying_key;
use blstrs::Scalar;
use cuzk_circuits::ShapeCache;
use cuzk_prover::{Backend, CpuBackend};
use cuzk_wire::job::{JobResult, JobStatus, JobTimings, PartitionTimings, Stage, RESULT_VERSION};
use ff::Field;
use rayon::prelude::*;

use crate::load::{JobOutcome, RunConfig, RunData, Sample};

const WORKER: &str = "single-box/cpu";

/// Runs `config.jobs` jobs, all queued at the start, one after another (after the warm-up).
pub fn run(config: &RunConfig, cache: &ShapeCache, sample_ms: u64) -> anyhow::Result<RunData> {
    let template = &config.template;
    let family = cuzk_circuits::resolve(&template.circuit, &template.params)?;
    let partitions = family.partitions();
    let key = cache.proving_key(&*family)?;
    let pvk = prepare_verifying_key(&key.info.vk);
    let backend = CpuBackend;
    let key = backend.load_key(key)?;
    let input = cuzk_cli::inline_input(&template.input)?;

    let prove_job =
        |record: &mut dyn FnMut(Instant, Instant)| -> anyhow::Result<Vec<PartitionTimings>> {
            let synth_started = Instant::now();
            let assignments = (0..partitions)
                .into_par_iter()
                .map(|k| family.witness(&input, k, None))
                .collect::<Result<Vec<_>, _>>()?;
            // Synthesis of a partition is not timed one by one here: they run together, and the
            // herd's cost is the wall time of the whole batch.
            let synth_ms = synth_started.elapsed().as_secs_f64() * 1e3 / partitions as f64;
            let mut timings = Vec::with_capacity(partitions);
            for (k, witness) in assignments.into_iter().enumerate() {
                let mut rng = rand::rngs::OsRng;
                let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
                let started = Instant::now();
                let (proof, t) = cuzk_prover::prove_timed(&backend, &key, &witness, r, s)?;
                record(started, Instant::now());
                // Checked like the GPU node checks (`--gpu-verify`), inside the wall time.
                let inputs = family.public_inputs(&input, k)?;
                anyhow::ensure!(
                    cuzk_prover::verify(&pvk, &proof, &inputs)?,
                    "partition {k} proof does not verify"
                );
                let mut partition = PartitionTimings {
                    synth_ms,
                    ..Default::default()
                };
                for (stage, took) in t.stages() {
                    partition.set(stage, took);
                }
                partition.set(Stage::Prove, t.total);
                timings.push(partition);
            }
            Ok(timings)
        };

    for _ in 0..config.warmup {
        prove_job(&mut |_, _| {})?;
    }

    let start = Instant::now();
    let mut busy: Vec<(f64, f64)> = Vec::new();
    let mut outcomes = Vec::with_capacity(config.jobs);
    for index in 0..config.jobs {
        if start.elapsed() > config.timeout {
            eprintln!(
                "warning: single box stopped after {index} jobs at the {:?} bound",
                config.timeout
            );
            break;
        }
        let timings = prove_job(&mut |from, to| {
            busy.push(((from - start).as_secs_f64(), (to - start).as_secs_f64()));
        })
        .with_context(|| format!("single-box job {index}"))?;
        let completed = start.elapsed().as_secs_f64();
        let result = JobResult {
            version: RESULT_VERSION,
            job_id: format!("single-{index}"),
            status: JobStatus::Done,
            circuit: Some(template.circuit.clone()),
            proof: None,
            partitions: partitions as u32,
            verified: true,
            synthetic: false,
            error: None,
            timings: JobTimings {
                total_ms: completed * 1e3,
                stages: timings.iter().copied().sum(),
                ..Default::default()
            },
            partition_timings: timings,
        };
        outcomes.push(JobOutcome {
            job_id: result.job_id.clone(),
            submitted_s: 0.0,
            completed_s: Some(completed),
            result: Some(result),
        });
    }
    let wall = start.elapsed().as_secs_f64();

    // The same samples the cluster run records, rebuilt from the proving intervals.
    let period = Duration::from_millis(sample_ms.max(50)).as_secs_f64();
    let mut samples = Vec::new();
    let mut t = 0.0_f64;
    loop {
        let t_s = t.min(wall);
        let jobs_done = outcomes
            .iter()
            .filter(|o| o.completed_s.is_some_and(|c| c <= t_s))
            .count();
        let busy_s: f64 = busy
            .iter()
            .map(|&(from, to)| (to.min(t_s) - from).max(0.0))
            .sum();
        samples.push(Sample {
            t_s,
            jobs_done,
            partitions_done: jobs_done * partitions,
            work_depth: None,
            jobs_depth: None,
            busy: BTreeMap::from([(WORKER.to_owned(), busy_s)]),
        });
        if t >= wall {
            break;
        }
        t += period;
    }

    Ok(RunData {
        label: "single-box".into(),
        description: format!(
            "one process: synthesize all {partitions} partitions (rayon, {} threads), then prove one by one (CPU backend)",
            rayon::current_num_threads()
        ),
        circuit: template.circuit.clone(),
        params: template.params.clone(),
        partitions,
        mode: config.mode,
        outcomes,
        samples,
        workers: vec![WORKER.to_owned()],
    })
}
