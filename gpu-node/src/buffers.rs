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

/// A decoded-witness buffer, page-locked by the backend where that speeds its upload.
#[derive(Default)]
pub struct WitnessBuf {
    /// Declared first, so dropped first: the memory is unpinned before it is freed.
    pin: Option<cuzk_prover::HostPin>,
    pub w: cuzk_wire::witness::Witness,
}

impl WitnessBuf {
    /// `w` pinned by `backend` where it can.
    pub fn pinned<B: cuzk_prover::Backend>(backend: &B, w: cuzk_wire::witness::Witness) -> Self {
        // SAFETY: the pin lives in the same buffer as `w` and is dropped before it, and before
        // `w.aux` grows (`make_room`): the only ways its memory is freed or moved.
        let pin = unsafe { backend.pin(&w) };
        WitnessBuf { pin, w }
    }

    /// Readies the buffer for a witness of `aux` elements: one that must grow is unpinned
    /// first, since growing moves it.
    pub fn make_room(&mut self, aux: usize) {
        if self.w.aux.capacity() < aux {
            self.pin = None;
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
    fn a_buffer_that_must_grow_is_unpinned_first() {
        let unpinned = Arc::new(AtomicBool::new(false));
        let mut buf = WitnessBuf {
            pin: Some(Box::new(Unpinned(unpinned.clone()))),
            w: cuzk_wire::witness::Witness {
                input: vec![],
                aux: Vec::with_capacity(10),
            },
        };
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
    }
}
