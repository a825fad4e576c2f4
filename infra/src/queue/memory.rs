//! The embedded queue: in-process, with the broker's delivery semantics (see the parent
//! module). It keeps nothing across processes; the store is what makes a run resumable.

use super::{Consumer, DeadLetter, Delivery, Queue, QueueError};
use async_trait::async_trait;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

struct Envelope {
    body: Vec<u8>,
    deliveries: u32,
}

#[derive(Default)]
struct Lane {
    ready: VecDeque<Envelope>,
    in_flight: usize,
}

#[derive(Default)]
struct State {
    lanes: HashMap<String, Lane>,
    dead: Vec<DeadLetter>,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Notify,
    max_deliveries: u32,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state consistent (every mutation is
        // a single push/pop), so a poisoned lock is safe to take over.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn settle(&self, queue: &str, env: Envelope, outcome: Outcome) {
        let mut st = self.lock();
        let lane = st.lanes.entry(queue.to_string()).or_default();
        lane.in_flight -= 1;
        match outcome {
            Outcome::Ack => {}
            Outcome::Release => {
                // Back at the head, its count as before this delivery.
                let mut env = env;
                env.deliveries = env.deliveries.saturating_sub(1);
                lane.ready.push_front(env);
            }
            Outcome::Requeue if env.deliveries < self.max_deliveries => lane.ready.push_back(env),
            Outcome::Requeue => st.dead.push(DeadLetter {
                queue: queue.to_string(),
                deliveries: env.deliveries,
                body: env.body,
                reason: format!(
                    "delivery limit reached ({} deliveries)",
                    self.max_deliveries
                ),
            }),
            Outcome::Dead(reason) => st.dead.push(DeadLetter {
                queue: queue.to_string(),
                deliveries: env.deliveries,
                body: env.body,
                reason,
            }),
        }
        drop(st);
        self.changed.notify_waiters();
    }
}

enum Outcome {
    Ack,
    Release,
    Requeue,
    Dead(String),
}

/// The in-process queue engine.
///
/// ```
/// # tokio_test_block_on(async {
/// use credence_infra::queue::{memory::MemoryQueue, Queue};
/// let q = MemoryQueue::new(3);
/// q.publish("jobs", b"hello".to_vec()).await?;
/// q.close();
/// let mut consumer = q.consume("jobs").await?;
/// let d = consumer.next().await?.expect("one message");
/// assert_eq!(d.body(), b"hello");
/// d.ack().await?;
/// assert!(consumer.next().await?.is_none());
/// # Ok::<(), credence_infra::queue::QueueError>(())
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryQueue {
    shared: Arc<Shared>,
}

impl MemoryQueue {
    /// A queue that dead-letters a message after `max_deliveries` unsuccessful deliveries.
    pub fn new(max_deliveries: u32) -> Self {
        MemoryQueue {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                changed: Notify::new(),
                max_deliveries: max_deliveries.max(1),
            }),
        }
    }

    /// No more messages will be published: consumers end once their queue is drained and
    /// nothing is in flight.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_waiters();
    }

    /// Messages ready plus in flight on `queue`.
    pub fn depth(&self, queue: &str) -> usize {
        let st = self.shared.lock();
        st.lanes
            .get(queue)
            .map_or(0, |l| l.ready.len() + l.in_flight)
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn publish(&self, queue: &str, body: Vec<u8>) -> Result<(), QueueError> {
        let mut st = self.shared.lock();
        if st.closed {
            return Err(QueueError::Closed);
        }
        st.lanes
            .entry(queue.to_string())
            .or_default()
            .ready
            .push_back(Envelope {
                body,
                deliveries: 0,
            });
        drop(st);
        self.shared.changed.notify_waiters();
        Ok(())
    }

    async fn consume(&self, queue: &str) -> Result<Box<dyn Consumer>, QueueError> {
        Ok(Box::new(MemoryConsumer {
            shared: self.shared.clone(),
            queue: queue.to_string(),
        }))
    }

    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        Ok(self.shared.lock().dead.clone())
    }
}

struct MemoryConsumer {
    shared: Arc<Shared>,
    queue: String,
}

#[async_trait]
impl Consumer for MemoryConsumer {
    async fn next(&mut self) -> Result<Option<Box<dyn Delivery>>, QueueError> {
        loop {
            // Register interest before looking, so a change between the look and the
            // wait is not missed.
            let notified = self.shared.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.shared.lock();
                let closed = st.closed;
                let lane = st.lanes.entry(self.queue.clone()).or_default();
                if let Some(mut env) = lane.ready.pop_front() {
                    lane.in_flight += 1;
                    let previous = env.deliveries;
                    env.deliveries += 1;
                    return Ok(Some(Box::new(MemoryDelivery {
                        shared: self.shared.clone(),
                        queue: self.queue.clone(),
                        env: Some(env),
                        previous,
                    })));
                }
                if closed && lane.in_flight == 0 {
                    return Ok(None);
                }
            }
            notified.await;
        }
    }
}

struct MemoryDelivery {
    shared: Arc<Shared>,
    queue: String,
    env: Option<Envelope>,
    previous: u32,
}

