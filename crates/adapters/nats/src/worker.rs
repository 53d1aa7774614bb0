//! The pull loop every worker stage shares: fetch a batch from a durable
//! consumer, hand it to a [`Handler`], then acknowledge, retry or
//! dead-letter each message by its [`Outcome`].

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::consumer::{AckPolicy, PullConsumer, pull};
use async_nats::jetstream::{AckKind, Message};
use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;

use weft_core::ErrorKind;
use weft_core::ports::PortError;
use weft_telemetry::trace::{Kind, TraceSpan, start_span};

use crate::trace::{TraceContext, TraceHeaders};
use crate::{
    DELIVERIES_HEADER, ERROR_HEADER, ERROR_KIND_HEADER, Jet, NatsError, STAGE_HEADER,
    SUBJECT_HEADER, subject_token,
};

/// One received message.
pub struct Delivery {
    /// Its subject.
    pub subject: String,
    /// Its payload.
    pub payload: Bytes,
    /// Its headers.
    pub headers: Option<HeaderMap>,
    /// How often it has been delivered, this time included.
    pub delivered: i64,
    /// Its sequence number in the stream: later publishes have larger ones.
    pub stream_sequence: u64,
    /// The trace span of the work on it (a child of what it carried).
    pub trace: TraceContext,
    span: TraceSpan,
    message: Message,
}

impl Delivery {
    /// Checks that the message came on `expected`, the subject its own
    /// project and document id give (`weft.docs.<project>.<document_id>`…):
    /// a message published on another document's subject would replace or
    /// be replaced by that document's messages.
    pub fn check_subject(&self, expected: &str) -> Result<(), Failure> {
        if self.subject == expected {
            Ok(())
        } else {
            Err(Failure::invalid(format!(
                "{}: the message's generation, project and document_id belong on {expected}, not on this subject",
                self.subject
            )))
        }
    }
}

/// Why a message was not handled. Its kind decides what the worker does
/// ([`Failure::retries`]): input that is [`ErrorKind::Invalid`] is
/// dead-lettered at once with the reason; anything else (a store or API
/// unavailable, a rate limit, a bug) is delivered again with backoff, and
/// dead-lettered after `max_deliver` attempts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Failure {
    /// What kind of failure it is.
    pub kind: ErrorKind,
    /// Why, for logs and the dead-letter's `Weft-Error` header.
    pub reason: String,
}

impl Failure {
    /// A failure of `kind`.
    pub fn new(kind: ErrorKind, reason: impl Into<String>) -> Self {
        Self {
            kind,
            reason: reason.into(),
        }
    }

    /// A message that can never be handled (malformed, on the wrong
    /// subject): [`ErrorKind::Invalid`].
    pub fn invalid(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, reason)
    }

    /// A store or service that cannot be reached now:
    /// [`ErrorKind::Unavailable`].
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, reason)
    }

    /// The same failure with `context` before its reason.
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        Self {
            reason: format!("{context}: {}", self.reason),
            ..self
        }
    }

    /// Whether another delivery may pass: for every kind but
    /// [`ErrorKind::Invalid`], which no attempt fixes.
    pub fn retries(&self) -> bool {
        self.kind != ErrorKind::Invalid
    }
}

impl From<PortError> for Failure {
    fn from(e: PortError) -> Self {
        Self::new(e.kind(), e.to_string())
    }
}

impl From<NatsError> for Failure {
    fn from(e: NatsError) -> Self {
        Self::new(e.kind(), e.to_string())
    }
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Handled: acknowledge it.
    Done,
    /// Not handled: retried or dead-lettered as its kind says.
    Failed(Failure),
}

impl From<Failure> for Outcome {
    fn from(failure: Failure) -> Self {
        Outcome::Failed(failure)
    }
}

/// What the worker does with one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Action {
    /// Acknowledge it.
    Ack,
    /// Hand it back, to be delivered again after this delay.
    Retry(Duration, Failure),
    /// Move it to the dead-letter stream now.
    DeadLetter(Failure),
}

/// The rule: a message handled is acknowledged; one that failed is
/// delivered again with backoff while its failure [`retries`](Failure::retries)
/// and it has been delivered fewer than `max_deliver` times, and is
/// dead-lettered otherwise — invalid input at once.
fn decide(outcome: Outcome, delivered: i64, max_deliver: i64) -> Action {
    match outcome {
        Outcome::Done => Action::Ack,
        Outcome::Failed(failure) if failure.retries() && delivered < max_deliver => {
            Action::Retry(backoff(delivered), failure)
        }
        Outcome::Failed(failure) => Action::DeadLetter(failure),
    }
}

