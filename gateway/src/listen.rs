//! The gateway's server on its listen address (`cuzk_common::listen::ListenAddr`: TCP or a
//! unix socket), with its limits (`limits.rs`), HTTP/2 settings and, where configured, TLS.

use std::net::IpAddr;
use std::time::Duration;

pub use cuzk_common::listen::ListenAddr;

use cuzk_common::config::GatewayConfig;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

use crate::auth::Access;
use crate::limits::{Limits, SMALL_MESSAGE_BYTES};
use crate::proto::proving_engine_server::ProvingEngineServer;
use crate::Gateway;

/// A client that has not finished its TLS handshake by then is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Tls {
        path: String,
        source: std::io::Error,
    },
    #[error("the reflection service cannot load the descriptor: {0}")]
    Reflection(String),
    #[error("serving failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A socket file left by a gateway that is gone is replaced; one that answers is not.
fn clear_stale_socket(path: &std::path::Path) -> std::io::Result<()> {
    if path.exists() && std::os::unix::net::UnixStream::connect(path).is_err() {
        std::fs::remove_file(path)?;
    }
    Ok(())
}

/// The TLS the settings ask for: the server's certificate and key, and the CA that client
/// certificates are checked against (required unless `access` lets callers in by token).
fn tls(config: &GatewayConfig, access: &Access) -> Result<Option<ServerTlsConfig>, ServeError> {
    let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) else {
        return Ok(None);
    };
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|source| ServeError::Tls {
            path: path.display().to_string(),
            source,
        })
    };
    let mut tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(read(cert)?, read(key)?))
        .timeout(TLS_HANDSHAKE_TIMEOUT);
    if let Some(ca) = &config.tls_client_ca {
        tls = tls
            .client_ca_root(Certificate::from_pem(read(ca)?))
            .client_auth_optional(access.certificates_optional());
    }
    Ok(Some(tls))
}

/// What to warn an operator of who serves `ip`: anyone who can reach a port that is not on
/// loopback can call it.
fn exposure(ip: IpAddr, tls: bool, open: bool) -> Option<&'static str> {
    match (ip.is_loopback(), tls, open) {
        (true, _, _) | (false, true, false) => None,
        (false, false, true) => Some(
            "the gateway listens beyond loopback with neither TLS nor authentication: anyone who reaches the port may submit at any priority, cancel any job and load or drop the GPU nodes' proving keys (set --auth-file and --tls-cert/--tls-key, docs/gateway.md)",
        ),
        (false, true, true) => Some(
            "the gateway listens beyond loopback without authentication: any client that completes TLS may do anything (set --auth-file, docs/gateway.md)",
        ),
        (false, false, false) => Some(
            "the gateway listens beyond loopback without TLS: bearer tokens and proofs cross the network in clear (set --tls-cert/--tls-key, docs/gateway.md)",
        ),
    }
}

/// Serves `gateway` (and the gRPC reflection service, so `grpcurl` can list it) on `addr`
/// until `shutdown`; `bound` hears the address actually bound (a TCP port 0 picks one).
pub async fn serve(
    addr: &ListenAddr,
    gateway: Gateway,
    shutdown: CancellationToken,
    bound: impl FnOnce(String),
) -> Result<(), ServeError> {
    let config = gateway.config().clone();
    let tls = tls(&config, gateway.access())?;
    let open = gateway.access().is_open();
    // tonic decodes up to this; the limits layer has already cut each method to its own cap.
    let max_decoding = config.max_message_bytes.max(SMALL_MESSAGE_BYTES);
    let service = ProvingEngineServer::new(gateway)
        .max_decoding_message_size(max_decoding)
        .max_encoding_message_size(config.max_message_bytes);
    // Both reflection versions: grpcurl asks v1 first, older clients (and grpcio's Python
    // reflection client) only v1alpha.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
    };
    let reflection_err = |e: tonic_reflection::server::Error| ServeError::Reflection(e.to_string());
    let reflection_v1 = reflection().build_v1().map_err(reflection_err)?;
    let reflection_v1alpha = reflection().build_v1alpha().map_err(reflection_err)?;
    let mut server = Server::builder()
        // A peer that vanishes without closing is noticed; its calls end.
        .http2_keepalive_interval(Some(config.http2_keepalive))
        .http2_keepalive_timeout(Some(config.http2_keepalive_timeout))
        .max_concurrent_streams(config.max_streams_per_connection)
        .http2_max_header_list_size(config.max_header_bytes);
    let tls_on = tls.is_some();
    if let Some(tls) = tls {
        server = server.tls_config(tls)?;
    }
    let router = server
        .layer(Limits::new(&config))
        .add_service(service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha);
    let listen_err = |source| ServeError::Listen {
        addr: addr.to_string(),
        source,
    };
    let stop = shutdown.cancelled_owned();
    match addr {
        ListenAddr::Tcp(host_port) => {
            let listener = tokio::net::TcpListener::bind(host_port.as_str())
                .await
                .map_err(listen_err)?;
            let local = listener.local_addr().map_err(listen_err)?;
            if let Some(warning) = exposure(local.ip(), tls_on, open) {
                tracing::warn!(listen = %local, "{warning}");
            }
            bound(local.to_string());
            // Replies are small: with Nagle's algorithm on, some wait for the peer's delayed
            // ACK (`cuzk-load gateway` showed it in the p90 latency).
            let incoming = TcpIncoming::from(listener)
                .with_nodelay(Some(true))
                .with_keepalive(Some(config.tcp_keepalive));
            router.serve_with_incoming_shutdown(incoming, stop).await?;
        }
        ListenAddr::Unix(path) => {
            clear_stale_socket(path).map_err(listen_err)?;
            let listener = tokio::net::UnixListener::bind(path).map_err(listen_err)?;
            bound(addr.to_string());
            let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
            let served = router.serve_with_incoming_shutdown(incoming, stop).await;
            let _ = std::fs::remove_file(path);
            served?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_beyond_loopback_without_tls_or_auth_is_warned_of() {
        let (lo, any) = ("127.0.0.1".parse().unwrap(), "0.0.0.0".parse().unwrap());
        assert_eq!(exposure(lo, false, true), None);
        assert_eq!(exposure("::1".parse().unwrap(), false, true), None);
        assert_eq!(exposure(any, true, false), None);
        let bare = exposure(any, false, true).unwrap();
        assert!(bare.contains("neither TLS nor authentication"), "{bare}");
        assert!(exposure(any, true, true)
            .unwrap()
            .contains("without authentication"));
        assert!(exposure(any, false, false).unwrap().contains("without TLS"));
    }
}
