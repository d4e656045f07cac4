//! Groth16 parameters per circuit shape: generated on demand (TEST ONLY, INSECURE) and cached
//! on disk and in memory, or loaded from a real bellperson parameter file.
//!
//! Generated parameters come from a ChaCha20 stream seeded with the shape key, so every node
//! derives the same file — and anyone can derive the toxic waste and forge proofs. They exist
//! for tests and load tests only; the file names say so.

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bellperson::groth16::Parameters;
use blstrs::Bls12;
use cuzk_prover::cpu::{check_query_sizes, domain_size};
use cuzk_prover::params::{read_params, write_params};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::{partition_seed, CircuitError, CircuitFamily};

/// Environment variable naming the cache directory (`--param-cache`'s twin).
pub const CACHE_ENV: &str = "CUZK_PARAM_CACHE";
/// filecoin-proofs' name for the same directory, honoured after [`CACHE_ENV`]: operators of
/// lotus and Curio have it set already.
pub const FILECOIN_CACHE_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// Parameters by shape key, backed by a directory of `TEST-ONLY-INSECURE-<shape>.params` files.
pub struct ParamCache {
    dir: PathBuf,
    loaded: Mutex<HashMap<String, Arc<Parameters<Bls12>>>>,
}

impl std::fmt::Debug for ParamCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let loaded = self
            .loaded
            .lock()
            .map(|m| m.keys().cloned().collect::<Vec<_>>());
        f.debug_struct("ParamCache")
            .field("dir", &self.dir)
            .field("loaded", &loaded.ok())
            .finish()
    }
}

