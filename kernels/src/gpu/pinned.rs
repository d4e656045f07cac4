//! Host memory page-locked in place (registered with the driver): a witness decoded into it goes
//! to the device by DMA from where it lies, without the copy through the pinned staging that
//! took half of a 32 GiB partition's h2d and the host's memory bandwidth while the next blob was
//! fetched (docs/gpu-runs.md, "Witness buffers pinned; one decode at a time").

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use cudarc::driver::{sys, CudaContext};

use super::{Gpu, Result};

/// The ranges live pins hold, (start, len): an upload reads one in place only while it is here.
static REGISTERED: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

fn registered() -> MutexGuard<'static, Vec<(usize, usize)>> {
    // A list of ranges holds no invariant a panic could break.
    REGISTERED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Host memory page-locked for every device until this is dropped.
pub struct HostPin {
    ctx: Arc<CudaContext>,
    start: usize,
    len: usize,
}

impl Gpu {
    /// Page-locks `bytes` in place for every device (a portable registration).
    ///
    /// # Safety
    /// The memory must stay allocated, and where it is, until the pin is dropped: the driver
    /// keeps the pages it locked, so an upload from memory freed and allocated again under a
    /// live pin would read the old pages.
    pub unsafe fn pin_host(&self, bytes: &[u8]) -> Result<HostPin> {
        self.ctx.bind_to_thread()?;
        let (start, len) = (bytes.as_ptr() as usize, bytes.len());
        // SAFETY: a valid host range; the caller keeps it in place while the pin lives.
        unsafe {
            sys::cuMemHostRegister_v2(start as *mut _, len, sys::CU_MEMHOSTREGISTER_PORTABLE)
        }
        .result()?;
        registered().push((start, len));
        Ok(HostPin {
            ctx: self.ctx.clone(),
            start,
            len,
        })
    }
}

/// Values shared by every device of the process while any holder keeps them, by key.
pub(super) struct Shared<K, T>(Mutex<Vec<(K, Weak<T>)>>);

impl<K: PartialEq, T> Shared<K, T> {
    pub(super) const fn new() -> Self {
        Shared(Mutex::new(Vec::new()))
    }

    /// The live value of `key`, or the one `make` makes (under the lock, so it is made once).
    pub(super) fn get_or_make<E>(
        &self,
        key: K,
        make: impl FnOnce() -> std::result::Result<Arc<T>, E>,
    ) -> std::result::Result<Arc<T>, E> {
        // A list of weak references holds no invariant a panic could break.
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|(_, w)| w.strong_count() > 0);
        if let Some(v) = all
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(v);
        }
        let v = make()?;
        all.push((key, Arc::downgrade(&v)));
        Ok(v)
    }
}

/// Pins by (start, len): a range is registered with the driver once, however many devices
/// stream from it.
static SHARED: Shared<(usize, usize), HostPin> = Shared::new();

impl Gpu {
    /// [`Gpu::pin_host`] once per process for `bytes`: a live pin of the same range is shared.
    /// `None` (with a warning naming the bytes) when the memory cannot be locked: copies from it
    /// then go through the pinned staging.
    ///
    /// # Safety
    /// As [`Gpu::pin_host`]: the memory stays where it is while any returned pin lives.
    pub unsafe fn pin_shared(&self, bytes: &[u8], what: &str) -> Option<Arc<HostPin>> {
        if bytes.is_empty() {
            return None;
        }
        let range = (bytes.as_ptr() as usize, bytes.len());
        // SAFETY: passed on from the caller.
        let pinned = SHARED.get_or_make(range, || unsafe { self.pin_host(bytes) }.map(Arc::new));
        match pinned {
            Ok(pin) => Some(pin),
            Err(e) => {
                tracing::warn!(what, bytes = bytes.len(), err = %e,
                    "could not page-lock host memory; its copies to the device go through the pinned staging, slower (raise the locked-memory limit, or give the host more memory)");
                None
            }
        }
    }
}

/// Whether `bytes` lie inside memory a live pin holds.
pub(super) fn is_pinned(bytes: &[u8]) -> bool {
    let s = bytes.as_ptr() as usize;
    let e = s + bytes.len();
    !bytes.is_empty() && registered().iter().any(|&(a, l)| a <= s && e <= a + l)
}

impl Drop for HostPin {
    fn drop(&mut self) {
        let mut r = registered();
        if let Some(i) = r.iter().position(|&x| x == (self.start, self.len)) {
            r.swap_remove(i);
        }
        drop(r);
        // On failure the pages stay locked until the process exits: nothing else to do.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the range this pin registered, removed from the list above.
        let _ = unsafe { sys::cuMemHostUnregister(self.start as *mut _) };
    }
}
