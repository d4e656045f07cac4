//! GPU vs CPU checks on fresh random inputs, then a benchmark table (printed last).
//!
//!   cuzk-gpu-check [--max-log N] [--bench-max-log N] [--no-bench] [--no-check] [--reps N] (--help)
//!                  [--partition-logs 20,22] [--partition-rounds R1,R2] [--g1-logs 24]
//!                  [--large-logs 27] [--msm-windows 19,22]
//!
//! `--partition-logs`: whole-partition Groth16 proves of a MiMC circuit (cuzk-circuits, 2
//! constraints per round; rounds 2^(L-1) - 16 unless `--partition-rounds` says) with parameters
//! from our generator: CPU and CUDA backends run side by side (`Dual`: every step's output
//! compared, proofs byte-identical and verified), then h2d / SpMV / H / MSM / total per backend.
//! `--plan-log 22`: the memory plans — the toy circuit and a MiMC partition of 2^22 proved
//! under plans that stream the key from host memory, each checked against the CPU and against
//! the resident plan's proof (gpu-check/src/plans.rs).
//! `--g1-logs`: G1 MSM only (scalars on device), median of `--reps`.
//! `--large-logs 27 [--msm-windows 19,22]`: the H pipeline and the G1 MSM at a 32 GiB
//! partition's size, the MSM checked exactly against the CPU (gpu-check/src/large.rs).
//!
//! Exit status: 0 all checks passed, 1 a check failed, 2 no CUDA device / no kernels.

#[cfg(cuzk_fatbin)]
mod inputs;
#[cfg(cuzk_fatbin)]
mod kernels;
#[cfg(cuzk_fatbin)]
mod large;
#[cfg(cuzk_fatbin)]
mod partition;
#[cfg(cuzk_fatbin)]
mod plans;

/// GPU vs CPU checks on fresh random inputs, then benchmark tables.
#[derive(clap::Parser)]
#[command(version)]
pub struct Args {
    /// Largest NTT / G1 MSM checked, log2.
    #[arg(long, env = "CUZK_CHECK_MAX_LOG", default_value_t = 24)]
    pub max_log: u32,
    /// Largest size benchmarked, log2.
    #[arg(long, env = "CUZK_CHECK_BENCH_MAX_LOG", default_value_t = 26)]
    pub bench_max_log: u32,
    /// Largest G2 MSM checked and benchmarked, log2.
    #[arg(long, env = "CUZK_CHECK_G2_MAX_LOG", default_value_t = 22)]
    pub g2_max_log: u32,
    /// Skip the benchmark tables.
    #[arg(long, env = "CUZK_CHECK_NO_BENCH")]
    pub no_bench: bool,
    /// Skip the GPU-vs-CPU checks.
    #[arg(long, env = "CUZK_CHECK_NO_CHECK")]
    pub no_check: bool,
    /// Timed repetitions (the median is reported).
    #[arg(long, env = "CUZK_CHECK_REPS", default_value_t = 5)]
    pub reps: usize,
    /// Whole-partition proves at these log2 sizes (comma-separated).
    #[arg(long, env = "CUZK_CHECK_PARTITION_LOGS", value_delimiter = ',')]
    pub partition_logs: Vec<u32>,
    /// MiMC rounds per partition size (default 2^(L-1) - 16).
    #[arg(long, env = "CUZK_CHECK_PARTITION_ROUNDS", value_delimiter = ',')]
    pub partition_rounds: Vec<usize>,
    /// G1 MSM only (scalars on device) at these log2 sizes, median of `--reps`.
    #[arg(long, env = "CUZK_CHECK_G1_LOGS", value_delimiter = ',')]
    pub g1_logs: Vec<u32>,
    /// The H pipeline and the G1 MSM at these log2 sizes (e.g. 27, a 32 GiB partition's),
    /// vectors on the device, median of `--reps`.
    #[arg(long, env = "CUZK_CHECK_LARGE_LOGS", value_delimiter = ',')]
    pub large_logs: Vec<u32>,
    /// The memory plans' checks: a MiMC partition of this log2 domain proved under streaming
    /// plans and the resident one (0: the toy circuit only).
    #[arg(long, env = "CUZK_CHECK_PLAN_LOG", default_value_t = 22)]
    pub plan_log: u32,
    /// Window widths the large G1 MSMs are run at, side by side (default: chosen by size).
    #[arg(long, env = "CUZK_CHECK_MSM_WINDOWS", value_delimiter = ',')]
    pub msm_windows: Vec<u32>,
}

