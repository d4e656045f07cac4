//! `CudaBackend`: the `cuzk_prover::Backend` on one GPU, within a device memory budget. A
//! shape's key is placed by its plan (kernels/src/plan): resident where it fits, streamed from
//! page-locked host memory where it does not; a partition's evaluations, H and the MSM scalars
//! never leave the device.

mod batch;
mod key;
mod sums;
mod witness;

pub use key::CudaKey;
pub use witness::{DevScalars, DevWitness};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use blstrs::{G1Affine, G1Projective, G2Affine, Scalar};
use cuzk_prover::backend::{Backend, BackendError, HostPin, MsmResults};
use cuzk_prover::setup::FixedBase;
use cuzk_prover::{KeyInfo, ProvingKey};
use cuzk_wire::blob::CompactWitness;
use cuzk_wire::witness::Witness;

use crate::error::CudaError;
use crate::gpu::{jac_g1, Curve, DevBuf, Gpu, Scalars};
use crate::plan::{gib, HStage, PlanLimits};
use batch::{Arrival, Member, Room, WitnessSums};
use key::Resident;
use sums::Witnesses;
use witness::{Data, DeferredC, HostWitness};

/// Device memory left out of the default budget (the context, the memory pool's slack).
const DEFAULT_RESERVE: u64 = 2 << 30;

/// The device's lanes, handed out first come, first served: `take(n)` waits until every
/// earlier taker has had its lanes and `n` are free; they are handed back when the permit is
/// dropped.
struct Gate {
    queue: Mutex<Queue>,
    freed: Condvar,
}

struct Queue {
    free: Vec<usize>,
    /// The next ticket to hand out, and the one whose turn it is.
    next: u64,
    serving: u64,
}

/// Lanes taken from a [`Gate`].
pub(crate) struct Permit {
    lanes: Vec<usize>,
    gate: Arc<Gate>,
}

impl Gate {
    fn new(lanes: usize) -> Arc<Self> {
        Arc::new(Gate {
            queue: Mutex::new(Queue {
                free: (0..lanes).rev().collect(),
                next: 0,
                serving: 0,
            }),
            freed: Condvar::new(),
        })
    }

    fn take(self: &Arc<Self>, n: usize) -> Permit {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = q.next;
        q.next += 1;
        while q.serving != ticket || q.free.len() < n {
            q = self.freed.wait(q).unwrap_or_else(|e| e.into_inner());
        }
        q.serving += 1;
        let at = q.free.len() - n;
        let lanes = q.free.split_off(at);
        drop(q);
        // The next ticket may be served from what is left.
        self.freed.notify_all();
        Permit {
            lanes,
            gate: self.clone(),
        }
    }
}

impl Permit {
    /// The lane its partition's steps run on: the first of its lanes, so a turn of the whole
    /// device runs on the first lane, whose staging was reserved at key load and whose twiddles
    /// are the ones its plan counts.
    fn lane(&self) -> usize {
        *self.lanes.iter().min().expect("a permit holds a lane")
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut q = self.gate.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.free.append(&mut self.lanes);
        drop(q);
        self.gate.freed.notify_all();
    }
}

/// A partition's lanes from its evaluation to its MSMs: one where its key's plan counts a
/// working set per lane, otherwise the whole device (the plan counts one partition's
/// evaluations, H and MSM scratch) while workers' uploads overlap it.
pub(crate) type Turn = Permit;

/// A place for one partition's proving steps: streams, twiddles and staging of its own.
struct Lane {
    gpu: Gpu,
    /// One proving step at a time on this lane (they share its compute stream and scratch).
    job: Mutex<()>,
}

/// Groth16 proving on one CUDA device.
pub struct CudaBackend {
    /// The first also takes uploads, keys and parameter generation.
    lanes: Vec<Lane>,
    budget: u64,
    limits: PlanLimits,
    resident: Arc<Mutex<Resident>>,
    turns: Arc<Gate>,
    /// Workers proving on this device: each may hold an uploaded witness.
    workers: usize,
    /// Batches of L, A and B MSMs run, and the partitions they served.
    batches: [AtomicU64; 2],
}

