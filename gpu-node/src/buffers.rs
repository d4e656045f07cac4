//! Buffers reused so each partition's fetch and decode write into memory that is already
//! mapped: witness blobs as read (each at most the blob limit) and decoded witnesses.

/// Buffers kept for reuse: at most `max` (what the workers can hold at once), so the pool never
/// holds more than the pipeline itself does.
pub struct Buffers<T> {
    max: usize,
    free: std::sync::Mutex<Vec<T>>,
}

impl<T: Default> Buffers<T> {
    pub fn new(max: usize) -> Self {
        Buffers {
            max,
            free: std::sync::Mutex::default(),
        }
    }

    pub fn take(&self) -> T {
        self.lock().pop().unwrap_or_default()
    }

    pub fn put(&self, buf: T) {
        let mut free = self.lock();
        if free.len() < self.max {
            free.push(buf);
        }
    }

    /// Adds buffers made by `make` until the pool holds `n` (at most its `max`): memory
    /// touched ahead, so that the first partitions do not pay for mapping it.
    pub fn fill(&self, n: usize, make: impl Fn() -> T) {
        while self.lock().len() < n.min(self.max) {
            let buf = make();
            self.put(buf);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        // Buffers hold no invariant a panic could break.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}
