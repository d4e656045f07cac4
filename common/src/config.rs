//! Configuration for every binary, in one place. Each setting can come from a flag, its
//! environment twin, a TOML file (`--config`) or the default — in that order of precedence.
//! clap merges flag and environment; `merge` lays the file underneath; `resolve` applies
//! defaults and validates before anything starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use cuzk_wire::blob::EncodeOptions;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is invalid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid setting {name}: {message}")]
    Invalid { name: &'static str, message: String },
}

fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        message: message.into(),
    }
}

/// A byte count: a number, optionally with a unit (`15GiB`, `22.5 GiB`, `512MiB`, `80GB`;
/// binary `KiB`..`TiB`, decimal `KB`..`TB`, `B`).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..split], t[split..].trim());
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a byte count"))?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as u64)
}

/// A byte count in a config file: a number of bytes or a string with a unit ([`parse_bytes`]).
fn bytes_setting<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Number(n)) => Ok(Some(n)),
        Some(Raw::Text(t)) => parse_bytes(&t).map(Some).map_err(serde::de::Error::custom),
    }
}

/// Fills every `None` field of `$into` from `$from`.
macro_rules! fill {
    ($into:ident, $from:ident, $($field:ident),+ $(,)?) => {
        $( if $into.$field.is_none() { $into.$field = $from.$field; } )+
    };
}

// After `fill!`, which it uses.
mod gateway;
pub use gateway::{GatewayArgs, GatewayConfig};

/// The file form of the configuration: one table per role.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub nats: NatsArgs,
    #[serde(default)]
    pub synth: SynthArgs,
    #[serde(default)]
    pub gpu: GpuArgs,
    #[serde(default)]
    pub params: ParamArgs,
    #[serde(default)]
    pub gateway: GatewayArgs,
}

impl ConfigFile {
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.into(),
            message: e.to_string(),
        })
    }

    pub fn load_optional(path: Option<&Path>) -> Result<ConfigFile, ConfigError> {
        path.map_or_else(|| Ok(ConfigFile::default()), ConfigFile::load)
    }
}

#[derive(clap::Args, Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsArgs {
    /// NATS server URLs, comma separated (all servers of a cluster).
    #[arg(long = "nats-url", env = "CUZK_NATS_URL", value_delimiter = ',')]
    #[serde(default)]
    pub urls: Option<Vec<String>>,
    /// Client name shown by the server.
    #[arg(long = "nats-name", env = "CUZK_NATS_NAME")]
    pub name: Option<String>,
    #[arg(long = "nats-user", env = "CUZK_NATS_USER")]
    pub user: Option<String>,
    #[arg(
        long = "nats-password",
        env = "CUZK_NATS_PASSWORD",
        hide_env_values = true
    )]
    pub password: Option<String>,
    /// A `.creds` file (JWT + nkey seed).
    #[arg(long = "nats-creds", env = "CUZK_NATS_CREDS")]
    pub creds: Option<PathBuf>,
    /// A file holding an nkey seed.
    #[arg(long = "nats-nkey-seed-file", env = "CUZK_NATS_NKEY_SEED_FILE")]
    pub nkey_seed_file: Option<PathBuf>,
    /// CA certificate to verify the servers with (enables TLS).
    #[arg(long = "nats-tls-ca", env = "CUZK_NATS_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate and key for mutual TLS.
    #[arg(
        long = "nats-tls-cert",
        env = "CUZK_NATS_TLS_CERT",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    #[arg(
        long = "nats-tls-key",
        env = "CUZK_NATS_TLS_KEY",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Inbox prefix, so server permissions can pin each role's reply subjects.
    #[arg(long = "nats-inbox-prefix", env = "CUZK_NATS_INBOX_PREFIX")]
    pub inbox_prefix: Option<String>,
    /// Replicas for streams and buckets this process creates (1, or 3 in a cluster).
    #[arg(long = "nats-replicas", env = "CUZK_NATS_REPLICAS")]
    pub replicas: Option<usize>,
    /// Timeout of a single NATS request or publish acknowledgement, in seconds.
    #[arg(long = "nats-timeout-secs", env = "CUZK_NATS_TIMEOUT_SECS")]
    pub timeout_secs: Option<u64>,
    /// Seconds without an ack or progress before a job or partition is redelivered (set when
    /// the consumers are first created).
    #[arg(long = "nats-ack-wait-secs", env = "CUZK_NATS_ACK_WAIT_SECS")]
    pub ack_wait_secs: Option<u64>,
    /// Sizes of the streams and buckets this process creates: `production` (24.1 GiB reserved
    /// per server) or `local` (2.1 GiB, for private servers and tests); the settings below
    /// override parts of it. Set when a stream is first created.
    #[arg(long = "nats-limits", env = "CUZK_NATS_LIMITS", value_enum)]
    pub limits: Option<LimitsProfile>,
    /// Jobs the jobs stream holds at most; a submission beyond it is refused.
    #[arg(long = "nats-max-queued-jobs", env = "CUZK_NATS_MAX_QUEUED_JOBS")]
    pub max_queued_jobs: Option<i64>,
    /// Bytes the blob buckets hold at most, together (a quarter each, common/src/topology.rs); an
    /// upload beyond it is refused and retried later.
    #[arg(long = "nats-blobs-max-bytes", env = "CUZK_NATS_BLOBS_MAX_BYTES")]
    pub blobs_max_bytes: Option<i64>,
    /// Bytes the inputs bucket holds at most; an upload beyond it is refused.
    #[arg(long = "nats-inputs-max-bytes", env = "CUZK_NATS_INPUTS_MAX_BYTES")]
    pub inputs_max_bytes: Option<i64>,
    /// Days job records, results and staged inputs are kept (default 7).
    #[arg(long = "nats-retention-days", env = "CUZK_NATS_RETENTION_DAYS")]
    pub retention_days: Option<u32>,
    /// Jobs per hour the farm ends at most; with the retention, what the records bucket is sized
    /// for (default: an 8-GPU farm's, docs/deploy.md).
    #[arg(long = "nats-jobs-per-hour", env = "CUZK_NATS_JOBS_PER_HOUR")]
    pub jobs_per_hour: Option<u32>,
    /// The inputs bucket this client stages large inputs into: `cuzk-inputs` (shared, the
    /// default) or a submitter's own `cuzk-inputs-<submitter>`, which `cuzk provision` creates
    /// when given this setting.
    #[arg(long = "nats-inputs-bucket", env = "CUZK_NATS_INPUTS_BUCKET")]
    pub inputs_bucket: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LimitsProfile {
    Production,
    Local,
}

