//! How a shape is proved within a device memory budget: which parts of its key stay on the
//! device and which stream from pinned host memory, how the H polynomial's vectors share the
//! device, and how many points an MSM takes at a time. Arithmetic only, no device: the CUDA
//! backend picks a plan when it loads a key, `cuzk gpu-node --explain-plan` prints one, and the
//! tests here run in CI.
//!
//! The choice, in order:
//! 1. **Full**: the whole key resident, the workers' witnesses expanded on the device beside the
//!    partition being proved, A·w, B·w, C·w and the twiddles together (the fastest; an H200
//!    holds a 32 GiB partition so). MSMs in one pass when their scratch fits, else in passes.
//! 2. Full with one witness on the device at a time (the next worker's upload waits).
//! 3. **Lean**: at most three vectors of the domain at once (the witness is expanded again from
//!    its compact form, kept in host memory, whenever a step needs it; the twiddles are made
//!    again for each transform stage), and every part of the key that does not fit streams from
//!    pinned host memory in double-buffered passes. The parts kept resident are chosen greedily,
//!    those whose streaming would hide least behind compute first; among pass sizes, the one
//!    the cost model below finds cheapest. Several partitions waiting on the device share each
//!    streamed pass of L, A and B ([`Plan::batch`]): each pass's bases serve all of them, and
//!    each witness is made a window at a time, the stretch its pass reads ([`passes`]), in one
//!    window buffer the batch shares, so a batch takes no more room than one partition.
//!
//! A full plan with every worker's witness expanded at upload may also prove several partitions
//! at once, each on streams of its own ([`Plan::lanes`]), where the budget holds each one's
//! working buffers beside the others': one partition's kernels fill the gaps of the other's
//! host round trips.

mod explain;
mod memory;
mod passes;

pub use memory::{expand_staging, msm_scratch, pass_buckets, EXPAND_BATCH, FR, G1, G2};
pub use passes::{fixed as fixed_passes, Passes};

use cuzk_prover::params::Query;
use cuzk_prover::ProvingKey;

/// Smallest MSM pass a plan picks on its own: below it, each pass's fixed work (the bucket
/// reduction, a few synchronisations) outweighs its points.
pub const MIN_CHUNK: usize = 1 << 20;

/// Largest pass of the witness's MSMs (L, A, B) in a lean plan: two of a streamed section's
/// buffers and its scratch must leave room for a batch. H's passes are sized on their own.
pub const MAX_STREAM_CHUNK: usize = 1 << 24;

/// Most partitions whose L, A and B MSMs share streamed passes ([`batch_limit`]). The batch's
/// witnesses are made a window at a time in buffers they share, so its room does not grow with
/// it; the partitions wait for one another (a batch's first partition waits for the others' H
/// stages), and their page-locked compact witnesses wait in host memory.
pub const MAX_BATCH: usize = 8;

/// The largest batch `workers` GPU workers form: one worker stays out of it where there are
/// three or more, so that a partition is ready for the device's turn when the batch ends (a
/// batch of every worker left the device idle while they all started their next partitions:
/// docs/gpu.md, "At each device memory budget"); two workers batch both.
pub fn batch_limit(workers: usize) -> usize {
    match workers {
        0..=2 => workers.max(1),
        w => (w - 1).min(MAX_BATCH),
    }
}

/// A window of a batched pass over A's or B's points holds at most this many times the pass's
/// points of witness positions: a pass whose variables spread wider ends early
/// ([`Passes::windowed`]).
pub const WINDOW_SPAN: usize = 2;

/// A batch keeps its witnesses' compact bytes on the device while its passes run where they
/// fit in what its plan counts for them: at least this share of each witness's scalars (a
/// PoRep witness's compact form is about a sixteenth of them, docs/gpu.md). Otherwise each
/// window's chunks cross with it, on the compute stream, behind the next pass's bases.
pub const COMPACT_SHARE: u64 = 8;

/// Bytes of a streamed matrix's entries (columns and coefficients) per pass.
pub const MATRIX_CHUNK: u64 = 256 << 20;

