//! `cuzk gateway`'s settings (Curio's proving API, `gateway/`; docs/gateway.md lists them).
//! The limits bound what any client that reaches the port can make the gateway hold: calls,
//! waits, request bytes, streams per connection and time.

use std::path::PathBuf;
use std::time::Duration;

use super::units::{Bytes, Span};
use super::{invalid, settings::settings, ConfigError};
use crate::listen::ListenAddr;

/// A span of at least a second.
fn at_least_a_second(span: &Duration) -> bool {
    *span >= Duration::from_secs(1)
}

settings! {
    table "gateway": GatewayArgs => GatewayConfig {
        /// host:port, or unix:PATH for a unix socket.
        #[arg(long = "listen", env = "CUZK_GATEWAY_LISTEN")]
        listen: ListenAddr = ListenAddr::Tcp("127.0.0.1:9820".into()), shown "127.0.0.1:9820";
        /// Longest wait of a Prove call, or of an AwaitProof without a timeout; a client's gRPC
        /// deadline cuts either shorter.
        #[arg(long = "max-wait", env = "CUZK_GATEWAY_MAX_WAIT")]
        max_wait: Span => Duration = Duration::from_secs(24 * 3600), shown "1d",
            check at_least_a_second => "must be at least 1s",
            was "max-wait-secs" "CUZK_GATEWAY_MAX_WAIT_SECS" "max_wait_secs";
        /// Longest wait for the cluster's state in GetStatus and GetMetrics.
        #[arg(long = "status-timeout", env = "CUZK_GATEWAY_STATUS_TIMEOUT")]
        status_timeout: Span => Duration = Duration::from_secs(10), shown "10s",
            check at_least_a_second => "must be at least 1s",
            was "status-timeout-secs" "CUZK_GATEWAY_STATUS_TIMEOUT_SECS" "status_timeout_secs";
        /// Longest wait for the GPU nodes' answers to PreloadSRS / EvictSRS: loading a 32 GiB
        /// key from disk takes minutes.
        #[arg(long = "srs-timeout", env = "CUZK_GATEWAY_SRS_TIMEOUT")]
        srs_timeout: Span => Duration = Duration::from_secs(600), shown "10m",
            check at_least_a_second => "must be at least 1s",
            was "srs-timeout-secs" "CUZK_GATEWAY_SRS_TIMEOUT_SECS" "srs_timeout_secs";
        /// Largest SubmitProof or Prove message accepted (about twice the largest Curio sends:
        /// a 32 GiB sector's C1 output is ~50 MB). Other calls take 64 KiB.
        #[arg(long = "max-message-bytes", env = "CUZK_GATEWAY_MAX_MESSAGE_BYTES")]
        max_message_bytes: Bytes => usize = 128 << 20, shown "128MiB";
        /// Request bytes held by all calls together; a call that would pass it is refused with
        /// RESOURCE_EXHAUSTED (at least max_message_bytes).
        #[arg(long = "max-inflight-bytes", env = "CUZK_GATEWAY_MAX_INFLIGHT_BYTES")]
        max_inflight_bytes: Bytes => usize = 1 << 30, shown "1GiB",
            check |n| *n >= 1 => "must be at least 1";
        /// Calls served at once, all connections together; more are refused with
        /// RESOURCE_EXHAUSTED, not queued.
        #[arg(long = "max-calls", env = "CUZK_GATEWAY_MAX_CALLS")]
        max_calls: usize = 1024, shown "1024", check |n| *n >= 1 => "must be at least 1";
        /// AwaitProof and Prove calls waiting at once, each on a NATS subscription of its own.
        #[arg(long = "max-awaits", env = "CUZK_GATEWAY_MAX_AWAITS")]
        max_awaits: usize = 512, shown "512", check |n| *n >= 1 => "must be at least 1";
        /// Concurrent HTTP/2 streams (calls) one connection may open.
        #[arg(long = "max-streams-per-connection", env = "CUZK_GATEWAY_MAX_STREAMS_PER_CONNECTION")]
        max_streams_per_connection: u32 = 64, shown "64",
            check |n| *n >= 1 => "must be at least 1";
        /// Deadline of a call whose client sent none, on top of the wait the call makes by
        /// design (max_wait for AwaitProof and Prove, srs_timeout for PreloadSRS and EvictSRS).
        #[arg(long = "default-deadline", env = "CUZK_GATEWAY_DEFAULT_DEADLINE")]
        default_deadline: Span => Duration = Duration::from_secs(300), shown "5m",
            check at_least_a_second => "must be at least 1s",
            was "default-deadline-secs" "CUZK_GATEWAY_DEFAULT_DEADLINE_SECS"
                "default_deadline_secs";
        /// Longest deadline of any call, whatever its client asks. A call past its deadline
        /// ends with DEADLINE_EXCEEDED.
        #[arg(long = "max-deadline", env = "CUZK_GATEWAY_MAX_DEADLINE")]
        max_deadline: Span => Duration = Duration::from_secs(90_000), shown "25h",
            check at_least_a_second => "must be at least 1s",
            was "max-deadline-secs" "CUZK_GATEWAY_MAX_DEADLINE_SECS" "max_deadline_secs";
        /// Time between HTTP/2 pings to an idle connection's peer.
        #[arg(long = "http2-keepalive", env = "CUZK_GATEWAY_HTTP2_KEEPALIVE")]
        http2_keepalive: Span => Duration = Duration::from_secs(30), shown "30s",
            check at_least_a_second => "must be at least 1s",
            was "http2-keepalive-secs" "CUZK_GATEWAY_HTTP2_KEEPALIVE_SECS"
                "http2_keepalive_secs";
        /// How long a ping may go unanswered before the connection and its calls end.
        #[arg(long = "http2-keepalive-timeout", env = "CUZK_GATEWAY_HTTP2_KEEPALIVE_TIMEOUT")]
        http2_keepalive_timeout: Span => Duration = Duration::from_secs(20), shown "20s",
            check at_least_a_second => "must be at least 1s",
            was "http2-keepalive-timeout-secs" "CUZK_GATEWAY_HTTP2_KEEPALIVE_TIMEOUT_SECS"
                "http2_keepalive_timeout_secs";
        /// TCP keepalive idle time of accepted connections.
        #[arg(long = "tcp-keepalive", env = "CUZK_GATEWAY_TCP_KEEPALIVE")]
        tcp_keepalive: Span => Duration = Duration::from_secs(60), shown "60s",
            check at_least_a_second => "must be at least 1s",
            was "tcp-keepalive-secs" "CUZK_GATEWAY_TCP_KEEPALIVE_SECS" "tcp_keepalive_secs";
        /// Largest header block (metadata, a bearer token included) of a call.
        #[arg(long = "max-header-bytes", env = "CUZK_GATEWAY_MAX_HEADER_BYTES")]
        max_header_bytes: Bytes => u32 = 16 << 10, shown "16KiB";
        /// PEM certificate chain the gateway serves TLS with (with --tls-key).
        #[arg(long = "tls-cert", env = "CUZK_GATEWAY_TLS_CERT", requires = "gateway.tls_key")]
        tls_cert: PathBuf => Option<PathBuf> = None;
        /// PEM private key of --tls-cert.
        #[arg(long = "tls-key", env = "CUZK_GATEWAY_TLS_KEY", requires = "gateway.tls_cert")]
        tls_key: PathBuf => Option<PathBuf> = None;
        /// PEM CA certificates client certificates are verified with (mutual TLS; needs
        /// --tls-cert). Without --auth-file every client it certifies has every power.
        #[arg(long = "tls-client-ca", env = "CUZK_GATEWAY_TLS_CLIENT_CA")]
        tls_client_ca: PathBuf => Option<PathBuf> = None;
        /// TOML file of the clients allowed in, each with a bearer token and/or a client
        /// certificate's SHA-256 and its powers (docs/gateway.md). Without it (and without
        /// --tls-client-ca) any caller may do anything.
        #[arg(long = "auth-file", env = "CUZK_GATEWAY_AUTH_FILE")]
        auth_file: PathBuf => Option<PathBuf> = None;
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
                "gateway.max_deadline",
                "must be at least default_deadline",
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
        super::readable_files(&[
            ("gateway.tls_cert", &self.tls_cert),
            ("gateway.tls_key", &self.tls_key),
            ("gateway.tls_client_ca", &self.tls_client_ca),
            ("gateway.auth_file", &self.auth_file),
        ])
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
            max_wait: Some(Span::secs(5)),
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
                status_timeout: Some(Span::secs(0)),
                ..Default::default()
            },
            GatewayArgs {
                max_message_bytes: Some(Bytes(1000)),
                ..Default::default()
            },
            GatewayArgs {
                max_inflight_bytes: Some(Bytes(64 << 20)),
                ..Default::default()
            },
            GatewayArgs {
                max_calls: Some(0),
                ..Default::default()
            },
            GatewayArgs {
                default_deadline: Some(Span::secs(100)),
                max_deadline: Some(Span::secs(10)),
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
