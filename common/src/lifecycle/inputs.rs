//! A job's staged input (the object its submission named in an inputs bucket) is deleted once
//! the job has ended, by whoever ended it: done, failed and cancelled alike. A 32 GiB C1 output
//! is ~50 MB, so an inputs bucket holds only so many; left to its age limit, it would refuse
//! new uploads long before the oldest expired.

use async_nats::jetstream::Context;

use crate::objects::{self, ObjectError};
use crate::topology::open_inputs_bucket;
use cuzk_wire::job::StagedInput;

/// Deletes the staged input; one already gone counts as deleted, so ending a job twice (a crash
/// between ending and publishing, a redelivery) is harmless. A failure is logged and leaves the
/// object to its bucket's age limit: the job's answer does not wait on it.
pub(super) async fn release(js: &Context, job_id: &str, staged: &StagedInput) {
    let deleted = match open_inputs_bucket(js, &staged.bucket).await {
        Ok(store) => objects::delete(&store, &staged.name).await,
        Err(ObjectError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    };
    match deleted {
        Ok(()) => tracing::debug!(job_id, bucket = %staged.bucket, object = %staged.name,
            "staged input deleted"),
        Err(e) => tracing::warn!(job_id, bucket = %staged.bucket, object = %staged.name,
            err = %e, "cannot delete the ended job's staged input; its bucket's age limit will"),
    }
}
