//! Which parameter files may be trusted, and where insecure ones may go.
//!
//! * A parameter file under a published name (Filecoin's `v28-….params`, listed with a digest in
//!   filecoin-proofs' `parameters.json`) is checked against that digest the first time it is
//!   loaded: BLAKE2b-512 of the file, the first 16 bytes in hex, as filecoin-proofs checks it.
//!   A good verdict is remembered in a sidecar file (`<file>.cuzk-verified`) together with the
//!   file's size and modification time, so a 44 GiB file is hashed once, not on every start.
//! * Insecure test parameters written under a published name carry a sidecar marker
//!   (`<file>.TEST-ONLY-INSECURE`); such a file is refused unless test parameters are allowed,
//!   and then loaded without the digest check, loudly.
//! * Insecure parameters never go into a production directory — filecoin-proofs' default
//!   (`/var/tmp/filecoin-proof-parameters`) or one that holds published files without the
//!   marker — unless forced.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

/// filecoin-proofs' default parameter directory: production by convention.
pub const FILECOIN_DEFAULT_DIR: &str = "/var/tmp/filecoin-proof-parameters";
const INSECURE_SUFFIX: &str = ".TEST-ONLY-INSECURE";
const VERIFIED_SUFFIX: &str = ".cuzk-verified";

#[derive(Debug, thiserror::Error)]
pub enum ParamFileError {
    #[error("parameter file {} is missing; {hint}", path.display())]
    Missing { path: PathBuf, hint: String },
    #[error("parameter file {} is corrupt or not the published one: its digest is {actual}, parameters.json says {expected}; fetch it again (lotus fetch-params / paramfetch), or, for test parameters, mark them with a file {}{INSECURE_SUFFIX}", path.display(), path.display())]
    DigestMismatch {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("parameter file {} is marked INSECURE test-only ({}{INSECURE_SUFFIX}): whoever generated it can forge proofs; refused unless the node runs with --allow-test-params", path.display(), path.display())]
    Insecure { path: PathBuf },
    #[error("cannot read parameter file {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("refusing to write INSECURE test parameters as {}: {} is a production parameter directory ({why}); use another directory, or force it", path.display(), dir.display())]
    ProductionDir {
        path: PathBuf,
        dir: PathBuf,
        why: String,
    },
}

fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether `path` was written as insecure test parameters.
pub fn is_marked_insecure(path: &Path) -> bool {
    sidecar(path, INSECURE_SUFFIX).exists()
}

