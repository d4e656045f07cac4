//! `cuzk gateway`'s settings (Curio's proving API, `gateway/`; docs/gateway.md lists them with
//! their defaults). The limits bound what any client that reaches the port can make the
//! gateway hold: calls, waits, request bytes, streams per connection and time.

use std::path::PathBuf;
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
    /// Largest SubmitProof or Prove message accepted, bytes (default: 128 MiB, about twice the
    /// largest Curio sends: a 32 GiB sector's C1 output is ~50 MB). Other calls take 64 KiB.
    #[arg(long = "max-message-bytes", env = "CUZK_GATEWAY_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: Option<usize>,
    /// Request bytes held by all calls together; a call that would pass it is refused with
    /// RESOURCE_EXHAUSTED (default: 1 GiB; at least max_message_bytes).
    #[arg(long = "max-inflight-bytes", env = "CUZK_GATEWAY_MAX_INFLIGHT_BYTES")]
    pub max_inflight_bytes: Option<usize>,
    /// Calls served at once, all connections together; more are refused with
    /// RESOURCE_EXHAUSTED, not queued (default: 1024).
    #[arg(long = "max-calls", env = "CUZK_GATEWAY_MAX_CALLS")]
    pub max_calls: Option<usize>,
    /// AwaitProof and Prove calls waiting at once, each on a NATS subscription of its own
    /// (default: 512).
    #[arg(long = "max-awaits", env = "CUZK_GATEWAY_MAX_AWAITS")]
    pub max_awaits: Option<usize>,
    /// Concurrent HTTP/2 streams (calls) one connection may open (default: 64).
    #[arg(
        long = "max-streams-per-connection",
        env = "CUZK_GATEWAY_MAX_STREAMS_PER_CONNECTION"
    )]
    pub max_streams_per_connection: Option<u32>,
    /// Deadline of a call whose client sent none, seconds, on top of the wait the call makes
    /// by design (max_wait_secs for AwaitProof and Prove, srs_timeout_secs for PreloadSRS and
    /// EvictSRS) (default: 300).
    #[arg(
        long = "default-deadline-secs",
        env = "CUZK_GATEWAY_DEFAULT_DEADLINE_SECS"
    )]
    pub default_deadline_secs: Option<u64>,
    /// Longest deadline of any call, whatever its client asks, seconds (default: 90000, a day
    /// and an hour). A call past its deadline ends with DEADLINE_EXCEEDED.
    #[arg(long = "max-deadline-secs", env = "CUZK_GATEWAY_MAX_DEADLINE_SECS")]
    pub max_deadline_secs: Option<u64>,
    /// Seconds between HTTP/2 pings to an idle connection's peer (default: 30).
    #[arg(
        long = "http2-keepalive-secs",
        env = "CUZK_GATEWAY_HTTP2_KEEPALIVE_SECS"
    )]
    pub http2_keepalive_secs: Option<u64>,
    /// Seconds a ping may go unanswered before the connection and its calls end (default: 20).
    #[arg(
        long = "http2-keepalive-timeout-secs",
        env = "CUZK_GATEWAY_HTTP2_KEEPALIVE_TIMEOUT_SECS"
    )]
    pub http2_keepalive_timeout_secs: Option<u64>,
    /// TCP keepalive idle time of accepted connections, seconds (default: 60).
    #[arg(long = "tcp-keepalive-secs", env = "CUZK_GATEWAY_TCP_KEEPALIVE_SECS")]
    pub tcp_keepalive_secs: Option<u64>,
    /// Largest header block (metadata, a bearer token included) of a call, bytes
    /// (default: 16384).
    #[arg(long = "max-header-bytes", env = "CUZK_GATEWAY_MAX_HEADER_BYTES")]
    pub max_header_bytes: Option<u32>,
    /// PEM certificate chain the gateway serves TLS with (with --tls-key).
    // Ids of their own: the NATS settings beside these have `tls_cert` and `tls_key` too.
    #[arg(
        id = "gateway_tls_cert",
        long = "tls-cert",
        env = "CUZK_GATEWAY_TLS_CERT",
        requires = "gateway_tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(
        id = "gateway_tls_key",
        long = "tls-key",
        env = "CUZK_GATEWAY_TLS_KEY",
        requires = "gateway_tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates client certificates are verified with (mutual TLS; needs
    /// --tls-cert). Without --auth-file every client it certifies has every power.
    #[arg(long = "tls-client-ca", env = "CUZK_GATEWAY_TLS_CLIENT_CA")]
    pub tls_client_ca: Option<PathBuf>,
    /// TOML file of the clients allowed in, each with a bearer token and/or a client
    /// certificate's SHA-256 and its powers (docs/gateway.md). Without it (and without
    /// --tls-client-ca) any caller may do anything.
    #[arg(long = "auth-file", env = "CUZK_GATEWAY_AUTH_FILE")]
    pub auth_file: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatewayConfig {
    pub listen: ListenAddr,
    pub max_wait: Duration,
    pub status_timeout: Duration,
    pub srs_timeout: Duration,
    pub max_message_bytes: usize,
    pub max_inflight_bytes: usize,
    pub max_calls: usize,
    pub max_awaits: usize,
    pub max_streams_per_connection: u32,
    pub default_deadline: Duration,
    pub max_deadline: Duration,
    pub http2_keepalive: Duration,
    pub http2_keepalive_timeout: Duration,
    pub tcp_keepalive: Duration,
    pub max_header_bytes: u32,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_client_ca: Option<PathBuf>,
    pub auth_file: Option<PathBuf>,
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
            max_message_bytes,
            max_inflight_bytes,
            max_calls,
            max_awaits,
            max_streams_per_connection,
            default_deadline_secs,
            max_deadline_secs,
            http2_keepalive_secs,
            http2_keepalive_timeout_secs,
            tcp_keepalive_secs,
            max_header_bytes,
            tls_cert,
            tls_key,
            tls_client_ca,
            auth_file
        );
        self
    }

    pub fn resolve(self) -> Result<GatewayConfig, ConfigError> {
        let secs = |value: Option<u64>, default: u64, name: &'static str| match value {
            Some(0) => Err(invalid(name, "must be at least 1")),
            value => Ok(Duration::from_secs(value.unwrap_or(default))),
        };
        let count = |value: Option<usize>, default: usize, name: &'static str| match value {
            Some(0) => Err(invalid(name, "must be at least 1")),
            value => Ok(value.unwrap_or(default)),
        };
        let config = GatewayConfig {
            listen: self
                .listen
                .unwrap_or_else(|| ListenAddr::Tcp("127.0.0.1:9820".into())),
            max_wait: secs(self.max_wait_secs, 24 * 3600, "gateway.max_wait_secs")?,
            status_timeout: secs(self.status_timeout_secs, 10, "gateway.status_timeout_secs")?,
            srs_timeout: secs(self.srs_timeout_secs, 600, "gateway.srs_timeout_secs")?,
            max_message_bytes: self.max_message_bytes.unwrap_or(128 << 20),
            max_inflight_bytes: count(
                self.max_inflight_bytes,
                1 << 30,
                "gateway.max_inflight_bytes",
            )?,
            max_calls: count(self.max_calls, 1024, "gateway.max_calls")?,
            max_awaits: count(self.max_awaits, 512, "gateway.max_awaits")?,
            max_streams_per_connection: count(
                self.max_streams_per_connection.map(|n| n as usize),
                64,
                "gateway.max_streams_per_connection",
            )? as u32,
            default_deadline: secs(
                self.default_deadline_secs,
                300,
                "gateway.default_deadline_secs",
            )?,
            max_deadline: secs(self.max_deadline_secs, 90_000, "gateway.max_deadline_secs")?,
            http2_keepalive: secs(
                self.http2_keepalive_secs,
                30,
                "gateway.http2_keepalive_secs",
            )?,
            http2_keepalive_timeout: secs(
                self.http2_keepalive_timeout_secs,
                20,
                "gateway.http2_keepalive_timeout_secs",
            )?,
            tcp_keepalive: secs(self.tcp_keepalive_secs, 60, "gateway.tcp_keepalive_secs")?,
            max_header_bytes: self.max_header_bytes.unwrap_or(16 << 10),
            tls_cert: self.tls_cert,
            tls_key: self.tls_key,
            tls_client_ca: self.tls_client_ca,
            auth_file: self.auth_file,
        };
        config.check()?;
        Ok(config)
    }
}

