//! One blob fetch at a time per device. A device's first partition is fetched, decoded and
//! uploaded before the device has anything to do, and its workers' first fetches ran at once,
//! each about twice as long as one alone. In turn, the first arrives at the speed of one;
//! fetches after it are not slower, since the server's side gives one blob in flight most of
//! what it gives four (docs/gpu-runs.md, "Witness buffers pinned; one decode at a time" and
//! "One blob fetch at a time per device").

use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};

#[derive(Default)]
pub struct FetchTurn(Mutex<()>);

impl FetchTurn {
    /// Waits at most `wait`, then gives `None` and the caller fetches anyway: a fetch stuck in
    /// its retries delays the others by `wait`, not by its whole retry policy.
    pub async fn take(&self, wait: Duration) -> Option<MutexGuard<'_, ()>> {
        tokio::time::timeout(wait, self.0.lock()).await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_fetch_at_a_time_and_a_bounded_wait() {
        let turn = FetchTurn::default();
        let first = turn.take(Duration::from_secs(1)).await;
        assert!(first.is_some());
        // The turn is held: the next caller waits, then goes without it.
        let started = std::time::Instant::now();
        assert!(turn.take(Duration::from_millis(50)).await.is_none());
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(first);
        assert!(turn.take(Duration::from_millis(50)).await.is_some());
    }
}
