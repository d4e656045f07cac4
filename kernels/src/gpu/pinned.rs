//! Host memory page-locked in place (registered with the driver): a witness decoded into it goes
//! to the device by DMA from where it lies, without the copy through the pinned staging that
//! took half of a 32 GiB partition's h2d and the host's memory bandwidth while the next blob was
//! fetched (docs/gpu-runs.md, run 31).

use std::sync::{Arc, Mutex, MutexGuard};

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