/// A stage's work on a batch of messages.
#[async_trait]
pub trait Handler: Send {
    /// One outcome per delivery, in order.
    async fn handle(&mut self, deliveries: &[Delivery]) -> Vec<Outcome>;

    /// Called when a fetch found nothing after some work: time for
    /// housekeeping (e.g. building search structures). The default does nothing.
    async fn idle(&mut self) {}

    /// Called after every fetch that brought nothing (about once per
    /// fetch expiry while the queue is empty): housekeeping that must
    /// happen even when no message comes, e.g. letting go of resources no
    /// longer needed. The default does nothing.
    async fn tick(&mut self) {}
}

/// Where and how a worker pulls.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The stage, for metrics, logs and dead-letter subjects: `chunker`, `embedder`.
    pub stage: &'static str,
    /// The stream to pull from.
    pub stream: String,
    /// The durable consumer shared by every worker of the stage.
    pub durable: String,
    /// Messages per batch.
    pub batch: usize,
    /// How long a fetch waits for a full batch.
    pub linger: Duration,
}

/// What a worker did before it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Messages acknowledged.
    pub done: u64,
    /// Messages handed back for another attempt.
    pub retried: u64,
    /// Messages moved to the dead-letter stream.
    pub dead_lettered: u64,
}

impl std::fmt::Display for WorkerStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} done, {} retried, {} dead-lettered",
            self.done, self.retried, self.dead_lettered
        )
    }
}

