//! NTTs over Fr and the H pipeline on device-resident vectors.

use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::{as_bytes, as_bytes_mut, cfg, grid, DevBuf, Gpu, Result, Twiddles};
use crate::error::CudaError;

/// Table lo[j] = base^j (j < 4096), hi[j] = scale · base^(4096 j) (j < ceil(n / 4096)).
fn pow_tables(base: Scalar, scale: Scalar, n: u64) -> (Vec<Scalar>, Vec<Scalar>) {
    let mut lo = Vec::with_capacity(4096);
    let mut acc = Scalar::ONE;
    for _ in 0..4096 {
        lo.push(acc);
        acc *= base;
    }
    let step = acc; // base^4096
    let nh = n.div_ceil(4096).max(1) as usize;
    let mut hi = Vec::with_capacity(nh);
    let mut acc = scale;
    for _ in 0..nh {
        hi.push(acc);
        acc *= step;
    }
    (lo, hi)
}

impl Gpu {
    fn twiddles(&self, logn: u32) -> Result<std::sync::MutexGuard<'_, Option<Twiddles>>> {
        let mut tw = self.tw.lock().unwrap();
        if tw.as_ref().is_none_or(|t| t.log < logn) {
            *tw = None;
            let log = logn.max(1);
            let half = 1u64 << (log - 1);
            let w = cuzk_prover::cpu::omega(log);
            let make = |base: Scalar| -> Result<DevBuf> {
                let out = self.alloc((half * 32) as usize)?;
                let (lo, hi) = pow_tables(base, Scalar::ONE, half);
                let dlo = self.upload(as_bytes(&lo))?;
                let dhi = self.upload(as_bytes(&hi))?;
                let s = &self.stream;
                launch!(self, self.f.fr_powers, cfg(grid(half, 256).min(1 << 16), 256, 0);
                    out.ptr(s), half, dlo.ptr(s), dhi.ptr(s))?;
                self.stream.synchronize()?;
                Ok(out)
            };
            let fwd = make(w)?;
            let inv = make(w.invert().unwrap())?;
            *tw = Some(Twiddles { log, fwd, inv });
        }
        Ok(tw)
    }

    /// One group of stages on every block of the vector at `x` (kernels/cuda/ntt.cuh `ntt_pass`);
    /// `mul`: device tables (lo, hi) of the factors applied after the DIF stages, and the
    /// bit-reversal width of their index.
    fn pass(
        &self,
        x: u64,
        logn: u32,
        t: &Twiddles,
        (s0, k, lb): Group,
        stages: Stages,
        mul: Option<(&DevBuf, &DevBuf, u32)>,
    ) -> Result<()> {
        let s = &self.stream;
        let e = 1u64 << (k + lb);
        let (mode, tw_dit) = match stages {
            Stages::InverseDif => (NTT_DIF, &t.fwd),
            Stages::Dit { inverse } => (NTT_DIT, if inverse { &t.inv } else { &t.fwd }),
            Stages::InverseDifForwardDit => (NTT_DIF | NTT_DIT, &t.fwd),
        };
        let (lo, hi, rev) = mul.map_or((0, 0, 0), |(lo, hi, rev)| (lo.ptr(s), hi.ptr(s), rev));
        launch!(self, self.f.ntt_pass, cfg(((1u64 << logn) / e) as u32, 256, (e * 32) as u32);
            x, t.inv.ptr(s), tw_dit.ptr(s), t.log, s0, k, lb, mode, lo, hi, rev)
    }

    /// In-place natural-order (inverse) transform without the 1/n factor.
    fn ntt_core(&self, x: u64, logn: u32, inverse: bool) -> Result<()> {
        if logn == 0 {
            return Ok(());
        }
        let n = 1u64 << logn;
        let tw = self.twiddles(logn)?;
        let t = tw.as_ref().unwrap();
        launch!(self, self.f.ntt_bitrev, cfg(grid(n, 256).min(1 << 16), 256, 0); x, logn)?;
        for g in stage_groups(logn) {
            self.pass(x, logn, t, g, Stages::Dit { inverse }, None)?;
        }
        Ok(())
    }

    fn mul_powers(&self, x: u64, n: u64, base: Scalar, scale: Scalar) -> Result<(DevBuf, DevBuf)> {
        let (lo, hi) = pow_tables(base, scale, n);
        let dlo = self.upload(as_bytes(&lo))?;
        let dhi = self.upload(as_bytes(&hi))?;
        let s = &self.stream;
        launch!(self, self.f.fr_mul_powers, cfg(grid(n, 256).min(1 << 16), 256, 0);
            x, n, dlo.ptr(s), dhi.ptr(s))?;
        // keep the tables alive until the kernel has run
        Ok((dlo, dhi))
    }

    /// Runs one of the four transforms on a power-of-two vector held on the device.
    pub fn transform_device(&self, x: &DevBuf, logn: u32, kind: NttKind) -> Result<()> {
        let n = 1u64 << logn;
        let p = x.ptr(&self.stream);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let n_inv = Scalar::from(n).invert().unwrap();
        // Tables the launches read stay alive until the stream is synchronised below.
        let _keep = match kind {
            NttKind::Forward => {
                self.ntt_core(p, logn, false)?;
                None
            }
            NttKind::Inverse => {
                self.ntt_core(p, logn, true)?;
                let c = self.upload(as_bytes(&[n_inv]))?;
                launch!(self, self.f.fr_scale, cfg(grid(n, 256).min(1 << 16), 256, 0);
                    p, n, c.ptr(&self.stream))?;
                Some((c, None))
            }
            NttKind::Coset => {
                let t = self.mul_powers(p, n, g, Scalar::ONE)?;
                self.ntt_core(p, logn, false)?;
                Some((t.0, Some(t.1)))
            }
            NttKind::InverseCoset => {
                self.ntt_core(p, logn, true)?;
                let t = self.mul_powers(p, n, g.invert().unwrap(), n_inv)?;
                Some((t.0, Some(t.1)))
            }
        };
        self.stream.synchronize()?;
        Ok(())
    }

    /// Host-to-host transform (upload, transform, download); `v.len()` must be a power of two.
    pub fn transform(&self, v: &mut [Scalar], kind: NttKind) -> Result<()> {
        if !v.len().is_power_of_two() {
            return Err(CudaError::Shape(format!(
                "NTT length {} is not a power of two",
                v.len()
            )));
        }
        let logn = v.len().trailing_zeros();
        let x = self.upload(as_bytes(v))?;
        self.transform_device(&x, logn, kind)?;
        self.download_into(&x, 0, as_bytes_mut(v))
    }

    /// The H polynomial on device-resident evaluations: `abc` hold `m = 2^logm` values each
    /// (the constraint evaluations, zero-padded); the result is in the first buffer, whose
    /// coefficients `0..m-1` are H (the top one is zero for a satisfied circuit). The same
    /// coefficients as bellperson's pipeline with one transform fewer: the inverse coset
    /// transform is linear and undoes C's coset transform, so C is only interpolated
    /// (prover/src/ntt.rs `compute_h`).
    pub fn h_device(&self, abc: [DevBuf; 3], logm: u32) -> Result<DevBuf> {
        let [a, b, c] = abc;
        check_domain(&c, logm)?;
        // C's interpolation first, as it always was: the product's passes then follow it.
        let t = HTables::new(self, logm)?;
        self.inverse_dif(c.ptr(&self.stream), logm, None)?;
        self.coset_product_with(&a, b, logm, &t)?;
        self.finish(&a, c, logm, &t, true)?;
        Ok(a)
    }

    /// `a` becomes A·B on the coset: `a` and `b` hold the evaluations A·w and B·w (`m =
    /// 2^logm` values each, zero-padded); `b` is used up. With [`Gpu::interpolate_minus`] after
    /// it, the H of [`Gpu::h_device`], while never holding three vectors and the twiddles.
    pub fn coset_product(&self, a: &DevBuf, b: DevBuf, logm: u32) -> Result<()> {
        let t = HTables::new(self, logm)?;
        self.coset_product_with(a, b, logm, &t)
    }

    /// H from `a` (A·B on the coset, [`Gpu::coset_product`]) and `c` (C·w, used up), into `a`.
    pub fn interpolate_minus(&self, a: &DevBuf, c: DevBuf, logm: u32) -> Result<()> {
        let t = HTables::new(self, logm)?;
        self.finish(a, c, logm, &t, false)
    }

    /// Drops the cached twiddles (the next transform makes them again): room for a vector.
    pub fn release_twiddles(&self) {
        *self.tw.lock().unwrap() = None;
    }

    /// The inverse transform's DIF passes over the vector at `p`, top group first; the lowest
    /// group applies `mul`'s factors.
    fn inverse_dif(&self, p: u64, logm: u32, mul: Option<(&DevBuf, &DevBuf, u32)>) -> Result<()> {
        let tw = self.twiddles(logm)?;
        let t = tw.as_ref().unwrap();
        let groups = stage_groups(logm);
        let (low, rest) = groups.split_first().expect("at least one group");
        for &g in rest.iter().rev() {
            self.pass(p, logm, t, g, Stages::InverseDif, None)?;
        }
        self.pass(p, logm, t, *low, Stages::InverseDif, mul)
    }

    fn coset_product_with(&self, a: &DevBuf, b: DevBuf, logm: u32, h: &HTables) -> Result<()> {
        check_domain(a, logm)?;
        check_domain(&b, logm)?;
        let s = &self.stream;
        let tw = self.twiddles(logm)?;
        let t = tw.as_ref().unwrap();
        // Coefficients stay in bit-reversed order between the inverse transform (DIF stages)
        // and the forward one (DIT): no permutation until the end. Both transforms' groups of
        // the lowest stages, and the coset factors between them, are one pass over the vector.
        let groups = stage_groups(logm);
        let (low, rest) = groups.split_first().expect("at least one group");
        let (pa, pb) = (a.ptr(s), b.ptr(s));
        for p in [pa, pb] {
            for &g in rest.iter().rev() {
                self.pass(p, logm, t, g, Stages::InverseDif, None)?;
            }
            let to = Some((&h.tabs[0], &h.tabs[1], logm));
            self.pass(p, logm, t, *low, Stages::InverseDifForwardDit, to)?;
            for &g in rest {
                self.pass(p, logm, t, g, Stages::Dit { inverse: false }, None)?;
            }
        }
        launch!(self, self.f.h_product, cfg(h.grid, 256, 0); pa, pb, 1u64 << logm)?;
        // b must outlive the kernels reading it.
        self.stream.synchronize()?;
        drop(b);
        Ok(())
    }

    /// (A·B on the coset, interpolated and shifted back) − C, both over Z's value on the coset,
    /// into `a`; `c` is interpolated here unless `c_done`.
    fn finish(&self, a: &DevBuf, c: DevBuf, logm: u32, h: &HTables, c_done: bool) -> Result<()> {
        check_domain(&c, logm)?;
        let s = &self.stream;
        if !c_done {
            self.inverse_dif(c.ptr(s), logm, None)?;
        }
        self.inverse_dif(a.ptr(s), logm, Some((&h.tabs[2], &h.tabs[3], logm)))?;
        launch!(self, self.f.h_finish, cfg(h.grid, 256, 0); a.ptr(s), c.ptr(s), logm, h.k.ptr(s))?;
        // The tables and c must outlive the kernels reading them.
        self.stream.synchronize()?;
        drop(c);
        Ok(())
    }

    /// Host-to-host H (the kernels' check against the CPU): uploads `a`, `b`, `c` (length n,
    /// padded on the device) and returns `m - 1` coefficients.
    pub fn compute_h(&self, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Result<Vec<Scalar>> {
        let n = a.len();
        if b.len() != n || c.len() != n {
            return Err(CudaError::Shape(format!(
                "constraint vectors differ in length: a={} b={} c={}",
                n,
                b.len(),
                c.len()
            )));
        }
        let (m, logm) =
            cuzk_prover::cpu::domain_size(n).map_err(|e| CudaError::Shape(e.to_string()))?;
        let up = |v: &[Scalar]| self.upload_padded(v, m);
        let h = self.h_device([up(a)?, up(b)?, up(c)?], logm)?;
        let mut out = vec![Scalar::ZERO; m - 1];
        self.download_into(&h, 0, as_bytes_mut(&mut out))?;
        Ok(out)
    }
}