pub struct Report {
    pub fails: usize,
    pub checks: usize,
}

impl Report {
    pub fn check(&mut self, name: &str, ok: bool) {
        self.checks += 1;
        if !ok {
            self.fails += 1;
        }
        println!("{} {name}", if ok { "PASS" } else { "FAIL" });
    }
}

/// A titled markdown table of rows printed as they were measured.
#[cfg(cuzk_fatbin)]
fn table(title: String, header: String, rule: String, rows: &[String]) {
    println!("\n{title}\n{header}\n{rule}");
    for r in rows {
        println!("{r}");
    }
}

fn main() {
    #[cfg_attr(not(cuzk_fatbin), allow(unused_variables))]
    let args = <Args as clap::Parser>::parse();
    if !cuzk_kernels::cuda_available() {
        eprintln!(
            "no CUDA device available (kernels built: {}); GPU checks skipped",
            cuzk_kernels::KERNELS_BUILT
        );
        std::process::exit(2);
    }
    #[cfg(cuzk_fatbin)]
    {
        use rand::RngCore;
        let seed = rand::rngs::OsRng.next_u64();
        let be = std::sync::Arc::new(
            cuzk_kernels::CudaBackend::new(0, None, 1).expect("open CUDA device 0"),
        );
        let (free, total) = be.gpu().mem_info().unwrap();
        println!(
            "device: {} ({:.1} GiB, {:.1} GiB free), {} CPU threads, seed {seed:#x}",
            be.device_name(),
            total as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64,
            rayon::current_num_threads()
        );
        let mut rep = Report {
            fails: 0,
            checks: 0,
        };
        if !args.no_check {
            let t = std::time::Instant::now();
            kernels::run_checks(&args, &be, seed, &mut rep);
            partition::check_toy(&be, seed, &mut rep);
            plans::run(args.plan_log, seed, &mut rep);
            println!(
                "checks: {} run, {} failed ({:.1} s)",
                rep.checks,
                rep.fails,
                t.elapsed().as_secs_f64()
            );
        }
        let mut rows = Vec::new();
        if !args.no_bench {
            kernels::run_bench(&args, &be, seed, &mut rows);
        }
        let mut prows = Vec::new();
        if !args.partition_logs.is_empty() {
            partition::run_partition_bench(&args, &be, seed, &mut rep, &mut prows);
        }
        let mut grows = Vec::new();
        if !args.g1_logs.is_empty() {
            kernels::run_g1_bench(&args, &be, seed, &mut rep, &mut grows);
        }
        if !rows.is_empty() {
            table(
                format!(
                    "benchmark on {} (median of {} after a warm-up; CPU: rayon, {} threads)",
                    be.device_name(),
                    args.reps,
                    rayon::current_num_threads()
                ),
                format!(
                    "| {:<38} | {:>10} | {:>10} | {:>7} |",
                    "what", "GPU ms", "CPU ms", "CPU/GPU"
                ),
                format!("|{:-<40}|{:->12}|{:->12}|{:->9}|", "", "", "", ""),
                &rows,
            );
        }
        if !prows.is_empty() {
            table(
                format!("whole-partition prove on {} (CUDA: median of {} after a warm-up; CPU backend: one run, {} threads)", be.device_name(), args.reps.max(1), rayon::current_num_threads()),
                format!(
                    "| {:<32} | {:<5} | {:>10} | {:>9} | {:>8} |",
                    "partition", "stage", "CPU ms", "GPU ms", "CPU/GPU"
                ),
                format!("|{:-<34}|{:-<7}|{:->12}|{:->11}|{:->10}|", "", "", "", "", ""),
                &prows,
            );
        }
        for r in &grows {
            println!("{r}");
        }
        if !args.large_logs.is_empty() {
            let mut lrows = Vec::new();
            large::run(&args, &be, seed, &mut rep, &mut lrows);
            table(
                format!(
                    "large sizes on {} (ms; median, min, max of {} after a warm-up)",
                    be.device_name(),
                    args.reps.max(1)
                ),
                format!(
                    "| {:<40} | {:>9} | {:>9} | {:>9} |",
                    "what", "median", "min", "max"
                ),
                format!("|{:-<42}|{:->11}|{:->11}|{:->11}|", "", "", "", ""),
                &lrows,
            );
        }
        if rep.checks > 0 {
            println!("checks: {} run, {} failed", rep.checks, rep.fails);
        }
        std::process::exit(if rep.fails > 0 { 1 } else { 0 });
    }
}
