//! Decoded-witness buffers, reused so each partition's decode writes into memory that is
//! already mapped.

use cuzk_wire::witness::Witness;

/// Witness buffers kept for reuse: at most `max` (what the workers can hold at once), so the
/// pool never holds more than the pipeline itself does.
pub struct WitnessBuffers {
    max: usize,
    free: std::sync::Mutex<Vec<Witness>>,
}

impl WitnessBuffers {
    pub fn new(max: usize) -> Self {
        WitnessBuffers {
            max,
            free: std::sync::Mutex::default(),
        }
    }

    pub fn take(&self) -> Witness {
        self.lock().pop().unwrap_or_default()
    }

    pub fn put(&self, w: Witness) {
        let mut free = self.lock();
        if free.len() < self.max {
            free.push(w);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Witness>> {
        // Buffers hold no invariant a panic could break.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}
