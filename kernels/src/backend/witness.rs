//! A partition's witness and vectors on the device. Under a full plan with room for every
//! worker's witness, the witness is expanded once, at upload. Otherwise its compact form waits
//! in page-locked host memory and is expanded on the device at its turn (a few milliseconds:
//! ~0.2 GB of compact bytes for a 32 GiB PoRep partition): a full plan keeps it from its
//! evaluation to the end of its MSMs, a lean plan expands it again for each step that reads
//! it, so the 4.2 GB of scalars are not held while H's vectors need the room.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use blstrs::Scalar;
use cuzk_prover::backend::BackendError;
use cuzk_wire::blob::{CompactAux, CompactWitness};
use cuzk_wire::witness::Witness;

use super::batch::Room;
use super::key::KeyMatrix;
use super::Turn;
use crate::error::CudaError;
use crate::gpu::{as_bytes, DevBuf, Gpu, HostPin, WindowSource};

/// A witness on the device: inputs then aux, contiguous, when expanded.
pub struct DevWitness {
    /// Expanded at upload: until dropped. Expanded at its turn: under a full plan from its
    /// evaluation to the end of its MSMs, under a lean one for each step that needs it.
    pub(super) expanded: Mutex<Option<DevBuf>>,
    /// What it is expanded from at its turn.
    pub(super) host: Option<Arc<HostWitness>>,
    /// The device's turn, from its evaluation to the end of its MSMs (or until it is dropped).
    pub(super) turn: Mutex<Option<Turn>>,
    /// Lanes its turn takes (`CudaBackend::turn_lanes`).
    pub(super) lanes: usize,
    /// Where its L, A and B MSMs meet other partitions' (a key whose plan batches them).
    pub(super) room: Option<Arc<Room>>,
    /// Counted in the room as on its way: from asking for its turn until it arrives.
    pub(super) coming: AtomicBool,
}

impl Drop for DevWitness {
    fn drop(&mut self) {
        if let Some(room) = &self.room {
            if self.coming.swap(false, Ordering::SeqCst) {
                room.gone();
            }
        }
    }
}

impl DevWitness {
    pub(super) fn expanded(buf: DevBuf, lanes: usize) -> Self {
        DevWitness {
            expanded: Mutex::new(Some(buf)),
            host: None,
            turn: Mutex::new(None),
            lanes,
            room: None,
            coming: AtomicBool::new(false),
        }
    }

    pub(super) fn on_host(host: HostWitness, lanes: usize) -> Self {
        DevWitness {
            expanded: Mutex::new(None),
            host: Some(Arc::new(host)),
            turn: Mutex::new(None),
            lanes,
            room: None,
            coming: AtomicBool::new(false),
        }
    }

    /// Its L, A and B MSMs in batches of `room`'s key.
    pub(super) fn in_room(mut self, room: Option<Arc<Room>>) -> Self {
        self.room = room;
        self
    }

    /// Counts it in its room as on its way, once.
    pub(super) fn count_coming(&self) {
        if let Some(room) = &self.room {
            if !self.coming.swap(true, Ordering::SeqCst) {
                room.coming();
            }
        }
    }

    /// Runs `f` with the witness expanded on the device; a lean witness is expanded for it and
    /// dropped after it unless `keep`.
    pub(super) fn with_expanded<R>(
        &self,
        gpu: &Gpu,
        keep: bool,
        f: impl FnOnce(&DevBuf) -> Result<R, BackendError>,
    ) -> Result<R, BackendError> {
        let mut slot = self.expanded.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            let host = self.host.as_ref().ok_or_else(|| {
                BackendError::Device("a witness with neither device nor host copy".into())
            })?;
            *slot = Some(host.expand(gpu)?);
        }
        let out = f(slot.as_ref().expect("expanded above"));
        if !keep && self.host.is_some() {
            // The buffer was made on the copy stream: the kernels reading it on the compute
            // stream must be done before it is freed there.
            gpu.synchronize()?;
            *slot = None;
        }
        out
    }
}

/// A witness kept in host memory, page-locked so that each expansion reads it by DMA.
pub(crate) struct HostWitness {
    // Declared first: the memory is unlocked before it is freed.
    _pin: Option<HostPin>,
    form: HostForm,
}

enum HostForm {
    Compact { input: Vec<Scalar>, aux: CompactAux },
    Scalars(Vec<Scalar>),
}

