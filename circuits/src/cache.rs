//! Per-shape proving material on disk and in memory: each shape's constraint matrices
//! (captured once, stored content-addressed by their hash), its Groth16 parameters (a real file
//! the family names, or generated TEST-ONLY INSECURE ones where the node allows them), and the
//! proving keys joining the two, kept in memory up to a byte budget (least recently used first
//! out).
//!
//! Files, all in one directory:
//! - `R1CS-<shape>-<hash>.r1cs`: the matrices; checked against their hash on every load — a
//!   corrupt or truncated file is rebuilt, never used;
//! - `TEST-ONLY-INSECURE-<shape>-<hash16>.params`: generated parameters, derived from a seed of
//!   the shape key and the matrices' hash, so every node derives the same file — and anyone can
//!   derive the toxic waste and forge proofs. For tests and load tests only.
//! - the parameter files families name (Filecoin's published `v28-….params`), checked against
//!   their published digests before first use ([`crate::param_files`]).

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bellperson::groth16::VerifyingKey;
use blstrs::Bls12;
use cuzk_prover::key::Srs;
use cuzk_prover::params::{read_params, ParamsFile};
use cuzk_prover::r1cs::file;
use cuzk_prover::setup::{self, CpuFixedBase};
use cuzk_prover::{ProvingKey, ShapeMatrices};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use crate::{partition_seed, CircuitError, CircuitFamily};

/// Environment variable naming the cache directory (`--param-cache`'s twin).
pub const CACHE_ENV: &str = "CUZK_PARAM_CACHE";
/// filecoin-proofs' name for the same directory, honoured after [`CACHE_ENV`]: operators of
/// lotus and Curio have it set already.
pub const FILECOIN_CACHE_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// What a synth node stamps on a shape's blobs: the matrices' identity and sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeId {
    pub hash: [u8; 32],
    pub inputs: usize,
    pub aux: usize,
    pub constraints: usize,
}

impl ShapeId {
    fn of(m: &ShapeMatrices) -> Self {
        ShapeId {
            hash: m.hash(),
            inputs: m.inputs,
            aux: m.aux,
            constraints: m.constraints(),
        }
    }
}

/// Proving keys in memory, evicted least recently used first beyond a byte budget.
struct Lru {
    budget: u64,
    clock: u64,
    entries: HashMap<String, (Arc<ProvingKey>, u64)>,
}

impl Lru {
    fn get(&mut self, key: &str) -> Option<Arc<ProvingKey>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|(k, used)| {
            *used = clock;
            k.clone()
        })
    }

    fn insert(&mut self, key: String, value: Arc<ProvingKey>) {
        self.clock += 1;
        self.entries.insert(key, (value, self.clock));
        while self.bytes() > self.budget {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
                .expect("not empty");
            tracing::info!(shape = %oldest, "evicting a proving key from the host cache");
            self.entries.remove(&oldest);
        }
    }

    fn bytes(&self) -> u64 {
        self.entries.values().map(|(k, _)| host_bytes(k)).sum()
    }
}

/// Host bytes of a proving key: its SRS points and matrices.
fn host_bytes(k: &ProvingKey) -> u64 {
    k.device_bytes()
}

/// Matrices, parameters and proving keys by shape, backed by one directory.
pub struct ShapeCache {
    dir: PathBuf,
    allow_test_params: bool,
    /// Operator-given parameter files by shape key, read with subgroup checks.
    files: HashMap<String, PathBuf>,
    ids: Mutex<HashMap<String, ShapeId>>,
    keys: Mutex<Lru>,
}

impl std::fmt::Debug for ShapeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShapeCache")
            .field("dir", &self.dir)
            .field("allow_test_params", &self.allow_test_params)
            .finish()
    }
}

impl ShapeCache {
    /// `allow_test_params`: generate INSECURE parameters for shapes without a parameter file.
    /// `host_budget`: bytes of proving keys kept in memory between uses; a key larger than
    /// the budget is handed out but not kept.
    pub fn new(dir: impl Into<PathBuf>, allow_test_params: bool, host_budget: u64) -> Self {
        Self {
            dir: dir.into(),
            allow_test_params,
            files: HashMap::new(),
            ids: Mutex::default(),
            keys: Mutex::new(Lru {
                budget: host_budget,
                clock: 0,
                entries: HashMap::new(),
            }),
        }
    }

    /// Parameter files for some shapes (SHAPE → PATH), instead of the family's own or generated
    /// ones. They come from the operator, not from us: every point is checked.
    pub fn with_parameter_files(mut self, files: HashMap<String, PathBuf>) -> Self {
        self.files = files;
        self
    }

