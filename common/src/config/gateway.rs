//! `cuzk gateway`'s settings (Curio's proving API, `gateway/`; docs/gateway.md lists them with
//! their defaults).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{invalid, ConfigError};
use crate::listen::ListenAddr;

#[derive(clap::Args, Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayArgs {
    /// host:port, or unix:PATH for a unix socket (default: 127.0.0.1:9820).
    #[arg(long = "listen", env = "CUZK_GATEWAY_LISTEN")]
    pub listen: Option<ListenAddr>,
    /// Longest wait of a Prove call, or of an AwaitProof without a timeout, in seconds; a
    /// client's gRPC deadline cuts either shorter (default: one day).
    #[arg(long = "max-wait-secs", env = "CUZK_GATEWAY_MAX_WAIT_SECS")]
    pub max_wait_secs: Option<u64>,
    /// Longest wait for the cluster's state in GetStatus and GetMetrics, seconds (default: 10).
    #[arg(long = "status-timeout-secs", env = "CUZK_GATEWAY_STATUS_TIMEOUT_SECS")]
    pub status_timeout_secs: Option<u64>,
    /// Longest wait for the GPU nodes' answers to PreloadSRS / EvictSRS, seconds: loading a
    /// 32 GiB key from disk takes minutes (default: 600).
    #[arg(long = "srs-timeout-secs", env = "CUZK_GATEWAY_SRS_TIMEOUT_SECS")]
    pub srs_timeout_secs: Option<u64>,
    /// Largest gRPC message accepted or sent, bytes (default: 256 MiB, Curio's client's limit:
    /// a 64 GiB sector's C1 output is ~100 MB of JSON).
    #[arg(long = "max-message-bytes", env = "CUZK_GATEWAY_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatewayConfig {
    pub listen: ListenAddr,
    pub max_wait: Duration,
    pub status_timeout: Duration,
    pub srs_timeout: Duration,
    pub max_message_bytes: usize,
}

impl GatewayArgs {
    pub fn merge(mut self, file: GatewayArgs) -> GatewayArgs {
        fill!(
            self,
            file,
            listen,
            max_wait_secs,
            status_timeout_secs,
            srs_timeout_secs,
            max_message_bytes
        );
        self
    }

    pub fn resolve(self) -> Result<GatewayConfig, ConfigError> {
        let secs = |value: Option<u64>, default: u64, name: &'static str| match value {
            Some(0) => Err(invalid(name, "must be at least 1")),
            value => Ok(Duration::from_secs(value.unwrap_or(default))),
        };
        let config = GatewayConfig {
            listen: self
                .listen
                .unwrap_or_else(|| ListenAddr::Tcp("127.0.0.1:9820".into())),
            max_wait: secs(self.max_wait_secs, 24 * 3600, "gateway.max_wait_secs")?,
            status_timeout: secs(self.status_timeout_secs, 10, "gateway.status_timeout_secs")?,
            srs_timeout: secs(self.srs_timeout_secs, 600, "gateway.srs_timeout_secs")?,
            max_message_bytes: self.max_message_bytes.unwrap_or(256 << 20),
        };
        // Below a job message's size the gateway could not take even an inline job's input.
        if config.max_message_bytes < crate::topology::MAX_JOB_MESSAGE as usize {
            return Err(invalid(
                "gateway.max_message_bytes",
                format!(
                    "must be at least {} (a job message)",
                    crate::topology::MAX_JOB_MESSAGE
                ),
            ));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::super::ConfigFile;
    use super::*;

    #[test]
    fn gateway_table_fills_in_under_flags() {
        let file: ConfigFile = toml::from_str(
            "[gateway]\nlisten = \"unix:/run/cuzk.sock\"\nmax_wait_secs = 60\nmax_message_bytes = 8388608\n",
        )
        .unwrap();
        let cli = GatewayArgs {
            max_wait_secs: Some(5),
            ..Default::default()
        };
        let gateway = cli.merge(file.gateway).resolve().unwrap();
        assert_eq!(gateway.listen, ListenAddr::Unix("/run/cuzk.sock".into()));
        assert_eq!(gateway.max_wait, Duration::from_secs(5));
        assert_eq!(gateway.max_message_bytes, 8 << 20);
        assert_eq!(gateway.srs_timeout, Duration::from_secs(600));
        let defaults = GatewayArgs::default().resolve().unwrap();
        assert_eq!(defaults.listen.to_string(), "127.0.0.1:9820");
        assert_eq!(defaults.max_message_bytes, 256 << 20);
        assert!(toml::from_str::<ConfigFile>("[gateway]\nlisten = \"nowhere\"\n").is_err());
        for bad in [
            GatewayArgs {
                status_timeout_secs: Some(0),
                ..Default::default()
            },
            GatewayArgs {
                max_message_bytes: Some(1000),
                ..Default::default()
            },
        ] {
            assert!(bad.resolve().is_err());
        }
    }
}
