//! The dead-letter queue of a namespace: listing it (`credence dlq list`) and moving
//! chosen messages back to the queues they came from (`credence dlq replay`).
//!
//! Both read the queue with `basic.get` on a connection of their own without acking; a
//! listed message stays where it is (closing the connection returns it), a replayed one is
//! re-published to its queue with a confirm and only then acked here.

use super::consume::as_u64;
use super::{broker, close_connection, RabbitQueue};
use crate::queue::{DeadLetter, QueueError};
use lapin::options::{BasicAckOptions, BasicGetOptions};
use lapin::types::{AMQPValue, FieldTable};

fn header_str(headers: Option<&FieldTable>, name: &str) -> Option<String> {
    match headers?.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

fn header_u64(headers: Option<&FieldTable>, name: &str) -> Option<u64> {
    as_u64(headers?.inner().get(name)?)
}

/// `count` of the first `x-death` entry: how many times the broker dead-lettered it.
fn death_count(headers: Option<&FieldTable>) -> Option<u64> {
    match headers?.inner().get("x-death")? {
        AMQPValue::FieldArray(deaths) => match deaths.as_slice().first()? {
            AMQPValue::FieldTable(death) => as_u64(death.inner().get("count")?),
            _ => None,
        },
        _ => None,
    }
}

/// Reads a dead-lettered message: the worker's own headers, else the broker's.
/// `delivery_limit` is the job queues' `x-delivery-limit`: a message the broker gave up
/// on was delivered once more than that (the dead-letter copy carries no count of its
/// own; its `x-delivery-count` counts the readings of the dead-letter queue).
fn dead_letter(d: &lapin::message::Delivery, delivery_limit: u32) -> DeadLetter {
    let h = d.properties.headers().as_ref();
    let queue = header_str(h, "x-credence-queue")
        .or_else(|| header_str(h, "x-first-death-queue"))
        .unwrap_or_default();
    let broker_reason = header_str(h, "x-first-death-reason");
    let reason =
        header_str(h, "x-credence-reason").unwrap_or_else(|| match broker_reason.as_deref() {
            Some("delivery_limit") => {
                "delivery limit reached: its consumers kept dying or returning it".into()
            }
            Some(other) => format!("dead-lettered by the broker: {other}"),
            None => "dead-lettered (no reason recorded)".into(),
        });
    let deliveries = header_u64(h, "x-credence-deliveries")
        .or_else(|| {
            (broker_reason.as_deref() == Some("delivery_limit")).then(|| {
                // Deliveries before a release (publish-back) count too.
                header_u64(h, "x-credence-previous").unwrap_or(0) + u64::from(delivery_limit) + 1
            })
        })
        .or_else(|| death_count(h))
        .unwrap_or(0);
    DeadLetter {
        queue,
        body: d.data.clone(),
        deliveries: deliveries.min(u64::from(u32::MAX)) as u32,
        reason,
    }
}

impl RabbitQueue {
    /// Every message in the dead-letter queue, oldest first; nothing is removed.
    pub(super) async fn list_dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        self.replay_dead_letters(|_| false)
            .await
            .map(|(all, _)| all)
    }

    /// Re-publishes the dead letters `select` picks to the queues they came from and
    /// removes them from the dead-letter queue. Returns every dead letter seen and the
    /// ones replayed.
    pub async fn replay_dead_letters(
        &self,
        select: impl Fn(&DeadLetter) -> bool + Send,
    ) -> Result<(Vec<DeadLetter>, Vec<DeadLetter>), QueueError> {
        // The dead-letter queue is declared on the main connection.
        drop(self.live_link().await?);
        // A connection of its own, closed as a whole when done: closing a channel just
        // before its connection can make lapin remove it twice and log a connection error.
        let connection = self.connect_once().await?;
        let channel = match connection.create_channel().await {
            Ok(channel) => channel,
            Err(e) => {
                close_connection(connection).await;
                return Err(broker("open channel")(e));
            }
        };
        let dead = self.dead_letter_queue();
        let mut all = Vec::new();
        let mut replayed = Vec::new();
        let result = async {
            while let Some(got) = channel
                .basic_get(&dead, BasicGetOptions::default())
                .await
                .map_err(broker("read dead letters"))?
            {
                let letter = dead_letter(&got.delivery, self.inner.settings.delivery_limit);
                if select(&letter) && !letter.queue.is_empty() {
                    self.publish_physical(
                        &letter.queue,
                        std::slice::from_ref(&letter.body),
                        None,
                        true,
                    )
                    .await?;
                    got.delivery
                        .acker
                        .ack(BasicAckOptions::default())
                        .await
                        .map_err(broker("ack replayed dead letter"))?;
                    replayed.push(letter.clone());
                }
                all.push(letter);
            }
            Ok::<_, QueueError>(())
        }
        .await;
        // Closing the connection returns every message read but not replayed.
        close_connection(connection).await;
        drop(channel);
        result?;
        Ok((all, replayed))
    }
}
