//! Consuming a RabbitMQ queue: a consumer that resubscribes (reconnecting with backoff)
//! when its channel or connection is lost, and deliveries that are settled exactly once
//! (an unsettled one returns to the queue when dropped).
//!
//! A quorum queue counts every return of a message (nack, a dropped channel) in
//! `x-delivery-count` and dead-letters it past `x-delivery-limit`; AMQP 0.9.1 has no
//! return that does not count. So [`Delivery::release`] publishes the message back to
//! its queue (confirmed) and then acks the original: the copy starts with no count of
//! its own and carries the deliveries that did count in `x-credence-previous`, which
//! [`Delivery::previous_deliveries`] adds back. A crash between the two leaves the
//! message twice in the queue, never nowhere; the store makes the second run a no-op.

use super::{broker, RabbitQueue};
use crate::queue::{Consumer, Delivery, QueueError};
use async_trait::async_trait;
use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::Channel;
use std::time::Duration;

pub(super) struct RabbitConsumer {
    pub(super) queue: RabbitQueue,
    pub(super) physical: String,
    pub(super) stream: Option<(Channel, lapin::Consumer)>,
}

impl RabbitConsumer {
    /// Opens a channel on the live connection (reconnecting if needed) and subscribes.
    pub(super) async fn subscribe(&mut self) -> Result<(), QueueError> {
        let started = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.try_subscribe().await {
                Ok(s) => {
                    self.stream = Some(s);
                    return Ok(());
                }
                Err(e) => {
                    if let Some(limit) = self.queue.inner.settings.reconnect_for {
                        if started.elapsed() >= limit {
                            return Err(e);
                        }
                    }
                    tracing::warn!(error = %e, queue = %self.physical, "cannot subscribe; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    async fn try_subscribe(&self) -> Result<(Channel, lapin::Consumer), QueueError> {
        let guard = self.queue.live_link().await?;
        let link = guard.as_ref().ok_or(QueueError::Closed)?;
        let channel = link
            .connection
            .create_channel()
            .await
            .map_err(broker("open channel"))?;
        drop(guard);
        channel
            .basic_qos(
                self.queue.inner.settings.prefetch,
                BasicQosOptions::default(),
            )
            .await
            .map_err(broker("set prefetch"))?;
        self.queue.declare(&channel, &self.physical).await?;
        let consumer = channel
            .basic_consume(
                &self.physical,
                "",
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(broker("consume"))?;
        Ok((channel, consumer))
    }
}

#[async_trait]
impl Consumer for RabbitConsumer {
    async fn next(&mut self) -> Result<Option<Box<dyn Delivery>>, QueueError> {
        loop {
            let Some((_, stream)) = self.stream.as_mut() else {
                self.subscribe().await?;
                continue;
            };
            match stream.next().await {
                Some(Ok(d)) => {
                    let headers = d.properties.headers().as_ref();
                    let previous = delivery_count(headers).saturating_add(carried_count(headers));
                    return Ok(Some(Box::new(RabbitDelivery {
                        queue: self.queue.clone(),
                        physical: self.physical.clone(),
                        delivery: Some(d),
                        previous,
                    })));
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, queue = %self.physical, "consumer lost its connection; resubscribing");
                    self.stream = None;
                }
                None => {
                    tracing::warn!(queue = %self.physical, "the broker cancelled the consumer; resubscribing");
                    self.stream = None;
                }
            }
        }
    }
}

impl Drop for RabbitConsumer {
    /// Closes the consumer's channel, so the broker returns its unacked messages now and
    /// stops delivering to it (rather than when the connection ends).
    fn drop(&mut self) {
        if let Some((channel, _)) = self.stream.take() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = channel.close(200, "consumer dropped").await;
                });
            }
        }
    }
}

/// `x-delivery-count` of a quorum-queue delivery: how many times it was returned.
fn delivery_count(headers: Option<&FieldTable>) -> u32 {
    headers
        .and_then(|h| h.inner().get("x-delivery-count"))
        .and_then(as_u64)
        .map_or(0, |n| n.min(u64::from(u32::MAX)) as u32)
}

/// Header of a message published back by [`Delivery::release`]: the deliveries that
/// counted before it was published back.
const CARRIED: &str = "x-credence-previous";