/// The cost model that ranks lean plans: host-to-device bytes at a PCIe 4.0 x16 card's rate,
/// and a fixed cost per MSM pass (what a pass costs beyond its points: G1 MSMs of 2^22 and
/// 2^24 points fit 8.6 ms + 8.4 ns a point on the H200, docs/gpu.md). It only orders plans.
const PCIE_BYTES_PER_S: f64 = 25e9;
const PASS_S: f64 = 0.008;
/// Each bucket a pass fills costs it too (ends of buckets, partial sums, the reduction): fitted
/// to H's MSM in passes of 2^24 against passes of 2^25 on one H100, the same buckets each
/// (docs/gpu.md, "Every budget with the batch-affine accumulation").
const BUCKET_S: f64 = 2.75e-9;
const POINT_S: f64 = 8.4e-9;

/// Least share of a partition's MSM time that its passes' fixed costs (the host round trips
/// another lane's kernels fill) must make for a second lane: where they are a large share (a
/// 2 KiB partition) a second lane paid; where they are a small one (32 GiB) it did not, while
/// holding a second working set (docs/gpu.md, "Lanes").
const LANE_GAPS: f64 = 0.1;

/// What a plan needs to know of a shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanShape {
    /// Public inputs, ONE included.
    pub inputs: usize,
    pub aux: usize,
    /// The evaluation domain.
    pub m: usize,
    /// Points of each SRS section, in [`Query::ALL`] order.
    pub points: [usize; 5],
    /// Device bytes of the A, B and C matrices.
    pub matrices: [u64; 3],
    /// Always resident: the coefficient table and the A and B packing maps.
    pub fixed: u64,
}

impl PlanShape {
    pub fn of(pk: &ProvingKey) -> Self {
        let m = &pk.matrices;
        PlanShape {
            inputs: pk.info.inputs,
            aux: pk.info.aux,
            m: pk.info.m,
            points: Query::ALL.map(|q| pk.srs.len(q)),
            matrices: [m.a.bytes(), m.b.bytes(), m.c.bytes()],
            fixed: FR * m.coeffs.len() as u64 + 4 * (pk.a_vars.len() + pk.b_vars.len()) as u64,
        }
    }

    pub fn vars(&self) -> usize {
        self.inputs + self.aux
    }

    pub fn section_bytes(&self, i: usize) -> u64 {
        self.points[i] as u64 * Query::ALL[i].point_bytes() as u64
    }

    /// The whole key: SRS, matrices and what is always resident.
    pub fn key_bytes(&self) -> u64 {
        (0..5).map(|i| self.section_bytes(i)).sum::<u64>()
            + self.matrices.iter().sum::<u64>()
            + self.fixed
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Resident,
    /// In pinned host memory, copied to the device pass by pass for every partition.
    Streamed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HStage {
    /// `witnesses` expanded witnesses on the device (one proving, the others waiting for their
    /// turn), and a partition's A·w, B·w, C·w and the twiddles together.
    Full { witnesses: usize },
    /// At most three domain-sized vectors at once: A·w and B·w are transformed and multiplied
    /// before C·w is made; the witness is expanded again where it is needed.
    Lean,
}

/// A step of a partition and the device bytes it holds beyond the resident key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    pub name: &'static str,
    pub bytes: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub budget: u64,
    pub h_stage: HStage,
    /// The SRS sections, in [`Query::ALL`] order.
    pub srs: [Placement; 5],
    /// The A, B and C matrices.
    pub matrices: [Placement; 3],
    /// Points a G1 MSM of the witness takes at a time (a streamed section's pass); B in G2
    /// takes half as many ([`Plan::section_chunk`]).
    pub chunk: usize,
    /// Points H's MSM takes at a time: at least `chunk`; more where the budget has room for
    /// them while the witness is not on the device (H's MSM comes first).
    pub h_chunk: usize,
    /// Partitions whose L, A and B MSMs share each streamed pass (1: each its own): under a
    /// lean plan that streams one of them, as many expanded witnesses as the MSM phase has
    /// room for beside the passes, at most one per worker.
    pub batch: usize,
    /// Partitions proved at once, each on streams of its own (1 but under a full plan with
    /// room for each one's working buffers).
    pub lanes: usize,
    /// Device bytes of the resident parts.
    pub resident: u64,
    pub phases: Vec<Phase>,
}

impl Plan {
    /// The largest phase's bytes beyond the resident key.
    pub fn working(&self) -> u64 {
        self.phases.iter().map(|p| p.bytes).max().unwrap_or(0)
    }

