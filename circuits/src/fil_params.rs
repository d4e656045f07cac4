//! TEST-ONLY INSECURE Groth16 parameters installed under a Filecoin published name
//! (`v28-<cache id>.params`), so that filecoin-proofs' own provers and verifiers read the same
//! files our nodes prove with. Shared by every Filecoin family (`porep/`, `post.rs`).

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use cuzk_prover::setup::FixedBase;
use storage_proofs_core::parameter_cache::PARAMETERS;

use crate::{CircuitError, CircuitFamily, ShapeCache};

/// Whether `name` is a parameter file filecoin-proofs publishes (listed in its
/// `parameters.json` with a digest).
pub fn is_published(name: &str) -> bool {
    PARAMETERS.contains_key(name)
}

/// The digest filecoin-proofs publishes for the parameter file `name`.
pub(crate) fn published_digest(name: &str) -> Option<&'static str> {
    PARAMETERS.get(name).map(|data| data.digest.as_str())
}

/// Generates random (INSECURE, TEST-ONLY) parameters for `family` from its matrices (captured
/// once by `shapes`; toxic waste from the OS RNG; query points by `engine`) into `path`, then
/// runs `derive`, which has filecoin-proofs write the `.vk` and `.meta` beside it (so they are
/// exactly what its verifier expects). Does not regenerate an existing `.params`. A lock file
/// makes concurrent callers wait for one generator. The file is marked insecure, and refused in
/// a production directory unless `force` ([`crate::param_files`]).
pub(crate) fn install_test_parameters(
    family: &dyn CircuitFamily,
    path: &Path,
    shapes: &ShapeCache,
    engine: &dyn FixedBase,
    force: bool,
    derive: impl FnOnce() -> Result<(), String>,
) -> Result<PathBuf, CircuitError> {
    let err = |reason: String| CircuitError::Params {
        shape: family.shape_key(),
        reason,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
    }
    let lock_path = path.with_extension("params.cuzk-lock");
    let lock = File::create(&lock_path)
        .map_err(|e| err(format!("cannot create {}: {e}", lock_path.display())))?;
    lock.lock()
        .map_err(|e| err(format!("cannot lock {}: {e}", lock_path.display())))?;
    if !path.exists() {
        crate::param_files::claim_for_insecure(path, force, is_published)
            .map_err(|e| err(e.to_string()))?;
        tracing::warn!(
            shape = %family.shape_key(),
            path = %path.display(),
            "generating INSECURE TEST-ONLY Groth16 parameters; proofs made with them prove nothing"
        );
        // Written beside and renamed into place: filecoin-proofs takes an existing `.params`
        // file as complete.
        let started = std::time::Instant::now();
        // Freshly captured matrices go to the shape cache while the parameters are written.
        shapes.with_matrices(family, true, |matrices| {
            tracing::info!(secs = started.elapsed().as_secs_f64(), "matrices ready");
            let started = std::time::Instant::now();
            let tmp = path.with_extension(format!("params.tmp-{}", std::process::id()));
            let write = || -> Result<(), CircuitError> {
                let (_, _, synced) = cuzk_prover::setup::generate_file(
                    matrices,
                    &mut rand::rngs::OsRng,
                    engine,
                    &tmp,
                )
                .map_err(|e| err(format!("generating {}: {e}", tmp.display())))?;
                // Timed apart: what the disk still owed once generation ended.
                tracing::info!(secs = synced.as_secs_f64(), "parameters synced to disk");
                Ok(())
            };
            write().inspect_err(|_| {
                let _ = fs::remove_file(&tmp);
            })?;
            fs::rename(&tmp, path)
                .map_err(|e| err(format!("cannot rename {} into place: {e}", tmp.display())))?;
            tracing::info!(secs = started.elapsed().as_secs_f64(), "parameters written");
            Ok(())
        })?;
    }
    derive().map_err(err)?;
    Ok(path.to_owned())
}