/// Refuses `path` if it is marked insecure and test parameters are not allowed: a marker must
/// never be enough to prove with known toxic waste.
pub fn refuse_insecure(path: &Path, allow_test_params: bool) -> Result<(), ParamFileError> {
    if !allow_test_params && is_marked_insecure(path) {
        return Err(ParamFileError::Insecure {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// Marks `path` (about to be written) as insecure test parameters. Call before the file is
/// renamed into place, so that it never exists unmarked.
pub fn mark_insecure(path: &Path) -> io::Result<()> {
    fs::write(
        sidecar(path, INSECURE_SUFFIX),
        "INSECURE, TEST-ONLY Groth16 parameters: whoever generated them can forge proofs.\n",
    )
}

/// Why `dir` counts as a production parameter directory, if it does. `published` tells a
/// published parameter file name (see the module docs).
pub fn production_reason(dir: &Path, published: impl Fn(&str) -> bool) -> Option<String> {
    if dir == Path::new(FILECOIN_DEFAULT_DIR) {
        return Some("filecoin-proofs' default".into());
    }
    let entries = fs::read_dir(dir).ok()?;
    entries.flatten().find_map(|entry| {
        let name = entry.file_name().into_string().ok()?;
        // A published `.vk`/`.meta` is ours when its `.params` is marked: filecoin-proofs derives
        // them beside test parameters without a marker of their own.
        (published(&name) && !is_marked_insecure(&entry.path().with_extension("params")))
            .then(|| format!("it holds the real {name}"))
    })
}

/// Checks that insecure parameters may be written as `path`, then marks it insecure.
pub fn claim_for_insecure(
    path: &Path,
    force: bool,
    published: impl Fn(&str) -> bool,
) -> Result<(), ParamFileError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    if let Some(why) = production_reason(dir, &published).filter(|_| !force) {
        return Err(ParamFileError::ProductionDir {
            path: path.to_owned(),
            dir: dir.to_owned(),
            why,
        });
    }
    fs::create_dir_all(dir)
        .and_then(|()| mark_insecure(path))
        .map_err(|source| ParamFileError::Read {
            path: path.to_owned(),
            source,
        })
}

/// A good verdict, valid while the file keeps its size and modification time.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Verdict {
    size: u64,
    mtime_ns: u128,
    digest: String,
}

fn stat(path: &Path) -> Result<(u64, u128), ParamFileError> {
    let meta = fs::metadata(path).map_err(|source| ParamFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok((meta.len(), mtime))
}

/// filecoin-proofs' parameter digest: BLAKE2b-512 of the file, first 16 bytes as hex.
pub fn digest(path: &Path) -> Result<String, ParamFileError> {
    let read_err = |source| ParamFileError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = fs::File::open(path).map_err(read_err)?;
    let mut state = blake2b_simd::State::new();
    let mut buf = vec![0u8; 8 << 20];
    loop {
        let n = file.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        state.update(&buf[..n]);
    }
    Ok(state.finalize().to_hex()[..32].to_owned())
}

/// Whether the file was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Its digest was computed now and matches.
    Hashed,
    /// A remembered good verdict still applies (same size and modification time).
    Remembered,
    /// Marked insecure test parameters: not checked.
    Insecure,
}

/// Checks a parameter file against its published digest (see the module docs). A marked file
/// passes unchecked: whether it may be used at all is [`refuse_insecure`]'s to say.
pub fn verify(path: &Path, expected: &str) -> Result<Checked, ParamFileError> {
    if !path.exists() {
        return Err(ParamFileError::Missing {
            path: path.to_owned(),
            hint: "fetch the published parameters (lotus fetch-params / paramfetch) into the parameter directory".into(),
        });
    }
    if is_marked_insecure(path) {
        tracing::warn!(path = %path.display(), "loading INSECURE TEST-ONLY parameters (marked as such); proofs made with them prove nothing");
        return Ok(Checked::Insecure);
    }
    let (size, mtime_ns) = stat(path)?;
    let record = sidecar(path, VERIFIED_SUFFIX);
    let remembered = fs::read(&record)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Verdict>(&bytes).ok());
    if remembered.is_some_and(|v| v.size == size && v.mtime_ns == mtime_ns && v.digest == expected)
    {
        return Ok(Checked::Remembered);
    }
    let started = std::time::Instant::now();
    let actual = digest(path)?;
    if actual != expected {
        return Err(ParamFileError::DigestMismatch {
            path: path.to_owned(),
            expected: expected.to_owned(),
            actual,
        });
    }
    tracing::info!(path = %path.display(), secs = started.elapsed().as_secs_f64(), "parameter file matches its published digest");
    let verdict = Verdict {
        size,
        mtime_ns,
        digest: actual,
    };
    let written = serde_json::to_vec(&verdict)
        .map_err(io::Error::other)
        .and_then(|bytes| fs::write(&record, bytes));
    if let Err(e) = written {
        // A read-only parameter volume: correct, only slower (hashed again next start).
        tracing::warn!(path = %record.display(), err = %e, "cannot remember the digest verdict; the file will be hashed again on the next start");
    }
    Ok(Checked::Hashed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_checked_once_per_file_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v28-x.params");
        fs::write(&path, b"parameters").unwrap();
        // BLAKE2b-512("parameters"), first 16 bytes.
        let good = digest(&path).unwrap();
        assert_eq!(good.len(), 32);
        assert_eq!(verify(&path, &good).unwrap(), Checked::Hashed);
        assert_eq!(verify(&path, &good).unwrap(), Checked::Remembered);

        // Same size, new content and modification time: hashed again, and refused. (The time
        // is set explicitly: some file systems keep whole seconds.)
        fs::write(&path, b"PARAMETERS").unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        let file = fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(later).unwrap();
        let e = verify(&path, &good).unwrap_err().to_string();
        assert!(e.contains("v28-x.params is corrupt"), "{e}");
        assert!(e.contains(&good), "{e}");

        // A remembered verdict for another digest does not vouch for this one.
        let other = digest(&path).unwrap();
        assert_eq!(verify(&path, &other).unwrap(), Checked::Hashed);
        assert!(verify(&path, &good).is_err());

        let e = verify(&dir.path().join("v28-y.params"), &good)
            .unwrap_err()
            .to_string();
        assert!(e.contains("v28-y.params is missing"), "{e}");

        mark_insecure(&path).unwrap();
        refuse_insecure(&path, true).unwrap();
        let e = refuse_insecure(&path, false).unwrap_err().to_string();
        assert!(e.contains("v28-x.params is marked INSECURE"), "{e}");
        assert!(e.contains("--allow-test-params"), "{e}");
        assert_eq!(verify(&path, &good).unwrap(), Checked::Insecure);
    }

    #[test]
    fn insecure_files_stay_out_of_production_directories() {
        let published = |name: &str| {
            name.starts_with("v28-")
                && [".params", ".vk", ".meta"]
                    .iter()
                    .any(|e| name.ends_with(e))
        };
        let dir = tempfile::tempdir().unwrap();
        let test_file = dir.path().join("v28-a.params");
        claim_for_insecure(&test_file, false, published).unwrap();
        assert!(is_marked_insecure(&test_file));
        fs::write(&test_file, b"insecure").unwrap();
        fs::write(dir.path().join("v28-a.vk"), b"derived by filecoin-proofs").unwrap();
        fs::write(dir.path().join("v28-a.meta"), b"derived by filecoin-proofs").unwrap();
        // Its own marked files (and what filecoin-proofs derives beside them) do not make a
        // directory production.
        claim_for_insecure(&dir.path().join("v28-b.params"), false, published).unwrap();

        // A real (unmarked) published file does, unless forced.
        fs::write(dir.path().join("v28-real.params"), b"real").unwrap();
        let target = dir.path().join("v28-c.params");
        let e = claim_for_insecure(&target, false, published)
            .unwrap_err()
            .to_string();
        assert!(e.contains("holds the real v28-real.params"), "{e}");
        assert!(!is_marked_insecure(&target));
        claim_for_insecure(&target, true, published).unwrap();
        assert!(is_marked_insecure(&target));

        let e = claim_for_insecure(
            &Path::new(FILECOIN_DEFAULT_DIR).join("v28-a.params"),
            false,
            published,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("filecoin-proofs' default"), "{e}");
    }
}
