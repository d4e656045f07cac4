//! Configuration for every binary, in one place. Each setting can come from a flag, its
//! environment twin, a TOML file (`--config`, one table per role) or its default — in that
//! order of precedence — and is declared once, in its table's `settings!` (`settings.rs`):
//! clap merges flag and environment; `merge` lays the file underneath; `resolve` applies the
//! defaults and checks before anything starts.

use std::path::{Path, PathBuf};

use serde::Deserialize;

mod settings;
pub mod units;

mod gateway;
mod gpu;
mod nats;
mod synth;

pub use gateway::{GatewayArgs, GatewayConfig};
pub use gpu::{
    BackendKind, GpuArgs, GpuConfig, MsmAccumulation, ParamArgs, ParamConfig, ParamsFile, Preload,
    FIL_PARAM_CACHE_ENV, PARAM_CACHE_ENV,
};
pub use nats::{LimitsProfile, NatsArgs, NatsConfig, DEFAULT_NATS_TIMEOUT, DEFAULT_NATS_URL};
pub use synth::{SynthArgs, SynthConfig, SYNTH_PROCESS_ALLOWANCE};
pub use units::{parse_bytes, parse_duration, Bytes, Secret, Span};

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

pub(crate) fn invalid(name: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        name,
        message: message.into(),
    }
}

/// Each named path that is set must be a readable file.
fn readable_files(paths: &[(&'static str, &Option<PathBuf>)]) -> Result<(), ConfigError> {
    for (name, path) in paths {
        if let Some(path) = path.as_ref().filter(|p| !p.is_file()) {
            return Err(invalid(
                name,
                format!("{} is not a readable file", path.display()),
            ));
        }
    }
    Ok(())
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

fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_and_spans_take_units_in_files() {
        let file: ConfigFile = toml::from_str("[gpu]\nmemory_budget = \"22GiB\"\n").unwrap();
        assert_eq!(file.gpu.memory_budget, Some(Bytes(22 << 30)));
        let file: ConfigFile = toml::from_str("[gpu]\nmemory_budget = 1000\n").unwrap();
        assert_eq!(file.gpu.memory_budget, Some(Bytes(1000)));
        assert!(toml::from_str::<ConfigFile>("[gpu]\nmemory_budget = \"lots\"\n").is_err());
        let file: ConfigFile =
            toml::from_str("[synth]\ndrain_timeout = \"2m\"\nno_progress_timeout = 90\n").unwrap();
        let synth = file.synth.resolve().unwrap();
        assert_eq!(synth.drain_timeout, std::time::Duration::from_secs(120));
        assert_eq!(
            synth.no_progress_timeout,
            std::time::Duration::from_secs(90)
        );
    }

    /// A setting's old name still works in a file, and its new name wins where both are set
    /// (flags and environment are covered by cli/tests/config.rs).
    #[test]
    fn old_names_are_still_read() {
        let file: ConfigFile =
            toml::from_str("[synth]\ndrain_timeout_secs = 7\n[gateway]\nmax_wait_secs = 9\n")
                .unwrap();
        assert_eq!(file.synth.drain_timeout, Some(Span::secs(7)));
        assert_eq!(file.gateway.max_wait, Some(Span::secs(9)));
        assert!(toml::from_str::<ConfigFile>(
            "[synth]\ndrain_timeout_secs = 7\ndrain_timeout = 8\n"
        )
        .is_err());
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
            password: Some(Secret::from("hunter2".to_owned())),
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
        let missing = NatsArgs {
            creds: Some("/nonexistent.creds".into()),
            ..Default::default()
        };
        let err = missing.resolve("x").unwrap_err().to_string();
        assert!(err.contains("nonexistent"), "{err}");
    }
}