/// Resolved connection settings. `Debug` and `Serialize` leave the password out: configs are
/// logged and printed by `--check-config`.
#[derive(Clone, PartialEq, Serialize)]
pub struct NatsConfig {
    pub urls: Vec<String>,
    pub name: String,
    pub user: Option<String>,
    #[serde(skip)]
    pub password: Option<String>,
    pub creds: Option<PathBuf>,
    pub nkey_seed_file: Option<PathBuf>,
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub inbox_prefix: Option<String>,
    pub replicas: usize,
    pub timeout: Duration,
    pub ack_wait: Duration,
    pub limits: crate::topology::Limits,
    pub inputs_bucket: String,
}

pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";

impl std::fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsConfig")
            .field("urls", &self.urls)
            .field("name", &self.name)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("creds", &self.creds)
            .field("nkey_seed_file", &self.nkey_seed_file)
            .field("tls_ca", &self.tls_ca)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("inbox_prefix", &self.inbox_prefix)
            .field("replicas", &self.replicas)
            .field("timeout", &self.timeout)
            .field("ack_wait", &self.ack_wait)
            .field("limits", &self.limits)
            .field("inputs_bucket", &self.inputs_bucket)
            .finish()
    }
}

impl NatsArgs {
    pub fn merge(mut self, file: NatsArgs) -> NatsArgs {
        fill!(
            self,
            file,
            urls,
            name,
            user,
            password,
            creds,
            nkey_seed_file,
            tls_ca,
            tls_cert,
            tls_key,
            inbox_prefix,
            replicas,
            timeout_secs,
            ack_wait_secs,
            limits,
            max_queued_jobs,
            blobs_max_bytes,
            inputs_max_bytes,
            retention_days,
            jobs_per_hour,
            inputs_bucket
        );
        self
    }

