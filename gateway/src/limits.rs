//! What every call meets before the service sees it, as a tower layer under tonic's router:
//! a count of calls on all connections, refused past it rather than queued; a cap on the
//! request's bytes per method, far below the message limit for the calls that carry only
//! ids, so a 48 MiB `AwaitProof` is turned away after 64 KiB instead of decoded; a budget of
//! request bytes held by all calls together (a semaphore in bytes); and a deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use cuzk_common::config::GatewayConfig;
use http_body::{Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::body::Body;
use tonic::Status;

/// Largest message of the calls that carry ids only (all but `SubmitProof` and `Prove`): the
/// largest of them, a `PreloadSRS` naming a circuit in JSON, is a few hundred bytes.
pub const SMALL_MESSAGE_BYTES: usize = 64 << 10;

/// A gRPC message's frame header: a flag and its length.
const FRAME_HEADER: usize = 5;

const SERVICE: &str = "/cuzk.v1.ProvingEngine/";

/// The gateway's limits (`[gateway]` in the config, common/src/config/gateway.rs), shared by
/// every connection.
#[derive(Clone)]
pub struct Limits {
    calls: Arc<Semaphore>,
    max_calls: usize,
    bytes: Arc<Semaphore>,
    max_bytes: usize,
    max_message_bytes: usize,
    default_deadline: Duration,
    max_deadline: Duration,
    max_wait: Duration,
    srs_timeout: Duration,
}

impl Limits {
    pub fn new(config: &GatewayConfig) -> Limits {
        Limits {
            calls: Arc::new(Semaphore::new(config.max_calls)),
            max_calls: config.max_calls,
            bytes: Arc::new(Semaphore::new(config.max_inflight_bytes)),
            max_bytes: config.max_inflight_bytes,
            max_message_bytes: config.max_message_bytes,
            default_deadline: config.default_deadline,
            max_deadline: config.max_deadline,
            max_wait: config.max_wait,
            srs_timeout: config.srs_timeout,
        }
    }

    /// The most request bytes a call to `method` may send.
    fn body_cap(&self, method: &str) -> usize {
        match method.strip_prefix(SERVICE) {
            Some("SubmitProof" | "Prove") => self.max_message_bytes + FRAME_HEADER,
            _ => SMALL_MESSAGE_BYTES + FRAME_HEADER,
        }
    }

    /// The deadline of a call to `method`: its client's (`grpc-timeout`), else the default on
    /// top of what the call waits by design; never past the cap.
    fn deadline(&self, method: &str, headers: &http::HeaderMap) -> Duration {
        let asked = headers
            .get("grpc-timeout")
            .and_then(|v| grpc_timeout(v.as_bytes()));
        let by_design = match method.strip_prefix(SERVICE) {
            Some("AwaitProof" | "Prove") => self.max_wait,
            Some("PreloadSRS" | "EvictSRS") => self.srs_timeout,
            _ => Duration::ZERO,
        };
        asked
            .unwrap_or(self.default_deadline + by_design)
            .min(self.max_deadline)
    }
}

/// A `grpc-timeout` value (gRPC over HTTP/2: at most 8 digits and a unit); `None` if malformed.
fn grpc_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

impl<S> tower_layer::Layer<S> for Limits {
    type Service = Limited<S>;

    fn layer(&self, inner: S) -> Limited<S> {
        Limited {
            inner,
            limits: self.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Limited<S> {
    inner: S,
    limits: Limits,
}

type Held = Arc<Mutex<Option<OwnedSemaphorePermit>>>;

impl<S> tower_service::Service<http::Request<Body>> for Limited<S>
where
    S: tower_service::Service<http::Request<Body>, Response = http::Response<Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<http::Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        // The service polled ready is the one that takes the call (tower's rule).
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let limits = self.limits.clone();
        Box::pin(async move {
            let Ok(call) = limits.calls.clone().try_acquire_owned() else {
                let status = Status::resource_exhausted(format!(
                    "the gateway is serving its limit of {} calls; try again later",
                    limits.max_calls
                ));
                return Ok(status.into_http());
            };
            let method = request.uri().path();
            let deadline = limits.deadline(method, request.headers());
            let held = Held::default();
            let metered = Metered {
                cap: limits.body_cap(method),
                seen: 0,
                budget: limits.bytes.clone(),
                max_bytes: limits.max_bytes,
                held: held.clone(),
            };
            let request = request.map(|body| Body::new(metered.around(body)));
            let response = tokio::time::timeout(deadline, inner.call(request)).await;
            // The request's bytes are held until its call has answered (for a stream, until
            // its body is dropped too).
            drop((call, held));
            response.unwrap_or_else(|_| {
                let status = Status::deadline_exceeded(format!(
                    "the call passed its deadline of {deadline:?}"
                ));
                Ok(status.into_http())
            })
        })
    }
}

/// How a request body is counted: against its method's cap and the shared byte budget.
struct Metered {
    cap: usize,
    seen: usize,
    budget: Arc<Semaphore>,
    max_bytes: usize,
    held: Held,
}

impl Metered {
    fn around(self, body: Body) -> MeteredBody {
        MeteredBody { body, meter: self }
    }

    /// Counts `n` more bytes; the refusal if they pass a limit.
    fn count(&mut self, n: usize) -> Result<(), Status> {
        self.seen += n;
        if self.seen > self.cap {
            return Err(Status::resource_exhausted(format!(
                "the request is over {} bytes, this call's limit",
                self.cap - FRAME_HEADER
            )));
        }
        let permit = u32::try_from(n)
            .ok()
            .and_then(|n| self.budget.clone().try_acquire_many_owned(n).ok())
            .ok_or_else(|| {
                Status::resource_exhausted(format!(
                    "the gateway holds its limit of {} request bytes; try again later",
                    self.max_bytes
                ))
            })?;
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        match held.as_mut() {
            Some(all) => all.merge(permit),
            None => *held = Some(permit),
        }
        Ok(())
    }
}

struct MeteredBody {
    body: Body,
    meter: Metered,
}

impl http_body::Body for MeteredBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let frame = match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            other => return Poll::Ready(other),
        };
        if let Some(data) = frame.data_ref() {
            if let Err(refused) = this.meter.count(data.len()) {
                return Poll::Ready(Some(Err(refused)));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        let config = cuzk_common::config::GatewayArgs {
            max_message_bytes: Some(cuzk_common::config::Bytes(4 << 20)),
            max_inflight_bytes: Some(cuzk_common::config::Bytes(6 << 20)),
            default_deadline: Some(cuzk_common::config::Span::secs(7)),
            max_deadline: Some(cuzk_common::config::Span::secs(1000)),
            max_wait: Some(cuzk_common::config::Span::secs(100)),
            ..Default::default()
        }
        .resolve()
        .unwrap();
        Limits::new(&config)
    }

    #[test]
    fn grpc_timeouts_parse_and_malformed_ones_do_not() {
        assert_eq!(grpc_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(grpc_timeout(b"2H"), Some(Duration::from_secs(7200)));
        assert_eq!(grpc_timeout(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(
            grpc_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in [
            &b""[..],
            b"S",
            b"123456789S",
            b"12x",
            b"-1S",
            "1\u{e9}".as_bytes(),
        ] {
            assert_eq!(grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn deadlines_default_by_method_and_stop_at_the_cap() {
        let limits = limits();
        let none = http::HeaderMap::new();
        let call = |m: &str| format!("{SERVICE}{m}");
        assert_eq!(
            limits.deadline(&call("SubmitProof"), &none),
            Duration::from_secs(7)
        );
        assert_eq!(
            limits.deadline(&call("AwaitProof"), &none),
            Duration::from_secs(107)
        );
        assert_eq!(
            limits.deadline(&call("EvictSRS"), &none),
            Duration::from_secs(607)
        );
        let mut asked = http::HeaderMap::new();
        asked.insert("grpc-timeout", http::HeaderValue::from_static("2S"));
        assert_eq!(
            limits.deadline(&call("AwaitProof"), &asked),
            Duration::from_secs(2)
        );
        asked.insert("grpc-timeout", http::HeaderValue::from_static("5H"));
        assert_eq!(
            limits.deadline(&call("Prove"), &asked),
            Duration::from_secs(1000)
        );
    }

    #[test]
    fn bodies_are_capped_per_method_and_by_the_shared_budget() {
        let limits = limits();
        let meter = |method: &str| Metered {
            cap: limits.body_cap(&format!("{SERVICE}{method}")),
            seen: 0,
            budget: limits.bytes.clone(),
            max_bytes: limits.max_bytes,
            held: Held::default(),
        };
        let mut await_proof = meter("AwaitProof");
        assert!(await_proof.count(SMALL_MESSAGE_BYTES).is_ok());
        let refused = await_proof.count(FRAME_HEADER + 1).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused.message().contains("65536 bytes"),
            "{}",
            refused.message()
        );

        // Two submissions of 4 MiB do not fit 6 MiB at once; the second fits once the first
        // has let go of its bytes.
        let mut first = meter("SubmitProof");
        first.count(4 << 20).unwrap();
        let mut second = meter("SubmitProof");
        let refused = second.count(4 << 20).unwrap_err();
        assert!(
            refused.message().contains("6291456 request bytes"),
            "{}",
            refused.message()
        );
        drop(first);
        let mut third = meter("SubmitProof");
        third.count(4 << 20).unwrap();
        assert!(
            third.count(FRAME_HEADER + 1).is_err(),
            "over the message limit"
        );
    }
}
