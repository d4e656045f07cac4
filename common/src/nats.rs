//! Connecting to NATS with the configured credentials, and pulling, acking and answering on the
//! connection. The retry policy every network step uses lives in [`crate::retry`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer, AckKind};
use async_nats::{Client, ConnectOptions, Event};
use futures::StreamExt;

use crate::config::NatsConfig;
use crate::retry::{retry, RetryPolicy};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot read NATS credentials: {0}")]
    Credentials(String),
    #[error("cannot connect to NATS at {urls}: {message}")]
    Connect { urls: String, message: String },
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
    let subjects = [subject.to_owned()];
    serve_requests_on(client, &subjects, queue, shutdown, |_, payload| {
        answer(payload)
    })
    .await
}

/// Answers requests on each of `subjects` (wildcards allowed) until `shutdown`, as
/// [`serve_requests`] does, `answer` given each request's subject too: where the server pins
/// subjects per user, the subject says who asks.
pub async fn serve_requests_on<F, Fut>(
    client: Client,
    subjects: &[String],
    queue: Option<&'static str>,
    shutdown: tokio_util::sync::CancellationToken,
    mut answer: F,
) where
    F: FnMut(String, bytes::Bytes) -> Fut,
    Fut: Future<Output = Vec<u8>>,
{
    let mut subscribers = Vec::with_capacity(subjects.len());
    for subject in subjects {
        let subscribed = match queue {
            Some(group) => client.queue_subscribe(subject.clone(), group.into()).await,
            None => client.subscribe(subject.clone()).await,
        };
        match subscribed {
            Ok(subscriber) => subscribers.push(subscriber),
            Err(e) => {
                tracing::warn!(err = %e, subject, "cannot serve requests");
                return;
            }
        }
    }
    let mut requests = futures::stream::select_all(subscribers);
    loop {
        let request = tokio::select! {
            _ = shutdown.cancelled() => return,
            request = requests.next() => match request {
                Some(request) => request,
                None => return,
            },
        };
        let subject = request.subject.to_string();
        let Some(reply_to) = request.reply else {
            tracing::warn!(subject, "a request without a reply subject; ignored");
            continue;
        };
        let reply = answer(subject.clone(), request.payload).await;
        if let Err(e) = client.publish(reply_to, reply.into()).await {
            tracing::warn!(err = %e, subject, "replying to a request failed");
        }
    }
}
