//! A job's witness blobs, one a partition, named by the job's key, its submission and the
//! partition: a resubmitted job id never meets stale blobs, and the ledger service can tell
//! from a name alone, against the job's record, whether a worker may delete the blob.

use super::{ops::Op, Ledger, RecordError};
use crate::objects;
use cuzk_wire::job::{valid_job_key, JobRecord, PartitionStatus};

/// The blob of partition `partition` of submission `seq` of the job with key `key`.
pub fn blob_object_name(key: &str, partition: usize, seq: u64) -> String {
    format!("{key}/{seq}/{partition}")
}

/// The job key, submission and partition a [`blob_object_name`] names; `None` for any other
/// name.
pub fn parse_blob_name(name: &str) -> Option<(&str, u64, usize)> {
    let (rest, partition) = name.rsplit_once('/')?;
    let (key, seq) = rest.rsplit_once('/')?;
    if !valid_job_key(key) {
        return None;
    }
    Some((key, seq.parse().ok()?, partition.parse().ok()?))
}

/// Whether the job as `record` stands (`None`: it has no record) no longer needs the blob of
/// partition `partition` of submission `seq`: the job has ended, the partition is proved, or
/// the blob is another submission's.
pub fn spent(record: Option<&JobRecord>, seq: u64, partition: usize) -> bool {
    let Some(record) = record else {
        return true;
    };
    record.submission_seq != seq
        || record.status.is_final()
        || record
            .partitions
            .get(partition)
            .is_none_or(|p| p.status == PartitionStatus::Proved)
}

/// The blobs an ended job's queued partitions left (proved ones were deleted by their GPU
/// node).
pub fn queued_blobs(record: &JobRecord) -> impl Iterator<Item = String> + '_ {
    let key = record.key();
    record
        .partitions
        .iter()
        .enumerate()
        .filter(|(_, p)| p.status == PartitionStatus::Queued)
        .map(move |(index, _)| blob_object_name(&key, index, record.submission_seq))
}

impl Ledger {
    /// Deletes the blob `name` ([`blob_object_name`]) and its stripes; one already gone
    /// counts as deleted. Through the ledger service, only once its job no longer needs it
    /// ([`spent`]).
    pub async fn delete_blob(&self, name: &str) -> Result<(), RecordError> {
        if let Some(remote) = &self.remote {
            return remote
                .call(Op::DeleteBlob {
                    name: name.to_owned(),
                })
                .await;
        }
        let Some(blobs) = &self.blobs else {
            return Err(RecordError::Refused(
                "a client's ledger deletes no blobs".into(),
            ));
        };
        objects::delete(blobs, name)
            .await
            .map_err(|e| RecordError::Unavailable(e.to_string()))
    }

    /// Deletes the blobs an ended job's queued partitions left; a failure is logged and leaves
    /// the blob to its bucket's age limit.
    pub async fn delete_queued_blobs(&self, record: &JobRecord) {
        for blob in queued_blobs(record) {
            if let Err(e) = self.delete_blob(&blob).await {
                tracing::warn!(err = %e, %blob,
                    "deleting an ended job's blob failed; the bucket's max age reclaims it");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::machine::admitted;
    use crate::lifecycle::machine::tests::{shape, spec};
    use cuzk_wire::job::JobStatus;

    #[test]
    fn names_parse_back() {
        for key in ["j1", "alice.j-2"] {
            let name = blob_object_name(key, 7, 42);
            assert_eq!(parse_blob_name(&name), Some((key, 42, 7)));
        }
        for name in [
            "j1",
            "j1/2",
            "j1/x/1",
            "j1/2/y",
            "a.b.c/1/2",
            "/1/2",
            "j 1/1/2",
        ] {
            assert_eq!(parse_blob_name(name), None, "{name}");
        }
    }

    /// A blob a partition still needs is not spent: what keeps a worker from deleting the
    /// input of work another node has yet to do.
    #[test]
    fn only_blobs_no_longer_needed_are_spent() {
        let mut record = admitted(&spec(), None, shape(2), 5, 100, 1, 150);
        record.status = JobStatus::Proving;
        record.partitions[0].status = PartitionStatus::Proved;
        record.partitions[1].status = PartitionStatus::Queued;
        assert!(spent(Some(&record), 5, 0), "proved");
        assert!(!spent(Some(&record), 5, 1), "queued");
        assert!(spent(Some(&record), 4, 1), "an earlier submission's");
        assert!(spent(Some(&record), 5, 2), "no such partition");
        assert!(spent(None, 5, 1), "no record");
        assert_eq!(queued_blobs(&record).collect::<Vec<_>>(), ["j/5/1"]);
        record.status = JobStatus::Failed;
        assert!(spent(Some(&record), 5, 1), "the job ended");
    }
}