impl CudaBackend {
    /// Opens device `ordinal` for `workers` proving workers. `memory_budget_bytes` caps the
    /// device memory the process allocates on it — keys, working buffers, scratch — (default,
    /// and at most: the device's memory less 2 GiB).
    pub fn new(
        ordinal: usize,
        memory_budget_bytes: Option<u64>,
        workers: usize,
    ) -> Result<Self, CudaError> {
        let gpu = Gpu::new(ordinal)?;
        let (_free, total) = gpu.mem_info()?;
        let card = (total as u64).saturating_sub(DEFAULT_RESERVE);
        let budget = match memory_budget_bytes {
            Some(b) if b > card => {
                tracing::warn!(device = %gpu.name(), asked_gib = format!("{:.2}", gib(b)),
                    budget_gib = format!("{:.2}", gib(card)),
                    "the memory budget exceeds the device's memory less its reserve; using that");
                card
            }
            Some(b) => b,
            None => card,
        };
        gpu.set_budget(budget);
        Ok(CudaBackend {
            lanes: vec![Lane {
                gpu,
                job: Mutex::new(()),
            }],
            budget,
            limits: PlanLimits::default(),
            resident: Arc::default(),
            turns: Gate::new(1),
            workers: workers.max(1),
            batches: Default::default(),
        })
    }

    /// Proves up to `lanes` partitions at once on the device, for keys whose plans have room
    /// for each one's working buffers (set before any key is loaded).
    pub fn with_lanes(mut self, lanes: usize) -> Result<Self, CudaError> {
        while self.lanes.len() < lanes {
            let gpu = self.gpu().lane()?;
            self.lanes.push(Lane {
                gpu,
                job: Mutex::new(()),
            });
        }
        self.turns = Gate::new(self.lanes.len());
        Ok(self)
    }

    /// How every lane's G1 MSMs accumulate their buckets (the default: by size).
    pub fn set_accumulation(&self, way: crate::Accumulation) {
        self.gpu().set_accumulation(way);
    }

