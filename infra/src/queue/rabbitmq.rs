//! The distributed queue: RabbitMQ through lapin, with the topology of DESIGN.md.
//!
//! Every logical queue name (`credence.jobs.<model>`, `credence.aggregate`) is a durable
//! quorum queue, with its `credence` prefix replaced by the namespace (`credence` unless
//! set, so tests can run side by side). Each has an explicit `x-delivery-limit` and
//! dead-letters at-least-once to the fanout exchange `<namespace>.dead`, bound to the
//! quorum queue `<namespace>.dead`. Messages are persistent and published with
//! confirms; consumers take `prefetch` (default 1) messages at a time. A lost connection
//! is re-established with exponential backoff, by publishers and consumers alike; a
//! delivery from the lost connection can no longer be settled, and the broker delivers it
//! again (at-least-once; the store makes the second run change nothing).
//!
//! Each job queue also has an `x-consumer-timeout` ([`RabbitSettings::consumer_timeout`]):
//! how long a consumer may hold a message unacknowledged before the broker takes it back.
//! It must exceed the longest job (a local-LLM shard can run for hours), or the broker
//! redelivers a job while it still runs. RabbitMQ reads the argument from 3.12 on; older
//! brokers accept and ignore it and apply their global `consumer_timeout` (30 min by
//! default; set it in `rabbitmq.conf`). A queue declared by an older credence without the
//! argument (or with another value) cannot be redeclared with it (`PRECONDITION_FAILED`):
//! it is then used as it is, with a warning saying how to apply the timeout (a
//! `consumer-timeout` policy, or deleting the queue once drained).
//!
//! A message dead-lettered by the worker (unreadable, or failed its last delivery)
//! carries the reason in the header `x-credence-reason`; one dead-lettered by the broker
//! (its consumers kept dying) carries the broker's `x-first-death-reason`.

mod consume;
mod dead;

use super::{Consumer, DeadLetter, Queue, QueueError};
use async_trait::async_trait;
use consume::RabbitConsumer;
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::collections::HashSet;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Settings of the RabbitMQ queue.
#[derive(Debug, Clone)]
pub struct RabbitSettings {
    /// `amqp://user:password@host:port/vhost`.
    pub url: String,
    /// Replaces `credence` in queue names.
    pub namespace: String,
    /// `x-delivery-limit` of every job queue: deliveries after which the broker
    /// dead-letters a message whose consumers keep failing to settle it.
    pub delivery_limit: u32,
    /// Unacknowledged messages per consumer.
    pub prefetch: u16,
    /// How long to keep reconnecting after the connection is lost before an operation
    /// gives up (`None`: forever, what a worker wants).
    pub reconnect_for: Option<Duration>,
    /// `x-consumer-timeout` of every job queue: how long a worker may hold a message
    /// before the broker takes it back. Longer than the longest job, with margin (every
    /// process of a deployment must agree, as for the delivery limit).
    pub consumer_timeout: Duration,
}

/// The default [`RabbitSettings::consumer_timeout`]: 24 hours. A job is one shard; a
/// shard of a large local model on a CPU can take hours, and a worker that dies is
/// noticed sooner by its heartbeat (the reaper) and by its connection closing, so the
/// broker's timeout only has to catch a consumer that hangs while its connection lives.
pub const DEFAULT_CONSUMER_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

impl RabbitSettings {
    /// Defaults: namespace `credence`, delivery limit 3, prefetch 1, reconnect forever,
    /// consumer timeout [`DEFAULT_CONSUMER_TIMEOUT`].
    pub fn new(url: &str) -> Self {
        RabbitSettings {
            url: url.to_string(),
            namespace: "credence".into(),
            delivery_limit: 3,
            prefetch: 1,
            reconnect_for: None,
            consumer_timeout: DEFAULT_CONSUMER_TIMEOUT,
        }
    }
}

/// Where a broker URL points, as `host:port/vhost`, without user or password.
pub fn describe_url(url: &str) -> String {
    match lapin::uri::AMQPUri::from_str(url) {
        Ok(u) => format!("{}:{}/{}", u.authority.host, u.authority.port, u.vhost),
        Err(_) => "an invalid broker URL".into(),
    }
}

