//! Connecting to NATS with the configured credentials, and the retry policy every network step
//! uses.

use std::future::Future;
use std::time::Duration;

use std::sync::Arc;

use async_nats::jetstream::{self, consumer::PullConsumer, AckKind};
use async_nats::{Client, ConnectOptions, Event};
use futures::StreamExt;

use crate::config::NatsConfig;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read NATS credentials: {0}")]
    Credentials(String),
    #[error("cannot connect to NATS at {urls}: {message}")]
    Connect { urls: String, message: String },
}

/// Exponential backoff, capped, with a bounded number of attempts.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub initial: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    /// For publishes and KV operations: rides out a leader election (a few seconds).
    pub const NETWORK: RetryPolicy = RetryPolicy {
        attempts: 8,
        initial: Duration::from_millis(100),
        max: Duration::from_secs(3),
    };

    pub fn delay(&self, attempt: u32) -> Duration {
        self.initial
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.max)
    }

    /// [`Self::delay`] scaled by a random factor in [0.5, 1): clients that failed together
    /// (a leader election, a restarted server) do not all retry in the same instant.
    pub fn jittered(&self, attempt: u32) -> Duration {
        self.delay(attempt)
            .mul_f64(0.5 + rand::random::<f64>() / 2.0)
    }
}

/// Runs `op` until it succeeds or the policy's attempts are spent, logging each failure.
pub async fn retry<T, E, F, Fut>(what: &str, policy: RetryPolicy, op: F) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retry_when(what, policy, op, |_| true).await
}

/// [`retry`] for errors that say whether they are worth retrying: a fatal one returns at once.
pub async fn retry_retryable<T, E, F, Fut>(what: &str, policy: RetryPolicy, op: F) -> Result<T, E>
where
    E: std::fmt::Display + cuzk_wire::Retryable,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retry_when(what, policy, op, |e: &E| e.retryable()).await
}

async fn retry_when<T, E, F, Fut>(
    what: &str,
    policy: RetryPolicy,
    mut op: F,
    worth_retrying: impl Fn(&E) -> bool,
) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 0;
    loop {
        match op().await {
            Ok(value) => return Ok(value),
            Err(err) if attempt + 1 >= policy.attempts || !worth_retrying(&err) => return Err(err),
            Err(err) => {
                let delay = policy.jittered(attempt);
                tracing::warn!(%err, attempt, ?delay, "{what} failed; retrying");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        }
    }
}

