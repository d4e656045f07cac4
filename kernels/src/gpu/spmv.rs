//! The sparse products that turn a witness into the A/B/C evaluations, and the gathers that pack
//! an MSM's scalars, on device-resident data.

use super::{cfg, grid, DevBuf, Gpu, Result};

/// Rows with at least this many entries are summed by a warp each (`spmv_long_rows`).
pub const LONG_ROW: u32 = 32;

/// One constraint matrix in CSR form on the device.
pub struct DeviceMatrix {
    pub row_ptr: DevBuf,
    pub cols: DevBuf,
    pub coeffs: DevBuf,
    pub rows: usize,
    /// The indices of the rows of [`LONG_ROW`] entries or more.
    pub long_rows: DevBuf,
    pub n_long: usize,
}

/// The rows of `row_ptr` (CSR offsets) with [`LONG_ROW`] entries or more.
pub fn long_rows(row_ptr: &[u32]) -> Vec<u32> {
    (0..row_ptr.len().saturating_sub(1))
        .filter(|&r| row_ptr[r + 1] - row_ptr[r] >= LONG_ROW)
        .map(|r| r as u32)
        .collect()
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
            m.rows as u32, n_out as u64, LONG_ROW)?;
        if m.n_long == 0 {
            return Ok(());
        }
        launch!(self, self.f.spmv_long_rows, cfg(grid(m.n_long as u64 * 32, 256).min(1 << 16), 256, 0);
            m.row_ptr.ptr(s), m.cols.ptr(s), m.coeffs.ptr(s), table.ptr(s), w.ptr(s), out.ptr(s),
            m.long_rows.ptr(s), m.n_long as u32)
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