    pub fn total(&self) -> u64 {
        self.resident + self.working()
    }

    pub fn streams(&self) -> bool {
        self.srs.contains(&Placement::Streamed) || self.matrices.contains(&Placement::Streamed)
    }

    /// Key bytes that cross to the device for every partition, with a full batch (L's, A's
    /// and B's passes shared by [`Plan::batch`] partitions).
    pub fn streamed_bytes(&self, shape: &PlanShape) -> u64 {
        let section = |i: usize| match i {
            0 => shape.section_bytes(0),
            _ => shape.section_bytes(i).div_ceil(self.batch as u64),
        };
        let srs = (0..5).filter(|&i| self.srs[i] == Placement::Streamed);
        let mats = (0..3).filter(|&i| self.matrices[i] == Placement::Streamed);
        srs.map(section).sum::<u64>() + mats.map(|i| shape.matrices[i]).sum::<u64>()
    }

    /// Device bytes a batch may keep its witnesses' compact bytes in ([`COMPACT_SHARE`]), at
    /// least what expanding one witness stages; 0 without batches.
    pub fn compact_room(&self, shape: &PlanShape) -> u64 {
        compact_room(shape, self.batch)
    }

    /// Whether L's, A's or B's bases stream (what a batch shares).
    pub fn streams_witness_sections(&self) -> bool {
        self.srs[1..].contains(&Placement::Streamed)
    }

    /// Points an MSM over SRS section `i` ([`Query::ALL`] order) takes at a time.
    pub fn section_chunk(&self, i: usize) -> usize {
        section_chunk(i, self.chunk, self.h_chunk)
    }

    /// MSM passes per partition.
    pub fn passes(&self, shape: &PlanShape) -> usize {
        (0..5).map(|i| self.section_passes(shape, i)).sum()
    }

    /// Passes of the MSM over SRS section `i`.
    fn section_passes(&self, shape: &PlanShape, i: usize) -> usize {
        shape.points[i].div_ceil(self.section_chunk(i))
    }

    /// The share of a partition's MSM time, by the cost model, that its passes' fixed costs
    /// make (G2 points counted twice).
    fn gaps(&self, shape: &PlanShape) -> f64 {
        let fixed = self.passes(shape) as f64 * PASS_S;
        let points: f64 = (0..5)
            .map(|i| curve_weight(i) * shape.points[i] as f64)
            .sum();
        fixed / (fixed + points * POINT_S)
    }

    /// The cost model's seconds of this plan beyond a resident one's: the bytes that cross, and
    /// each pass's fixed work and buckets (G2's counted twice).
    fn cost(&self, shape: &PlanShape) -> f64 {
        let passes: f64 = (0..5)
            .map(|i| {
                let total = shape.points[i];
                let buckets = pass_buckets(self.section_chunk(i).min(total), total) as f64;
                let pass = PASS_S + curve_weight(i) * buckets * BUCKET_S;
                self.section_passes(shape, i) as f64 * pass
            })
            .sum();
        self.streamed_bytes(shape) as f64 / PCIE_BYTES_PER_S + passes
    }
}

/// Overrides for checks of the streaming path at shapes an ordinary budget would keep resident.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanLimits {
    /// Most points an MSM takes at a time.
    pub max_chunk: Option<usize>,
    /// Lean, with every SRS section and matrix streamed, whatever the budget holds.
    pub stream_all: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "a device memory budget of {:.2} GiB cannot prove this shape: even streaming its whole key it needs {:.2} GiB",
        gib(*budget),
        gib(*minimum)
    )]
    TooSmall { budget: u64, minimum: u64 },
}