/// `x-credence-previous` of a released message (0 for any other).
fn carried_count(headers: Option<&FieldTable>) -> u32 {
    headers
        .and_then(|h| h.inner().get(CARRIED))
        .and_then(as_u64)
        .map_or(0, |n| n.min(u64::from(u32::MAX)) as u32)
}

pub(super) fn as_u64(v: &AMQPValue) -> Option<u64> {
    match v {
        AMQPValue::ShortShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::ShortShortUInt(n) => Some(u64::from(*n)),
        AMQPValue::ShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::ShortUInt(n) => Some(u64::from(*n)),
        AMQPValue::LongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongUInt(n) => Some(u64::from(*n)),
        AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

struct RabbitDelivery {
    queue: RabbitQueue,
    physical: String,
    delivery: Option<lapin::message::Delivery>,
    previous: u32,
}

#[async_trait]
impl Delivery for RabbitDelivery {
    fn body(&self) -> &[u8] {
        self.delivery.as_ref().map_or(&[], |d| &d.data)
    }

    fn previous_deliveries(&self) -> u32 {
        self.previous
    }

    async fn ack(mut self: Box<Self>) -> Result<(), QueueError> {
        match self.delivery.take() {
            Some(d) => d
                .acker
                .ack(BasicAckOptions::default())
                .await
                .map_err(broker("ack")),
            None => Ok(()),
        }
    }

    async fn nack(mut self: Box<Self>, requeue: bool) -> Result<(), QueueError> {
        match self.delivery.take() {
            Some(d) => d
                .acker
                .nack(BasicNackOptions {
                    requeue,
                    ..Default::default()
                })
                .await
                .map_err(broker("nack")),
            None => Ok(()),
        }
    }

    async fn dead_letter(mut self: Box<Self>, reason: &str) -> Result<(), QueueError> {
        let Some(d) = self.delivery.take() else {
            return Ok(());
        };
        // The broker's own dead-lettering cannot carry a reason; publish the copy with
        // it (confirmed), then ack the original. A crash in between leaves the message
        // in both places, never in neither.
        let mut headers = FieldTable::default();
        headers.insert(
            "x-credence-reason".into(),
            AMQPValue::LongString(reason.into()),
        );
        headers.insert(
            "x-credence-queue".into(),
            AMQPValue::LongString(self.physical.as_str().into()),
        );
        headers.insert(
            "x-credence-deliveries".into(),
            AMQPValue::LongLongInt(i64::from(self.previous) + 1),
        );
        let dead = self.queue.dead_letter_queue();
        self.queue
            .publish_physical(&dead, std::slice::from_ref(&d.data), Some(headers), false)
            .await?;
        d.acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(broker("ack dead-lettered"))
    }

    async fn release(mut self: Box<Self>) -> Result<(), QueueError> {
        let Some(d) = self.delivery.take() else {
            return Ok(());
        };
        let mut headers = FieldTable::default();
        headers.insert(
            CARRIED.into(),
            AMQPValue::LongLongInt(i64::from(self.previous)),
        );
        self.queue
            .publish_physical(
                &self.physical,
                std::slice::from_ref(&d.data),
                Some(headers),
                false,
            )
            .await?;
        d.acker
            .ack(BasicAckOptions::default())
            .await
            .map_err(broker("ack released"))
    }
}

impl Drop for RabbitDelivery {
    /// An unsettled delivery is returned to the queue, as the embedded queue does.
    fn drop(&mut self) {
        if let Some(d) = self.delivery.take() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = d
                        .acker
                        .nack(BasicNackOptions {
                            requeue: true,
                            ..Default::default()
                        })
                        .await;
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_count_reads_any_integer_header() {
        let mut h = FieldTable::default();
        assert_eq!(delivery_count(Some(&h)), 0);
        h.insert("x-delivery-count".into(), AMQPValue::LongLongInt(2));
        assert_eq!(delivery_count(Some(&h)), 2);
        h.insert("x-delivery-count".into(), AMQPValue::LongInt(5));
        assert_eq!(delivery_count(Some(&h)), 5);
        assert_eq!(delivery_count(None), 0);
    }
}