async fn options(config: &NatsConfig) -> Result<ConnectOptions, ConnectError> {
    let mut options = if let Some(creds) = &config.creds {
        ConnectOptions::with_credentials_file(creds)
            .await
            .map_err(|e| ConnectError::Credentials(format!("{}: {e}", creds.display())))?
    } else if let Some(seed_file) = &config.nkey_seed_file {
        let seed = std::fs::read_to_string(seed_file)
            .map_err(|e| ConnectError::Credentials(format!("{}: {e}", seed_file.display())))?;
        ConnectOptions::with_nkey(seed.trim().to_owned())
    } else if let (Some(user), Some(password)) = (&config.user, &config.password) {
        ConnectOptions::with_user_and_password(user.clone(), password.expose().to_owned())
    } else {
        ConnectOptions::new()
    };
    if let Some(ca) = &config.tls_ca {
        options = options.require_tls(true).add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    if let Some(prefix) = &config.inbox_prefix {
        options = options.custom_inbox_prefix(prefix);
    }
    Ok(options
        .name(&config.name)
        .connection_timeout(config.timeout)
        .request_timeout(Some(config.timeout))
        .max_reconnects(None)
        .event_callback(|event| async move {
            match event {
                // Permission violations surface only here, then as a request timeout.
                Event::ServerError(err) => tracing::error!(%err, "nats server error"),
                Event::Disconnected => tracing::warn!("nats disconnected"),
                Event::Connected => tracing::info!("nats connected"),
                other => tracing::debug!(event = %other, "nats event"),
            }
        }))
}

/// Connects to the first reachable server of the configured list, retrying for a while so a
/// node started together with its server does not fail at once.
pub async fn connect(config: &NatsConfig) -> Result<Client, ConnectError> {
    let urls: Vec<async_nats::ServerAddr> = config
        .urls
        .iter()
        .map(|u| u.parse())
        .collect::<Result<_, _>>()
        .map_err(|e: std::io::Error| ConnectError::Connect {
            urls: config.urls.join(","),
            message: format!("bad URL: {e}"),
        })?;
    let policy = RetryPolicy {
        attempts: 10,
        initial: Duration::from_millis(200),
        max: Duration::from_secs(3),
    };
    retry("nats connect", policy, || async {
        let options = options(config).await?;
        options
            .connect(urls.clone())
            .await
            .map_err(|e| ConnectError::Connect {
                urls: config.urls.join(","),
                message: e.to_string(),
            })
    })
    .await
}

/// Pulls one message, waiting up to `wait` (zero: only what is already there). The whole pull
/// is also bounded on our side: a pull request sent to a server that then died gets no answer,
/// and the next pull must go out on the reconnected connection.
pub async fn pull_one(
    consumer: &PullConsumer,
    wait: Duration,
) -> Result<Option<jetstream::Message>, async_nats::Error> {
    let pull = async {
        let mut batch = if wait.is_zero() {
            consumer.fetch().max_messages(1).messages().await?
        } else {
            consumer
                .batch()
                .max_messages(1)
                .expires(wait)
                .messages()
                .await?
        };
        match batch.next().await {
            Some(message) => Ok(Some(message?)),
            None => Ok(None),
        }
    };
    match tokio::time::timeout(wait + Duration::from_secs(5), pull).await {
        Ok(result) => result,
        Err(_) => Err("pull request got no answer in time".into()),
    }
}

/// Sends progress acks so a message being worked on is not redelivered; abort it when done.
pub async fn progress_ticker(message: Arc<jetstream::Message>, every: Duration) {
    let mut interval = tokio::time::interval(every);
    interval.tick().await;
    loop {
        interval.tick().await;
        if let Err(e) = message.ack_with(AckKind::Progress).await {
            tracing::warn!(err = %e, "progress ack failed");
        }
    }
}

/// Milliseconds as a float, the unit of every stage timing.
/// Answers requests on `subject` until `shutdown`: `answer` makes each reply from a request's
/// payload. With `queue`, one member of the group answers each request; without, every
/// subscriber does. A lost reply is the requester's timeout (its retry is answered again).
pub async fn serve_requests<F, Fut>(
    client: Client,
    subject: &'static str,
    queue: Option<&'static str>,
    shutdown: tokio_util::sync::CancellationToken,
    mut answer: F,
) where
    F: FnMut(bytes::Bytes) -> Fut,
    Fut: Future<Output = Vec<u8>>,
{
    let subscribed = match queue {
        Some(group) => client.queue_subscribe(subject, group.into()).await,
        None => client.subscribe(subject).await,
    };
    let mut requests = match subscribed {
        Ok(subscriber) => subscriber,
        Err(e) => {
            tracing::warn!(err = %e, subject, "cannot serve requests");
            return;
        }
    };
    loop {
        let request = tokio::select! {
            _ = shutdown.cancelled() => return,
            request = requests.next() => match request {
                Some(request) => request,
                None => return,
            },
        };
        let Some(reply_to) = request.reply else {
            tracing::warn!(subject, "a request without a reply subject; ignored");
            continue;
        };
        let reply = answer(request.payload).await;
        if let Err(e) = client.publish(reply_to, reply.into()).await {
            tracing::warn!(err = %e, subject, "replying to a request failed");
        }
    }
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let p = RetryPolicy::NETWORK;
        assert_eq!(p.delay(0), Duration::from_millis(100));
        assert_eq!(p.delay(2), Duration::from_millis(400));
        assert_eq!(p.delay(40), Duration::from_secs(3));
        for attempt in [0, 2, 40] {
            let d = p.jittered(attempt);
            assert!(d >= p.delay(attempt) / 2 && d < p.delay(attempt), "{d:?}");
        }
    }

    #[tokio::test]
    async fn retry_stops_after_the_policy() {
        let policy = RetryPolicy {
            attempts: 3,
            initial: Duration::from_millis(1),
            max: Duration::from_millis(1),
        };
        let mut calls = 0;
        let result: Result<(), String> = retry("op", policy, || {
            calls += 1;
            async { Err("nope".to_owned()) }
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls, 3);
    }
}
