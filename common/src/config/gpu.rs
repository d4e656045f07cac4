//! A GPU node's settings (`[gpu]`) and where both node roles find parameters (`[params]`).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::units::{Bytes, FromArg, Span};
use super::{default_threads, settings::settings, ConfigError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// CUDA when a GPU and driver are present, otherwise the CPU.
    Auto,
    Cpu,
    Cuda,
}

/// How a device's G1 MSMs add points into their buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum MsmAccumulation {
    /// In affine coordinates, one inversion shared by a block's additions, wherever one wave of
    /// it fills the device within the MSM's scratch (H's MSM, the large passes); XYZZ elsewhere.
    BySize,
    /// XYZZ mixed additions in every MSM.
    Xyzz,
}

/// `--param-cache`'s environment twin (the name `cuzk_circuits::ShapeCache::default_dir`
/// reads).
pub const PARAM_CACHE_ENV: &str = "CUZK_PARAM_CACHE";
/// filecoin-proofs' name for the same directory, honoured as a second twin: operators of
/// lotus and Curio have it set already.
pub const FIL_PARAM_CACHE_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

settings! {
    table "gpu": GpuArgs => GpuConfig {
        #[arg(long = "gpu-backend", env = "CUZK_GPU_BACKEND", value_enum)]
        backend: BackendKind = BackendKind::Auto, shown "auto";
        /// Proving workers per device (per node for the CPU backend): 2 on a GPU (one uploads
        /// its witness while the other proves), 1 on the CPU.
        #[arg(long = "gpu-workers", env = "CUZK_GPU_WORKERS")]
        workers: usize => Option<usize> = None, shown "by backend",
            check |n| *n != Some(0) => "must be at least 1";
        /// Partitions proved at once on each device, each on streams of its own, for shapes
        /// whose plan has room for every one's working buffers beside the key and whose MSMs
        /// leave gaps worth filling (small shapes; the others take the device one partition at
        /// a time): one fills the gaps of the other's host round trips. At most the workers
        /// per device.
        #[arg(long = "gpu-lanes", env = "CUZK_GPU_LANES")]
        lanes: usize = 2, shown "2",
            check |n| (1..=8).contains(n) => "from 1 to 8";
        /// Partitions fetched and decoded ahead of the one being proved, per worker.
        #[arg(long = "gpu-prefetch", env = "CUZK_GPU_PREFETCH")]
        prefetch: usize = 1, shown "1",
            check |n| *n <= 16 => "at most 16 (each prefetched blob is held in memory)";
        /// Threads for the CPU backend.
        #[arg(long = "gpu-cpu-threads", env = "CUZK_GPU_CPU_THREADS")]
        cpu_threads: usize = default_threads(), shown "all cores",
            check |n| *n >= 1 => "must be at least 1";
        /// Device memory the node may allocate on each GPU — proving keys, matrices, working
        /// buffers, scratch — a hard cap (`15GiB`). Within it each shape gets a plan: what of
        /// its key stays on the device and what streams from pinned host memory
        /// (`--explain-plan` prints it).
        #[arg(long = "gpu-memory-budget", env = "CUZK_GPU_MEMORY_BUDGET")]
        memory_budget: Bytes => Option<u64> = None,
            shown "the device's memory less 2GiB, also the most";
        /// How G1 MSMs add into their buckets: `by-size` (batch-affine where it fits, XYZZ
        /// elsewhere) or `xyzz` (everywhere; docs/gpu.md compares the two).
        #[arg(long = "gpu-msm-accumulation", env = "CUZK_GPU_MSM_ACCUMULATION", value_enum)]
        msm_accumulation: MsmAccumulation = MsmAccumulation::BySize, shown "by-size";
        /// Verify every partition proof, against the public inputs derived from the job, before
        /// reporting the job (cheap: a few pairings); off, results say `verified: false`.
        #[arg(long = "gpu-verify", env = "CUZK_GPU_VERIFY")]
        verify: bool = true, shown "true";
        /// On SIGTERM, time to finish the partitions being proved before exiting anyway
        /// (unfinished work is redelivered to another node).
        #[arg(long = "gpu-drain-timeout", env = "CUZK_GPU_DRAIN_TIMEOUT")]
        drain_timeout: Span => Duration = Duration::from_secs(120), shown "120s",
            was "gpu-drain-timeout-secs" "CUZK_GPU_DRAIN_TIMEOUT_SECS" "drain_timeout_secs";
        /// A bellperson parameter file for a circuit shape, as SHAPE=PATH (repeatable); shapes
        /// without one use the parameter cache.
        #[arg(long = "params-file", env = "CUZK_PARAMS_FILES", value_delimiter = ',')]
        params_files: Vec<ParamsFile> => Vec<(String, PathBuf)> = Vec::new(), shown "none";
        /// Circuits whose proving keys each device loads at start, before taking work: a JSON
        /// array of `{"name": ..., "params": {...}}`, as in a job.
        #[arg(long = "gpu-preload", env = "CUZK_GPU_PRELOAD")]
        preload: Preload => Vec<serde_json::Value> = Vec::new(), shown "none";
    }
}

