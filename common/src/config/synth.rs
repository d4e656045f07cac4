//! A synth node's settings (`[synth]`).

use std::time::Duration;

use cuzk_wire::blob::EncodeOptions;

use super::units::{Bytes, Span};
use super::{default_threads, physical_memory, settings::settings, ConfigError};

/// The part of a synth node's memory budget its process needs besides partitions (runtime,
/// connections, job messages and inputs); partitions reserve from the rest.
pub const SYNTH_PROCESS_ALLOWANCE: u64 = 128 << 20;

settings! {
    table "synth": SynthArgs => SynthConfig {
        /// Threads for circuit synthesis.
        #[arg(long = "synth-threads", env = "CUZK_SYNTH_THREADS")]
        threads: usize = default_threads(), shown "all cores",
            check |n| *n >= 1 => "must be at least 1";
        /// Partitions synthesized and encoded at once (uploads hold memory, not a slot).
        #[arg(long = "synth-partitions-in-flight", env = "CUZK_SYNTH_PARTITIONS_IN_FLIGHT")]
        partitions_in_flight: usize = threads.max(2), shown "the threads, at least 2",
            check |n| *n >= 1 => "must be at least 1";
        /// Most jobs held at once (each holds its message and input). A new job is taken only
        /// while fewer partitions wait than there are threads, so this rarely binds.
        #[arg(long = "synth-jobs-in-flight", env = "CUZK_SYNTH_JOBS_IN_FLIGHT")]
        jobs_in_flight: usize = 64, shown "64", check |n| *n >= 1 => "must be at least 1";
        /// Memory the node may use (its resident set): partitions being synthesized, encoded
        /// and uploaded reserve their size, counted across jobs from each circuit's shape, from
        /// all but 128 MiB of it.
        #[arg(long = "synth-memory-budget", env = "CUZK_SYNTH_MEMORY_BUDGET")]
        memory_budget: Bytes => u64 = physical_memory() / 4 * 3,
            shown "three quarters of physical memory",
            check |b| *b >= 2 * SYNTH_PROCESS_ALLOWANCE => "must be at least 256MiB";
        /// Stop synthesizing while the blobs bucket holds this many bytes of queued partitions
        /// (backpressure from the GPUs).
        #[arg(long = "synth-max-queued-bytes", env = "CUZK_SYNTH_MAX_QUEUED_BYTES")]
        max_queued_bytes: Bytes => u64 = 8 << 30, shown "8GiB",
            check |b| *b > 0 => "must be positive";
        /// Largest job accepted, in constraints (per-partition constraints × partitions);
        /// larger ones are refused at intake with the numbers.
        #[arg(long = "synth-max-job-constraints", env = "CUZK_SYNTH_MAX_JOB_CONSTRAINTS")]
        max_job_constraints: u64 = 1 << 32, shown "4294967296";
        /// Fail a job whose record has not changed for this long and that no message in the
        /// queues carries any more (the sweeper's backstop for jobs whose messages were lost; a
        /// job waiting in a queue is never failed).
        #[arg(long = "synth-no-progress-timeout", env = "CUZK_SYNTH_NO_PROGRESS_TIMEOUT")]
        no_progress_timeout: Span => Duration = Duration::from_secs(3600), shown "1h",
            check |t| *t >= Duration::from_secs(1) => "must be at least 1s",
            was "synth-no-progress-timeout-secs" "CUZK_SYNTH_NO_PROGRESS_TIMEOUT_SECS"
                "no_progress_timeout_secs";
        /// Largest inline job input accepted.
        #[arg(long = "synth-max-inline-input", env = "CUZK_SYNTH_MAX_INLINE_INPUT")]
        max_inline_input: Bytes => usize = cuzk_wire::job::DEFAULT_MAX_INLINE_INPUT,
            shown "768KiB";
        /// Refused submissions each tenant (and the untenanted path) gets recorded per minute
        /// by this node, in bursts of as many: past it a refused job is answered on its results
        /// subject, counted (`cuzk_refusals_total{recorded="false"}`) and logged, but gets no
        /// record, so a flood of bad submissions cannot fill the records bucket (nor hold its
        /// ids: a later submission under one is judged afresh). 0 records none.
        #[arg(long = "synth-max-refusals-per-minute", env = "CUZK_SYNTH_MAX_REFUSALS_PER_MINUTE")]
        max_refusals_per_minute: u32 = 60, shown "60";
        /// zstd level for witness blobs.
        #[arg(long = "synth-zstd-level", env = "CUZK_SYNTH_ZSTD_LEVEL")]
        zstd_level: i32 = EncodeOptions::default().level, shown "1",
            check |l| (-7..=22).contains(l) => "must be in -7..=22";
        /// On SIGTERM, time to finish in-flight partitions before exiting anyway (unfinished
        /// work is redelivered to another node).
        #[arg(long = "synth-drain-timeout", env = "CUZK_SYNTH_DRAIN_TIMEOUT")]
        drain_timeout: Span => Duration = Duration::from_secs(60), shown "60s",
            was "synth-drain-timeout-secs" "CUZK_SYNTH_DRAIN_TIMEOUT_SECS" "drain_timeout_secs";
    }
}

impl SynthConfig {
    #[allow(clippy::unnecessary_wraps)] // every table has one; this one has no cross checks
    fn check(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}