    pub fn resolve(self, default_name: &str) -> Result<NatsConfig, ConfigError> {
        let urls = self
            .urls
            .unwrap_or_else(|| vec![DEFAULT_NATS_URL.to_owned()]);
        if urls.is_empty() || urls.iter().any(|u| u.trim().is_empty()) {
            return Err(invalid(
                "nats.urls",
                "at least one non-empty URL is required",
            ));
        }
        if self.user.is_some() != self.password.is_some() {
            return Err(invalid(
                "nats.user",
                "user and password must be given together",
            ));
        }
        let methods = [
            self.user.is_some(),
            self.creds.is_some(),
            self.nkey_seed_file.is_some(),
        ];
        if methods.iter().filter(|m| **m).count() > 1 {
            return Err(invalid(
                "nats.creds",
                "choose one of user/password, creds, nkey seed",
            ));
        }
        for (name, path) in [
            ("nats.creds", &self.creds),
            ("nats.nkey_seed_file", &self.nkey_seed_file),
            ("nats.tls_ca", &self.tls_ca),
            ("nats.tls_cert", &self.tls_cert),
            ("nats.tls_key", &self.tls_key),
        ] {
            if let Some(path) = path {
                if !path.is_file() {
                    return Err(invalid(
                        name,
                        format!("{} is not a readable file", path.display()),
                    ));
                }
            }
        }
        let replicas = self.replicas.unwrap_or(1);
        if !(1..=5).contains(&replicas) {
            return Err(invalid("nats.replicas", "must be 1..=5"));
        }
        let timeout_secs = self.timeout_secs.unwrap_or(10);
        if timeout_secs == 0 {
            return Err(invalid("nats.timeout_secs", "must be positive"));
        }
        let ack_wait = self
            .ack_wait_secs
            .map_or(crate::topology::DEFAULT_ACK_WAIT, Duration::from_secs);
        if ack_wait < Duration::from_secs(3) {
            return Err(invalid(
                "nats.ack_wait_secs",
                "must be at least 3 (progress acks go every third)",
            ));
        }
        let defaults = match self.limits.unwrap_or(LimitsProfile::Production) {
            LimitsProfile::Production => crate::topology::Limits::default(),
            LimitsProfile::Local => crate::topology::Limits::local(),
        };
        let limits = crate::topology::Limits {
            max_queued_jobs: self.max_queued_jobs.unwrap_or(defaults.max_queued_jobs),
            blobs_max_bytes: self.blobs_max_bytes.unwrap_or(defaults.blobs_max_bytes),
            inputs_max_bytes: self.inputs_max_bytes.unwrap_or(defaults.inputs_max_bytes),
            retention_days: self.retention_days.unwrap_or(defaults.retention_days),
            jobs_per_hour: self.jobs_per_hour.unwrap_or(defaults.jobs_per_hour),
            ..defaults
        };
        if limits.max_queued_jobs < 1 || limits.blobs_max_bytes < 1 || limits.inputs_max_bytes < 1 {
            return Err(invalid(
                "nats.max_queued_jobs",
                "stream and bucket limits must be positive",
            ));
        }
        limits
            .check()
            .map_err(|e| invalid("nats.jobs_per_hour", e.message))?;
        let inputs_bucket = self
            .inputs_bucket
            .unwrap_or_else(|| crate::topology::INPUTS_BUCKET.to_owned());
        if !crate::topology::valid_inputs_bucket(&inputs_bucket) {
            return Err(invalid(
                "nats.inputs_bucket",
                "must be cuzk-inputs or cuzk-inputs-<submitter> (1-32 of A-Z a-z 0-9 _ -)",
            ));
        }
        Ok(NatsConfig {
            urls,
            name: self.name.unwrap_or_else(|| default_name.to_owned()),
            user: self.user,
            password: self.password,
            creds: self.creds,
            nkey_seed_file: self.nkey_seed_file,
            tls_ca: self.tls_ca,
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
            inbox_prefix: self.inbox_prefix,
            replicas,
            timeout: Duration::from_secs(timeout_secs),
            ack_wait,
            limits,
            inputs_bucket,
        })
    }
}

/// Physical memory from /proc/meminfo (8 GiB where it cannot be read).
fn physical_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(8 << 30)
}

