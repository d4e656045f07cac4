//! Device memory against the budget: every allocation a `Gpu` makes is charged here first, so
//! `--gpu-memory-budget` is a cap on what the process holds on the device (keys, matrices,
//! working buffers, MSM and NTT scratch), not an estimate. An allocation past it fails as out of
//! memory, with the numbers, before the driver is asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::CudaError;

/// What a device holds and may hold.
pub struct DeviceMemory {
    budget: AtomicU64,
    live: AtomicU64,
    peak: AtomicU64,
}

/// Bytes charged until dropped.
pub(crate) struct Charge {
    memory: Option<Arc<DeviceMemory>>,
    bytes: u64,
}

impl DeviceMemory {
    pub(crate) fn new(budget: u64) -> Self {
        DeviceMemory {
            budget: AtomicU64::new(budget),
            live: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    pub(crate) fn set_budget(&self, bytes: u64) {
        self.budget.store(bytes, Ordering::Relaxed);
    }

    pub fn budget(&self) -> u64 {
        self.budget.load(Ordering::Relaxed)
    }

    /// Bytes allocated now.
    pub fn live(&self) -> u64 {
        self.live.load(Ordering::Relaxed)
    }

    /// The most bytes allocated at once so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Charges `bytes`, or refuses them when they would take the device past its budget.
    pub(crate) fn charge(self: &Arc<Self>, bytes: u64) -> Result<Charge, CudaError> {
        let budget = self.budget();
        let mut live = self.live.load(Ordering::Relaxed);
        loop {
            let next = live + bytes;
            if next > budget {
                return Err(CudaError::OutOfMemory(format!(
                    "{:.2} GiB more would take the device past its {:.2} GiB budget ({:.2} GiB held)",
                    gib(bytes),
                    gib(budget),
                    gib(live)
                )));
            }
            match self
                .live
                .compare_exchange_weak(live, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::Relaxed);
                    return Ok(Charge {
                        memory: Some(self.clone()),
                        bytes,
                    });
                }
                Err(now) => live = now,
            }
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if let Some(m) = &self.memory {
            m.live.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_up_to_the_budget_and_no_further() {
        let m = Arc::new(DeviceMemory::new(100));
        let a = m.charge(60).unwrap();
        let err = m.charge(41).err().expect("past the budget");
        assert!(matches!(err, CudaError::OutOfMemory(_)), "{err}");
        assert!(err.to_string().contains("budget"), "{err}");
        let b = m.charge(40).unwrap();
        assert_eq!((m.live(), m.peak()), (100, 100));
        drop(a);
        assert_eq!(m.live(), 40);
        m.set_budget(50);
        assert!(m.charge(11).is_err());
        drop(b);
        assert_eq!((m.live(), m.peak()), (0, 100));
    }
}
