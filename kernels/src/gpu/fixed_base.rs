//! Fixed-base multiplication of the group generators on the device: the query points of a
//! generated parameter set.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::Group;
use rayon::prelude::*;

use super::{as_bytes, as_bytes_mut, cfg, grid, Curve, DevBuf, Gpu, Result};

/// Window width: 16 windows of 2^16 points per table (100 MB in G1, 200 MB in G2).
const WINDOW: u32 = 16;
const WINDOWS: u32 = 16;
/// Scalars per launch: bounds the device scratch (~1.6 GB for G2).
const CHUNK: usize = 1 << 22;
/// Points per inversion in the affine conversion.
const PER_INVERSION: u32 = 64;

/// The generators' window tables, built on first use.
pub(super) struct Tables {
    g1: DevBuf,
    g2: DevBuf,
}

/// `table[w · 2^WINDOW + d] = d · 2^(WINDOW·w) · base`, affine; windows built in parallel.
fn table<P, A>(base: P, to_affine: fn(&[P]) -> Vec<A>) -> Vec<A>
where
    P: Group + Send + Sync,
    A: Send,
{
    let mut bases = vec![base];
    for _ in 1..WINDOWS {
        let mut b = *bases.last().expect("one base");
        for _ in 0..WINDOW {
            b = b.double();
        }
        bases.push(b);
    }
    bases
        .par_iter()
        .flat_map_iter(|b| {
            let mut row = Vec::with_capacity(1 << WINDOW);
            let mut acc = P::identity();
            for _ in 0..1u32 << WINDOW {
                row.push(acc);
                acc += b;
            }
            to_affine(&row)
        })
        .collect()
}

impl Gpu {
    fn with_tables<R>(&self, f: impl FnOnce(&Tables) -> Result<R>) -> Result<R> {
        let mut t = self.fb.lock().unwrap_or_else(|e| e.into_inner());
        if t.is_none() {
            let g1 = table(G1Projective::generator(), cuzk_prover::setup::g1_to_affine);
            let g2 = table(G2Projective::generator(), cuzk_prover::setup::g2_to_affine);
            *t = Some(Tables {
                g1: self.upload(as_bytes(&g1))?,
                g2: self.upload(as_bytes(&g2))?,
            });
        }
        f(t.as_ref().expect("built above"))
    }

    /// `[s]G` for each scalar in chunks: affine (blst layout), or with `encoded` in
    /// bellperson's uncompressed encoding (the same size), which the parameter writer writes as
    /// it is.
    fn fixed_base(
        &self,
        curve: Curve,
        scalars: &[Scalar],
        encoded: bool,
        out: &mut [u8],
    ) -> Result<()> {
        let ab = curve.affine_bytes();
        let s = &self.stream;
        let (points, to_affine, encode) = match curve {
            Curve::G1 => (
                &self.f.fixed_base_g1,
                &self.f.to_affine_g1,
                &self.f.encode_uncompressed_g1,
            ),
            Curve::G2 => (
                &self.f.fixed_base_g2,
                &self.f.to_affine_g2,
                &self.f.encode_uncompressed_g2,
            ),
        };
        self.with_tables(|tables| {
            let table = match curve {
                Curve::G1 => &tables.g1,
                Curve::G2 => &tables.g2,
            };
            for (chunk, out) in scalars.chunks(CHUNK).zip(out.chunks_mut(CHUNK * ab)) {
                let n = chunk.len() as u64;
                let d = self.upload_concat(&[chunk])?;
                let xyzz = self.alloc(chunk.len() * 2 * ab)?;
                launch!(self, points, cfg(grid(n, 128).min(1 << 16), 128, 0);
                    table.ptr(s), d.ptr(s), n, WINDOW, WINDOWS, xyzz.ptr(s))?;
                let scratch = self.alloc(chunk.len() * ab / 2)?;
                let affine = self.alloc(chunk.len() * ab)?;
                let threads = n.div_ceil(PER_INVERSION as u64);
                launch!(self, to_affine, cfg(grid(threads, 128), 128, 0);
                    xyzz.ptr(s), n, PER_INVERSION, scratch.ptr(s), affine.ptr(s))?;
                if encoded {
                    // The XYZZ buffer is free again and twice the size needed.
                    launch!(self, encode, cfg(grid(n, 128).min(1 << 16), 128, 0);
                        affine.ptr(s), n, xyzz.ptr(s))?;
                    self.download_into(&xyzz, 0, out)?;
                } else {
                    self.download_into(&affine, 0, out)?;
                }
            }
            Ok(())
        })
    }

    pub fn fixed_base_g1(&self, scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
        let mut out = vec![G1Affine::default(); scalars.len()];
        self.fixed_base(Curve::G1, scalars, false, as_bytes_mut(&mut out))?;
        Ok(out)
    }

    pub fn fixed_base_g2(&self, scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
        let mut out = vec![G2Affine::default(); scalars.len()];
        self.fixed_base(Curve::G2, scalars, false, as_bytes_mut(&mut out))?;
        Ok(out)
    }

    /// [`Self::fixed_base_g1`] or `_g2` in bellperson's uncompressed encoding, into `out`
    /// (resized; a buffer reused from chunk to chunk is neither allocated nor faulted in again).
    pub fn fixed_base_uncompressed(
        &self,
        curve: Curve,
        scalars: &[Scalar],
        out: &mut Vec<u8>,
    ) -> Result<()> {
        out.resize(scalars.len() * curve.affine_bytes(), 0);
        self.fixed_base(curve, scalars, true, out)
    }
}