    /// Plans keys loaded from now on with `limits` (checks of the streaming path).
    pub fn with_plan_limits(mut self, limits: PlanLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The underlying device (NTTs, MSMs on device-resident data).
    pub fn gpu(&self) -> &Gpu {
        &self.lanes[0].gpu
    }

    pub fn device_name(&self) -> &str {
        self.gpu().name()
    }

    /// Bytes of device memory proving may take (keys and working buffers).
    pub fn key_budget(&self) -> u64 {
        self.budget
    }

    /// The most device memory allocated at once so far.
    pub fn device_peak(&self) -> u64 {
        self.gpu().memory().peak()
    }

    /// Batches of L, A and B MSMs run so far, and the partitions they served.
    pub fn batches(&self) -> (u64, u64) {
        let [b, p] = &self.batches;
        (b.load(Ordering::Relaxed), p.load(Ordering::Relaxed))
    }

    /// One line of how a loaded key is proved within the budget.
    pub fn plan_summary(&self, key: &CudaKey) -> String {
        key.plan().summary()
    }

    /// Lane `i` and its lock. A panic in another proving step leaves nothing that the next
    /// one depends on (every step allocates its own buffers), so a poisoned lock is taken
    /// anyway.
    fn lock(&self, i: usize) -> (&Gpu, MutexGuard<'_, ()>) {
        let lane = &self.lanes[i];
        (
            &lane.gpu,
            lane.job.lock().unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Lanes a turn of `key`'s partitions takes: so many that no more of its partitions are
    /// proved at once than its plan counts working sets for (one lane each where it counts
    /// one for every lane, all of them where it counts one).
    fn turn_lanes(&self, key: &CudaKey) -> usize {
        self.lanes.len().div_ceil(key.plan.lanes.max(1))
    }

    /// The lane `w`'s turn holds (the first where it holds none).
    fn lane_of(&self, w: &DevWitness) -> usize {
        let turn = w.turn.lock().unwrap_or_else(|e| e.into_inner());
        turn.as_ref().map_or(0, Permit::lane)
    }

    /// Whether witnesses of `key`'s shape wait in host memory and are expanded on the device
    /// at their turn: under a lean plan, and under a full one with room for fewer expanded
    /// witnesses than workers (a few milliseconds at the turn instead of a whole partition's
    /// wait for room).
    fn expands_at_turn(&self, key: &CudaKey) -> bool {
        match key.plan.h_stage {
            HStage::Lean => true,
            HStage::Full { witnesses } => witnesses < self.workers,
        }
    }

    /// H's MSM, first of a partition's MSMs: its vector is freed before the witness is
    /// expanded for the others, so that no MSM pass shares the device with both.
    fn h_msm(&self, g: &Gpu, key: &CudaKey, h: DevScalars) -> Result<G1Projective, BackendError> {
        let started = Instant::now();
        let h_at = h
            .buf()
            .map(|b| g.ptr_at(b, 0))
            .ok_or_else(|| BackendError::Device("H is not on the device".into()))?;
        let sum = g.msm_passes(
            key.srs[0].bases(),
            Scalars::At(h_at),
            key.info.m - 1,
            key.plan.section_chunk(0),
            jac_g1,
        )?;
        let h_ms = started.elapsed().as_secs_f64() * 1e3;
        tracing::debug!(device = %g.name(), h_ms, "H MSM time");
        Ok(sum)
    }

    /// A partition's five MSMs alone.
    fn msms_alone(
        &self,
        key: &CudaKey,
        w: &DevWitness,
        h: DevScalars,
    ) -> Result<MsmResults, BackendError> {
        let (g, _job) = self.lock(self.lane_of(w));
        let h = self.h_msm(g, key, h)?;
        let mut sums = w.with_expanded(g, false, |wb| {
            self.witness_sums(g, key, Witnesses::Expanded(&[g.ptr_at(wb, 0)]))
        })?;
        let own = sums.pop().expect("one witness, one set of sums");
        Ok(own.with_h(h))
    }

    /// A partition's H MSM, then its L, A and B MSMs in a batch of its key's partitions.
    fn msms_batched(
        &self,
        key: &CudaKey,
        room: &Room,
        w: &DevWitness,
        h: DevScalars,
    ) -> Result<MsmResults, BackendError> {
        let h = {
            let (g, _job) = self.lock(self.lane_of(w));
            self.h_msm(g, key, h)?
        };
        let witness = w.host.clone().ok_or_else(|| {
            BackendError::Device("a batched partition's witness is not in host memory".into())
        })?;
        let member = Member { witness };
        let counted = w.coming.swap(false, Ordering::SeqCst);
        let release = || drop(w.turn.lock().unwrap_or_else(|e| e.into_inner()).take());
        let take = || self.turns.take(w.lanes);
        let run = |members: &[Member]| self.run_batch(key, members);
        let how = Arrival {
            release_turn: &release,
            take_turn: &take,
            run: &run,
        };
        let own = room.arrive(member, counted, key.plan.batch, how)?;
        Ok(own.with_h(h))
    }

    /// A batch's L, A and B MSMs: each witness checked and made a window at a time (one that
    /// the device refuses fails alone), every pass shared. Its turn holds every lane (a
    /// batching plan counts one partition at a time), so it runs on the first.
    fn run_batch(
        &self,
        key: &CudaKey,
        members: &[Member],
    ) -> Vec<Result<WitnessSums, BackendError>> {
        let (g, _job) = self.lock(0);
        self.batches[0].fetch_add(1, Ordering::Relaxed);
        self.batches[1].fetch_add(members.len() as u64, Ordering::Relaxed);
        // The batch's compact bytes stay on the device for its passes where its plan has room.
        let compact: u64 = members.iter().map(|m| m.witness.compact_bytes()).sum();
        let on_device = compact <= key.plan.compact_room(&key.shape);
        let mut sources = Vec::with_capacity(members.len());
        let mut refused = Vec::with_capacity(members.len());
        for m in members {
            match m.witness.window_source(g, on_device) {
                Ok(source) => {
                    sources.push(source);
                    refused.push(None);
                }
                Err(e) => refused.push(Some(e)),
            }
        }
        let shared = match sources.is_empty() {
            true => Ok(Vec::new()),
            false => self.witness_sums(g, key, Witnesses::Windows(&sources)),
        };
        // The kernels reading the sources' buffers are done before they are freed.
        let synced = g.synchronize();
        let made = sources.len();
        drop(sources);
        let shared = shared.and_then(|s| synced.map(|()| s).map_err(BackendError::from));
        let mut sums = match shared {
            Ok(s) => s.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => (0..made).map(|_| Err(e.clone())).collect(),
        }
        .into_iter();
        refused
            .into_iter()
            .map(|r| match r {
                Some(e) => Err(e),
                None => sums.next().expect("sums for each witness made"),
            })
            .collect()
    }

    /// A new evaluation vector on lane `lane` (whose lock the caller holds): matrix `i` times
    /// the witness.
    fn evaluation(
        &self,
        lane: usize,
        key: &CudaKey,
        i: usize,
        w: &DevBuf,
    ) -> Result<DevScalars, BackendError> {
        let g = &self.lanes[lane].gpu;
        let m = key.info.m;
        let buf = g.alloc(m * 32)?;
        key.matrices[i].spmv(g, &key.coeffs, w, &buf, m)?;
        Ok(DevScalars::device(buf, key.info.constraints, lane))
    }
}

impl Backend for CudaBackend {
    type Key = CudaKey;
    type Witness = DevWitness;
    type Scalars = DevScalars;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn load_key(&self, key: Arc<ProvingKey>) -> Result<CudaKey, BackendError> {
        let _job = self.lock(0);
        Ok(self.load(&key)?)
    }

    fn key_info<'k>(&self, key: &'k CudaKey) -> &'k KeyInfo {
        &key.info
    }

    /// The plan's total against the whole budget; more than the budget when no plan fits (the
    /// load then says why).
    fn memory_for(&self, key: &ProvingKey) -> u64 {
        self.key_plan(key, 0)
            .map_or(self.budget + 1, |(_, plan)| plan.total())
    }

    fn h2d_bytes(&self) -> u64 {
        self.gpu().h2d_bytes()
    }

    unsafe fn pin(&self, bytes: &[u8]) -> Option<HostPin> {
        if bytes.is_empty() {
            return None;
        }
        let started = Instant::now();
        // SAFETY: passed on from the caller.
        match unsafe { self.gpu().pin_host(bytes) } {
            Ok(pin) => {
                tracing::debug!(
                    bytes = bytes.len(),
                    ms = started.elapsed().as_millis() as u64,
                    "witness buffer page-locked"
                );
                Some(Box::new(pin))
            }
            Err(e) => {
                tracing::warn!(bytes = bytes.len(), err = %e, "could not page-lock a witness buffer; its uploads go through the staging");
                None
            }
        }
    }

    /// On the copy stream, without the device lock: a worker's upload overlaps another
    /// worker's kernels. Under a lean plan the witness stays on the host until its turn.
    fn upload(&self, key: &CudaKey, w: &Witness) -> Result<DevWitness, BackendError> {
        // The MSMs read the key's numbers of variables from the expanded witness.
        key.info.check_lens((w.input.len(), w.aux.len()))?;
        let lanes = self.turn_lanes(key);
        if self.expands_at_turn(key) {
            let host = HostWitness::scalars(self.gpu(), w);
            return Ok(DevWitness::on_host(host, lanes).in_room(key.room.clone()));
        }
        let buf = self.gpu().upload_concat(&[&w.input, &w.aux])?;
        Ok(DevWitness::expanded(buf, lanes))
    }

    /// As `upload`, the aux's compact bytes expanded on the device; a chunk it refuses is
    /// decoded on the host to say why.
    fn upload_compact(
        &self,
        key: &CudaKey,
        w: &CompactWitness,
    ) -> Result<DevWitness, BackendError> {
        key.info.check_lens((w.input.len(), w.aux.len()))?;
        let lanes = self.turn_lanes(key);
        if self.expands_at_turn(key) {
            let host = HostWitness::compact(self.gpu(), w);
            return Ok(DevWitness::on_host(host, lanes).in_room(key.room.clone()));
        }
        let buf = self
            .gpu()
            .upload_compact(&w.input, &w.aux)
            .map_err(|e| witness::refused(&w.aux, e))?;
        Ok(DevWitness::expanded(buf, lanes))
    }

    fn wait_turn(&self, w: &DevWitness) -> Result<(), BackendError> {
        let mut turn = w.turn.lock().unwrap_or_else(|e| e.into_inner());
        if turn.is_none() {
            // A batch does not close while a partition of its key waits for a turn.
            w.count_coming();
            *turn = Some(self.turns.take(w.lanes));
        }
        Ok(())
    }

    fn evaluate(&self, key: &CudaKey, w: &DevWitness) -> Result<[DevScalars; 3], BackendError> {
        // Callers that skipped `wait_turn` wait here.
        self.wait_turn(w)?;
        let started = Instant::now();
        let lane = self.lane_of(w);
        let (g, _job) = self.lock(lane);
        let started = g.note_slow("waiting for the device lock", started);
        let lean = key.plan.h_stage == HStage::Lean;
        // A full plan keeps a witness expanded at its turn until its MSMs are done.
        let abc = w.with_expanded(g, !lean, |wb| {
            let a = self.evaluation(lane, key, 0, wb)?;
            let b = self.evaluation(lane, key, 1, wb)?;
            // A lean plan makes C·w once A·w and B·w are multiplied (`compute_h`).
            let c = match (&w.host, lean) {
                (Some(host), true) => DevScalars {
                    len: key.info.constraints,
                    lane,
                    data: Data::CofW(DeferredC {
                        witness: host.clone(),
                        matrix: key.matrices[2].clone(),
                        coeffs: key.coeffs.clone(),
                        m: key.info.m,
                    }),
                },
                _ => self.evaluation(lane, key, 2, wb)?,
            };
            Ok([a, b, c])
        })?;
        // Its own stage in the timings, not folded into the next one's first wait.
        g.synchronize()?;
        g.note_slow("SpMV kernels", started);
        Ok(abc)
    }

    fn compute_h(&self, key: &CudaKey, abc: [DevScalars; 3]) -> Result<DevScalars, BackendError> {
        let lane = abc[0].lane;
        let (g, _job) = self.lock(lane);
        let logm = key.info.log_m;
        let [a, b, c] = abc.map(|v| v.data);
        let (Data::Device(a), Data::Device(b)) = (a, b) else {
            return Err(BackendError::Device(
                "A·w and B·w are not on the device".into(),
            ));
        };
        let buf = match c {
            Data::Device(c) => g.h_device([a, b, c], logm)?,
            Data::CofW(deferred) => {
                // At most three domain vectors at once: A·B on the coset first, then C·w in
                // B·w's place, each transform stage with twiddles made for it alone.
                g.coset_product(&a, b, logm)?;
                g.release_twiddles();
                let c = deferred.make(g)?;
                g.interpolate_minus(&a, c, logm)?;
                g.release_twiddles();
                a
            }
        };
        Ok(DevScalars::device(buf, key.info.m - 1, lane))
    }

    fn msms(
        &self,
        key: &CudaKey,
        w: &DevWitness,
        h: DevScalars,
    ) -> Result<MsmResults, BackendError> {
        let results = match &w.room {
            Some(room) => self.msms_batched(key, room, w, h),
            None => self.msms_alone(key, w, h),
        };
        // The next partition's evaluation may start.
        drop(w.turn.lock().unwrap_or_else(|e| e.into_inner()).take());
        results
    }

    fn download(&self, v: &DevScalars) -> Result<Vec<Scalar>, BackendError> {
        // On the lane that made it: its stream has the writes before the copy.
        let (g, _job) = self.lock(v.lane);
        match &v.data {
            Data::Device(buf) => Ok(g.download_scalars(buf, v.len)?),
            // Made for the download: what `compute_h` makes (Dual compares it).
            Data::CofW(deferred) => Ok(g.download_scalars(&deferred.make(g)?, v.len)?),
        }
    }
}

/// Parameter generation's query points on the device.
impl FixedBase for CudaBackend {
    fn g1(&self, scalars: &[Scalar]) -> Result<Vec<G1Affine>, BackendError> {
        let (g, _job) = self.lock(0);
        Ok(g.fixed_base_g1(scalars)?)
    }