/// The H pipeline's device tables: the factors into the coset (g^i/m) and back from it
/// (g^-i/(m·Z(g))), and 1/(m·Z(g)).
struct HTables {
    tabs: Vec<DevBuf>,
    k: DevBuf,
    grid: u32,
}

impl HTables {
    fn new(gpu: &Gpu, logm: u32) -> Result<Self> {
        let m64 = 1u64 << logm;
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let m_inv = Scalar::from(m64).invert().unwrap();
        let z_inv = (g.pow_vartime([m64]) - Scalar::ONE).invert().unwrap();
        let (to_lo, to_hi) = pow_tables(g, m_inv, m64);
        let (from_lo, from_hi) = pow_tables(g.invert().unwrap(), m_inv * z_inv, m64);
        let tabs = [&to_lo, &to_hi, &from_lo, &from_hi]
            .iter()
            .map(|t| gpu.upload(as_bytes(t)))
            .collect::<Result<_>>()?;
        Ok(HTables {
            tabs,
            k: gpu.upload(as_bytes(&[m_inv * z_inv]))?,
            grid: grid(m64, 256).min(1 << 16),
        })
    }
}

fn check_domain(v: &DevBuf, logm: u32) -> Result<()> {
    if v.bytes() < (1usize << logm) * 32 {
        return Err(CudaError::Shape(format!(
            "H needs 2^{logm} evaluations per vector"
        )));
    }
    Ok(())
}

