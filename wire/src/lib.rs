//! What crosses the wire between cuzk's processes, as plain data: job specs, work items and
//! results (`job`), per-partition witness blobs (`blob`) with their compact scalar codec
//! (`codec`), the witness they carry (`witness`) and the digest of a partition's public inputs
//! (`inputs`). Nothing here talks to NATS.

pub mod blob;
pub mod codec;
pub mod control;
pub mod inputs;
pub mod job;
pub mod record;
pub mod stage;
pub mod witness;

/// At most 32 characters of `text`, escaped, and how long it was: what a refusal may echo of
/// a string from the network.
pub fn excerpt(text: &str) -> String {
    const SHOWN: usize = 32;
    let shown: String = text.chars().take(SHOWN).collect();
    let escaped = shown.escape_debug();
    if shown.len() == text.len() {
        format!("\"{escaped}\"")
    } else {
        format!("\"{escaped}…\" ({} bytes)", text.len())
    }
}

/// An error that says whether trying the same work again may succeed: a node hands retryable
/// failures back to the queue and fails the job on the others.
pub trait Retryable: std::fmt::Display {
    fn retryable(&self) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_and_escaped() {
        assert_eq!(excerpt("a b"), "\"a b\"");
        let long = format!("\n{}", "x".repeat(48 << 20));
        let shown = excerpt(&long);
        let tail = format!("…\" ({} bytes)", long.len());
        assert!(
            shown.starts_with("\"\\nxxx") && shown.ends_with(&tail),
            "{shown}"
        );
        assert!(shown.len() < 80, "{shown}");
    }
}