impl ParamCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            loaded: Mutex::default(),
        }
    }

    /// The parameter directory without a flag or file: `$CUZK_PARAM_CACHE`, else
    /// `$FIL_PROOFS_PARAMETER_CACHE`, else `$XDG_CACHE_HOME/cuzk/params`, else
    /// `$HOME/.cache/cuzk/params`.
    pub fn from_env() -> Result<Self, CircuitError> {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let dir = var(CACHE_ENV)
            .or_else(|| var(FILECOIN_CACHE_ENV))
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("cuzk/params")))
            .or_else(|| var("HOME").map(|d| d.join(".cache/cuzk/params")))
            .ok_or_else(|| CircuitError::Params {
                shape: "any".into(),
                reason: format!(
                    "no parameter directory: set {CACHE_ENV}, {FILECOIN_CACHE_ENV}, XDG_CACHE_HOME or HOME"
                ),
            })?;
        Ok(Self::new(dir))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the parameters for `shape_key` live.
    pub fn path_for(&self, shape_key: &str) -> PathBuf {
        self.dir
            .join(format!("TEST-ONLY-INSECURE-{shape_key}.params"))
    }

    /// The family's parameters: from memory, else from the cache file, else generated and
    /// written there. A file lock makes concurrent callers (threads or processes) wait for
    /// one generator instead of each generating.
    pub fn get_or_generate(
        &self,
        family: &dyn CircuitFamily,
    ) -> Result<Arc<Parameters<Bls12>>, CircuitError> {
        let key = family.shape_key();
        if let Some(p) = self.lookup(&key) {
            return Ok(p);
        }
        let err = |reason: String| CircuitError::Params {
            shape: key.clone(),
            reason,
        };
        if let Some(path) = family.parameter_file() {
            return self.load_parameter_file(&key, &self.dir.join(path), family.published_digest());
        }
        if !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(err("shape key is not a safe file name".into()));
        }
        fs::create_dir_all(&self.dir).map_err(|e| {
            err(format!(
                "cannot create cache directory {}: {e}",
                self.dir.display()
            ))
        })?;
        let path = self.path_for(&key);
        let lock_path = path.with_extension("params.lock");
        let lock = File::create(&lock_path).map_err(|e| {
            err(format!(
                "cannot create lock file {}: {e}",
                lock_path.display()
            ))
        })?;
        lock.lock()
            .map_err(|e| err(format!("cannot lock {}: {e}", lock_path.display())))?;
        // Another caller may have finished while this one waited for the lock.
        if let Some(p) = self.lookup(&key) {
            return Ok(p);
        }

        let params = if path.exists() {
            // Our own atomically renamed file: skip the (slow) subgroup checks, but make sure
            // it still fits the circuit, which may have changed since it was written.
            let params = read_params(&path, false).map_err(|e| err(e.to_string()))?;
            check_params_fit(&params, family)?;
            params
        } else {
            tracing::warn!(
                shape = %key,
                path = %path.display(),
                "generating TEST-ONLY INSECURE Groth16 parameters (toxic waste derivable from the shape key); never use them for real proofs"
            );
            let mut rng =
                ChaCha20Rng::from_seed(partition_seed("cuzk/test-params/v1", key.as_bytes(), 0));
            let params = family.generate_test_params(&mut rng)?;
            let tmp = path.with_extension(format!("params.tmp-{}", std::process::id()));
            write_params(&params, &tmp).map_err(|e| err(e.to_string()))?;
            fs::rename(&tmp, &path)
                .map_err(|e| err(format!("cannot rename {} into place: {e}", tmp.display())))?;
            // Persist the rename itself; losing it only costs a regeneration, so best effort.
            if let Ok(dir) = File::open(&self.dir) {
                let _ = dir.sync_all();
            }
            params
        };
        let params = Arc::new(params);
        self.loaded
            .lock()
            .expect("cache map poisoned")
            .insert(key, params.clone());
        Ok(params)
    }

    /// Loads a family's own parameter file, checked against its published digest when it has
    /// one (subgroup checks skipped, as filecoin-proofs does), and keeps it in memory under
    /// `key`.
    fn load_parameter_file(
        &self,
        key: &str,
        path: &Path,
        digest: Option<&str>,
    ) -> Result<Arc<Parameters<Bls12>>, CircuitError> {
        let err = |reason: String| CircuitError::Params {
            shape: key.to_string(),
            reason,
        };
        if !path.exists() {
            // Only PoRep declares a parameter file today, hence the pointer to its tool.
            return Err(err(format!(
                "no Groth16 parameters for {key} at {}; generate test ones with `cuzk-porep params` (INSECURE) or fetch the real ones",
                path.display()
            )));
        }
        if let Some(expected) = digest {
            crate::param_files::verify(path, expected).map_err(|e| err(e.to_string()))?;
        }
        let started = std::time::Instant::now();
        let params = read_params(path, false).map_err(|e| err(e.to_string()))?;
        check_file_fit(&params).map_err(|reason| err(format!("{}: {reason}", path.display())))?;
        tracing::info!(shape = %key, path = %path.display(), load_ms = started.elapsed().as_millis() as u64, "parameter file loaded");
        let params = Arc::new(params);
        self.loaded
            .lock()
            .expect("cache map poisoned")
            .insert(key.to_string(), params.clone());
        Ok(params)
    }

    fn lookup(&self, key: &str) -> Option<Arc<Parameters<Bls12>>> {
        self.loaded
            .lock()
            .expect("cache map poisoned")
            .get(key)
            .cloned()
    }
}

/// Reads a real bellperson parameter file for `family` (with subgroup checks when `checked`)
/// and checks that it fits the circuit.
pub fn load_from_file(
    path: &Path,
    family: &dyn CircuitFamily,
    checked: bool,
) -> Result<Arc<Parameters<Bls12>>, CircuitError> {
    let params = read_params(path, checked).map_err(|e| CircuitError::Params {
        shape: family.shape_key(),
        reason: e.to_string(),
    })?;
    check_params_fit(&params, family)?;
    Ok(Arc::new(params))
}