/// `--param-cache`'s environment twin (the name `cuzk_circuits::ShapeCache::default_dir`
/// reads).
pub const PARAM_CACHE_ENV: &str = "CUZK_PARAM_CACHE";
/// filecoin-proofs' name for the same directory, honoured as a second twin: operators of
/// lotus and Curio have it set already.
pub const FIL_PARAM_CACHE_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[derive(clap::Args, Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynthArgs {
    /// Threads for circuit synthesis (default: all cores).
    #[arg(long = "synth-threads", env = "CUZK_SYNTH_THREADS")]
    pub threads: Option<usize>,
    /// Partitions synthesized and encoded at once (uploads hold memory, not a slot).
    #[arg(
        long = "synth-partitions-in-flight",
        env = "CUZK_SYNTH_PARTITIONS_IN_FLIGHT"
    )]
    pub partitions_in_flight: Option<usize>,
    /// Most jobs held at once (each holds its message and input). A new job is taken only while
    /// fewer partitions wait than there are threads, so this rarely binds.
    #[arg(long = "synth-jobs-in-flight", env = "CUZK_SYNTH_JOBS_IN_FLIGHT")]
    pub jobs_in_flight: Option<usize>,
    /// Bytes of memory the node may use (its resident set): partitions being synthesized,
    /// encoded and uploaded reserve their size, counted across jobs from each circuit's shape,
    /// from all but 128 MiB of it (default: three quarters of physical memory).
    #[arg(long = "synth-memory-budget", env = "CUZK_SYNTH_MEMORY_BUDGET")]
    pub memory_budget: Option<u64>,
    /// Stop synthesizing while the blobs bucket holds this many bytes of queued partitions
    /// (backpressure from the GPUs).
    #[arg(long = "synth-max-queued-bytes", env = "CUZK_SYNTH_MAX_QUEUED_BYTES")]
    pub max_queued_bytes: Option<u64>,
    /// Largest job accepted, in constraints (per-partition constraints × partitions); larger
    /// ones are refused at intake with the numbers.
    #[arg(
        long = "synth-max-job-constraints",
        env = "CUZK_SYNTH_MAX_JOB_CONSTRAINTS"
    )]
    pub max_job_constraints: Option<u64>,
    /// Fail a job whose record has not changed for this many seconds (the sweeper's backstop
    /// for jobs whose messages were lost). Make it longer than the longest queue wait.
    #[arg(
        long = "synth-no-progress-timeout-secs",
        env = "CUZK_SYNTH_NO_PROGRESS_TIMEOUT_SECS"
    )]
    pub no_progress_timeout_secs: Option<u64>,
    /// Largest inline job input accepted, bytes.
    #[arg(long = "synth-max-inline-input", env = "CUZK_SYNTH_MAX_INLINE_INPUT")]
    pub max_inline_input: Option<usize>,
    /// zstd level for witness blobs.
    #[arg(long = "synth-zstd-level", env = "CUZK_SYNTH_ZSTD_LEVEL")]
    pub zstd_level: Option<i32>,
    /// On SIGTERM, seconds to finish in-flight partitions before exiting anyway (unfinished
    /// work is redelivered to another node).
    #[arg(
        long = "synth-drain-timeout-secs",
        env = "CUZK_SYNTH_DRAIN_TIMEOUT_SECS"
    )]
    pub drain_timeout_secs: Option<u64>,
}

/// The part of a synth node's memory budget its process needs besides partitions (runtime,
/// connections, job messages and inputs); partitions reserve from the rest.
pub const SYNTH_PROCESS_ALLOWANCE: u64 = 128 << 20;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SynthConfig {
    pub threads: usize,
    pub partitions_in_flight: usize,
    pub jobs_in_flight: usize,
    pub memory_budget: u64,
    pub max_queued_bytes: u64,
    pub max_job_constraints: u64,
    pub no_progress_timeout: Duration,
    pub max_inline_input: usize,
    pub zstd_level: i32,
    pub drain_timeout: Duration,
}

impl SynthArgs {
    pub fn merge(mut self, file: SynthArgs) -> SynthArgs {
        fill!(
            self,
            file,
            threads,
            partitions_in_flight,
            jobs_in_flight,
            memory_budget,
            max_queued_bytes,
            max_job_constraints,
            no_progress_timeout_secs,
            max_inline_input,
            zstd_level,
            drain_timeout_secs
        );
        self
    }