pub fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// The orders in which a lean plan makes parts resident, greedily; it keeps the cheaper result.
/// First those whose streaming hides least behind compute (a matrix pass is a few milliseconds
/// of SpMV; B in G2 is the most bytes per point of MSM work), H last (the longest MSM hides its
/// bases best). But a batch shares L's, A's and B's passes while H's bases cross for every
/// partition: so H right after the matrices too.
const RESIDENT_ORDERS: [[Part; 8]; 2] = [
    [
        Part::Matrix(2),
        Part::Matrix(1),
        Part::Matrix(0),
        Part::Srs(4),
        Part::Srs(3),
        Part::Srs(2),
        Part::Srs(1),
        Part::Srs(0),
    ],
    [
        Part::Matrix(2),
        Part::Matrix(1),
        Part::Matrix(0),
        Part::Srs(0),
        Part::Srs(4),
        Part::Srs(3),
        Part::Srs(2),
        Part::Srs(1),
    ],
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Srs(usize),
    Matrix(usize),
}

/// The plan for `shape` within `budget` bytes of device memory, with `workers` proving on the
/// device and at most `lanes` partitions at once.
pub fn choose(
    shape: &PlanShape,
    budget: u64,
    workers: usize,
    lanes: usize,
    limits: PlanLimits,
) -> Result<Plan, PlanError> {
    let chunks = candidate_chunks(shape, limits.max_chunk);
    let widen = |plan: Plan| widen_h(shape, plan, &chunks);
    if !limits.stream_all {
        let mut witnesses = vec![workers.max(1)];
        if workers > 1 {
            witnesses.push(1);
        }
        // Each witness count with the largest passes that fit; of those the fewest passes, and
        // on a tie the most witnesses (the next partition's uploads while this one proves):
        // fewer, larger passes gained more than a second witness (docs/gpu.md, "Every budget
        // with the batch-affine accumulation").
        let full = witnesses
            .iter()
            .filter_map(|&w| {
                let stage = HStage::Full { witnesses: w };
                chunks
                    .iter()
                    .map(|&chunk| build(shape, budget, stage, (chunk, chunk), [true; 8], 1, 1))
                    .find(|plan| plan.total() <= budget)
            })
            .map(widen)
            .min_by(|a, b| a.cost(shape).total_cmp(&b.cost(shape)));
        if let Some(plan) = full {
            return Ok(more_lanes(shape, plan, workers, lanes));
        }
    }
    // H's passes compete with the parts of the key for the room: larger ones may be worth
    // streaming a section a batch shares.
    let passes = chunks
        .iter()
        .filter(|&&c| c <= MAX_STREAM_CHUNK || limits.max_chunk.is_some())
        .flat_map(|&c| {
            chunks
                .iter()
                .filter(move |&&h| h >= c)
                .map(move |&h| (c, h))
        });
    passes
        .filter_map(|passes| lean(shape, budget, passes, limits.stream_all, workers))
        .min_by(|a, b| a.cost(shape).total_cmp(&b.cost(shape)))
        .map(widen)
        .ok_or_else(|| PlanError::TooSmall {
            budget,
            minimum: minimum(shape, limits),
        })
}

/// The smallest budget any plan proves `shape` in.
pub fn minimum(shape: &PlanShape, limits: PlanLimits) -> u64 {
    let smallest = *candidate_chunks(shape, limits.max_chunk)
        .last()
        .expect("at least one pass size");
    build(
        shape,
        u64::MAX,
        HStage::Lean,
        (smallest, smallest),
        [false; 8],
        1,
        1,
    )
    .total()
}

/// A full plan with every worker's witness on the device, proving up to `lanes` partitions at
/// once where the budget holds their working buffers with the same passes (more passes would
/// cost the time a lane gains) and where the passes' fixed costs leave gaps worth filling.
fn more_lanes(shape: &PlanShape, plan: Plan, workers: usize, lanes: usize) -> Plan {
    if plan.h_stage != (HStage::Full { witnesses: workers }) || plan.gaps(shape) < LANE_GAPS {
        return plan;
    }
    (2..=lanes.min(workers))
        .rev()
        .map(|lanes| {
            let passes = (plan.chunk, plan.h_chunk);
            build(
                shape,
                plan.budget,
                plan.h_stage,
                passes,
                [true; 8],
                1,
                lanes,
            )
        })
        .find(|p| p.total() <= p.budget)
        .unwrap_or(plan)
}