    /// The default directory, test parameters as `allow_test_params` says, 8 GiB of keys kept:
    /// what tools and tests use.
    pub fn open_default(allow_test_params: bool) -> Result<Self, CircuitError> {
        Ok(Self::new(Self::default_dir()?, allow_test_params, 8 << 30))
    }

    /// The parameter directory without a flag or file: `$CUZK_PARAM_CACHE`, else
    /// `$FIL_PROOFS_PARAMETER_CACHE`, else `$XDG_CACHE_HOME/cuzk/params`, else
    /// `$HOME/.cache/cuzk/params`.
    pub fn default_dir() -> Result<PathBuf, CircuitError> {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        var(CACHE_ENV)
            .or_else(|| var(FILECOIN_CACHE_ENV))
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("cuzk/params")))
            .or_else(|| var("HOME").map(|d| d.join(".cache/cuzk/params")))
            .ok_or_else(|| CircuitError::Params {
                shape: "any".into(),
                reason: format!(
                    "no parameter directory: set {CACHE_ENV}, {FILECOIN_CACHE_ENV}, XDG_CACHE_HOME or HOME"
                ),
            })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn err(shape: &str, reason: String) -> CircuitError {
        CircuitError::Params {
            shape: shape.to_string(),
            reason,
        }
    }

    /// Checks that `key` is a safe file-name part and that the directory exists.
    fn prepare(&self, key: &str) -> Result<(), CircuitError> {
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(Self::err(key, "shape key is not a safe file name".into()));
        }
        fs::create_dir_all(&self.dir).map_err(|e| {
            Self::err(
                key,
                format!("cannot create cache directory {}: {e}", self.dir.display()),
            )
        })
    }

    /// Runs `f` holding an exclusive lock named `name` (threads and processes alike), so
    /// concurrent callers wait for one builder instead of each building.
    fn locked<T>(
        &self,
        key: &str,
        name: &str,
        f: impl FnOnce() -> Result<T, CircuitError>,
    ) -> Result<T, CircuitError> {
        let path = self.dir.join(format!("{name}.lock"));
        let lock = File::create(&path)
            .map_err(|e| Self::err(key, format!("cannot create {}: {e}", path.display())))?;
        lock.lock()
            .map_err(|e| Self::err(key, format!("cannot lock {}: {e}", path.display())))?;
        f()
    }

    fn matrices_prefix(key: &str) -> String {
        format!("R1CS-{key}-")
    }

    /// The matrices files present for `key`.
    fn matrices_files(&self, key: &str) -> Vec<PathBuf> {
        let prefix = Self::matrices_prefix(key);
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with(&prefix)
                        && n.ends_with(".r1cs")
                        // the hash part of this shape's names has no '-'
                        && !n[prefix.len()..n.len() - 5].contains('-')
                })
            })
            .collect()
    }

    /// Where matrices with `hash` for `key` live.
    pub fn matrices_path(&self, key: &str, hash: &[u8; 32]) -> PathBuf {
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        self.dir
            .join(format!("{}{hex}.r1cs", Self::matrices_prefix(key)))
    }

    /// The family's matrices: from a verified file, else captured and written.
    pub fn matrices(&self, family: &dyn CircuitFamily) -> Result<Arc<ShapeMatrices>, CircuitError> {
        self.with_matrices(family, false, |m| Ok(m.clone()))
    }

    /// [`Self::matrices`] handed to `f` under the shape's lock. With `save_behind`, freshly
    /// captured matrices are written to the cache while `f` runs: the parameter generator, which
    /// waits on the disk too, would otherwise wait first for the 32 GiB shape's matrices
    /// (docs/gpu-runs.md has how long that took on the H200 host).
    pub fn with_matrices<R>(
        &self,
        family: &dyn CircuitFamily,
        save_behind: bool,
        f: impl FnOnce(&Arc<ShapeMatrices>) -> Result<R, CircuitError>,
    ) -> Result<R, CircuitError> {
        let key = family.shape_key();
        self.prepare(&key)?;
        self.locked(&key, &format!("R1CS-{key}"), || {
            self.with_matrices_locked(family, &key, save_behind, f)
        })
    }

    /// [`Self::with_matrices`] for a caller holding the shape's lock.
    fn with_matrices_locked<R>(
        &self,
        family: &dyn CircuitFamily,
        key: &str,
        save_behind: bool,
        f: impl FnOnce(&Arc<ShapeMatrices>) -> Result<R, CircuitError>,
    ) -> Result<R, CircuitError> {
        if let Some(m) = self.load(key) {
            return f(&m);
        }
        let started = Instant::now();
        let m = Arc::new(family.capture_matrices()?);
        tracing::info!(shape = %key, constraints = m.constraints(), nnz = m.nnz(),
            capture_ms = started.elapsed().as_millis() as u64, "constraint matrices captured");
        if !save_behind {
            self.save(key, &m)?;
            return f(&m);
        }
        std::thread::scope(|scope| {
            let saver = scope.spawn(|| self.save(key, &m));
            let made = f(&m);
            let saved = saver
                .join()
                .unwrap_or_else(|_| Err(Self::err(key, "the matrices writer panicked".into())));
            let made = made?;
            saved.map(|()| made)
        })
    }

    /// The shape's verified matrices file, if there is one; unusable files are removed.
    fn load(&self, key: &str) -> Option<Arc<ShapeMatrices>> {
        for path in self.matrices_files(key) {
            match file::read(&path) {
                Ok(m) if path == self.matrices_path(key, &m.hash()) => {
                    self.remember(key, &m);
                    return Some(Arc::new(m));
                }
                Ok(_) => {
                    tracing::warn!(path = %path.display(), "matrices file named for another hash; rebuilding")
                }
                Err(e) => tracing::warn!(err = %e, "unusable matrices file; rebuilding"),
            }
            let _ = fs::remove_file(&path);
        }
        None
    }

    /// Writes captured matrices beside and renames them into place.
    fn save(&self, key: &str, m: &ShapeMatrices) -> Result<(), CircuitError> {
        let path = self.matrices_path(key, &m.hash());
        let tmp = path.with_extension(format!("r1cs.tmp-{}", std::process::id()));
        file::write(m, &tmp).map_err(|e| Self::err(key, e.to_string()))?;
        fs::rename(&tmp, &path).map_err(|e| {
            Self::err(
                key,
                format!("cannot rename {} into place: {e}", tmp.display()),
            )
        })?;
        sync_dir(&self.dir);
        self.remember(key, m);
        Ok(())
    }

    fn remember(&self, key: &str, m: &ShapeMatrices) {
        self.ids
            .lock()
            .expect("shape ids poisoned")
            .insert(key.to_string(), ShapeId::of(m));
    }

    /// The shape's identity, for synth nodes: computed once per process from the (verified)
    /// matrices, which are not kept in memory. Concurrent callers wait for the first.
    pub fn shape_id(&self, family: &dyn CircuitFamily) -> Result<ShapeId, CircuitError> {
        let key = family.shape_key();
        let known = |ids: &Mutex<HashMap<String, ShapeId>>| {
            ids.lock().expect("shape ids poisoned").get(&key).copied()
        };
        if let Some(id) = known(&self.ids) {
            return Ok(id);
        }
        self.prepare(&key)?;
        self.locked(&key, &format!("R1CS-{key}"), || match known(&self.ids) {
            Some(id) => Ok(id),
            None => self.with_matrices_locked(family, &key, false, |m| Ok(ShapeId::of(m))),
        })
    }

    /// Where generated test parameters for matrices `m` of shape `key` live.
    pub fn test_params_path(&self, key: &str, m: &ShapeMatrices) -> PathBuf {
        let hex: String = m.hash()[..8].iter().map(|b| format!("{b:02x}")).collect();
        self.dir
            .join(format!("TEST-ONLY-INSECURE-{key}-{hex}.params"))
    }

    /// The family's proving key: from memory, else its matrices joined with its parameters —
    /// an operator's file, the family's own file, or generated test parameters where allowed.
    pub fn proving_key(&self, family: &dyn CircuitFamily) -> Result<Arc<ProvingKey>, CircuitError> {
        let key = family.shape_key();
        if let Some(k) = self.keys.lock().expect("key cache poisoned").get(&key) {
            return Ok(k);
        }
        let matrices = self.matrices(family)?;
        let (path, checked) = self.params_path(family, &matrices)?;
        let started = Instant::now();
        let err = |e: String| Self::err(&key, format!("{}: {e}", path.display()));
        // Our own and the family's files are mapped, and parsed by whoever loads the key (a GPU
        // streams a 44 GiB SRS to the device); an operator's file is parsed here, every point
        // checked, before anything uses it.
        let srs = if checked {
            Srs::Memory(Arc::new(
                read_params(&path, true).map_err(|e| err(e.to_string()))?,
            ))
        } else {
            Srs::File(Arc::new(
                ParamsFile::open(&path).map_err(|e| err(e.to_string()))?,
            ))
        };
        let pk = ProvingKey::with_srs(srs, matrices).map_err(|e| err(e.to_string()))?;
        tracing::info!(shape = %key, path = %path.display(), load_ms = started.elapsed().as_millis() as u64, "proving key loaded");
        let pk = Arc::new(pk);
        self.keys
            .lock()
            .expect("key cache poisoned")
            .insert(key, pk.clone());
        Ok(pk)
    }

    /// The family's verifying key, read without loading the rest of its parameters.
    pub fn verifying_key(
        &self,
        family: &dyn CircuitFamily,
    ) -> Result<VerifyingKey<Bls12>, CircuitError> {
        let matrices = self.matrices(family)?;
        let (path, _) = self.params_path(family, &matrices)?;
        let file =
            ParamsFile::open(&path).map_err(|e| Self::err(&family.shape_key(), e.to_string()))?;
        Ok(file.vk().clone())
    }

    /// Which parameter file proves the family, and whether it needs the subgroup checks (an
    /// operator's file does: it did not come from us). The family's own file lives in this
    /// directory and is checked against its published digest first.
    fn params_path(
        &self,
        family: &dyn CircuitFamily,
        matrices: &ShapeMatrices,
    ) -> Result<(PathBuf, bool), CircuitError> {
        let key = family.shape_key();
        let operator = self.files.get(&key).cloned();
        let checked = operator.is_some();
        let own = family.parameter_file().map(|name| self.dir.join(name));
        match operator.or(own) {
            Some(path) if !path.exists() => {
                let hint = if checked {
                    "check the path given with --params-file".to_string()
                } else {
                    family.parameter_source()
                };
                Err(Self::err(
                    &key,
                    format!(
                        "no Groth16 parameters for {key} at {}; {hint}",
                        path.display()
                    ),
                ))
            }
            Some(path) => {
                // Every family and every file, the operator's included: a marker alone must not
                // let a node prove with known toxic waste.
                crate::param_files::refuse_insecure(&path, self.allow_test_params)
                    .map_err(|e| Self::err(&key, e.to_string()))?;
                if let Some(expected) = family.published_digest().filter(|_| !checked) {
                    crate::param_files::verify(&path, expected)
                        .map_err(|e| Self::err(&key, e.to_string()))?;
                }
                Ok((path, checked))
            }
            None => Ok((self.test_params(&key, matrices)?, false)),
        }
    }

    /// The path of the shape's generated test parameters, generating them first if allowed.
    fn test_params(&self, key: &str, m: &ShapeMatrices) -> Result<PathBuf, CircuitError> {
        let path = self.test_params_path(key, m);
        // Checked before the file is looked for: one left by an earlier test run is as
        // insecure as a fresh one.
        if !self.allow_test_params {
            return Err(Self::err(key, format!(
                "no Groth16 parameters for {key}, and this node does not generate test parameters or use existing ones (start it with --allow-test-params to use INSECURE ones, or give a parameter file with --params-file)"
            )));
        }
        if path.exists() {
            return Ok(path);
        }
        self.locked(key, &format!("TEST-ONLY-INSECURE-{key}"), || {
            if path.exists() {
                return Ok(path.clone());
            }
            tracing::warn!(shape = %key, path = %path.display(),
                "generating TEST-ONLY INSECURE Groth16 parameters (toxic waste derivable from the shape); never use them for real proofs");
            let mut rng = ChaCha20Rng::from_seed(partition_seed(
                "cuzk/test-params/v2",
                &m.hash(),
                0,
            ));
            let started = Instant::now();
            let tmp = path.with_extension(format!("params.tmp-{}", std::process::id()));
            write_generated(m, &mut rng, &tmp).map_err(|e| Self::err(key, e))?;
            fs::rename(&tmp, &path).map_err(|e| {
                Self::err(key, format!("cannot rename {} into place: {e}", tmp.display()))
            })?;
            sync_dir(&self.dir);
            tracing::info!(shape = %key, generate_ms = started.elapsed().as_millis() as u64, "test parameters generated");
            Ok(path.clone())
        })
    }
}

/// Generates parameters for `m` into `path` on the CPU.
fn write_generated(m: &ShapeMatrices, rng: &mut ChaCha20Rng, path: &Path) -> Result<(), String> {
    setup::generate_file(m, rng, &CpuFixedBase::new(), path)
        .map(|_| ())
        .map_err(|e| format!("generating {}: {e}", path.display()))
}

/// Persists a rename; losing it only costs a rebuild, so best effort.
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests;
