//! The retry policy every network step uses. It is kept out of [`crate::nats`], which reads
//! [`crate::config`], because the object store retries too and the configuration depends on
//! the object store through the topology.

use std::future::Future;
use std::time::Duration;

/// Exponential backoff, capped, with a bounded number of attempts.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub initial: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    /// For publishes and KV operations: rides out a leader election (a few seconds).
    pub const NETWORK: RetryPolicy = RetryPolicy {
        attempts: 8,
        initial: Duration::from_millis(100),
        max: Duration::from_secs(3),
    };

    pub fn delay(&self, attempt: u32) -> Duration {
        self.initial
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.max)
    }

    /// The longest a step retried under this policy takes to give up, when each attempt takes
    /// up to `attempt`.
    pub fn worst_case(&self, attempt: Duration) -> Duration {
        let waits = (0..self.attempts.saturating_sub(1)).map(|a| self.delay(a));
        attempt.saturating_mul(self.attempts) + waits.sum::<Duration>()
    }

    /// [`Self::delay`] scaled by a random factor in [0.5, 1): clients that failed together
    /// (a leader election, a restarted server) do not all retry in the same instant.
    pub fn jittered(&self, attempt: u32) -> Duration {
        self.delay(attempt)
            .mul_f64(0.5 + rand::random::<f64>() / 2.0)
    }
}

/// Runs `op` until it succeeds or the policy's attempts are spent, logging each failure.
pub async fn retry<T, E, F, Fut>(what: &str, policy: RetryPolicy, op: F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retry_when(what, policy, op, |_| true).await
}

/// [`retry`] for errors that say whether they are worth retrying: a fatal one returns at once.
pub async fn retry_retryable<T, E, F, Fut>(what: &str, policy: RetryPolicy, op: F) -> Result<T, E>
where
    E: std::fmt::Display + cuzk_wire::Retryable,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retry_when(what, policy, op, |e: &E| e.retryable()).await
}

/// [`retry`] for the errors `worth_retrying` picks; any other returns at once.
pub async fn retry_when<T, E, F, Fut>(
    what: &str,
    policy: RetryPolicy,
    mut op: F,
    worth_retrying: impl Fn(&E) -> bool,
) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(err) if attempt + 1 >= policy.attempts || !worth_retrying(&err) => return Err(err),
            Err(err) => {
                let delay = policy.jittered(attempt);
                tracing::warn!(%err, attempt, ?delay, "{what} failed; retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let p = RetryPolicy::NETWORK;
        assert_eq!(p.delay(0), Duration::from_millis(100));
        assert_eq!(p.delay(2), Duration::from_millis(400));
        assert_eq!(p.delay(40), Duration::from_secs(3));
        for attempt in [0, 2, 40] {
            let d = p.jittered(attempt);
            assert!(d >= p.delay(attempt) / 2 && d < p.delay(attempt), "{d:?}");
        }
    }

    #[tokio::test]
    async fn retry_stops_after_the_policy() {
        let policy = RetryPolicy {
            attempts: 3,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(1),
        };
        let mut calls = 0;
        let result: Result<(), String> = retry("op", policy, || {
            calls += 1;
            async { Err("nope".to_owned()) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, 3);
    }
}