/// `plan` with H's passes as large as its budget holds.
fn widen_h(shape: &PlanShape, plan: Plan, chunks: &[usize]) -> Plan {
    let resident = std::array::from_fn(|i| {
        if i < 5 {
            plan.srs[i] == Placement::Resident
        } else {
            plan.matrices[i - 5] == Placement::Resident
        }
    });
    chunks
        .iter()
        .filter(|&&c| c > plan.chunk)
        .map(|&c| {
            build(
                shape,
                plan.budget,
                plan.h_stage,
                (plan.chunk, c),
                resident,
                plan.batch,
                plan.lanes,
            )
        })
        .find(|p| p.total() <= p.budget)
        .unwrap_or(plan)
}

/// What a point (or bucket) of SRS section `i` weighs in the cost model: G2's twice G1's.
fn curve_weight(i: usize) -> f64 {
    match Query::ALL[i] {
        Query::BG2 => 2.0,
        _ => 1.0,
    }
}

/// Points a pass over section `i` takes: H's own, and B in G2 half of the other sections' (its
/// points are twice as large, so its buffers are as large as theirs).
fn section_chunk(i: usize, chunk: usize, h_chunk: usize) -> usize {
    match Query::ALL[i] {
        Query::H => h_chunk,
        Query::BG2 => (chunk / 2).max(1),
        _ => chunk,
    }
}

/// Pass sizes from one pass for the largest MSM down to [`MIN_CHUNK`] (or `max_chunk`).
fn candidate_chunks(shape: &PlanShape, max_chunk: Option<usize>) -> Vec<usize> {
    let largest = shape.points.iter().copied().max().unwrap_or(1).max(1);
    let top = max_chunk
        .unwrap_or(usize::MAX)
        .min(largest.next_power_of_two());
    let bottom = MIN_CHUNK.min(top);
    std::iter::successors(Some(top), |&c| (c / 2 >= bottom).then_some(c / 2)).collect()
}

/// The cheapest lean plan with `passes` (the witness's MSMs' points a pass, H's), if even
/// streaming everything fits: for each batch of up to `workers` partitions, the one that keeps
/// the most of the key resident greedily ([`RESIDENT_ORDERS`]) beside the batch's witnesses; a
/// batch only where L, A or B then streams (a larger batch can be worth more than a resident
/// matrix).
fn lean(
    shape: &PlanShape,
    budget: u64,
    passes: (usize, usize),
    stream_all: bool,
    workers: usize,
) -> Option<Plan> {
    let lean = |resident, batch| build(shape, budget, HStage::Lean, passes, resident, batch, 1);
    let greedy = |batch: usize, order: &[Part; 8]| -> Option<Plan> {
        let mut resident = [false; 8];
        let mut plan = lean(resident, batch);
        if plan.total() > budget {
            return None;
        }
        if !stream_all {
            for &part in order {
                let i = index(part);
                resident[i] = true;
                let tried = lean(resident, batch);
                if tried.total() <= budget {
                    plan = tried;
                } else {
                    resident[i] = false;
                }
            }
        }
        (batch == 1 || plan.streams_witness_sections()).then_some(plan)
    };
    let cheaper = |best: Option<Plan>, plan: Plan| match best {
        Some(b) if b.cost(shape) <= plan.cost(shape) => Some(b),
        _ => Some(plan),
    };
    (1..=batch_limit(workers))
        .map_while(|batch| {
            let plans = RESIDENT_ORDERS.iter().filter_map(|o| greedy(batch, o));
            plans.fold(None, cheaper)
        })
        .fold(None, cheaper)
}

/// [`Plan::compact_room`] of a batch of `batch`.
fn compact_room(shape: &PlanShape, batch: usize) -> u64 {
    match batch {
        1 => 0,
        k => expand_staging(shape.vars()).max(k as u64 * shape.vars() as u64 * FR / COMPACT_SHARE),
    }
}

/// Index of a part in a plan's residency flags: the SRS sections, then the matrices.
fn index(part: Part) -> usize {
    match part {
        Part::Srs(i) => i,
        Part::Matrix(i) => 5 + i,
    }
}