impl GatewayConfig {
    fn check(&self) -> Result<(), ConfigError> {
        // Below a job message's size the gateway could not take even an inline job's input.
        let job_message = crate::topology::MAX_JOB_MESSAGE as usize;
        if self.max_message_bytes < job_message {
            return Err(invalid(
                "gateway.max_message_bytes",
                format!("must be at least {job_message} (a job message)"),
            ));
        }
        if self.max_inflight_bytes < self.max_message_bytes {
            return Err(invalid(
                "gateway.max_inflight_bytes",
                format!(
                    "must be at least max_message_bytes ({}), or no request that large could ever be taken",
                    self.max_message_bytes
                ),
            ));
        }
        if self.max_deadline < self.default_deadline {
            return Err(invalid(
                "gateway.max_deadline_secs",
                "must be at least default_deadline_secs",
            ));
        }
        // A header block must hold a call's own headers and a bearer token.
        if self.max_header_bytes < 1024 {
            return Err(invalid("gateway.max_header_bytes", "must be at least 1024"));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(invalid(
                "gateway.tls_cert",
                "tls_cert and tls_key go together",
            ));
        }
        if self.tls_client_ca.is_some() && self.tls_cert.is_none() {
            return Err(invalid(
                "gateway.tls_client_ca",
                "client certificates need TLS: set tls_cert and tls_key too",
            ));
        }
        let files = [
            ("gateway.tls_cert", &self.tls_cert),
            ("gateway.tls_key", &self.tls_key),
            ("gateway.tls_client_ca", &self.tls_client_ca),
            ("gateway.auth_file", &self.auth_file),
        ];
        for (name, path) in files {
            if let Some(path) = path.as_ref().filter(|p| !p.is_file()) {
                return Err(invalid(
                    name,
                    format!("{} is not a readable file", path.display()),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::ConfigFile;
    use super::*;

    #[test]
    fn gateway_table_fills_in_under_flags() {
        let file: ConfigFile = toml::from_str(
            "[gateway]\nlisten = \"unix:/run/cuzk.sock\"\nmax_wait_secs = 60\nmax_message_bytes = 8388608\nmax_calls = 7\n",
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
        assert_eq!(gateway.max_calls, 7);
        assert_eq!(gateway.srs_timeout, Duration::from_secs(600));
        let defaults = GatewayArgs::default().resolve().unwrap();
        assert_eq!(defaults.listen.to_string(), "127.0.0.1:9820");
        assert_eq!(defaults.max_message_bytes, 128 << 20);
        assert_eq!(defaults.max_streams_per_connection, 64);
        assert_eq!(defaults.max_deadline, Duration::from_secs(90_000));
        assert_eq!(defaults.auth_file, None);
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
            GatewayArgs {
                max_inflight_bytes: Some(64 << 20),
                ..Default::default()
            },
            GatewayArgs {
                max_calls: Some(0),
                ..Default::default()
            },
            GatewayArgs {
                default_deadline_secs: Some(100),
                max_deadline_secs: Some(10),
                ..Default::default()
            },
            GatewayArgs {
                auth_file: Some("/nonexistent/clients.toml".into()),
                ..Default::default()
            },
            GatewayArgs {
                tls_client_ca: Some("/etc/hostname".into()),
                ..Default::default()
            },
        ] {
            assert!(bad.clone().resolve().is_err(), "{bad:?}");
        }
    }
}
