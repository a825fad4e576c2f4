//! The consumer loop, the same in both engines: take a delivery, decode the versioned
//! message, run the job, commit its results, then ack (DESIGN.md invariant 1). A failure
//! is retried through the queue until the delivery limit, then the job is marked failed
//! and dead-lettered with its error (invariant 5). A message that cannot be decoded is
//! dead-lettered at once with the reason, never crashing the worker.

use crate::handler::JobHandler;
use credence_shared::job::{Job, Message, MESSAGE_VERSION};
use credence_shared::queue::{Consumer, Delivery, QueueError};
use credence_shared::store::Store;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};

/// What the loop reports about each delivery.
#[derive(Debug, Clone)]
pub enum JobEvent {
    /// The job's results are committed.
    Done {
        /// The job.
        job: Job,
    },
    /// The job failed and goes back to the queue.
    Retry {
        /// The job.
        job: Job,
        /// The error.
        error: String,
    },
    /// The job failed its last delivery: marked failed and dead-lettered.
    Failed {
        /// The job.
        job: Job,
        /// The error.
        error: String,
    },
    /// A message that is not a job this worker can read was dead-lettered.
    Rejected {
        /// Why.
        reason: String,
    },
}

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct LoopSettings {
    /// Name of this worker in the store.
    pub worker_id: String,
    /// Deliveries after which a failing job is marked failed and dead-lettered.
    pub max_deliveries: u32,
}

#[derive(Deserialize)]
struct VersionProbe {
    v: Option<u32>,
}

/// Consumes until the consumer ends or `shutdown` turns true; the job in flight when
/// shutdown comes is finished first.
pub async fn consume(
    consumer: &mut dyn Consumer,
    handler: &JobHandler,
    store: &dyn Store,
    settings: &LoopSettings,
    events: &mpsc::UnboundedSender<JobEvent>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), QueueError> {
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        let delivery = tokio::select! {
            biased;
            _ = shutdown.changed() => continue,
            d = consumer.next() => d?,
        };
        let Some(delivery) = delivery else {
            return Ok(());
        };
        let event = handle_delivery(delivery, handler, store, settings).await?;
        // The receiver going away (the runner stopped listening) is not an error here.
        let _ = events.send(event);
    }
}

async fn handle_delivery(
    delivery: Box<dyn Delivery>,
    handler: &JobHandler,
    store: &dyn Store,
    settings: &LoopSettings,
) -> Result<JobEvent, QueueError> {
    let job = match decode(delivery.body()) {
        Ok(job) => job,
        Err(reason) => {
            tracing::warn!(%reason, "dead-lettering an unreadable message");
            delivery.dead_letter(&reason).await?;
            return Ok(JobEvent::Rejected { reason });
        }
    };
    let span = tracing::info_span!("job", key = %&job.key[..12], model = %job.model, dataset = %job.dataset, mode = %job.mode, shard = job.shard);
    let _enter = span.enter();
    let outcome = async {
        store.mark_running(&job, &settings.worker_id).await?;
        let results = handler.run(&job, store).await?;
        store.record_results(&job, &results).await?;
        Ok::<_, crate::handler::JobError>(())
    }
    .await;
    match outcome {
        Ok(()) => {
            delivery.ack().await?;
            Ok(JobEvent::Done { job })
        }
        Err(e) => {
            let error = e.to_string();
            if delivery.previous_deliveries() + 1 >= settings.max_deliveries {
                tracing::error!(%error, "job failed its last delivery");
                if let Err(store_err) = store.mark_failed(&job, &error).await {
                    tracing::error!(%store_err, "could not mark the job failed");
                }
                delivery.dead_letter(&error).await?;
                Ok(JobEvent::Failed { job, error })
            } else {
                tracing::warn!(%error, "job failed; returning it to the queue");
                delivery.nack(true).await?;
                Ok(JobEvent::Retry { job, error })
            }
        }
    }
}

/// Decodes a job message, or says why it cannot be handled.
pub fn decode(body: &[u8]) -> Result<Job, String> {
    let probe: VersionProbe =
        serde_json::from_slice(body).map_err(|e| format!("malformed message: {e}"))?;
    match probe.v {
        Some(MESSAGE_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "unknown message version {v}; this worker reads version {MESSAGE_VERSION}"
            ))
        }
        None => return Err("malformed message: no version field \"v\"".into()),
    }
    match serde_json::from_slice::<Message>(body) {
        Ok(Message::Job { job, .. }) => Ok(job),
        Ok(Message::Aggregate { .. }) => Err("an aggregation message on a job queue".into()),
        Err(e) => Err(format!("malformed message: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_names_what_is_wrong() {
        assert_eq!(
            decode(b"{oops").unwrap_err(),
            "malformed message: key must be a string at line 1 column 2"
        );
        assert_eq!(
            decode(br#"{"kind":"job","v":9}"#).unwrap_err(),
            "unknown message version 9; this worker reads version 1"
        );
        assert_eq!(
            decode(br#"{"kind":"job"}"#).unwrap_err(),
            "malformed message: no version field \"v\""
        );
        assert!(decode(br#"{"kind":"job","v":1,"job":{}}"#)
            .unwrap_err()
            .starts_with("malformed message: missing field"));
    }
}