struct Link {
    connection: Connection,
    /// The channel publishes go through (confirm mode).
    publisher: Channel,
    /// Queues declared on this connection.
    declared: HashSet<String>,
}

struct Inner {
    settings: RabbitSettings,
    location: String,
    link: Mutex<Option<Link>>,
    /// Set by [`RabbitQueue::close`]: no reconnecting after it.
    closed: std::sync::atomic::AtomicBool,
    /// Queues that exist with other arguments than [`RabbitQueue::queue_args`] (declared
    /// by an older version): used as they are, declared passively.
    legacy: std::sync::Mutex<HashSet<String>>,
}

/// The RabbitMQ queue engine; cheap to clone.
#[derive(Clone)]
pub struct RabbitQueue {
    inner: Arc<Inner>,
}

fn broker(what: &'static str) -> impl FnOnce(lapin::Error) -> QueueError {
    move |e| QueueError::Broker {
        what,
        message: e.to_string(),
    }
}

impl RabbitQueue {
    /// Connects once (up to 10 s) and declares the dead-letter exchange and queue.
    /// Errors name `host:port/vhost`, never the credentials.
    pub async fn connect(settings: RabbitSettings) -> Result<Self, QueueError> {
        let location = describe_url(&settings.url);
        if lapin::uri::AMQPUri::from_str(&settings.url).is_err() {
            return Err(QueueError::Connect {
                location,
                message: "expected amqp://USER:PASSWORD@HOST[:PORT]/VHOST (URL not shown, it may hold a password)".into(),
            });
        }
        let queue = RabbitQueue {
            inner: Arc::new(Inner {
                settings,
                location,
                link: Mutex::new(None),
                closed: std::sync::atomic::AtomicBool::new(false),
                legacy: std::sync::Mutex::new(HashSet::new()),
            }),
        };
        let link = queue.open_link().await?;
        *queue.inner.link.lock().await = Some(link);
        Ok(queue)
    }

    /// Closes the connection (every channel on it with it) with a clean AMQP close, so
    /// that the broker and lapin see an orderly goodbye. A process closes its queue
    /// before it exits: a connection dropped with the runtime makes lapin log errors
    /// about a clean run. Operations after it fail with [`QueueError::Closed`].
    pub async fn close(&self) {
        self.inner
            .closed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let Some(link) = self.inner.link.lock().await.take() else {
            return;
        };
        close_connection(link.connection).await;
        // Dropped only now: the last handle of a channel that still reads as open closes
        // it on its own, racing the connection's close.
        drop(link.publisher);
    }

    /// `host:port/vhost` of the broker.
    pub fn location(&self) -> &str {
        &self.inner.location
    }

    /// The physical name of a logical queue name.
    pub fn physical(&self, logical: &str) -> String {
        match logical.strip_prefix("credence") {
            Some(rest) => format!("{}{rest}", self.inner.settings.namespace),
            None => logical.to_string(),
        }
    }

    /// Name of the dead-letter exchange and queue.
    pub fn dead_letter_queue(&self) -> String {
        format!("{}.dead", self.inner.settings.namespace)
    }

    /// A new connection to the broker (10 s to answer), with nothing declared on it.
    async fn connect_once(&self) -> Result<Connection, QueueError> {
        let props = ConnectionProperties::default()
            .with_connection_name(LongString::from("credence"))
            .with_executor(tokio_executor_trait::Tokio::current())
            .with_reactor(tokio_reactor_trait::Tokio);
        let connect = Connection::connect(&self.inner.settings.url, props);
        let failed = |message: String| QueueError::Connect {
            location: self.inner.location.clone(),
            message,
        };
        match tokio::time::timeout(Duration::from_secs(10), connect).await {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(failed(e.to_string())),
            Err(_) => Err(failed("no answer within 10 s".into())),
        }
    }

