//! bellperson parameter files (VK ‖ h ‖ l ‖ a ‖ b_g1 ‖ b_g2, each query a u32 big-endian length
//! and uncompressed points), read in parallel.
//!
//! bellperson's own reader parses point by point on one thread: minutes for a 1 GiB file. Here
//! the file is mapped, its layout walked once (lengths checked against the file size before
//! anything is allocated), and each query parsed on every core — or handed out as raw bytes, so a
//! GPU backend can stream a 44 GiB SRS to the device without holding it on the host.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use memmap2::Mmap;
use rayon::prelude::*;

pub const G1_BYTES: usize = 96;
pub const G2_BYTES: usize = 192;

#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("cannot open parameter file {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("parameter file {path} is corrupt or truncated: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("cannot write parameter file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// The five queries, in file order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    H,
    L,
    A,
    BG1,
    BG2,
}

impl Query {
    pub const ALL: [Query; 5] = [Query::H, Query::L, Query::A, Query::BG1, Query::BG2];

    pub fn point_bytes(self) -> usize {
        if self == Query::BG2 {
            G2_BYTES
        } else {
            G1_BYTES
        }
    }
}

/// A mapped parameter file with its layout walked and its verifying key parsed.
pub struct ParamsFile {
    path: PathBuf,
    map: Mmap,
    vk: VerifyingKey<Bls12>,
    /// Byte ranges of each query's points, in [`Query::ALL`] order.
    sections: [Range<usize>; 5],
}

