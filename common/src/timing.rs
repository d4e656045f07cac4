//! The unit stage timings are kept in, shared by the object store, the ledger and the nodes.

use std::time::Duration;

/// Milliseconds as a float, the unit of every stage timing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
