//! A batch's (or a lone partition's) L, A, B in G1 and B in G2 MSMs, every pass of bases
//! serving each witness of it: witnesses expanded whole on the device, or made a window at a
//! time from host memory (a batch's: gpu/window.rs).

use std::borrow::Cow;
use std::ops::Range;
use std::time::Instant;

use cuzk_prover::backend::BackendError;

use super::batch::WitnessSums;
use super::{CudaBackend, CudaKey};
use crate::gpu::{compact_bytes, jac_g1, jac_g2, Gpu, Scalars, WindowSource};
use crate::plan::{expand_staging, fixed_passes, Passes};

/// The witnesses whose sums are made together.
pub(super) enum Witnesses<'a> {
    /// Expanded on the device: their addresses.
    Expanded(&'a [u64]),
    /// Made a window at a time; the passes and windows are the key's.
    Windows(&'a [WindowSource<'a>]),
}

impl CudaBackend {
    /// The L, A and B MSMs of `witnesses`, every pass of bases serving them all.
    pub(super) fn witness_sums(
        &self,
        g: &Gpu,
        key: &CudaKey,
        witnesses: Witnesses<'_>,
    ) -> Result<Vec<WitnessSums>, BackendError> {
        let info = &key.info;
        let windows = match witnesses {
            Witnesses::Windows(_) => Some(key.windows.as_deref().ok_or_else(|| {
                BackendError::Device("a batch of windows for a key that batches nothing".into())
            })?),
            Witnesses::Expanded(_) => None,
        };
        let mut bufs = match (&witnesses, windows) {
            (Witnesses::Windows(sources), Some(passes)) => {
                let (positions, staged) = window_room(key, sources, passes);
                Some(g.window_bufs(positions, staged)?)
            }
            _ => None,
        };
        // L reads the aux in order; A and B gather their variables.
        let n = [info.aux, key.a_vars.1, key.b_vars.1, key.b_vars.1];
        let indices = [
            None,
            Some(g.ptr_at(&key.a_vars.0, 0)),
            Some(g.ptr_at(&key.b_vars.0, 0)),
            Some(g.ptr_at(&key.b_vars.0, 0)),
        ];
        let inputs = (info.inputs * 32) as u64;
        let section = |k: usize| -> (Vec<Scalars<'_>>, Cow<'_, [Range<usize>]>) {
            match &witnesses {
                Witnesses::Windows(sources) => {
                    let p = &windows.expect("a batch of windows has the key's passes")[k];
                    let scalars = sources
                        .iter()
                        .map(|from| Scalars::Window {
                            from,
                            windows: &p.windows,
                            indices: indices[k],
                        })
                        .collect();
                    (scalars, Cow::Borrowed(p.points.as_slice()))
                }
                Witnesses::Expanded(at) => {
                    let scalars = at
                        .iter()
                        .map(|&witness| match indices[k] {
                            None => Scalars::At(witness + inputs),
                            Some(indices) => Scalars::Gather { witness, indices },
                        })
                        .collect();
                    let chunk = key.plan.section_chunk(k + 1);
                    (scalars, Cow::Owned(fixed_passes(n[k], chunk)))
                }
            }
        };
        let s = |k: usize| key.srs[k + 1].bases();
        // Each MSM returns its points to the host, so the clocks between them are its time.
        let mut clock = Instant::now();
        let mut lap = || {
            let now = Instant::now();
            let ms = (now - clock).as_secs_f64() * 1e3;
            clock = now;
            ms
        };
        let mut g1: [Vec<_>; 3] = Default::default();
        let mut ms = [0.0; 4];
        for k in 0..3 {
            let (scalars, passes) = section(k);
            g1[k] = g.msm_batch(s(k), &scalars, n[k], &passes, bufs.as_mut(), jac_g1)?;
            ms[k] = lap();
        }
        let (scalars, passes) = section(3);
        let b_g2 = g.msm_batch(s(3), &scalars, n[3], &passes, bufs.as_mut(), jac_g2)?;
        ms[3] = lap();
        let [l_ms, a_ms, b_g1_ms, b_g2_ms] = ms;
        let batch = b_g2.len();
        tracing::debug!(device = %g.name(), batch, windows = windows.is_some(), l_ms, a_ms,
            b_g1_ms, b_g2_ms, "MSM times");
        let [l, a, b_g1] = g1;
        Ok((0..batch)
            .map(|i| WitnessSums {
                l: l[i],
                a: a[i],
                b_g1: b_g1[i],
                b_g2: b_g2[i],
            })
            .collect())
    }
}

/// The positions of the widest window of `passes`, and the staged bytes the compact sources
/// not on the device need for a window at a time: what one window's chunks take, at most what
/// the plan counts for expanding a witness's chunks (the window is then made a few chunks at a
/// time).
fn window_room(key: &CudaKey, sources: &[WindowSource], passes: &[Passes; 4]) -> (usize, usize) {
    let positions = passes.iter().map(Passes::widest).max().unwrap_or(0);
    let inputs = key.info.inputs;
    let staged = sources
        .iter()
        .filter_map(|s| match s {
            WindowSource::Compact {
                aux,
                on_device: None,
                ..
            } => Some(*aux),
            _ => None,
        })
        .flat_map(|aux| {
            passes.iter().flat_map(move |p| {
                p.windows.iter().map(move |w| {
                    let from = w.start.max(inputs) - inputs;
                    compact_bytes(aux, from..w.end.saturating_sub(inputs).max(from))
                })
            })
        })
        .max()
        .unwrap_or(0);
    let cap = expand_staging(key.shape.vars());
    (positions, staged.min(cap) as usize)
}