/// Checks every query length of `params` against the family's shape (from synthesizing
/// partition 0 of an empty input), so wrong parameters fail here rather than in a prover.
/// Families with their own parameter file get the structural [`check_file_fit`] only.
pub fn check_params_fit(
    params: &Parameters<Bls12>,
    family: &dyn CircuitFamily,
) -> Result<(), CircuitError> {
    let shape = family.shape_key();
    if family.parameter_file().is_some() {
        // Such a family (PoRep) has no input-free probe to synthesize.
        return check_file_fit(params).map_err(|reason| CircuitError::Params {
            shape,
            reason: format!("parameters do not fit the circuit: {reason}"),
        });
    }
    let asg = family.synthesize_partition(&[], 0)?;
    let mismatch = |reason: String| CircuitError::Params {
        shape: shape.clone(),
        reason: format!("parameters do not fit the circuit: {reason}"),
    };
    check_query_sizes(params, &asg).map_err(|e| mismatch(e.to_string()))?;
    let (m, _) = domain_size(asg.num_constraints()).map_err(|e| mismatch(e.to_string()))?;
    if params.h.len() != m - 1 {
        return Err(mismatch(format!(
            "{} constraints need {} H points, the parameters have {}",
            asg.num_constraints(),
            m - 1,
            params.h.len()
        )));
    }
    Ok(())
}

