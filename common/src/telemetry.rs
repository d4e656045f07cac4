//! Logging setup shared by every binary: human-readable on a terminal, JSON when asked
//! (`LOG_FORMAT=json`), level from `RUST_LOG` (default `info`).

use tracing_subscriber::{fmt, EnvFilter};

/// Installs the global subscriber; a second call (tests, the all-in-one cluster) is a no-op.
pub fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let builder = fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if json { builder.json().try_init() } else { builder.compact().try_init() };
}