/// A group of NTT stages done in one pass: (first stage, stages, low "column" bits of a block).
type Group = (u32, u32, u32);

/// `ntt_pass` modes (kernels/cuda/ntt.cuh).
const NTT_DIF: u32 = 1;
const NTT_DIT: u32 = 2;

/// What one pass does to its group: DIF stages take natural order to bit-reversed, DIT stages
/// bit-reversed to natural.
#[derive(Clone, Copy)]
enum Stages {
    /// The inverse transform's DIF stages.
    InverseDif,
    /// DIT stages of the forward or the inverse transform.
    Dit { inverse: bool },
    /// The inverse transform's DIF stages, then (after the factors) the forward one's DIT.
    InverseDifForwardDit,
}

/// Stages per pass: a block holds 2^10 elements (32 KiB of shared memory). The first group is
/// the lowest 10 stages; the rest are split as evenly as possible into groups of at most 7,
/// each block 2^(10-k) consecutive columns wide. A short last group (2^27: 10 + 7 + 7 + 3) left
/// most threads idle and cost as much as a full one (docs/gpu-runs.md, "The 2^27 kernels without
/// parameters").
fn stage_groups(logn: u32) -> Vec<Group> {
    const BLOCK_LOG: u32 = 10;
    let first = logn.min(BLOCK_LOG);
    let rest = logn - first;
    let passes = rest.div_ceil(7);
    let mut groups = vec![(0, first, 0)];
    let mut s0 = first;
    for i in 0..passes {
        let k = rest / passes + u32::from(i < rest % passes);
        groups.push((s0, k, BLOCK_LOG - k));
        s0 += k;
    }
    groups
}

/// Which transform `transform` runs (bellperson's fft / ifft / coset_fft / icoset_fft).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NttKind {
    Forward,
    Inverse,
    Coset,
    InverseCoset,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_groups_cover_every_stage_in_full_blocks() {
        for logn in 1..=28 {
            let groups = stage_groups(logn);
            let mut next = 0;
            for &(s0, k, lb) in &groups {
                assert_eq!(s0, next, "2^{logn}: {groups:?}");
                assert!(k >= 1 && lb <= s0, "2^{logn}: {groups:?}");
                next += k;
                if logn >= 10 {
                    assert_eq!(k + lb, 10, "2^{logn}: {groups:?}");
                }
            }
            assert_eq!(next, logn);
            let ks: Vec<u32> = groups[1..].iter().map(|g| g.1).collect();
            assert!(ks.iter().all(|&k| k <= 7));
            assert!(ks.iter().max().unwrap_or(&0) - ks.iter().min().unwrap_or(&0) <= 1);
        }
        assert_eq!(
            stage_groups(27),
            vec![(0, 10, 0), (10, 6, 4), (16, 6, 4), (22, 5, 5)]
        );
    }
}