impl HostWitness {
    pub(super) fn compact(gpu: &Gpu, w: &CompactWitness) -> Self {
        let aux = w.aux.trimmed();
        // SAFETY: the copy is owned by this value and freed only after the pin (field order).
        let pin = unsafe { gpu.pin_host(aux.memory()) }.ok();
        HostWitness {
            _pin: pin,
            form: HostForm::Compact {
                input: w.input.clone(),
                aux,
            },
        }
    }

    pub(super) fn scalars(gpu: &Gpu, w: &Witness) -> Self {
        let all: Vec<Scalar> = w.input.iter().chain(&w.aux).copied().collect();
        // SAFETY: as above.
        let pin = unsafe { gpu.pin_host(as_bytes(&all)) }.ok();
        HostWitness {
            _pin: pin,
            form: HostForm::Scalars(all),
        }
    }

    /// No witness, for the batching tests.
    #[cfg(test)]
    pub(super) fn empty() -> Self {
        HostWitness {
            _pin: None,
            form: HostForm::Scalars(Vec::new()),
        }
    }

    /// The witness as a batch makes its windows: a compact one's chunks checked first, and
    /// its bytes copied to the device when `on_device`.
    pub(super) fn window_source<'a>(
        &'a self,
        gpu: &Gpu,
        on_device: bool,
    ) -> Result<WindowSource<'a>, BackendError> {
        match &self.form {
            HostForm::Compact { input, aux } => gpu
                .compact_source(input, aux, on_device)
                .map_err(|e| refused(aux, e)),
            HostForm::Scalars(all) => Ok(WindowSource::Scalars(all)),
        }
    }

    /// Bytes of its compact form (0 for scalars).
    pub(super) fn compact_bytes(&self) -> u64 {
        match &self.form {
            HostForm::Compact { aux, .. } => aux.bytes().len() as u64,
            HostForm::Scalars(_) => 0,
        }
    }

    pub(super) fn expand(&self, gpu: &Gpu) -> Result<DevBuf, BackendError> {
        match &self.form {
            HostForm::Compact { input, aux } => {
                gpu.upload_compact(input, aux).map_err(|e| refused(aux, e))
            }
            HostForm::Scalars(all) => Ok(gpu.upload_concat(&[all.as_slice()])?),
        }
    }
}

/// A device error of a compact upload, a refused chunk decoded on the host to say why.
pub(super) fn refused(aux: &CompactAux, e: CudaError) -> BackendError {
    match e {
        CudaError::RefusedChunk(chunk) => match aux.check_chunk(chunk) {
            Err(why) => BackendError::Witness(why),
            Ok(()) => BackendError::Device(format!(
                "the device refused compact witness chunk {chunk}, which the host's decoder accepts"
            )),
        },
        e => e.into(),
    }
}

/// Scalars on the device; the buffer may be longer than `len` (padding of the domain).
pub struct DevScalars {
    pub(super) len: usize,
    /// The lane whose compute stream made it: the next steps run there.
    pub(super) lane: usize,
    pub(super) data: Data,
}

pub(super) enum Data {
    Device(DevBuf),
    /// C·w under a lean plan: made when H has room for it, from the witness.
    CofW(DeferredC),
}

/// What C·w is made from when it is needed.
pub(super) struct DeferredC {
    pub(super) witness: Arc<HostWitness>,
    pub(super) matrix: Arc<KeyMatrix>,
    pub(super) coeffs: Arc<DevBuf>,
    pub(super) m: usize,
}

impl DeferredC {
    /// C·w on the device, the witness expanded for it and dropped again.
    pub(super) fn make(&self, gpu: &Gpu) -> Result<DevBuf, BackendError> {
        let w = self.witness.expand(gpu)?;
        let c = gpu.alloc(self.m * 32)?;
        self.matrix.spmv(gpu, &self.coeffs, &w, &c, self.m)?;
        // `w` is freed on the copy stream it was made on, after the product has read it.
        gpu.synchronize()?;
        Ok(c)
    }
}

impl DevScalars {
    pub(super) fn device(buf: DevBuf, len: usize, lane: usize) -> Self {
        DevScalars {
            len,
            lane,
            data: Data::Device(buf),
        }
    }

    pub(super) fn buf(&self) -> Option<&DevBuf> {
        match &self.data {
            Data::Device(b) => Some(b),
            Data::CofW(_) => None,
        }
    }
}
