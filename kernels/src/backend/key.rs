//! A shape's proving key on one device, placed as its plan says: each SRS section and each
//! matrix resident, or left in page-locked host memory (shared by the process's devices) and
//! streamed for every partition.

use std::sync::{Arc, Mutex};

use cuzk_prover::key::Srs;
use cuzk_prover::params::Query;
use cuzk_prover::r1cs::Matrix;
use cuzk_prover::{KeyInfo, ProvingKey};

use super::batch::Room;
use super::CudaBackend;
use crate::error::CudaError;
use crate::gpu::{
    as_bytes, long_rows, Bases, Curve, DevBuf, DeviceBases, DeviceMatrix, Gpu, HostBases,
    HostMatrix,
};
use crate::plan::{self, gib, Passes, Placement, Plan, PlanShape, WINDOW_SPAN};

/// A shape's proving key on the device.
pub struct CudaKey {
    pub(super) srs: [KeyBases; 5],
    pub(super) matrices: [Arc<KeyMatrix>; 3],
    pub(super) coeffs: Arc<DevBuf>,
    pub(super) a_vars: (DevBuf, usize),
    pub(super) b_vars: (DevBuf, usize),
    pub(super) info: KeyInfo,
    pub(super) plan: Plan,
    pub(super) shape: PlanShape,
    /// Where its partitions meet for batched L, A and B MSMs, when its plan batches them.
    pub(super) room: Option<Arc<Room>>,
    /// The passes of a batch's L, A, B in G1 and B in G2 MSMs and the witness windows they
    /// read, when its plan batches them.
    pub(super) windows: Option<Box<[Passes; 4]>>,
    accounted: Arc<Mutex<Resident>>,
}

pub(super) enum KeyBases {
    Device(DeviceBases),
    Host(Arc<HostBases>),
}

impl KeyBases {
    pub(super) fn bases(&self) -> Bases<'_> {
        match self {
            KeyBases::Device(d) => Bases::Device(d),
            KeyBases::Host(h) => Bases::Host(h),
        }
    }
}

pub(super) enum KeyMatrix {
    Device(DeviceMatrix),
    Host(HostMatrix),
}

impl KeyMatrix {
    /// `out = M·w`, padded with zeros to the domain of `m` values.
    pub(super) fn spmv(
        &self,
        g: &Gpu,
        coeffs: &DevBuf,
        w: &DevBuf,
        out: &DevBuf,
        m: usize,
    ) -> Result<(), CudaError> {
        match self {
            KeyMatrix::Device(d) => g.spmv(d, coeffs, w, out, m),
            KeyMatrix::Host(h) => g.spmv_streamed(h, coeffs, w, out, m),
        }
    }
}

/// What the resident keys of a device hold.
#[derive(Default)]
pub(super) struct Resident {
    keys: u64,
    /// The largest working set among them.
    working: u64,
}

impl CudaKey {
    /// Device bytes held by this key.
    pub fn device_bytes(&self) -> u64 {
        self.plan.resident
    }

    /// How this key is proved within the device's budget.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The plan as a table (what `--explain-plan` prints).
    pub fn explain(&self, name: &str) -> String {
        self.plan.explain(&self.shape, name)
    }
}

impl Drop for CudaKey {
    fn drop(&mut self) {
        let mut r = self.accounted.lock().unwrap_or_else(|e| e.into_inner());
        r.keys -= self.plan.resident;
        // The largest working set of those left is not tracked; keeping the old maximum until
        // the device is empty only makes the next admission conservative.
        if r.keys == 0 {
            r.working = 0;
        }
    }
}

impl CudaBackend {
    fn upload_matrix(&self, m: &Matrix) -> Result<DeviceMatrix, CudaError> {
        let g = self.gpu();
        // ~300 K rows of the 32 GiB shape (1.2 MB: inside the plan's fixed bytes).
        let long = long_rows(&m.row_ptr);
        Ok(DeviceMatrix {
            row_ptr: g.upload(as_bytes(&m.row_ptr))?,
            cols: g.upload(as_bytes(&m.cols))?,
            coeffs: g.upload(as_bytes(&m.coeffs))?,
            rows: m.rows(),
            long_rows: g.upload(as_bytes(&long))?,
            n_long: long.len(),
        })
    }

    /// The plan `pk`'s shape gets on this device, with `others` bytes held by other keys.
    pub fn key_plan(&self, pk: &ProvingKey, others: u64) -> Result<(PlanShape, Plan), CudaError> {
        let shape = PlanShape::of(pk);
        let available = self.budget.saturating_sub(others);
        let plan = plan::choose(
            &shape,
            available,
            self.workers,
            self.lanes.len(),
            self.limits,
        )
        .map_err(|e| CudaError::Shape(e.to_string()))?;
        Ok((shape, plan))
    }