impl MemoryDelivery {
    fn settle(&mut self, outcome: Outcome) {
        if let Some(env) = self.env.take() {
            self.shared.settle(&self.queue, env, outcome);
        }
    }
}

#[async_trait]
impl Delivery for MemoryDelivery {
    fn body(&self) -> &[u8] {
        self.env.as_ref().map_or(&[], |e| &e.body)
    }

    fn previous_deliveries(&self) -> u32 {
        self.previous
    }

    async fn ack(mut self: Box<Self>) -> Result<(), QueueError> {
        self.settle(Outcome::Ack);
        Ok(())
    }

    async fn nack(mut self: Box<Self>, requeue: bool) -> Result<(), QueueError> {
        self.settle(if requeue {
            Outcome::Requeue
        } else {
            Outcome::Dead("rejected without requeue".into())
        });
        Ok(())
    }

    async fn dead_letter(mut self: Box<Self>, reason: &str) -> Result<(), QueueError> {
        self.settle(Outcome::Dead(reason.to_string()));
        Ok(())
    }

    async fn release(mut self: Box<Self>) -> Result<(), QueueError> {
        self.settle(Outcome::Release);
        Ok(())
    }
}

impl Drop for MemoryDelivery {
    /// An unsettled delivery returns to the queue, as when a broker loses the consumer.
    fn drop(&mut self) {
        if let Some(env) = self.env.take() {
            self.shared.settle(&self.queue, env, Outcome::Requeue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn next_body(c: &mut Box<dyn Consumer>) -> Option<(Vec<u8>, Box<dyn Delivery>)> {
        c.next().await.unwrap().map(|d| (d.body().to_vec(), d))
    }

    #[tokio::test]
    async fn ack_removes_and_close_drains() {
        let q = MemoryQueue::new(3);
        for i in 0..3u8 {
            q.publish("a", vec![i]).await.unwrap();
        }
        q.close();
        assert!(matches!(
            q.publish("a", vec![9]).await,
            Err(QueueError::Closed)
        ));
        let mut c = q.consume("a").await.unwrap();
        let mut seen = Vec::new();
        while let Some((body, d)) = next_body(&mut c).await {
            seen.push(body[0]);
            d.ack().await.unwrap();
        }
        assert_eq!(seen, [0, 1, 2]);
        assert_eq!(q.depth("a"), 0);
    }

    #[tokio::test]
    async fn requeue_until_limit_then_dead_letter() {
        let q = MemoryQueue::new(3);
        q.publish("a", b"poison".to_vec()).await.unwrap();
        q.close();
        let mut c = q.consume("a").await.unwrap();
        let mut previous = Vec::new();
        while let Some((_, d)) = next_body(&mut c).await {
            previous.push(d.previous_deliveries());
            d.nack(true).await.unwrap();
        }
        assert_eq!(previous, [0, 1, 2]);
        let dead = q.dead_letters().await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!(dead[0].deliveries, 3);
        assert_eq!(dead[0].reason, "delivery limit reached (3 deliveries)");
    }

    #[tokio::test]
    async fn dropped_delivery_is_redelivered() {
        let q = MemoryQueue::new(5);
        q.publish("a", b"x".to_vec()).await.unwrap();
        q.close();
        let mut c = q.consume("a").await.unwrap();
        let (_, d) = next_body(&mut c).await.unwrap();
        drop(d); // the consumer "died" mid-job
        let (_, d) = next_body(&mut c).await.unwrap();
        assert_eq!(d.previous_deliveries(), 1);
        d.dead_letter("malformed").await.unwrap();
        assert!(next_body(&mut c).await.is_none());
        assert_eq!(q.dead_letters().await.unwrap()[0].reason, "malformed");
    }

    /// A released delivery goes back without counting: however many times a worker
    /// shuts down holding it, it never reaches the delivery limit.
    #[tokio::test]
    async fn a_released_delivery_keeps_its_count() {
        let q = MemoryQueue::new(2);
        q.publish("a", b"x".to_vec()).await.unwrap();
        q.close();
        let mut c = q.consume("a").await.unwrap();
        let (_, d) = next_body(&mut c).await.unwrap();
        d.nack(true).await.unwrap();
        for _ in 0..5 {
            let (_, d) = next_body(&mut c).await.unwrap();
            assert_eq!(d.previous_deliveries(), 1);
            d.release().await.unwrap();
        }
        let (_, d) = next_body(&mut c).await.unwrap();
        assert_eq!(d.previous_deliveries(), 1);
        d.ack().await.unwrap();
        assert!(next_body(&mut c).await.is_none());
        assert!(q.dead_letters().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn consumers_wait_for_in_flight_work_before_ending() {
        let q = MemoryQueue::new(3);
        q.publish("a", b"x".to_vec()).await.unwrap();
        q.close();
        let mut c1 = q.consume("a").await.unwrap();
        let mut c2 = q.consume("a").await.unwrap();
        let (_, d) = next_body(&mut c1).await.unwrap();
        let waiter = tokio::spawn(async move {
            next_body(&mut c2)
                .await
                .map(|(b, d)| (b, d.previous_deliveries()))
        });
        tokio::task::yield_now().await;
        d.nack(true).await.unwrap();
        let got = waiter.await.unwrap();
        assert_eq!(got, Some((b"x".to_vec(), 1)));
    }
}