/// The checks a parameter file gets without an assignment to compare with: a family with its
/// own file (PoRep) cannot synthesize a probe without a real input. Every query length is
/// still checked against each partition's assignment before proving
/// ([`check_query_sizes`] in the backends), so a file for another circuit fails the job there.
fn check_file_fit(params: &Parameters<Bls12>) -> Result<(), String> {
    if !(params.h.len() + 1).is_power_of_two() {
        return Err(format!(
            "{} H points is not a domain size minus one",
            params.h.len()
        ));
    }
    if params.vk.ic.is_empty() || params.l.is_empty() || params.a.is_empty() {
        return Err("empty query vectors".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MimcFamily, Sha256Family};
    use bellperson::SynthesisError;
    use blstrs::Scalar;
    use cuzk_wire::witness::Assignment;
    use rand::RngCore;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts parameter generations of the wrapped family; with `file`, the family is proved
    /// with its own parameter file, like PoRep.
    struct Counting {
        inner: MimcFamily,
        generated: AtomicUsize,
        file: Option<PathBuf>,
        digest: Option<&'static str>,
    }

    impl CircuitFamily for Counting {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn shape_key(&self) -> String {
            self.inner.shape_key()
        }
        fn partitions(&self) -> usize {
            self.inner.partitions()
        }
        fn synthesize_partition(
            &self,
            input: &[u8],
            index: usize,
        ) -> Result<Assignment, CircuitError> {
            self.inner.synthesize_partition(input, index)
        }
        fn public_inputs(&self, input: &[u8], index: usize) -> Result<Vec<Scalar>, CircuitError> {
            self.inner.public_inputs(input, index)
        }
        fn generate_test_params(
            &self,
            rng: &mut dyn RngCore,
        ) -> Result<Parameters<Bls12>, CircuitError> {
            self.generated.fetch_add(1, Ordering::SeqCst);
            self.inner.generate_test_params(rng)
        }
        fn parameter_file(&self) -> Option<PathBuf> {
            self.file.clone()
        }
        fn published_digest(&self) -> Option<&'static str> {
            self.digest
        }
    }

    #[test]
    fn concurrent_callers_generate_once_and_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        let family = Counting {
            inner: MimcFamily::new(64, 1).unwrap(),
            generated: AtomicUsize::new(0),
            file: None,
            digest: None,
        };
        // Separate caches stand in for separate processes: only the file lock is shared.
        let (p1, p2) = std::thread::scope(|s| {
            let a = s.spawn(|| {
                ParamCache::new(dir.path())
                    .get_or_generate(&family)
                    .unwrap()
            });
            let b = s.spawn(|| {
                ParamCache::new(dir.path())
                    .get_or_generate(&family)
                    .unwrap()
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(family.generated.load(Ordering::SeqCst), 1);
        assert!(*p1 == *p2);

        let cache = ParamCache::new(dir.path());
        let path = cache.path_for("mimc-r64");
        assert!(path.ends_with("TEST-ONLY-INSECURE-mimc-r64.params"));
        let loaded = cache.get_or_generate(&family).unwrap();
        assert!(*loaded == *p1);
        assert!(Arc::ptr_eq(
            &loaded,
            &cache.get_or_generate(&family).unwrap()
        ));
        assert_eq!(family.generated.load(Ordering::SeqCst), 1);

        // Deterministic: a fresh directory yields the same parameters.
        let dir2 = tempfile::tempdir().unwrap();
        assert!(
            *ParamCache::new(dir2.path())
                .get_or_generate(&family)
                .unwrap()
                == *p1
        );

        // The file is a valid bellperson parameter file for this shape, and not for another.
        assert!(load_from_file(&path, &family, true).is_ok());
        let other = MimcFamily::new(65, 1).unwrap();
        let e = load_from_file(&path, &other, false)
            .err()
            .expect("accepted");
        assert!(
            e.to_string().contains("parameters do not fit the circuit"),
            "{e}"
        );
        let e = load_from_file(&path, &Sha256Family::new(1, 1).unwrap(), false)
            .err()
            .expect("accepted");
        assert!(matches!(e, CircuitError::Params { .. }), "{e}");
        let e = load_from_file(&dir.path().join("nope"), &family, false)
            .err()
            .expect("accepted");
        assert!(e.to_string().contains("cannot open parameter file"), "{e}");
    }

    #[test]
    fn a_family_parameter_file_is_loaded_never_generated() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ceremony.params");
        let family = Counting {
            inner: MimcFamily::new(32, 1).unwrap(),
            generated: AtomicUsize::new(0),
            file: Some(file.clone()),
            digest: None,
        };
        let cache = ParamCache::new(dir.path().join("cache"));
        let e = cache
            .get_or_generate(&family)
            .err()
            .expect("loaded")
            .to_string();
        assert!(e.contains("no Groth16 parameters for mimc-r32 at"), "{e}");
        assert!(e.contains("ceremony.params"), "{e}");

        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let params = family.inner.generate_test_params(&mut rng).unwrap();
        write_params(&params, &file).unwrap();
        let loaded = cache.get_or_generate(&family).unwrap();
        assert!(*loaded == params);
        assert!(Arc::ptr_eq(
            &loaded,
            &cache.get_or_generate(&family).unwrap()
        ));
        assert_eq!(family.generated.load(Ordering::SeqCst), 0);
        assert!(!cache.path_for("mimc-r32").exists());

        // A published file is checked against its digest before it is read; the name is
        // relative to the cache directory.
        let published = |digest| Counting {
            inner: MimcFamily::new(32, 1).unwrap(),
            generated: AtomicUsize::new(0),
            file: Some(PathBuf::from("ceremony.params")),
            digest: Some(digest),
        };
        let good: &'static str =
            Box::leak(crate::param_files::digest(&file).unwrap().into_boxed_str());
        let loaded = ParamCache::new(dir.path())
            .get_or_generate(&published(good))
            .unwrap();
        assert!(*loaded == params);
        let e = ParamCache::new(dir.path())
            .get_or_generate(&published("00000000000000000000000000000000"))
            .err()
            .expect("loaded")
            .to_string();
        assert!(
            e.contains("ceremony.params is corrupt or not the published one"),
            "{e}"
        );

        std::fs::write(&file, b"truncated").unwrap();
        let e = ParamCache::new(dir.path())
            .get_or_generate(&family)
            .err()
            .expect("loaded");
        assert!(e.to_string().contains("corrupt or truncated"), "{e}");
    }

    #[test]
    fn synthesis_errors_are_reported() {
        let e = CircuitError::Synthesis {
            shape: "mimc-r1".into(),
            partition: 3,
            source: SynthesisError::AssignmentMissing,
        };
        assert!(e
            .to_string()
            .starts_with("synthesis of mimc-r1 partition 3 failed"));
    }
}
