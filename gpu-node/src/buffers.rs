//! Buffers reused so each partition's fetch and decode write into memory that is already
//! mapped: witness blobs as read (each at most the blob limit) and compact witnesses.

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

/// A compact-witness buffer, page-locked by the backend where that speeds its upload.
#[derive(Default)]
pub struct WitnessBuf {
    /// Declared first, so dropped first: the memory is unpinned before it is freed.
    pin: Option<cuzk_prover::HostPin>,
    /// It lost its pin growing: pinned again before its next upload.
    repin: bool,
    pub w: cuzk_wire::blob::CompactWitness,
}

impl WitnessBuf {
    /// `w` pinned by `backend` where it can.
    pub fn pinned<B: cuzk_prover::Backend>(
        backend: &B,
        w: cuzk_wire::blob::CompactWitness,
    ) -> Self {
        let mut buf = WitnessBuf {
            pin: None,
            repin: true,
            w,
        };
        buf.repin(backend);
        buf
    }

    /// Readies the buffer for a compact aux of up to `bytes`: one that must grow is unpinned
    /// first, since growing moves it.
    pub fn make_room(&mut self, bytes: usize) {
        if self.w.aux.memory().len() < bytes && self.pin.take().is_some() {
            self.repin = true;
        }
    }

    /// Pins the buffer again if it lost its pin growing.
    pub fn repin<B: cuzk_prover::Backend>(&mut self, backend: &B) {
        // SAFETY: the pin lives in the same buffer as `w` and is dropped before it, and before
        // `w`'s memory grows (`make_room`): the only ways that memory is freed or moved.
        self.repin_with(|memory| unsafe { backend.pin(memory) });
    }

    fn repin_with(&mut self, pin: impl FnOnce(&[u8]) -> Option<cuzk_prover::HostPin>) {
        if std::mem::take(&mut self.repin) {
            self.pin = pin(self.w.aux.memory());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    struct Unpinned(Arc<AtomicBool>);
    impl Drop for Unpinned {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_buffer_that_must_grow_is_unpinned_first_and_pinned_again() {
        let unpinned = Arc::new(AtomicBool::new(false));
        let mut buf = WitnessBuf {
            pin: Some(Box::new(Unpinned(unpinned.clone()))),
            ..WitnessBuf::default()
        };
        buf.w.aux.reserve(10);
        buf.make_room(10);
        assert!(
            !unpinned.load(Ordering::SeqCst),
            "a witness that fits keeps its pin"
        );
        buf.make_room(11);
        assert!(
            unpinned.load(Ordering::SeqCst),
            "one that must grow loses it"
        );
        let mut pinned = Vec::new();
        for _ in 0..2 {
            buf.repin_with(|memory| {
                pinned.push(memory.len());
                Some(Box::new(()))
            });
        }
        assert_eq!(pinned, [10], "pinned again once, over its memory");
    }
}
