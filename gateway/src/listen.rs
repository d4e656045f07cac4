//! The gateway's server on its listen address (`cuzk_common::listen::ListenAddr`: TCP or a
//! unix socket).

use std::time::Duration;

pub use cuzk_common::listen::ListenAddr;

use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;

use crate::proto::proving_engine_server::ProvingEngineServer;
use crate::Gateway;

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
    let max_message_bytes = gateway.config().max_message_bytes;
    let service = ProvingEngineServer::new(gateway)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes);
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
