//! How many refused submissions each tenant gets recorded: a refusal's record holds its job id
//! (one answer per id) but takes room in the records bucket, which drops its oldest records
//! when full — every tenant's. Past `--synth-max-refusals-per-minute` (per tenant, per node, in
//! bursts of as many) a refusal is answered on the job's results subject but not recorded
//! (`Ledger::refuse_unrecorded`), counted and logged, so a flood of bad submissions cannot
//! push other jobs' records out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most tenants tracked before the idle ones (their allowance full again) are forgotten: a
/// forgotten tenant starts again with a full allowance, which is what it would have.
const TRACKED: usize = 1024;

/// Per tenant (`None`: the untenanted path), a token bucket of refusals to record.
pub struct RefusalLimit {
    per_minute: u32,
    buckets: Mutex<HashMap<Option<String>, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
    /// Refusals answered without a record since the last recorded one.
    unrecorded: u64,
}

/// Whether to record a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Record,
    /// Answer it only; `nth` counts the tenant's unrecorded refusals in a row (1 for the first,
    /// which is logged as a warning: the rest at debug).
    AnswerOnly {
        nth: u64,
    },
}

impl RefusalLimit {
    pub fn new(per_minute: u32) -> RefusalLimit {
        RefusalLimit {
            per_minute,
            buckets: Mutex::default(),
        }
    }

    /// Takes one refusal of `tenant` at `now`.
    pub fn take(&self, tenant: Option<&str>, now: Instant) -> Verdict {
        let capacity = f64::from(self.per_minute);
        let rate = capacity / 60.0;
        let mut buckets = self.buckets.lock().expect("refusal limit lock");
        if buckets.len() >= TRACKED {
            buckets.retain(|_, b| b.tokens + rate * secs(now, b.at) < capacity);
        }
        let bucket = buckets.entry(tenant.map(str::to_owned)).or_insert(Bucket {
            tokens: capacity,
            at: now,
            unrecorded: 0,
        });
        bucket.tokens = (bucket.tokens + rate * secs(now, bucket.at)).min(capacity);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            bucket.unrecorded = 0;
            Verdict::Record
        } else {
            bucket.unrecorded += 1;
            Verdict::AnswerOnly {
                nth: bucket.unrecorded,
            }
        }
    }
}

fn secs(now: Instant, then: Instant) -> f64 {
    now.saturating_duration_since(then).as_secs_f64()
}

/// How long a tenant over its limit waits for its next recorded refusal.
pub fn refill(per_minute: u32) -> Duration {
    Duration::from_secs(60) / per_minute.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of the limit is recorded, the rest answered only; the allowance comes back at
    /// the limit's rate; each tenant has its own.
    #[test]
    fn each_tenant_gets_its_own_allowance() {
        let limit = RefusalLimit::new(3);
        let t0 = Instant::now();
        let verdicts: Vec<Verdict> = (0..5).map(|_| limit.take(Some("alice"), t0)).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::Record,
                Verdict::Record,
                Verdict::Record,
                Verdict::AnswerOnly { nth: 1 },
                Verdict::AnswerOnly { nth: 2 }
            ]
        );
        assert_eq!(limit.take(Some("bob"), t0), Verdict::Record);
        assert_eq!(limit.take(None, t0), Verdict::Record);
        // One refusal's worth comes back every 20 s.
        let later = t0 + refill(3);
        assert_eq!(limit.take(Some("alice"), later), Verdict::Record);
        assert_eq!(
            limit.take(Some("alice"), later),
            Verdict::AnswerOnly { nth: 1 }
        );
        // Never more than a burst, however long the tenant was quiet.
        let much_later = t0 + Duration::from_secs(3600);
        let recorded = (0..10)
            .filter(|_| limit.take(Some("alice"), much_later) == Verdict::Record)
            .count();
        assert_eq!(recorded, 3);
    }

    #[test]
    fn zero_records_none() {
        let limit = RefusalLimit::new(0);
        let now = Instant::now();
        assert_eq!(limit.take(None, now), Verdict::AnswerOnly { nth: 1 });
        assert_eq!(
            limit.take(None, now + Duration::from_secs(600)),
            Verdict::AnswerOnly { nth: 2 }
        );
    }

    /// Idle tenants are forgotten once many are tracked; a busy one is kept.
    #[test]
    fn idle_tenants_are_forgotten() {
        let limit = RefusalLimit::new(1);
        let t0 = Instant::now();
        assert_eq!(limit.take(Some("busy"), t0), Verdict::Record);
        for k in 0..TRACKED {
            limit.take(Some(&format!("t{k}")), t0 - Duration::from_secs(120));
        }
        limit.take(Some("new"), t0);
        let tracked = limit.buckets.lock().unwrap().len();
        assert!(tracked < TRACKED, "{tracked}");
        assert_eq!(
            limit.take(Some("busy"), t0),
            Verdict::AnswerOnly { nth: 1 },
            "a busy tenant is not forgotten"
        );
    }
}