    pub(super) fn load(&self, pk: &Arc<ProvingKey>) -> Result<CudaKey, CudaError> {
        // Keys share one set of working buffers (one proving step at a time per device).
        let mut resident = self.resident.lock().unwrap_or_else(|e| e.into_inner());
        let (shape, plan) = self.key_plan(pk, resident.keys)?;
        let total = resident.keys + plan.resident + resident.working.max(plan.working());
        if total > self.budget {
            return Err(CudaError::OutOfMemory(format!(
                "the proving key needs {:.1} GiB with its working buffers; {:.1} GiB of the {:.1} GiB budget are held by other keys",
                gib(plan.total()),
                gib(resident.keys),
                gib(self.budget)
            )));
        }
        let g = self.gpu();
        tracing::info!(device = %g.name(), plan = ?plan.summary(),
            resident_gib = format!("{:.2}", gib(plan.resident)),
            working_gib = format!("{:.2}", gib(plan.working())),
            budget_gib = format!("{:.2}", gib(plan.budget)),
            streamed_gib_per_partition = format!("{:.2}", gib(plan.streamed_bytes(&shape))),
            chunk = plan.chunk, h_chunk = plan.h_chunk, batch = plan.batch, "device memory plan");
        let section = |i: usize| -> Result<KeyBases, CudaError> {
            let q = Query::ALL[i];
            if plan.srs[i] == Placement::Streamed {
                return Ok(KeyBases::Host(g.host_bases(&pk.srs, q)?));
            }
            let curve = if q == Query::BG2 {
                Curve::G2
            } else {
                Curve::G1
            };
            Ok(KeyBases::Device(match &pk.srs {
                Srs::Memory(p) => match q {
                    Query::H => g.upload_g1(&p.h)?,
                    Query::L => g.upload_g1(&p.l)?,
                    Query::A => g.upload_g1(&p.a)?,
                    Query::BG1 => g.upload_g1(&p.b_g1)?,
                    Query::BG2 => g.upload_g2(&p.b_g2)?,
                },
                Srs::File(f) => {
                    let bases = g.upload_uncompressed(f.raw(q), curve)?;
                    f.release(q);
                    bases
                }
            }))
        };
        let srs = [
            section(0)?,
            section(1)?,
            section(2)?,
            section(3)?,
            section(4)?,
        ];
        let m = &pk.matrices;
        let matrix = |i: usize| -> Result<Arc<KeyMatrix>, CudaError> {
            Ok(Arc::new(match plan.matrices[i] {
                Placement::Resident => {
                    KeyMatrix::Device(self.upload_matrix([&m.a, &m.b, &m.c][i])?)
                }
                Placement::Streamed => KeyMatrix::Host(g.host_matrix(m, i)?),
            }))
        };
        let key = CudaKey {
            srs,
            matrices: [matrix(0)?, matrix(1)?, matrix(2)?],
            coeffs: Arc::new(g.upload(as_bytes(&m.coeffs))?),
            a_vars: (g.upload(as_bytes(&pk.a_vars))?, pk.a_vars.len()),
            b_vars: (g.upload(as_bytes(&pk.b_vars))?, pk.b_vars.len()),
            info: pk.info.clone(),
            accounted: self.resident.clone(),
            room: (plan.batch > 1).then(Arc::default),
            windows: (plan.batch > 1).then(|| Box::new(batch_passes(pk, &plan))),
            plan,
            shape,
        };
        g.synchronize()?;
        let working = key.plan.working();
        // Otherwise a key's first partition pays for page-locking the staging its compact
        // witness goes up through when it is not pinned in place, and for mapping its working
        // buffers into the memory pool (docs/gpu-runs.md, "32 GiB on one H200, 16 cores"); here
        // the node is still loading.
        g.reserve_staging(crate::plan::expand_staging(key.shape.vars()) as usize)?;
        // Only for the device's first key: no partition's buffers compete with it yet.
        if resident.keys == 0 {
            if let Err(e) = g.warm_pool(working as usize) {
                tracing::warn!(device = %g.name(), err = %e, "could not map the working buffers ahead");
            }
        }
        resident.keys += key.plan.resident;
        resident.working = resident.working.max(working);
        Ok(key)
    }
}

/// The passes of a batch's L, A, B in G1 and B in G2 MSMs under `plan`, each pass's window at
/// most [`WINDOW_SPAN`] G1 passes wide.
fn batch_passes(pk: &ProvingKey, plan: &Plan) -> [Passes; 4] {
    let span = WINDOW_SPAN * plan.chunk;
    let windowed = |vars: &[u32], i: usize| Passes::windowed(vars, plan.section_chunk(i), span);
    [
        Passes::contiguous(pk.info.aux, plan.section_chunk(1), pk.info.inputs),
        windowed(&pk.a_vars, 2),
        windowed(&pk.b_vars, 3),
        windowed(&pk.b_vars, 4),
    ]
}