async fn consumer(jet: &Jet, options: &WorkerOptions) -> Result<PullConsumer, NatsError> {
    let c = jet.config();
    let stream = jet
        .jetstream()
        .get_stream(&options.stream)
        .await
        .map_err(|e| NatsError::js(format!("get stream {}", options.stream), e))?;
    stream
        .get_or_create_consumer(
            &options.durable,
            pull::Config {
                durable_name: Some(options.durable.clone()),
                description: Some(format!("weft {} workers", options.stage)),
                ack_policy: AckPolicy::Explicit,
                ack_wait: Duration::from_secs(c.ack_wait_secs),
                max_ack_pending: c.max_ack_pending,
                // One more than ours: a message that keeps killing its worker
                // is delivered once more and dead-lettered unprocessed.
                max_deliver: c.max_deliver + 1,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| {
            NatsError::js(
                format!("consumer {} on {}", options.durable, options.stream),
                e,
            )
        })
}

/// Removes the messages of the work-queue stream that its consumer has
/// acknowledged (at or below its ack floor `floor`, with nothing pending)
/// but the stream still holds. A work queue removes a message when it is
/// acknowledged; a NATS server killed before it wrote that removal to disk
/// comes back with the consumer's ack floor past messages its stream still
/// holds, which no consumer would ever deliver again: the queue would never
/// drain (seen in the `nats_restart` e2e test: 30 of 240 chunk batches).
/// Acknowledged means handled (weft acknowledges after the work or the
/// dead letter), so they go.
async fn remove_acknowledged(jet: &Jet, options: &WorkerOptions, floor: u64) {
    let Ok(mut stream) = jet.jetstream().get_stream(&options.stream).await else {
        return;
    };
    let Ok(info) = stream.info().await else {
        return;
    };
    if info.state.messages == 0 || info.state.first_sequence > floor {
        return;
    }
    match stream.purge().sequence(floor + 1).await {
        Ok(purged) => tracing::warn!(
            stage = options.stage,
            stream = %options.stream,
            removed = purged.purged,
            "removed messages acknowledged but still held by the work queue (their removal was lost, as in a NATS server crash)"
        ),
        Err(e) => tracing::warn!(
            stage = options.stage,
            stream = %options.stream,
            "cannot remove acknowledged messages still held by the work queue: {e}"
        ),
    }
}

/// Pulls and handles messages until `shutdown` completes. A fetch under
/// way and the batch it brings are finished and answered first (acknowledged,
/// or NAKed for a retry): nothing fetched is left unanswered.
pub async fn run_worker(
    jet: &Jet,
    options: &WorkerOptions,
    handler: &mut dyn Handler,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<WorkerStats, NatsError> {
    let mut consumer = consumer(jet, options).await?;
    let max_deliver = jet.config().max_deliver;
    let metrics = weft_telemetry::metrics();
    let mut stats = WorkerStats::default();
    let mut worked_since_idle = false;
    let fault_delay = fault_delay();
    tokio::pin!(shutdown);
    loop {
        let mut acknowledged = None;
        if let Ok(info) = consumer.info().await {
            metrics
                .pending
                .with_label_values(&[options.stream.as_str()])
                .set(info.num_pending as i64);
            if info.num_pending == 0 && info.num_ack_pending == 0 {
                acknowledged = Some(info.ack_floor.stream_sequence);
            }
        }
        let fetch = async {
            let mut batch = consumer
                .batch()
                .max_messages(options.batch)
                .expires(options.linger.max(Duration::from_millis(100)))
                .messages()
                .await
                .map_err(|e| NatsError::js(format!("fetch from {}", options.durable), e))?;
            let mut messages = Vec::new();
            while let Some(message) = batch.next().await {
                match message {
                    Ok(m) => messages.push(m),
                    Err(e) => tracing::warn!(stage = options.stage, "fetch: {e}"),
                }
            }
            Ok::<_, NatsError>(messages)
        };
        // Shutdown is looked at between fetches, never during one: messages
        // a fetch has pulled are always handled and answered, not left for
        // redelivery after `ack_wait`. A fetch lasts at most its expiry.
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            () = std::future::ready(()) => {}
        }
        let messages = match fetch.await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(stage = options.stage, "{e}; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if messages.is_empty() {
            if let Some(floor) = acknowledged {
                remove_acknowledged(jet, options, floor).await;
            }
            if worked_since_idle {
                handler.idle().await;
                worked_since_idle = false;
            }
            handler.tick().await;
            continue;
        }
        worked_since_idle = true;
        let mut deliveries = Vec::new();
        for message in messages {
            let (delivered, stream_sequence) = match message.info() {
                Ok(info) => (info.delivered, info.stream_sequence),
                Err(_) => (1, 0),
            };
            let parent = TraceContext::from_headers(message.headers.as_ref());
            let trace = parent
                .as_ref()
                .map(TraceContext::child)
                .unwrap_or_else(TraceContext::new_root);
            let span = start_span(
                format!("{} process", options.stage),
                Kind::Consumer,
                &trace,
                parent.as_ref(),
                &[
                    ("messaging.system", "nats".into()),
                    ("messaging.destination.name", message.subject.to_string()),
                    ("messaging.message.delivery_count", delivered.to_string()),
                    ("weft.stage", options.stage.into()),
                ],
            );
            let mut delivery = Delivery {
                subject: message.subject.to_string(),
                payload: message.payload.clone(),
                headers: message.headers.clone(),
                delivered,
                stream_sequence,
                trace,
                span,
                message,
            };
            if delivered > max_deliver {
                // It was delivered `max_deliver` times without an answer:
                // it probably kills its worker. Do not try again.
                let reason = format!(
                    "delivered {delivered} times without being acknowledged (did it crash the {} worker?)",
                    options.stage
                );
                delivery.span.set("weft.outcome", "dead_letter");
                delivery.span.fail(reason.as_str());
                dead_letter(jet, options.stage, &delivery, &Failure::unavailable(reason)).await;
                stats.dead_lettered += 1;
                continue;
            }
            deliveries.push(delivery);
        }
        if deliveries.is_empty() {
            continue;
        }
        if let Some(delay) = fault_delay {
            tokio::time::sleep(delay).await;
        }
        let outcomes = handler.handle(&deliveries).await;
        for (i, mut delivery) in deliveries.into_iter().enumerate() {
            let outcome = outcomes.get(i).cloned().unwrap_or_else(|| {
                Failure::new(ErrorKind::Internal, "the handler gave no outcome").into()
            });
            match decide(outcome, delivery.delivered, max_deliver) {
                Action::Ack => {
                    delivery.span.set("weft.outcome", "done");
                    if let Err(e) = delivery.message.double_ack().await {
                        tracing::warn!(stage = options.stage, subject = %delivery.subject, "ack: {e}");
                    }
                    stats.done += 1;
                }
                Action::Retry(delay, failure) => {
                    metrics.errors.with_label_values(&[options.stage]).inc();
                    delivery.span.set("weft.outcome", "retry");
                    delivery.span.fail(failure.reason.as_str());
                    tracing::warn!(
                        stage = options.stage,
                        subject = %delivery.subject,
                        trace_id = %delivery.trace.trace_id,
                        attempt = delivery.delivered,
                        kind = %failure.kind,
                        "{}; again in {delay:?}",
                        failure.reason
                    );
                    if let Err(e) = delivery.message.ack_with(AckKind::Nak(Some(delay))).await {
                        tracing::warn!(stage = options.stage, "nak: {e}");
                    }
                    stats.retried += 1;
                }
                Action::DeadLetter(failure) => {
                    metrics.errors.with_label_values(&[options.stage]).inc();
                    delivery.span.set("weft.outcome", "dead_letter");
                    delivery.span.fail(failure.reason.as_str());
                    dead_letter(jet, options.stage, &delivery, &failure).await;
                    stats.dead_lettered += 1;
                }
            }
        }
    }
    Ok(stats)
}

/// `WEFT_FAULT_DELAY_MS`: a pause before each batch is handled, so that
/// crash-recovery tests and chaos drills can kill a worker mid-batch.
fn fault_delay() -> Option<Duration> {
    let ms: u64 = std::env::var("WEFT_FAULT_DELAY_MS").ok()?.parse().ok()?;
    tracing::warn!("WEFT_FAULT_DELAY_MS: pausing {ms} ms before each batch");
    Some(Duration::from_millis(ms))
}

/// 1 s after the first failure, doubling, at most 30 s.
fn backoff(delivered: i64) -> Duration {
    let exponent = delivered.clamp(1, 6) as u32 - 1;
    Duration::from_secs(2u64.pow(exponent).min(30))
}

/// Publishes the message to `weft.dead.<stage>.<subject>` with the error
/// (and its kind) and terminates it; when the publish fails the message is
/// handed back instead.
async fn dead_letter(jet: &Jet, stage: &str, delivery: &Delivery, failure: &Failure) {
    let reason = &failure.reason;
    tracing::error!(
        stage,
        subject = %delivery.subject,
        trace_id = %delivery.trace.trace_id,
        kind = %failure.kind,
        "dead-lettered: {reason}"
    );
    weft_telemetry::metrics()
        .documents
        .with_label_values(&[stage, "dead_letter"])
        .inc();
    let mut headers = delivery.headers.clone().unwrap_or_default();
    // Header values cannot hold line breaks.
    let one_line: String = reason
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    headers.insert(ERROR_HEADER, one_line.as_str());
    headers.insert(ERROR_KIND_HEADER, failure.kind.as_str());
    headers.insert(STAGE_HEADER, stage);
    headers.insert(SUBJECT_HEADER, delivery.subject.as_str());
    headers.insert(DELIVERIES_HEADER, delivery.delivered.to_string().as_str());
    let tail = delivery
        .subject
        .strip_prefix("weft.")
        .unwrap_or(&delivery.subject);
    let subject = format!("weft.dead.{}.{tail}", subject_token(stage));
    match jet
        .publish(subject, headers, delivery.payload.clone())
        .await
    {
        Ok(()) => {
            if let Err(e) = delivery.message.double_ack_with(AckKind::Term).await {
                tracing::warn!(stage, "term: {e}");
            }
        }
        Err(e) => {
            tracing::error!(stage, "cannot dead-letter {}: {e}", delivery.subject);
            let _ = delivery
                .message
                .ack_with(AckKind::Nak(Some(Duration::from_secs(30))))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_input_is_dead_lettered_at_once_and_the_rest_retried_until_max_deliver() {
        let max_deliver = 5;
        let why = |kind| Failure::new(kind, "why");
        let failed = |kind| Outcome::Failed(why(kind));
        assert_eq!(decide(Outcome::Done, 1, max_deliver), Action::Ack);
        assert_eq!(decide(Outcome::Done, 9, max_deliver), Action::Ack);
        // Invalid input: no attempt will pass.
        assert_eq!(
            decide(failed(ErrorKind::Invalid), 1, max_deliver),
            Action::DeadLetter(why(ErrorKind::Invalid))
        );
        // Anything else may pass later: retried with backoff, then
        // dead-lettered at the last delivery.
        for kind in [
            ErrorKind::Unavailable,
            ErrorKind::ResourceExhausted,
            ErrorKind::NotFound,
            ErrorKind::PermissionDenied,
            ErrorKind::FailedPrecondition,
            ErrorKind::Internal,
        ] {
            assert_eq!(
                decide(failed(kind), 1, max_deliver),
                Action::Retry(Duration::from_secs(1), why(kind)),
                "{kind}"
            );
            assert_eq!(
                decide(failed(kind), 4, max_deliver),
                Action::Retry(Duration::from_secs(8), why(kind)),
                "{kind}"
            );
            assert_eq!(
                decide(failed(kind), max_deliver, max_deliver),
                Action::DeadLetter(why(kind)),
                "{kind}"
            );
        }
        // A store error keeps its kind on the way.
        let refused = PortError::invalid("embedding API", "400: input too long");
        let failure = Failure::from(refused).context("index generation 1");
        assert_eq!(failure.kind, ErrorKind::Invalid);
        assert_eq!(
            failure.reason,
            "index generation 1: embedding API: 400: input too long"
        );
        assert!(!failure.retries());
        assert!(Failure::unavailable("down").retries());
    }

    #[test]
    fn backoff_doubles_up_to_thirty_seconds() {
        let d: Vec<u64> = (1..=8).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
