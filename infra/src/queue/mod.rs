//! The job queue. [`Queue`] is the one interface; [`memory::MemoryQueue`] is the
//! embedded engine and [`rabbitmq::RabbitQueue`] the distributed one, both with the delivery semantics of the broker: a delivery is settled by
//! [`Delivery::ack`], [`Delivery::nack`] (requeue or not), [`Delivery::dead_letter`] or
//! [`Delivery::release`] (back to the queue without using a delivery: the worker is
//! shutting down before it could run the job); one dropped unsettled returns to the queue
//! as if its consumer had died; a message delivered `max_deliveries` times without an
//! ack goes to the dead letters.

pub mod memory;
pub mod rabbitmq;

use async_trait::async_trait;

/// A queue operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The broker could not be reached; names the host, never the credentials.
    #[error("cannot reach the broker at {location}: {message}")]
    Connect {
        /// Host and port.
        location: String,
        /// What went wrong.
        message: String,
    },
    /// The queue has been shut down.
    #[error("the queue is closed")]
    Closed,
    /// A broker operation failed.
    #[error("queue operation ({what}): {message}")]
    Broker {
        /// What was being done.
        what: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// A message that reached the dead letters, with why.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The queue it came from.
    pub queue: String,
    /// The message body.
    pub body: Vec<u8>,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Why it was dead-lettered.
    pub reason: String,
}

/// A queue engine.
#[async_trait]
pub trait Queue: Send + Sync {
    /// Publishes a message durably onto `queue`; returns once the engine has it.
    async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), QueueError>;

    /// Publishes many messages onto `queue`; returns once the engine has all of them.
    /// Engines with publisher confirms override it to wait for the confirms together.
    async fn publish_batch(&self, queue: &str, bodies: Vec<Vec<u8>>) -> Result<(), QueueError> {
        for body in bodies {
            self.publish(queue, body).await?;
        }
        Ok(())
    }

    /// Starts consuming `queue`.
    async fn consume(&self, queue: &str) -> Result<Box<dyn Consumer>, QueueError>;

    /// Messages in the dead letters.
    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError>;
}

/// A consumer of one queue.
#[async_trait]
pub trait Consumer: Send {
    /// The next delivery, or `None` once the queue is closed and nothing is in flight.
    async fn next(&mut self) -> Result<Option<Box<dyn Delivery>>, QueueError>;
}

/// One delivery of a message; settle it exactly once.
#[async_trait]
pub trait Delivery: Send {
    /// The message body.
    fn body(&self) -> &[u8];

    /// How many times this message was delivered before this delivery (0 the first time).
    fn previous_deliveries(&self) -> u32;

    /// The message is done with; it leaves the queue.
    async fn ack(self: Box<Self>) -> Result<(), QueueError>;

    /// The message failed; with `requeue` it is delivered again (until the delivery
    /// limit), without it goes to the dead letters.
    async fn nack(self: Box<Self>, requeue: bool) -> Result<(), QueueError>;

    /// The message cannot be handled (malformed, unknown version, final failure); it goes
    /// to the dead letters with `reason`.
    async fn dead_letter(self: Box<Self>, reason: &str) -> Result<(), QueueError>;

    /// The worker stops before it could run the message (a shutdown while the store is
    /// unreachable): the message returns to its queue and this delivery does not count,
    /// so the next delivery's [`Delivery::previous_deliveries`] is this one's. A
    /// shutdown is not a failure of the job; counting it would let a rolling restart
    /// dead-letter a job that never failed.
    async fn release(self: Box<Self>) -> Result<(), QueueError>;
}

/// Name of the job queue of a model.
pub fn job_queue(model: &str) -> String {
    format!("credence.jobs.{model}")
}

/// Name of the aggregation queue.
pub const AGGREGATE_QUEUE: &str = "credence.aggregate";
