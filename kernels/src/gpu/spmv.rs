//! The sparse products that turn a witness into the A/B/C evaluations, and the gathers that pack
//! an MSM's scalars, on device-resident data.

use super::{cfg, grid, DevBuf, Gpu, Result};

/// One constraint matrix in CSR form on the device.
pub struct DeviceMatrix {
    pub row_ptr: DevBuf,
    pub cols: DevBuf,
    pub coeffs: DevBuf,
    pub rows: usize,
}

impl Gpu {
    /// `out[r] = Σ table[coeff[k]]·w[col[k]]` for each row, then zeros up to `out`'s length
    /// (`n_out` elements, the padded evaluation domain).
    pub fn spmv(
        &self,
        m: &DeviceMatrix,
        table: &DevBuf,
        w: &DevBuf,
        out: &DevBuf,
        n_out: usize,
    ) -> Result<()> {
        let s = &self.stream;
        launch!(self, self.f.spmv_csr, cfg(grid(n_out as u64, 256).min(1 << 16), 256, 0);
            m.row_ptr.ptr(s), m.cols.ptr(s), m.coeffs.ptr(s), table.ptr(s), w.ptr(s), out.ptr(s),
            m.rows as u32, n_out as u64)
    }

    /// `out[i] = w[idx[i]]` for the `n` indices of `idx`.
    pub fn gather(&self, w: &DevBuf, idx: &DevBuf, n: usize) -> Result<DevBuf> {
        let out = self.alloc(n * 32)?;
        let s = &self.stream;
        launch!(self, self.f.gather_fr, cfg(grid(n as u64, 256).min(1 << 16), 256, 0);
            w.ptr(s), idx.ptr(s), out.ptr(s), n as u64)?;
        Ok(out)
    }
}
