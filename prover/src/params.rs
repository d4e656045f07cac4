//! Reading and writing bellperson parameter files (VK ‖ h ‖ l ‖ a ‖ b_g1 ‖ b_g2, design §3.3).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use bellperson::groth16::Parameters;
use blstrs::Bls12;

#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("cannot open parameter file {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("parameter file {path} is corrupt or truncated: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write parameter file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Reads a parameter file. `checked` verifies that every point is in the prime-order subgroup
/// (slow; worth it for files from untrusted sources).
pub fn read_params(path: &Path, checked: bool) -> Result<Parameters<Bls12>, ParamsError> {
    let file = File::open(path).map_err(|source| ParamsError::Open {
        path: path.into(),
        source,
    })?;
    // bellperson reads point by point; unbuffered that is one syscall per point.
    Parameters::read(BufReader::with_capacity(1 << 20, file), checked).map_err(|source| {
        ParamsError::Read {
            path: path.into(),
            source,
        }
    })
}

/// Writes `params` to `path` (created or truncated) and syncs it to disk.
pub fn write_params(params: &Parameters<Bls12>, path: &Path) -> Result<(), ParamsError> {
    let write = || -> io::Result<()> {
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
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
        let dir = std::env::temp_dir().join(format!("cuzk-params-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("toy.params");
        write_params(&params, &path).unwrap();
        let back = read_params(&path, true).unwrap();
        assert!(back == params);

        let len = std::fs::metadata(&path).unwrap().len();
        let file = File::options().write(true).open(&path).unwrap();
        file.set_len(len - 10).unwrap();
        assert!(matches!(
            read_params(&path, false),
            Err(ParamsError::Read { .. })
        ));
        assert!(matches!(
            read_params(&dir.join("missing"), false),
            Err(ParamsError::Open { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
