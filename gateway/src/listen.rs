//! Where the gateway listens: `host:port` (TCP) or `unix:PATH` (also `unix://PATH`, the form
//! Curio's `[Cuzk] Address` takes), and the server on it.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

use crate::proto::proving_engine_server::ProvingEngineServer;
use crate::Gateway;

/// Curio's client sends and accepts messages up to this size (a 64 GiB sector's C1 output is
/// ~100 MB of JSON).
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(String),
    Unix(PathBuf),
}

impl FromStr for ListenAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<ListenAddr, String> {
        if let Some(path) = s
            .strip_prefix("unix://")
            .or_else(|| s.strip_prefix("unix:"))
        {
            if path.is_empty() {
                return Err(format!("{s}: the unix socket path is empty"));
            }
            return Ok(ListenAddr::Unix(path.into()));
        }
        match s.rsplit_once(':') {
            Some((_, port)) if port.parse::<u16>().is_ok() => Ok(ListenAddr::Tcp(s.to_owned())),
            _ => Err(format!("{s}: expected host:port or unix:PATH")),
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => f.write_str(addr),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
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

/// Serves `gateway` (and the gRPC reflection service, so `grpcurl` can list it) on `addr`
/// until `shutdown`; `bound` hears the address actually bound (a TCP port 0 picks one).
pub async fn serve(
    addr: &ListenAddr,
    gateway: Gateway,
    shutdown: CancellationToken,
    bound: impl FnOnce(String),
) -> Result<(), ServeError> {
    let service = ProvingEngineServer::new(gateway)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    // Both reflection versions: grpcurl asks v1 first, older clients (and grpcio's Python
    // reflection client) only v1alpha.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(crate::proto::FILE_DESCRIPTOR_SET)
    };
    let reflection_err = |e: tonic_reflection::server::Error| ServeError::Reflection(e.to_string());
    let reflection_v1 = reflection().build_v1().map_err(reflection_err)?;
    let reflection_v1alpha = reflection().build_v1alpha().map_err(reflection_err)?;
    let router = Server::builder()
        // A peer that vanishes without closing is noticed; its calls end.
        .tcp_keepalive(Some(Duration::from_secs(60)))
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)))
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
            bound(listener.local_addr().map_err(listen_err)?.to_string());
            // Replies are small: with Nagle's algorithm on, some wait for the peer's delayed
            // ACK (40 ms at p90 in `cuzk-load gateway` before this).
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
                conn.inspect(|stream| {
                    let _ = stream.set_nodelay(true);
                })
            });
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
    fn addresses_parse() {
        assert_eq!(
            "127.0.0.1:9820".parse(),
            Ok(ListenAddr::Tcp("127.0.0.1:9820".into()))
        );
        assert_eq!("[::1]:0".parse(), Ok(ListenAddr::Tcp("[::1]:0".into())));
        assert_eq!(
            "unix:/run/cuzk.sock".parse(),
            Ok(ListenAddr::Unix("/run/cuzk.sock".into()))
        );
        assert_eq!(
            "unix:///run/cuzk.sock".parse(),
            Ok(ListenAddr::Unix("/run/cuzk.sock".into()))
        );
        assert!("unix:".parse::<ListenAddr>().is_err());
        assert!("localhost".parse::<ListenAddr>().is_err());
        assert!("localhost:http".parse::<ListenAddr>().is_err());
    }
}