impl GpuConfig {
    /// Proving workers per device on a GPU (`cuda`) or per node on the CPU.
    pub fn workers(&self, cuda: bool) -> usize {
        self.workers.unwrap_or(if cuda { 2 } else { 1 })
    }

    fn check(&self) -> Result<(), ConfigError> {
        let files: Vec<_> = self
            .params_files
            .iter()
            .map(|(_, p)| Some(p.clone()))
            .collect();
        let named: Vec<_> = files.iter().map(|f| ("gpu.params_files", f)).collect();
        super::readable_files(&named)
    }
}

/// `SHAPE=PATH`: the parameter file of one circuit shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamsFile {
    shape: String,
    path: PathBuf,
}

impl FromStr for ParamsFile {
    type Err = String;
    fn from_str(entry: &str) -> Result<ParamsFile, String> {
        let (shape, path) = entry
            .split_once('=')
            .ok_or_else(|| format!("{entry:?} is not SHAPE=PATH"))?;
        Ok(ParamsFile {
            shape: shape.to_owned(),
            path: PathBuf::from(path),
        })
    }
}

impl<'de> Deserialize<'de> for ParamsFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ParamsFile, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl FromArg<Vec<ParamsFile>> for Vec<(String, PathBuf)> {
    fn from_arg(files: Vec<ParamsFile>) -> Self {
        files.into_iter().map(|f| (f.shape, f.path)).collect()
    }
}

/// A JSON array of circuit specs, each with a `"name"`.
#[derive(Debug, Clone, PartialEq)]
pub struct Preload(Vec<serde_json::Value>);

impl FromStr for Preload {
    type Err = String;
    fn from_str(text: &str) -> Result<Preload, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let specs = value
            .as_array()
            .ok_or("must be a JSON array of circuit specs")?;
        if let Some(spec) = specs
            .iter()
            .find(|s| !s.get("name").is_some_and(serde_json::Value::is_string))
        {
            return Err(format!("{spec} has no \"name\""));
        }
        Ok(Preload(specs.clone()))
    }
}

impl<'de> Deserialize<'de> for Preload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Preload, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl FromArg<Preload> for Vec<serde_json::Value> {
    fn from_arg(preload: Preload) -> Self {
        preload.0
    }
}

settings! {
    /// Where each circuit shape's constraint matrices and Groth16 parameters live; both node
    /// roles read them (synth nodes stamp blobs with the matrices' hash).
    table "params": ParamArgs => ParamConfig resolve(allow_test_default: bool) {
        /// Directory of every circuit's Groth16 parameters — Filecoin's published files
        /// (`v28-*.params`, checked against their published digests on first use) and
        /// generated test ones (`TEST-ONLY-INSECURE-*`) — and of the constraint matrices by
        /// circuit shape. `FIL_PROOFS_PARAMETER_CACHE` is read too, below this variable and
        /// above the file.
        #[arg(long = "param-cache", env = PARAM_CACHE_ENV)]
        cache: PathBuf => Option<PathBuf> = None,
            shown "$XDG_CACHE_HOME/cuzk/params or ~/.cache/cuzk/params",
            also_env "FIL_PROOFS_PARAMETER_CACHE";
        /// Generate TEST-ONLY, INSECURE Groth16 parameters for shapes that have none, and prove
        /// with parameter files marked insecure. Never in production: whoever made them can
        /// forge proofs.
        #[arg(long = "allow-test-params", env = "CUZK_ALLOW_TEST_PARAMS",
            num_args = 0..=1, default_missing_value = "true")]
        allow_test: bool = allow_test_default, shown "false; true for cuzk local and bench";
        /// Host memory for proving keys kept between uses (least recently used evicted first).
        #[arg(long = "param-host-cache-bytes", env = "CUZK_PARAM_HOST_CACHE_BYTES")]
        host_cache_bytes: Bytes => u64 = 8 << 30, shown "8GiB";
        /// Accept jobs on synthetic inputs (random data of a real shape, for timings; their
        /// proofs prove nothing and are not verified).
        #[arg(long = "allow-synthetic", env = "CUZK_ALLOW_SYNTHETIC",
            num_args = 0..=1, default_missing_value = "true")]
        allow_synthetic: bool = false, shown "false";
    }
}

impl ParamConfig {
    #[allow(clippy::unnecessary_wraps)] // every table has one; this one has no cross checks
    fn check(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_files_and_preload_are_checked() {
        let bad = GpuArgs {
            params_files: Some(vec!["sha256-b1=/nonexistent.params".parse().unwrap()]),
            ..Default::default()
        };
        let err = bad.resolve().unwrap_err().to_string();
        assert!(err.contains("nonexistent"), "{err}");
        assert!("sha256-b1"
            .parse::<ParamsFile>()
            .unwrap_err()
            .contains("SHAPE=PATH"));
        assert!("[{\"name\": \"sha256\"}]".parse::<Preload>().is_ok());
        assert!("[{\"params\": {}}]"
            .parse::<Preload>()
            .unwrap_err()
            .contains("name"));
        assert!("{}".parse::<Preload>().is_err());
    }
}
