//! The canonical byte form of [`ShapeMatrices`], which is both their file format and what their
//! hash covers:
//!
//! ```text
//! magic "CUZKR1CS", version u16 LE
//! inputs, aux, rows, coefficients, nnz(A), nnz(B), nnz(C): u64 LE each
//! coefficients: 32-byte canonical little-endian scalars
//! for A, B, C: row_ptr (rows + 1 × u32 LE), cols (nnz × u32 LE), coefficient indices (nnz × u32 LE)
//! ```
//!
//! A file is that form followed by its 32-byte blake3 hash. Reading checks the length the counts
//! imply before allocating, the structure, and the hash: a corrupt or truncated file is an error,
//! never a wrong matrix.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use blstrs::Scalar;
use ff::PrimeField;

use super::{Matrix, ShapeMatrices};

const MAGIC: [u8; 8] = *b"CUZKR1CS";
const VERSION: u16 = 1;
const PREFIX_LEN: u64 = 8 + 2 + 7 * 8;

// The u32 sections are written and read as their in-memory bytes.
const _: () = assert!(cfg!(target_endian = "little"));

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read or write constraint matrices {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("constraint matrices {path} are corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

fn counts(m: &ShapeMatrices) -> [u64; 7] {
    [
        m.inputs as u64,
        m.aux as u64,
        m.constraints() as u64,
        m.coeffs.len() as u64,
        m.a.nnz() as u64,
        m.b.nnz() as u64,
        m.c.nnz() as u64,
    ]
}

/// Feeds the canonical form, section by section, to `sink`.
fn sections(m: &ShapeMatrices, sink: &mut dyn FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
    let mut prefix = MAGIC.to_vec();
    prefix.extend_from_slice(&VERSION.to_le_bytes());
    for c in counts(m) {
        prefix.extend_from_slice(&c.to_le_bytes());
    }
    sink(&prefix)?;
    let coeffs: Vec<u8> = m.coeffs.iter().flat_map(|c| c.to_repr()).collect();
    sink(&coeffs)?;
    for matrix in [&m.a, &m.b, &m.c] {
        for v in [&matrix.row_ptr, &matrix.cols, &matrix.coeffs] {
            sink(bytemuck::cast_slice(v))?;
        }
    }
    Ok(())
}

/// blake3 of the canonical form.
pub(super) fn hash(m: &ShapeMatrices) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    sections(m, &mut |b| {
        h.update_rayon(b);
        Ok(())
    })
    .expect("hashing cannot fail");
    *h.finalize().as_bytes()
}

/// Writes `m` to `path` (created or truncated) and syncs it.
pub fn write(m: &ShapeMatrices, path: &Path) -> Result<(), FileError> {
    let io = |source| FileError::Io {
        path: path.into(),
        source,
    };
    let mut out = BufWriter::with_capacity(1 << 22, File::create(path).map_err(io)?);
    sections(m, &mut |b| out.write_all(b)).map_err(io)?;
    out.write_all(&m.hash()).map_err(io)?;
    out.flush().map_err(io)?;
    out.get_ref().sync_all().map_err(io)
}

/// Reads matrices written by [`write`].
pub fn read(path: &Path) -> Result<ShapeMatrices, FileError> {
    let io = |source| FileError::Io {
        path: path.into(),
        source,
    };
    let corrupt = |reason: String| FileError::Corrupt {
        path: path.into(),
        reason,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut r = BufReader::with_capacity(1 << 22, file);
    let mut prefix = [0u8; PREFIX_LEN as usize];
    r.read_exact(&mut prefix)
        .map_err(|_| corrupt(format!("{len} bytes is shorter than the header")))?;
    if prefix[..8] != MAGIC {
        return Err(corrupt("not a constraint-matrix file".into()));
    }
    let version = u16::from_le_bytes([prefix[8], prefix[9]]);
    if version != VERSION {
        return Err(corrupt(format!(
            "format version {version}, this build reads {VERSION}"
        )));
    }
    let c: [u64; 7] = std::array::from_fn(|i| {
        u64::from_le_bytes(prefix[10 + 8 * i..18 + 8 * i].try_into().expect("8 bytes"))
    });
    let [inputs, aux, rows, ncoeffs, nnz @ ..] = c;
    // Everything the counts imply, in u128 so absurd counts cannot overflow the check.
    let expected = PREFIX_LEN as u128
        + 32 * ncoeffs as u128
        + 3 * 4 * (rows as u128 + 1)
        + 8 * nnz.iter().map(|&n| n as u128).sum::<u128>()
        + 32;
    if expected != len as u128 {
        return Err(corrupt(format!(
            "{len} bytes, but its counts imply {expected}"
        )));
    }
    // The length check bounds every count by the file's size, so these allocations are too.
    let mut coeff_bytes = vec![0u8; 32 * ncoeffs as usize];
    r.read_exact(&mut coeff_bytes).map_err(io)?;
    let coeffs = coeff_bytes
        .chunks_exact(32)
        .map(|b| Scalar::from_repr_vartime(b.try_into().expect("32 bytes")))
        .collect::<Option<Vec<Scalar>>>()
        .ok_or_else(|| corrupt("a coefficient is not a canonical field element".into()))?;
    let mut read_u32s = |n: u64| -> Result<Vec<u32>, FileError> {
        let mut v = vec![0u32; n as usize];
        r.read_exact(bytemuck::cast_slice_mut(&mut v)).map_err(io)?;
        Ok(v)
    };
    let mut matrices = Vec::with_capacity(3);
    for n in nnz {
        matrices.push(Matrix {
            row_ptr: read_u32s(rows + 1)?,
            cols: read_u32s(n)?,
            coeffs: read_u32s(n)?,
        });
    }
    let mut stored = [0u8; 32];
    r.read_exact(&mut stored).map_err(io)?;
    let [a, b, c] = <[Matrix; 3]>::try_from(matrices).expect("three matrices");
    let m = ShapeMatrices::new(inputs as usize, aux as usize, coeffs, a, b, c)
        .map_err(|e| corrupt(e.to_string()))?;
    if m.hash() != stored {
        return Err(corrupt("hash mismatch".into()));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::r1cs::capture;
    use crate::recording::tests::ToyCircuit;

    #[test]
    fn roundtrips_and_rejects_damage() {
        let m = capture(ToyCircuit {
            x: Scalar::from(1u64),
            y: Scalar::from(2u64),
            rounds: 9,
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toy.r1cs");
        write(&m, &path).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back, m);

        let bytes = std::fs::read(&path).unwrap();
        for i in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            assert!(read(&path).is_err(), "flipped byte {i} accepted");
        }
        for len in [0, 9, PREFIX_LEN as usize, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..len]).unwrap();
            assert!(
                matches!(read(&path), Err(FileError::Corrupt { .. })),
                "truncated to {len} accepted"
            );
        }
        // Counts claiming 2^60 rows cannot make the reader allocate them.
        let mut bad = bytes.clone();
        bad[10 + 16..10 + 24].copy_from_slice(&(1u64 << 60).to_le_bytes());
        std::fs::write(&path, &bad).unwrap();
        assert!(matches!(read(&path), Err(FileError::Corrupt { .. })));
        assert!(matches!(
            read(&dir.path().join("missing")),
            Err(FileError::Io { .. })
        ));
    }
}