    async fn open_link(&self) -> Result<Link, QueueError> {
        let connection = self.connect_once().await?;
        let publisher = publisher_channel(&connection).await?;
        let dead = self.dead_letter_queue();
        publisher
            .exchange_declare(
                &dead,
                ExchangeKind::Fanout,
                ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(broker("declare dead-letter exchange"))?;
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        publisher
            .queue_declare(&dead, durable(), args)
            .await
            .map_err(broker("declare dead-letter queue"))?;
        publisher
            .queue_bind(
                &dead,
                &dead,
                "",
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(broker("bind dead-letter queue"))?;
        tracing::info!(broker = %self.inner.location, "connected to the broker");
        Ok(Link {
            connection,
            publisher,
            declared: HashSet::new(),
        })
    }

    /// Runs `op` on the live link (reconnecting with backoff if it was lost), under the
    /// link's lock: declarations and publishes are quick.
    async fn with_link<T: Send>(&self, op: impl LinkOp<T>) -> Result<T, QueueError> {
        let mut guard = self.live_link().await?;
        let link = guard.as_mut().ok_or(QueueError::Closed)?;
        op.call(self, link).await
    }

    async fn live_link(&self) -> Result<tokio::sync::MutexGuard<'_, Option<Link>>, QueueError> {
        let started = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(100);
        let mut guard = self.inner.link.lock().await;
        loop {
            if self.inner.closed.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(QueueError::Closed);
            }
            if let Some(link) = guard.as_mut() {
                if link.connection.status().connected() {
                    if link.publisher.status().connected() {
                        return Ok(guard);
                    }
                    // A channel error (not a lost connection) closed the publisher.
                    match publisher_channel(&link.connection).await {
                        Ok(channel) => {
                            link.publisher = channel;
                            link.declared.clear();
                            return Ok(guard);
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot reopen the publishing channel")
                        }
                    }
                }
                tracing::warn!(broker = %self.inner.location, "connection to the broker lost; reconnecting");
                *guard = None;
            }
            match self.open_link().await {
                Ok(link) => {
                    *guard = Some(link);
                    return Ok(guard);
                }
                Err(e) => {
                    if let Some(limit) = self.inner.settings.reconnect_for {
                        if started.elapsed() >= limit {
                            return Err(e);
                        }
                    }
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "broker unreachable");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// The arguments every job queue is declared with.
    fn queue_args(&self) -> FieldTable {
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        args.insert(
            "x-delivery-limit".into(),
            AMQPValue::LongInt(self.inner.settings.delivery_limit.min(i32::MAX as u32) as i32),
        );
        args.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(self.dead_letter_queue().into()),
        );
        args.insert(
            "x-dead-letter-strategy".into(),
            AMQPValue::LongString("at-least-once".into()),
        );
        // At-least-once dead-lettering requires the queue to refuse publishes when full
        // rather than drop its head.
        args.insert(
            "x-overflow".into(),
            AMQPValue::LongString("reject-publish".into()),
        );
        let timeout_ms = self.inner.settings.consumer_timeout.as_millis();
        args.insert(
            "x-consumer-timeout".into(),
            AMQPValue::LongLongInt(i64::try_from(timeout_ms).unwrap_or(i64::MAX)),
        );
        args
    }

    /// Declares a job queue with [`RabbitQueue::queue_args`]. A queue that exists with
    /// another consumer timeout (an older version declared it) fails that declaration,
    /// which closes `channel`; it is remembered, the error returned, and the caller's
    /// retry (on a new channel) declares it passively.
    async fn declare(&self, channel: &Channel, physical: &str) -> Result<lapin::Queue, QueueError> {
        let legacy = self
            .inner
            .legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(physical);
        if legacy {
            let passive = QueueDeclareOptions {
                passive: true,
                ..durable()
            };
            return channel
                .queue_declare(physical, passive, FieldTable::default())
                .await
                .map_err(broker("declare queue"));
        }
        match channel
            .queue_declare(physical, durable(), self.queue_args())
            .await
        {
            Err(lapin::Error::ProtocolError(e)) if other_consumer_timeout(&e) => {
                tracing::warn!(
                    queue = physical,
                    "the queue exists without this version's x-consumer-timeout (declared by an older credence); it is used as it is, under the broker's consumer timeout. To apply it: rabbitmqctl set_policy credence-consumer-timeout '^{}' '{{\"consumer-timeout\": {}}}' --apply-to queues, or delete the queue once it is empty",
                    regex_escape(physical),
                    self.inner.settings.consumer_timeout.as_millis()
                );
                self.inner
                    .legacy
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(physical.to_string());
                Err(QueueError::Broker {
                    what: "declare queue",
                    message: e.to_string(),
                })
            }
            other => other.map_err(broker("declare queue")),
        }
    }

    /// Messages ready in a queue and its consumers (declaring it if needed).
    pub async fn depth(&self, logical: &str) -> Result<(u32, u32), QueueError> {
        let physical = self.physical(logical);
        match self.with_link(DepthOp(physical.clone())).await {
            // A queue of an older version: the second try declares it passively.
            Err(_) if self.is_legacy(&physical) => self.with_link(DepthOp(physical)).await,
            other => other,
        }
    }

    fn is_legacy(&self, physical: &str) -> bool {
        self.inner
            .legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(physical)
    }

    /// Publishes raw bodies (with optional headers) onto a physical queue, waiting for
    /// the broker's confirms; retries on a new connection if the link is lost.
    async fn publish_physical(
        &self,
        physical: &str,
        bodies: &[Vec<u8>],
        headers: Option<FieldTable>,
        declare: bool,
    ) -> Result<(), QueueError> {
        let started = tokio::time::Instant::now();
        loop {
            let op = PublishOp {
                physical,
                bodies,
                headers: headers.clone(),
                declare,
            };
            match self.with_link(op).await {
                Ok(()) => return Ok(()),
                Err(e @ QueueError::Broker { .. }) => {
                    let give_up = self
                        .inner
                        .settings
                        .reconnect_for
                        .is_some_and(|limit| started.elapsed() >= limit);
                    if give_up {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, "publish failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Deletes the queues of this namespace named by `logical`, and its dead-letter
    /// queue and exchange (for tests and for tearing down a deployment).
    pub async fn delete_queues(&self, logical: &[String]) -> Result<(), QueueError> {
        let names: Vec<String> = logical.iter().map(|q| self.physical(q)).collect();
        self.with_link(DeleteOp(names)).await
    }
}

/// A channel in confirm mode, for publishing.
/// Closes `connection` (every channel on it with it) with a clean AMQP close and waits
/// for lapin's I/O loop to stop: the close is answered before that thread has stopped,
/// and a runtime that shuts down under it makes it log errors (a closed connection's
/// loop ends at once, so the wait is brief).
async fn close_connection(connection: Connection) {
    if !connection.status().connected() {
        return;
    }
    if let Err(e) = connection.close(200, "bye").await {
        tracing::debug!(error = %e, "closing the broker connection");
        return;
    }
    let io_loop = tokio::task::spawn_blocking(move || connection.run());
    if tokio::time::timeout(Duration::from_secs(5), io_loop)
        .await
        .is_err()
    {
        tracing::debug!("the broker connection's I/O loop did not stop within 5 s");
    }
}

async fn publisher_channel(connection: &Connection) -> Result<Channel, QueueError> {
    let channel = connection
        .create_channel()
        .await
        .map_err(broker("open channel"))?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(broker("confirm select"))?;
    Ok(channel)
}

/// Whether a declaration failed because the queue exists with another
/// `x-consumer-timeout` (or none).
fn other_consumer_timeout(e: &lapin::protocol::AMQPError) -> bool {
    matches!(
        e.kind(),
        lapin::protocol::AMQPErrorKind::Soft(lapin::protocol::AMQPSoftError::PRECONDITIONFAILED)
    ) && e.get_message().as_str().contains("x-consumer-timeout")
}

/// `name` as a regular expression that matches it alone (for a policy pattern).
fn regex_escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() && c != '_' && c != '-' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('$');
    out
}

fn durable() -> QueueDeclareOptions {
    QueueDeclareOptions {
        durable: true,
        ..Default::default()
    }
}

fn persistent() -> BasicProperties {
    BasicProperties::default()
        .with_delivery_mode(2)
        .with_content_type(ShortString::from("application/json"))
}

/// An operation run on the live link under its lock.
#[async_trait]
trait LinkOp<T> {
    async fn call(self, queue: &RabbitQueue, link: &mut Link) -> Result<T, QueueError>;
}

struct PublishOp<'a> {
    physical: &'a str,
    bodies: &'a [Vec<u8>],
    headers: Option<FieldTable>,
    declare: bool,
}

#[async_trait]
impl LinkOp<()> for PublishOp<'_> {
    async fn call(self, queue: &RabbitQueue, link: &mut Link) -> Result<(), QueueError> {
        if self.declare && !link.declared.contains(self.physical) {
            queue.declare(&link.publisher, self.physical).await?;
            link.declared.insert(self.physical.to_string());
        }
        let mut props = persistent();
        if let Some(h) = self.headers {
            props = props.with_headers(h);
        }
        let mut confirms = Vec::with_capacity(self.bodies.len());
        for body in self.bodies {
            let confirm = link
                .publisher
                .basic_publish(
                    "",
                    self.physical,
                    BasicPublishOptions::default(),
                    body,
                    props.clone(),
                )
                .await
                .map_err(broker("publish"))?;
            confirms.push(confirm);
        }
        for confirm in confirms {
            let confirmation = confirm.await.map_err(broker("publisher confirm"))?;
            if confirmation.is_nack() {
                return Err(QueueError::Broker {
                    what: "publisher confirm",
                    message: format!("the broker refused a message for {}", self.physical),
                });
            }
        }
        Ok(())
    }
}

struct DepthOp(String);

#[async_trait]
impl LinkOp<(u32, u32)> for DepthOp {
    async fn call(self, queue: &RabbitQueue, link: &mut Link) -> Result<(u32, u32), QueueError> {
        let q = queue.declare(&link.publisher, &self.0).await?;
        link.declared.insert(self.0);
        Ok((q.message_count(), q.consumer_count()))
    }
}

struct DeleteOp(Vec<String>);

#[async_trait]
impl LinkOp<()> for DeleteOp {
    async fn call(self, queue: &RabbitQueue, link: &mut Link) -> Result<(), QueueError> {
        let dead = queue.dead_letter_queue();
        for name in self.0.iter().chain(std::iter::once(&dead)) {
            link.publisher
                .queue_delete(name, Default::default())
                .await
                .map_err(broker("delete queue"))?;
            link.declared.remove(name);
        }
        link.publisher
            .exchange_delete(&dead, Default::default())
            .await
            .map_err(broker("delete dead-letter exchange"))?;
        Ok(())
    }
}

#[async_trait]
impl Queue for RabbitQueue {
    async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), QueueError> {
        self.publish_physical(&self.physical(queue), &[body], None, true)
            .await
    }

    async fn publish_batch(&self, queue: &str, bodies: Vec<Vec<u8>>) -> Result<(), QueueError> {
        // Confirms are awaited per chunk: enough in flight to keep the broker busy, few
        // enough that a lost connection re-sends little.
        for chunk in bodies.chunks(1000) {
            self.publish_physical(&self.physical(queue), chunk, None, true)
                .await?;
        }
        Ok(())
    }

    async fn consume(&self, queue: &str) -> Result<Box<dyn Consumer>, QueueError> {
        let mut consumer = RabbitConsumer {
            queue: self.clone(),
            physical: self.physical(queue),
            stream: None,
        };
        consumer.subscribe().await?;
        Ok(Box::new(consumer))
    }

    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        self.list_dead_letters().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_url_hides_credentials() {
        assert_eq!(
            describe_url("amqp://alice:s3cret@mq.example.org:5673/%2f"),
            "mq.example.org:5673//"
        );
        assert_eq!(describe_url("not a url"), "an invalid broker URL");
    }
}