impl ParamsFile {
    pub fn open(path: &Path) -> Result<Self, ParamsError> {
        let file = File::open(path).map_err(|source| ParamsError::Open {
            path: path.into(),
            source,
        })?;
        // SAFETY: the file is only read; parameter files are written once and renamed into
        // place, so no writer changes it under the mapping.
        let map = unsafe { Mmap::map(&file) }.map_err(|source| ParamsError::Open {
            path: path.into(),
            source,
        })?;
        let corrupt = |reason: String| ParamsError::Corrupt {
            path: path.into(),
            reason,
        };
        let mut at = &map[..];
        let vk = VerifyingKey::<Bls12>::read(&mut at).map_err(|e| corrupt(e.to_string()))?;
        let mut offset = map.len() - at.len();
        let mut sections: [Range<usize>; 5] = Default::default();
        for (q, section) in Query::ALL.iter().zip(sections.iter_mut()) {
            let len_bytes = map
                .get(offset..offset + 4)
                .ok_or_else(|| corrupt(format!("ends before the {q:?} query's length")))?;
            let n = u32::from_be_bytes(len_bytes.try_into().expect("4 bytes")) as usize;
            let start = offset + 4;
            let end = start + n * q.point_bytes();
            if end > map.len() {
                return Err(corrupt(format!(
                    "the {q:?} query claims {n} points, past the end of the file"
                )));
            }
            *section = start..end;
            offset = end;
        }
        if offset != map.len() {
            return Err(corrupt(format!(
                "{} bytes after the last query",
                map.len() - offset
            )));
        }
        Ok(ParamsFile {
            path: path.into(),
            map,
            vk,
            sections,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn vk(&self) -> &VerifyingKey<Bls12> {
        &self.vk
    }

    /// Points in query `q`.
    pub fn len(&self, q: Query) -> usize {
        self.sections[q as usize].len() / q.point_bytes()
    }

    /// The uncompressed points of query `q`.
    pub fn raw(&self, q: Query) -> &[u8] {
        &self.map[self.sections[q as usize].clone()]
    }

    /// Takes query `q`'s pages out of this process's resident set once they have been read
    /// (parsed into host memory, or copied to a device): the page cache keeps them, and a
    /// later read maps them again. Without it a 44 GiB key's file pages count in the node's
    /// resident set long after the key is loaded.
    pub fn release(&self, q: Query) {
        let r = &self.sections[q as usize];
        // SAFETY: a read-only mapping of a file that is never written while mapped (see
        // `open`): dropped pages read back the same bytes from the file, and no reference into
        // the mapping is live across this call (callers release a query after they are done
        // with its bytes).
        let _ = unsafe {
            self.map
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, r.start, r.len())
        };
    }

    /// Parses every query on all cores. `checked` adds the subgroup checks (slow; for files
    /// from untrusted sources).
    pub fn read(&self, checked: bool) -> Result<Parameters<Bls12>, ParamsError> {
        let g1 = |q: Query| parse_g1(self.raw(q), checked).map_err(|r| self.corrupt(q, r));
        Ok(Parameters {
            vk: self.vk.clone(),
            h: g1(Query::H)?.into(),
            l: g1(Query::L)?.into(),
            a: g1(Query::A)?.into(),
            b_g1: g1(Query::BG1)?.into(),
            b_g2: parse_g2(self.raw(Query::BG2), checked)
                .map_err(|r| self.corrupt(Query::BG2, r))?
                .into(),
        })
    }

    fn corrupt(&self, q: Query, reason: String) -> ParamsError {
        ParamsError::Corrupt {
            path: self.path.clone(),
            reason: format!("{q:?} query: {reason}"),
        }
    }
}

/// Parses `bytes` (uncompressed points of `N` bytes) into `out`, on all cores.
fn parse_into<A: PrimeCurveAffine + Send, const N: usize>(
    bytes: &[u8],
    out: &mut [A],
    decode: impl Fn(&[u8; N]) -> Option<A> + Sync,
) -> Result<(), String> {
    if bytes.len() != out.len() * N {
        return Err(format!("{} bytes for {} points", bytes.len(), out.len()));
    }
    bytes
        .par_chunks_exact(N)
        .zip(out.par_iter_mut())
        .enumerate()
        .try_for_each(|(i, (b, o))| {
            let p = decode(b.try_into().expect("N bytes"))
                .ok_or_else(|| format!("point {i} is not on the curve"))?;
            // bellperson refuses identity points in the queries too.
            if bool::from(p.is_identity()) {
                return Err(format!("point {i} is the point at infinity"));
            }
            *o = p;
            Ok(())
        })
}

fn g1_decoder(checked: bool) -> impl Fn(&[u8; G1_BYTES]) -> Option<G1Affine> + Sync {
    move |b| {
        if checked {
            G1Affine::from_uncompressed(b).into()
        } else {
            G1Affine::from_uncompressed_unchecked(b).into()
        }
    }
}

fn g2_decoder(checked: bool) -> impl Fn(&[u8; G2_BYTES]) -> Option<G2Affine> + Sync {
    move |b| {
        if checked {
            G2Affine::from_uncompressed(b).into()
        } else {
            G2Affine::from_uncompressed_unchecked(b).into()
        }
    }
}

/// Uncompressed G1 points into `out` (as many as it holds), in parallel.
pub fn parse_g1_into(bytes: &[u8], out: &mut [G1Affine], checked: bool) -> Result<(), String> {
    parse_into(bytes, out, g1_decoder(checked))
}

/// Uncompressed G2 points into `out`, in parallel.
pub fn parse_g2_into(bytes: &[u8], out: &mut [G2Affine], checked: bool) -> Result<(), String> {
    parse_into(bytes, out, g2_decoder(checked))
}

/// Uncompressed G1 points, parsed in parallel.
pub fn parse_g1(bytes: &[u8], checked: bool) -> Result<Vec<G1Affine>, String> {
    let mut out = vec![G1Affine::identity(); bytes.len() / G1_BYTES];
    parse_g1_into(bytes, &mut out, checked)?;
    Ok(out)
}

/// Uncompressed G2 points, parsed in parallel.
pub fn parse_g2(bytes: &[u8], checked: bool) -> Result<Vec<G2Affine>, String> {
    let mut out = vec![G2Affine::identity(); bytes.len() / G2_BYTES];
    parse_g2_into(bytes, &mut out, checked)?;
    Ok(out)
}

/// Reads a parameter file on all cores; see [`ParamsFile::read`].
pub fn read_params(path: &Path, checked: bool) -> Result<Parameters<Bls12>, ParamsError> {
    ParamsFile::open(path)?.read(checked)
}

/// Writes `params` to `path` (created or truncated) and syncs it to disk.
pub fn write_params(params: &Parameters<Bls12>, path: &Path) -> Result<(), ParamsError> {
    let write = || -> io::Result<()> {
        let mut out = BufWriter::with_capacity(1 << 22, File::create(path)?);
        params.write(&mut out)?;
        out.flush()?;
        out.get_ref().sync_all()
    };
    write().map_err(|source| ParamsError::Write {
        path: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::tests::ToyCircuit;
    use bellperson::groth16::generate_random_parameters;
    use blstrs::Scalar;
    use ff::Field;
    use rand::SeedableRng;

    #[test]
    fn roundtrip_and_errors() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let blank = ToyCircuit {
            x: Scalar::ZERO,
            y: Scalar::ZERO,
            rounds: 3,
        };
        let params = generate_random_parameters::<Bls12, _, _>(blank, &mut rng).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toy.params");
        write_params(&params, &path).unwrap();
        let file = ParamsFile::open(&path).unwrap();
        assert_eq!(file.len(Query::L), params.l.len());
        assert!(file.read(true).unwrap() == params);
        assert!(read_params(&path, false).unwrap() == params);
        // bellperson reads what we read.
        let bytes = std::fs::read(&path).unwrap();
        assert!(Parameters::<Bls12>::read(&bytes[..], true).unwrap() == params);

        for cut in [10, bytes.len() / 2, bytes.len() - 10] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(matches!(
                read_params(&path, false),
                Err(ParamsError::Corrupt { .. })
            ));
        }
        let mut long = bytes.clone();
        long.push(0);
        std::fs::write(&path, &long).unwrap();
        assert!(matches!(
            read_params(&path, false),
            Err(ParamsError::Corrupt { .. })
        ));
        // A point moved off the curve in the last (B in G2) query.
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        let e = read_params(&path, false).err().unwrap().to_string();
        assert!(e.contains("BG2 query"), "{e}");
        assert!(matches!(
            read_params(&dir.path().join("missing"), false),
            Err(ParamsError::Open { .. })
        ));
    }
}