    pub fn resolve(self) -> Result<SynthConfig, ConfigError> {
        let threads = self.threads.unwrap_or_else(default_threads);
        let config = SynthConfig {
            threads,
            partitions_in_flight: self.partitions_in_flight.unwrap_or(threads.max(2)),
            jobs_in_flight: self.jobs_in_flight.unwrap_or(64),
            memory_budget: self
                .memory_budget
                .unwrap_or_else(|| physical_memory() / 4 * 3),
            max_queued_bytes: self.max_queued_bytes.unwrap_or(8 << 30),
            max_job_constraints: self.max_job_constraints.unwrap_or(1 << 32),
            no_progress_timeout: Duration::from_secs(self.no_progress_timeout_secs.unwrap_or(3600)),
            max_inline_input: self
                .max_inline_input
                .unwrap_or(cuzk_wire::job::DEFAULT_MAX_INLINE_INPUT),
            zstd_level: self.zstd_level.unwrap_or(EncodeOptions::default().level),
            drain_timeout: Duration::from_secs(self.drain_timeout_secs.unwrap_or(60)),
        };
        if config.threads == 0 {
            return Err(invalid("synth.threads", "must be at least 1"));
        }
        if config.partitions_in_flight == 0 || config.jobs_in_flight == 0 {
            return Err(invalid(
                "synth.partitions_in_flight",
                "in-flight limits must be at least 1",
            ));
        }
        if config.memory_budget < 2 * SYNTH_PROCESS_ALLOWANCE {
            return Err(invalid(
                "synth.memory_budget",
                format!("must be at least {} bytes", 2 * SYNTH_PROCESS_ALLOWANCE),
            ));
        }
        if config.max_queued_bytes == 0 {
            return Err(invalid("synth.max_queued_bytes", "must be positive"));
        }
        if config.no_progress_timeout < Duration::from_secs(1) {
            return Err(invalid(
                "synth.no_progress_timeout_secs",
                "must be at least 1",
            ));
        }
        if !(-7..=22).contains(&config.zstd_level) {
            return Err(invalid("synth.zstd_level", "must be in -7..=22"));
        }
        Ok(config)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// CUDA when a GPU and driver are present, otherwise the CPU.
    Auto,
    Cpu,
    Cuda,
}

#[derive(clap::Args, Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuArgs {
    #[arg(long = "gpu-backend", env = "CUZK_GPU_BACKEND", value_enum)]
    pub backend: Option<BackendKind>,
    /// Proving workers per device (per node for the CPU backend). Default: 2 on a GPU (one
    /// uploads its witness while the other proves), 1 on the CPU.
    #[arg(long = "gpu-workers", env = "CUZK_GPU_WORKERS")]
    pub workers: Option<usize>,
    /// Partitions fetched and decoded ahead of the one being proved, per worker.
    #[arg(long = "gpu-prefetch", env = "CUZK_GPU_PREFETCH")]
    pub prefetch: Option<usize>,
    /// Threads for the CPU backend (default: all cores).
    #[arg(long = "gpu-cpu-threads", env = "CUZK_GPU_CPU_THREADS")]
    pub cpu_threads: Option<usize>,
    /// Device memory the node may allocate on each GPU — proving keys, matrices, working
    /// buffers, scratch — a hard cap; bytes or with a unit (`15GiB`). Within it each shape gets
    /// a plan: what of its key stays on the device and what streams from pinned host memory
    /// (`--explain-plan` prints it). Default, and at most: the device's memory less 2 GiB.
    #[arg(long = "gpu-memory-budget", env = "CUZK_GPU_MEMORY_BUDGET", value_parser = parse_bytes)]
    #[serde(default, deserialize_with = "bytes_setting")]
    pub memory_budget: Option<u64>,
    /// Verify every partition proof before reporting the job (cheap: a few pairings).
    #[arg(long = "gpu-verify", env = "CUZK_GPU_VERIFY")]
    pub verify: Option<bool>,
    /// On SIGTERM, seconds to finish the partitions being proved before exiting anyway
    /// (unfinished work is redelivered to another node).
    #[arg(long = "gpu-drain-timeout-secs", env = "CUZK_GPU_DRAIN_TIMEOUT_SECS")]
    pub drain_timeout_secs: Option<u64>,
    /// A bellperson parameter file for a circuit shape, as SHAPE=PATH (repeatable); shapes
    /// without one use the parameter cache.
    #[arg(long = "params-file", env = "CUZK_PARAMS_FILES", value_delimiter = ',')]
    pub params_files: Option<Vec<String>>,
    /// Circuits whose proving keys each device loads at start, before taking work: a JSON
    /// array of `{"name": ..., "params": {...}}`, as in a job.
    #[arg(long = "gpu-preload", env = "CUZK_GPU_PRELOAD")]
    pub preload: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuConfig {
    pub backend: BackendKind,
    /// `None`: by backend (`workers`).
    pub workers: Option<usize>,
    pub prefetch: usize,
    pub cpu_threads: usize,
    pub memory_budget: Option<u64>,
    pub verify: bool,
    pub params_files: Vec<(String, PathBuf)>,
    pub preload: Vec<serde_json::Value>,
    pub drain_timeout: Duration,
}

impl GpuConfig {
    /// Proving workers per device on a GPU (`cuda`) or per node on the CPU.
    pub fn workers(&self, cuda: bool) -> usize {
        self.workers.unwrap_or(if cuda { 2 } else { 1 })
    }
}

impl GpuArgs {
    pub fn merge(mut self, file: GpuArgs) -> GpuArgs {
        fill!(
            self,
            file,
            backend,
            workers,
            prefetch,
            cpu_threads,
            memory_budget,
            verify,
            params_files,
            preload,
            drain_timeout_secs
        );
        self
    }

