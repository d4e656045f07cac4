//! The streams' and buckets' limits: byte and message bounds, and the job records bucket sized
//! from the retention and the farm's throughput.

use std::time::Duration;

use super::{failed, TopologyError, NODES_KV_MAX_BYTES};

/// What a finished 10-partition 32 GiB PoRep job's final record takes in the records bucket's
/// stream, with headroom: the unit the bucket is sized in (measured in
/// `lifecycle::machine`'s tests and `common/tests/ledger.rs`; docs/reliability.md).
pub const RECORD_BYTES: u64 = 6144;

/// Upper bounds of the streams and buckets. Everything a client or node adds is refused once
/// its store is full (discard new) — a refused submission is reported to a publisher that asks
/// (`nats req`, `cuzk submit`), a refused upload is retried later — except results and job
/// records, which must always be writable and drop their oldest instead (see
/// [`super::records_config`]). A server reserves every byte limit from its `max_file_store` when
/// the stream is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    pub max_queued_jobs: i64,
    pub blobs_max_bytes: i64,
    pub inputs_max_bytes: i64,
    /// Job messages are at most `MAX_JOB_MESSAGE`; most are small.
    pub jobs_max_bytes: i64,
    /// Work items are a few hundred bytes each, one per queued partition.
    pub work_max_bytes: i64,
    /// About 8 KB per 32 GiB job; a result the stream dropped is still in the job's record.
    pub results_max_bytes: i64,
    /// Days a job's record, its result and its staged input are kept at most.
    pub retention_days: u32,
    /// Jobs per hour the farm ends at most: with `retention_days`, how many records the records
    /// bucket holds ([`Limits::retained_jobs`]).
    pub jobs_per_hour: u32,
}

/// Reserved per server: docs/deploy.md. Records for a week of an 8-GPU farm's throughput
/// (docs/reliability.md, "How long records last").
impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_queued_jobs: 100_000,
            blobs_max_bytes: 16 << 30,
            inputs_max_bytes: 4 << 30,
            jobs_max_bytes: 1 << 30,
            work_max_bytes: 256 << 20,
            results_max_bytes: 1 << 30,
            retention_days: 7,
            jobs_per_hour: 1_935,
        }
    }
}

impl Limits {
    /// What a server reserves for these limits when the topology is provisioned.
    pub fn reserved_bytes(&self) -> u64 {
        [
            self.blobs_max_bytes,
            self.inputs_max_bytes,
            self.jobs_max_bytes,
            self.work_max_bytes,
            self.results_max_bytes,
            self.records_max_bytes(),
            NODES_KV_MAX_BYTES,
        ]
        .iter()
        .map(|&b| u64::try_from(b).unwrap_or(0))
        .sum()
    }

    /// For private servers on a developer's machine or in tests (`cuzk local`, `cuzk launch`,
    /// the test clusters): about half a GiB reserved per server, so that a disk a build has
    /// nearly filled still grants it (their stores are temporary, so a day of records is plenty).
    pub fn local() -> Limits {
        Limits {
            blobs_max_bytes: 256 << 20,
            inputs_max_bytes: 64 << 20,
            jobs_max_bytes: 64 << 20,
            work_max_bytes: 16 << 20,
            results_max_bytes: 64 << 20,
            retention_days: 1,
            jobs_per_hour: 250,
            ..Limits::default()
        }
    }

    /// How long records, results and staged inputs are kept at most.
    pub fn retention(&self) -> Duration {
        Duration::from_secs(u64::from(self.retention_days) * 24 * 3600)
    }

    /// The finished jobs whose records the records bucket holds: every job of the retention
    /// period at the configured rate.
    pub fn retained_jobs(&self) -> u64 {
        u64::from(self.retention_days) * 24 * u64::from(self.jobs_per_hour)
    }

    /// The records bucket's byte limit, derived from [`Limits::retained_jobs`].
    pub fn records_max_bytes(&self) -> i64 {
        i64::try_from(self.retained_jobs().saturating_mul(RECORD_BYTES)).unwrap_or(i64::MAX)
    }

    /// Refuses limits that cannot keep a live job's record: the sweeper ends a job after an
    /// hour without progress at most by default, so a bucket that holds at least a day of jobs
    /// evicts only records of jobs that ended long ago.
    pub fn check(&self) -> Result<(), TopologyError> {
        if self.retention_days == 0 || self.jobs_per_hour == 0 {
            return Err(failed("job records")(
                "retention_days and jobs_per_hour must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults hold a week of an 8-GPU farm's jobs; a rate of zero is refused.
    #[test]
    fn the_default_records_bucket_holds_a_week_of_an_eight_gpu_farm() {
        let limits = Limits::default();
        assert!(limits.retained_jobs() >= 325_000);
        assert!(limits.retention() >= Duration::from_secs(7 * 24 * 3600));
        assert!(limits.check().is_ok());
        let none = Limits {
            jobs_per_hour: 0,
            ..limits
        };
        assert!(none.check().is_err());
    }

    /// Private servers must start on a disk a build has nearly filled: nats-server grants
    /// three quarters of the free space, and a CI machine once had 1.7 GiB free.
    #[test]
    fn the_local_limits_fit_in_a_nearly_full_disk() {
        assert!(Limits::local().reserved_bytes() <= 600 << 20);
        assert!(Limits::local().check().is_ok());
    }
}