/// A plan and its phases' bytes, for residency flags in [`index`] order, MSM passes of
/// `chunk` points and H's of `h_chunk`, `batch` witnesses expanded for L, A and B, and `lanes`
/// partitions at once (a full plan's).
fn build(
    shape: &PlanShape,
    budget: u64,
    h_stage: HStage,
    (chunk, h_chunk): (usize, usize),
    resident: [bool; 8],
    batch: usize,
    lanes: usize,
) -> Plan {
    let place = |r: bool| {
        if r {
            Placement::Resident
        } else {
            Placement::Streamed
        }
    };
    let srs: [Placement; 5] = std::array::from_fn(|i| place(resident[i]));
    let matrices: [Placement; 3] = std::array::from_fn(|i| place(resident[5 + i]));
    let resident_bytes = shape.fixed
        + (0..5)
            .filter(|&i| resident[i])
            .map(|i| shape.section_bytes(i))
            .sum::<u64>()
        + (0..3)
            .filter(|&i| resident[5 + i])
            .map(|i| shape.matrices[i])
            .sum::<u64>();
    let (w, v, t) = (
        shape.vars() as u64 * FR,
        shape.m as u64 * FR,
        shape.m as u64 * FR,
    );
    let e = expand_staging(shape.vars());
    // A streamed matrix's passes: two sets of buffers of at most MATRIX_CHUNK bytes of entries
    // and half that of row offsets (gpu/stream.rs cuts passes so), or one set holding a matrix
    // that fits in one pass.
    let m_s = (0..3)
        .filter(|&i| matrices[i] == Placement::Streamed)
        .map(|i| (3 * MATRIX_CHUNK).min(2 * shape.matrices[i]))
        .max()
        .unwrap_or(0);
    // An MSM pass over sections `of`: the largest one's sort and buckets, the A and B scalars
    // gathered for it, and a streamed section's two buffers of a pass (one when a single pass
    // covers it).
    let pass = |of: std::ops::Range<usize>| {
        of.map(|i| {
            let chunk = section_chunk(i, chunk, h_chunk);
            let n = chunk.min(shape.points[i]);
            let q = Query::ALL[i];
            let gathered = if matches!(q, Query::A | Query::BG1 | Query::BG2) {
                n as u64 * FR
            } else {
                0
            };
            let buffers = match srs[i] {
                Placement::Resident => 0,
                Placement::Streamed if shape.points[i] > chunk => 2,
                Placement::Streamed => 1,
            };
            msm_scratch(n, shape.points[i], q.point_bytes() as u64)
                + gathered
                + buffers * n as u64 * q.point_bytes() as u64
        })
        .max()
        .unwrap_or(0)
    };
    // H's MSM comes first and frees H before the witness is needed again (backend/mod.rs).
    let (h_pass, others) = (pass(0..1), pass(1..5));
    let phase = |name, bytes| Phase { name, bytes };
    let phases = match h_stage {
        HStage::Full { witnesses } => {
            // Each lane its own twiddles and vectors; the other lanes counted at their largest.
            let own = [3 * v + m_s, v + h_pass, others].map(|b| b + t);
            let base = witnesses as u64 * (w + e)
                + (lanes as u64 - 1) * own.iter().max().expect("three phases");
            vec![
                phase("witnesses, A·w, B·w, C·w, H", base + own[0]),
                phase("witnesses, H, its MSM pass", base + own[1]),
                phase("witnesses, MSM pass", base + own[2]),
            ]
        }
        HStage::Lean => vec![
            phase("witness expanded", w + e),
            phase("A·w, B·w", w + 2 * v + m_s),
            phase("their transforms", 2 * v + t),
            phase("C·w", 2 * v + w + m_s.max(e)),
            phase("H", 2 * v + t),
            phase("H, its MSM pass", v + h_pass),
            // One partition's witness expanded whole; a batch's made a window at a time, from
            // their compact bytes on the device.
            match batch {
                1 => phase("witness, MSM pass", w + others.max(e)),
                k => {
                    let window = (WINDOW_SPAN * chunk).min(shape.vars()) as u64 * FR;
                    let compact = compact_room(shape, k);
                    phase("witness windows, MSM pass", window + compact + others)
                }
            },
        ],
    };
    Plan {
        budget,
        h_stage,
        srs,
        matrices,
        chunk,
        h_chunk,
        batch,
        lanes,
        resident: resident_bytes,
        phases,
    }
}

#[cfg(test)]
mod tests;
