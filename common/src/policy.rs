//! The one failure policy both nodes follow: how a step on a job or work-item message ended
//! ([`StepError`]) decides how the message is settled — acknowledged, handed back with a delay,
//! or the job failed first ([`decide`]).

use std::time::Duration;

use async_nats::jetstream::AckKind;

use crate::retry::RetryPolicy;
use cuzk_wire::Retryable;

/// How a step on a message ended, when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// It can never succeed: the job fails with this reason.
    #[error("{0}")]
    Fatal(String),
    /// A transient condition: the message is handed back and tried again.
    #[error("{0}")]
    Retry(String),
    /// The node is stopping: the message is handed back for another node.
    #[error("shutting down")]
    Shutdown,
    /// A later delivery of the message holds the job now (this node's hold lapsed): this node
    /// stops and leaves the message to its holder.
    #[error("{0}")]
    Superseded(String),
}

impl StepError {
    /// A panic caught while doing `what`: fatal, with the panic's message.
    pub fn panicked(what: &str, panic: &(dyn std::any::Any + Send)) -> StepError {
        StepError::Fatal(format!("{what} panicked: {}", panic_message(panic)))
    }
}

/// The text a panic was raised with, where it has one.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

impl<E: Retryable> From<E> for StepError {
    fn from(e: E) -> Self {
        if e.retryable() {
            StepError::Retry(e.to_string())
        } else {
            StepError::Fatal(e.to_string())
        }
    }
}

/// How a message is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Consumed: a work queue drops it.
    Ack,
    /// Handed back, redelivered after the delay (at once without one).
    Nak(Option<Duration>),
    /// Neither: a later delivery holds it, and settles it.
    Leave,
}

impl Settle {
    /// What to tell the server; nothing for a message left to a later delivery.
    pub fn ack_kind(self) -> Option<AckKind> {
        match self {
            Settle::Ack => Some(AckKind::Ack),
            Settle::Nak(delay) => Some(AckKind::Nak(delay)),
            Settle::Leave => None,
        }
    }
}

/// What to do with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Settle it so.
    Settle(Settle),
    /// Fail the job with this reason first, then settle with [`after_failing`].
    FailJob(String),
}

/// How long a message waits before another try when reporting its job's failure failed.
pub const REPORT_RETRY: Duration = Duration::from_secs(5);

/// The decision for a step's `outcome` on the `delivered`-th delivery of a message that may be
/// delivered `max_deliver` times. Retries back off with the delivery count; the last allowed
/// delivery fails the job instead of retrying, so the job never waits on a message the server
/// will not deliver again.
pub fn decide(outcome: Result<(), StepError>, delivered: i64, max_deliver: i64) -> Decision {
    match outcome {
        Ok(()) => Decision::Settle(Settle::Ack),
        Err(StepError::Shutdown) => Decision::Settle(Settle::Nak(None)),
        Err(StepError::Superseded(_)) => Decision::Settle(Settle::Leave),
        Err(StepError::Retry(_)) if delivered < max_deliver => Decision::Settle(Settle::Nak(Some(
            RetryPolicy::NETWORK.delay(delivered.max(0) as u32 + 2),
        ))),
        Err(StepError::Retry(reason)) => {
            Decision::FailJob(format!("gave up after {delivered} attempts: {reason}"))
        }
        Err(StepError::Fatal(reason)) => Decision::FailJob(reason),
    }
}

/// How to settle a message whose job was just failed: consumed once the failure is reported,
/// tried again later if even that was impossible.
pub fn after_failing(reported: bool) -> Settle {
    if reported {
        Settle::Ack
    } else {
        Settle::Nak(Some(REPORT_RETRY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry() -> Result<(), StepError> {
        Err(StepError::Retry("nats away".into()))
    }

    #[test]
    fn success_acks_and_shutdown_hands_back_at_once() {
        assert_eq!(decide(Ok(()), 1, 5), Decision::Settle(Settle::Ack));
        assert_eq!(
            decide(Err(StepError::Shutdown), 5, 5),
            Decision::Settle(Settle::Nak(None))
        );
        // A later delivery holds the job: this one is neither acknowledged nor handed back.
        let superseded = decide(
            Err(StepError::Superseded("delivery 2 holds it".into())),
            1,
            5,
        );
        assert_eq!(superseded, Decision::Settle(Settle::Leave));
        assert!(Settle::Leave.ack_kind().is_none());
    }

    #[test]
    fn retries_back_off_until_the_last_delivery() {
        let Decision::Settle(Settle::Nak(Some(first))) = decide(retry(), 1, 5) else {
            panic!("first retry is a delayed nak");
        };
        let Decision::Settle(Settle::Nak(Some(later))) = decide(retry(), 4, 5) else {
            panic!("fourth retry is a delayed nak");
        };
        assert!(later > first);
        assert_eq!(
            decide(retry(), 5, 5),
            Decision::FailJob("gave up after 5 attempts: nats away".into())
        );
    }

    #[test]
    fn fatal_fails_the_job_at_once() {
        assert_eq!(
            decide(Err(StepError::Fatal("bad blob".into())), 1, 5),
            Decision::FailJob("bad blob".into())
        );
        assert_eq!(after_failing(true), Settle::Ack);
        assert_eq!(after_failing(false), Settle::Nak(Some(REPORT_RETRY)));
    }
}