    pub fn resolve(self) -> Result<GpuConfig, ConfigError> {
        let config = GpuConfig {
            backend: self.backend.unwrap_or(BackendKind::Auto),
            workers: self.workers,
            prefetch: self.prefetch.unwrap_or(1),
            cpu_threads: self.cpu_threads.unwrap_or_else(default_threads),
            memory_budget: self.memory_budget,
            verify: self.verify.unwrap_or(true),
            params_files: parse_params_files(self.params_files.unwrap_or_default())?,
            preload: parse_preload(self.preload.as_deref())?,
            drain_timeout: Duration::from_secs(self.drain_timeout_secs.unwrap_or(120)),
        };
        if config.workers == Some(0) || config.cpu_threads == 0 {
            return Err(invalid(
                "gpu.workers",
                "workers and threads must be at least 1",
            ));
        }
        if config.prefetch > 16 {
            return Err(invalid(
                "gpu.prefetch",
                "at most 16 (each prefetched blob is held in memory)",
            ));
        }
        Ok(config)
    }
}

/// Where each circuit shape's constraint matrices and Groth16 parameters live; both node roles
/// read them (synth nodes stamp blobs with the matrices' hash).
#[derive(clap::Args, Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamArgs {
    /// Directory of every circuit's Groth16 parameters — Filecoin's published files
    /// (`v28-*.params`, checked against their published digests on first use) and generated
    /// test ones (`TEST-ONLY-INSECURE-*`) — and of the constraint matrices by circuit shape.
    /// `FIL_PROOFS_PARAMETER_CACHE` is honoured too (default: $XDG_CACHE_HOME/cuzk/params or
    /// ~/.cache/cuzk/params).
    #[arg(long = "param-cache", env = PARAM_CACHE_ENV)]
    pub cache: Option<PathBuf>,
    /// Generate TEST-ONLY, INSECURE Groth16 parameters for shapes that have none, and prove with
    /// parameter files marked insecure. Never in production: whoever made them can forge proofs.
    #[arg(long = "allow-test-params", env = "CUZK_ALLOW_TEST_PARAMS",
        num_args = 0..=1, default_missing_value = "true")]
    pub allow_test: Option<bool>,
    /// Host memory for proving keys kept between uses, bytes (least recently used evicted first).
    #[arg(long = "param-host-cache-bytes", env = "CUZK_PARAM_HOST_CACHE_BYTES")]
    pub host_cache_bytes: Option<u64>,
    /// Accept jobs on synthetic inputs (random data of a real shape, for timings; their proofs
    /// prove nothing and are not verified).
    #[arg(long = "allow-synthetic", env = "CUZK_ALLOW_SYNTHETIC",
        num_args = 0..=1, default_missing_value = "true")]
    pub allow_synthetic: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParamConfig {
    /// `None`: the default directory, resolved where it is used.
    pub cache: Option<PathBuf>,
    pub allow_test: bool,
    pub host_cache_bytes: u64,
    pub allow_synthetic: bool,
}

impl ParamArgs {
    pub fn merge(mut self, file: ParamArgs) -> ParamArgs {
        // The second environment twin ranks with the first: above the file.
        if self.cache.is_none() {
            self.cache = std::env::var_os(FIL_PARAM_CACHE_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from);
        }
        fill!(
            self,
            file,
            cache,
            allow_test,
            host_cache_bytes,
            allow_synthetic
        );
        self
    }

