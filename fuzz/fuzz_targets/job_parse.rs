//! Any submitted job body: parsed or rejected with a reason, never a panic.
#![no_main]

use cuzk_wire::job::{valid_job_id, JobSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match JobSpec::parse(data) {
        Ok(spec) => assert!(valid_job_id(&spec.job_id)),
        Err((Some(id), _)) => assert!(valid_job_id(&id)),
        Err((None, _)) => {}
    }
});
