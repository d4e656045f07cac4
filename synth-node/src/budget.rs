//! What bounds a synth node: a memory budget in bytes that every partition reserves its size
//! from before it is synthesized (counted across jobs), and a backlog of admitted partitions
//! not yet started that tells the picker when to take another job, so that many small jobs keep
//! every core busy while one large job does not pull in more than the node can hold.

use std::sync::Arc;

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// Budget accounting unit: tokio's semaphore counts at most u32 permits per acquisition.
const UNIT: u64 = 1024;

/// Bytes a synth node holds for one partition at its peak: the witness (one 32-byte value per
/// variable; synthesis is witness-only) and its encoded blob, which is never larger.
pub fn partition_bytes(shape: cuzk_circuits::PartitionShape) -> u64 {
    2 * blob_bound(shape.variables)
}

/// The most bytes one partition's blob can take: its witness, uncompressed.
pub fn blob_bound(variables: u64) -> u64 {
    32 * variables
}

#[derive(Debug, Clone)]
pub struct MemoryBudget {
    units: Arc<Semaphore>,
    total: u64,
}

/// Bytes held until dropped.
pub struct Reserved {
    _permit: OwnedSemaphorePermit,
}

impl MemoryBudget {
    pub fn new(bytes: u64) -> MemoryBudget {
        let units = (bytes / UNIT).clamp(1, u32::MAX as u64);
        MemoryBudget {
            units: Arc::new(Semaphore::new(units as usize)),
            total: units * UNIT,
        }
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether `bytes` can ever be reserved.
    pub fn fits(&self, bytes: u64) -> bool {
        bytes <= self.total
    }

    /// Waits until `bytes` (at most [`total`](Self::total)) are free and holds them.
    pub async fn reserve(&self, bytes: u64) -> Reserved {
        let units = bytes.div_ceil(UNIT).clamp(1, self.total / UNIT) as u32;
        let permit = self
            .units
            .clone()
            .acquire_many_owned(units)
            .await
            .expect("the budget is never closed");
        Reserved { _permit: permit }
    }

    /// Bytes not reserved right now.
    pub fn free(&self) -> u64 {
        self.units.available_permits() as u64 * UNIT
    }
}

/// Partitions admitted but not started, across jobs.
#[derive(Debug, Clone)]
pub struct Backlog {
    count: Arc<watch::Sender<usize>>,
}

/// One admitted partition (or a job still in intake) counted in the backlog until it starts
/// or is dropped.
pub struct Waiting {
    backlog: Backlog,
    n: usize,
}

impl Default for Backlog {
    fn default() -> Backlog {
        Backlog {
            count: Arc::new(watch::channel(0).0),
        }
    }
}

impl Backlog {
    pub fn add(&self, n: usize) -> Waiting {
        self.count.send_modify(|c| *c += n);
        Waiting {
            backlog: self.clone(),
            n,
        }
    }

    pub fn len(&self) -> usize {
        *self.count.borrow()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns once fewer than `limit` partitions wait.
    pub async fn wait_below(&self, limit: usize) {
        let mut rx = self.count.subscribe();
        let _ = rx.wait_for(|c| *c < limit).await;
    }
}

impl Waiting {
    /// Splits off one partition's share (it starts, or is given up).
    pub fn take_one(&mut self) -> Option<Waiting> {
        if self.n == 0 {
            return None;
        }
        self.n -= 1;
        Some(Waiting {
            backlog: self.backlog.clone(),
            n: 1,
        })
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let n = self.n;
        self.backlog.count.send_modify(|c| *c -= n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn reservations_wait_for_room_and_release_on_drop() {
        let budget = MemoryBudget::new(10 * UNIT);
        assert!(budget.fits(10 * UNIT) && !budget.fits(10 * UNIT + 1));
        let a = budget.reserve(6 * UNIT).await;
        assert_eq!(budget.free(), 4 * UNIT);
        let blocked = tokio::time::timeout(Duration::from_millis(50), budget.reserve(5 * UNIT));
        assert!(blocked.await.is_err(), "over budget while held");
        drop(a);
        let _b = budget.reserve(5 * UNIT).await;
        // A reservation larger than the budget takes all of it instead of waiting forever.
        drop(_b);
        let _all = budget.reserve(100 * UNIT).await;
        assert_eq!(budget.free(), 0);
    }

    #[tokio::test]
    async fn the_backlog_counts_until_partitions_start() {
        let backlog = Backlog::default();
        let mut job = backlog.add(3);
        assert_eq!(backlog.len(), 3);
        let first = job.take_one().unwrap();
        drop(first);
        assert_eq!(backlog.len(), 2);
        let waiter = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.wait_below(1).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        drop(job);
        waiter.await.unwrap();
        assert!(backlog.is_empty());
    }

    #[test]
    fn partition_bytes_cover_witness_and_blob() {
        let shape = cuzk_circuits::PartitionShape {
            constraints: 1000,
            variables: 500,
        };
        assert_eq!(partition_bytes(shape), 2 * 32 * 500);
    }
}