    /// `allow_test_default`: what an unset `--allow-test-params` means for this command (`cuzk
    /// local` and the tests allow test parameters; the node commands never do by default).
    pub fn resolve(self, allow_test_default: bool) -> ParamConfig {
        ParamConfig {
            cache: self.cache,
            allow_test: self.allow_test.unwrap_or(allow_test_default),
            host_cache_bytes: self.host_cache_bytes.unwrap_or(8 << 30),
            allow_synthetic: self.allow_synthetic.unwrap_or(false),
        }
    }
}

fn parse_preload(text: Option<&str>) -> Result<Vec<serde_json::Value>, ConfigError> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let bad = |m: String| invalid("gpu.preload", m);
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let specs = value
        .as_array()
        .ok_or_else(|| bad("must be a JSON array of circuit specs".into()))?;
    for spec in specs {
        if !spec.get("name").is_some_and(|n| n.is_string()) {
            return Err(bad(format!("{spec} has no \"name\"")));
        }
    }
    Ok(specs.clone())
}

fn parse_params_files(entries: Vec<String>) -> Result<Vec<(String, PathBuf)>, ConfigError> {
    entries
        .into_iter()
        .map(|entry| {
            let (shape, path) = entry.split_once('=').ok_or_else(|| {
                invalid("gpu.params_files", format!("{entry:?} is not SHAPE=PATH"))
            })?;
            let path = PathBuf::from(path);
            if !path.is_file() {
                return Err(invalid(
                    "gpu.params_files",
                    format!("{} is not a readable file", path.display()),
                ));
            }
            Ok((shape.to_owned(), path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_units_in_flags_and_files() {
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert_eq!(parse_bytes("15GiB"), Ok(15 << 30));
        assert_eq!(parse_bytes("22.5 GiB"), Ok(45 << 29));
        assert_eq!(parse_bytes("80GB"), Ok(80_000_000_000));
        assert_eq!(parse_bytes("512mib"), Ok(512 << 20));
        assert!(parse_bytes("15 parsecs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(parse_bytes("GiB").is_err());
        assert!(parse_bytes("-1GiB").is_err());
        let file: ConfigFile = toml::from_str("[gpu]\nmemory_budget = \"22GiB\"\n").unwrap();
        assert_eq!(file.gpu.memory_budget, Some(22 << 30));
        let file: ConfigFile = toml::from_str("[gpu]\nmemory_budget = 1000\n").unwrap();
        assert_eq!(file.gpu.memory_budget, Some(1000));
        assert!(toml::from_str::<ConfigFile>("[gpu]\nmemory_budget = \"lots\"\n").is_err());
    }

    #[test]
    fn cli_overrides_file_overrides_defaults() {
        let file: ConfigFile = toml::from_str(
            "[synth]\nthreads = 3\nzstd_level = 5\n[nats]\nurls = [\"nats://a:1\"]\n",
        )
        .unwrap();
        let cli = SynthArgs {
            threads: Some(7),
            ..Default::default()
        };
        let synth = cli.merge(file.synth).resolve().unwrap();
        assert_eq!(
            (synth.threads, synth.zstd_level, synth.jobs_in_flight),
            (7, 5, 64)
        );
        let nats = NatsArgs::default().merge(file.nats).resolve("x").unwrap();
        assert_eq!(nats.urls, vec!["nats://a:1".to_owned()]);
        assert_eq!(nats.name, "x");
        let secret = NatsArgs {
            user: Some("u".into()),
            password: Some("hunter2".into()),
            ..Default::default()
        };
        let secret = secret.resolve("x").unwrap();
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert!(!serde_json::to_string(&secret).unwrap().contains("hunter2"));
    }

    #[test]
    fn rejects_bad_settings() {
        assert!(toml::from_str::<ConfigFile>("[synth]\nthreadz = 1\n").is_err());
        let zero = SynthArgs {
            threads: Some(0),
            ..Default::default()
        };
        assert!(zero.resolve().is_err());
        let half_auth = NatsArgs {
            user: Some("u".into()),
            ..Default::default()
        };
        assert!(half_auth.resolve("x").is_err());
        let bad_params = GpuArgs {
            params_files: Some(vec!["sha256-b1".into()]),
            ..Default::default()
        };
        assert!(bad_params
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("SHAPE=PATH"));
        let missing = NatsArgs {
            creds: Some("/nonexistent.creds".into()),
            ..Default::default()
        };
        let err = missing.resolve("x").unwrap_err().to_string();
        assert!(err.contains("nonexistent"), "{err}");
    }
}