    fn g2(&self, scalars: &[Scalar]) -> Result<Vec<G2Affine>, BackendError> {
        let (g, _job) = self.lock(0);
        Ok(g.fixed_base_g2(scalars)?)
    }

    fn g1_uncompressed(&self, scalars: &[Scalar], out: &mut Vec<u8>) -> Result<(), BackendError> {
        let (g, _job) = self.lock(0);
        Ok(g.fixed_base_uncompressed(Curve::G1, scalars, out)?)
    }

    fn g2_uncompressed(&self, scalars: &[Scalar], out: &mut Vec<u8>) -> Result<(), BackendError> {
        let (g, _job) = self.lock(0);
        Ok(g.fixed_base_uncompressed(Curve::G2, scalars, out)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn a_gate_hands_out_its_lanes_and_no_more() {
        for lanes in [1, 2] {
            let gate = Gate::new(lanes);
            let held: Vec<Permit> = (0..lanes).map(|_| gate.take(1)).collect();
            let mut named: Vec<usize> = held.iter().map(Permit::lane).collect();
            named.sort_unstable();
            assert_eq!(named, (0..lanes).collect::<Vec<_>>(), "each lane once");
            drop(held);
            assert_eq!(
                gate.take(lanes).lane(),
                0,
                "the whole device runs on the first lane"
            );
            let held: Vec<Permit> = (0..lanes).map(|_| gate.take(1)).collect();
            let (tx, rx) = mpsc::channel();
            let waiter = {
                let gate = gate.clone();
                std::thread::spawn(move || {
                    let _next = gate.take(1);
                    tx.send(()).unwrap();
                })
            };
            // The next one waits while every lane is held ...
            assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
            // ... and gets one once a holder hands it back.
            drop(held);
            rx.recv_timeout(Duration::from_secs(5)).unwrap();
            waiter.join().unwrap();
            drop(gate.take(lanes));
        }
    }

    #[test]
    fn a_turn_of_the_whole_device_is_not_overtaken() {
        let gate = Gate::new(2);
        let first = gate.take(1);
        let (tx, rx) = mpsc::channel();
        let whole = {
            let (gate, tx) = (gate.clone(), tx.clone());
            std::thread::spawn(move || {
                let both = gate.take(2);
                tx.send("whole").unwrap();
                drop(both);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        // A lane is free, but the whole-device turn asked first: a later single lane waits.
        let later = {
            let gate = gate.clone();
            std::thread::spawn(move || {
                let _one = gate.take(1);
                tx.send("later").unwrap();
            })
        };
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        drop(first);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "whole");
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), "later");
        whole.join().unwrap();
        later.join().unwrap();
    }
}
