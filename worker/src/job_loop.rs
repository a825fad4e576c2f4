//! The consumer loop, the same in both engines: take a delivery, decode the versioned
//! message, run the job, commit its results, then ack (DESIGN.md invariant 1). A failure
//! is retried through the queue until the delivery limit, then the job is marked failed
//! and dead-lettered with its error (invariant 5). A message that cannot be decoded is
//! dead-lettered at once with the reason, never crashing the worker. While the store is
//! unreachable the job is retried in place with backoff (the delivery stays unacked), so
//! a database outage costs time, not deliveries. While a job runs its heartbeat is kept
//! fresh in the store for the coordinator's reaper. The commit that finishes the last
//! job of a model x dataset x mode enqueues its one aggregation job.

use crate::handler::{JobError, JobHandler};
use credence_shared::job::{Job, Message, MESSAGE_VERSION};
use credence_shared::queue::{Consumer, Delivery, Queue, QueueError, AGGREGATE_QUEUE};
use credence_shared::store::{ConfigRef, JobCommit, Store};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

/// What the loop reports about each delivery.
#[derive(Debug, Clone)]
pub enum JobEvent {
    /// The job's results are committed.
    Done {
        /// The job.
        job: Job,
        /// Whether the commit finished the job's model x dataset x mode.
        completes_config: bool,
        /// Seconds from taking the job to its commit.
        seconds: f64,
    },
    /// The job needed no work (already done, or its run was cancelled); acked.
    Skipped {
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
    /// The aggregates of a finished configuration are written.
    Aggregated {
        /// The configuration.
        config: ConfigRef,
    },
    /// A message that is not a job this worker can read was dead-lettered.
    Rejected {
        /// Why.
        reason: String,
    },
}

/// Settings of the loop.
#[derive(Clone)]
pub struct LoopSettings {
    /// Name of this worker in the store.
    pub worker_id: String,
    /// Deliveries after which a failing job is marked failed and dead-lettered.
    pub max_deliveries: u32,
    /// How often a running job's heartbeat is refreshed (`None`: never).
    pub heartbeat: Option<Duration>,
    /// Where the aggregation job of a finished configuration is published (`None`: the
    /// engine aggregates no configurations).
    pub aggregation: Option<Arc<dyn Queue>>,
}

impl std::fmt::Debug for LoopSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopSettings")
            .field("worker_id", &self.worker_id)
            .field("max_deliveries", &self.max_deliveries)
            .field("heartbeat", &self.heartbeat)
            .field("aggregation", &self.aggregation.is_some())
            .finish()
    }
}

#[derive(Deserialize)]
struct VersionProbe {
    v: Option<u32>,
}

/// What a message asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// Run a job.
    Job(Job),
    /// Aggregate a finished configuration.
    Aggregate(ConfigRef),
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
        if let Some(event) =
            handle_delivery(delivery, handler, store, settings, shutdown.clone()).await
        {
            // The receiver going away (the runner stopped listening) is not an error here.
            let _ = events.send(event);
        }
    }
}

/// Logs a failed settle: the delivery's connection is gone and the broker will deliver
/// the message again, which the store turns into a no-op.
fn settled(result: Result<(), QueueError>, what: &str) {
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not {what} the delivery; it will be delivered again");
    }
}

/// Runs `op` until it succeeds or fails for a reason other than the store being
/// unreachable, backing off between tries; `None` if shutdown came first.
async fn retry_transient<T, F, Fut>(
    mut shutdown: watch::Receiver<bool>,
    what: &str,
    mut op: F,
) -> Option<Result<T, JobError>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, JobError>>,
{
    let mut backoff = Duration::from_millis(250);
    loop {
        match op().await {
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "{what}: the store is unreachable; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => return None,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            other => return Some(other),
        }
    }
}

async fn handle_delivery(
    delivery: Box<dyn Delivery>,
    handler: &JobHandler,
    store: &dyn Store,
    settings: &LoopSettings,
    shutdown: watch::Receiver<bool>,
) -> Option<JobEvent> {
    let job = match decode_work(delivery.body()) {
        Ok(Work::Job(job)) => job,
        Ok(Work::Aggregate(config)) => {
            let done = retry_transient(shutdown, "aggregation", || async {
                store
                    .aggregate_config(&config)
                    .await
                    .map_err(JobError::from)
            })
            .await?;
            return Some(match done {
                Ok(()) => {
                    settled(delivery.ack().await, "ack");
                    JobEvent::Aggregated { config }
                }
                Err(e) => fail(delivery, None, store, settings, e).await,
            });
        }
        Err(reason) => {
            tracing::warn!(%reason, "dead-lettering an unreadable message");
            settled(delivery.dead_letter(&reason).await, "dead-letter");
            return Some(JobEvent::Rejected { reason });
        }
    };
    let started = std::time::Instant::now();
    let span = tracing::info_span!("job", key = %&job.key[..12.min(job.key.len())], model = %job.model, dataset = %job.dataset, mode = %job.mode, shard = job.shard);
    let outcome = retry_transient(shutdown, "job", || run_job(&job, handler, store, settings))
        .instrument(span)
        .await?;
    Some(match outcome {
        Ok(None) => {
            settled(delivery.ack().await, "ack");
            JobEvent::Skipped { job }
        }
        Ok(Some(commit)) => {
            if commit.completes_config {
                publish_aggregation(&job, settings).await;
            }
            settled(delivery.ack().await, "ack");
            JobEvent::Done {
                job,
                completes_config: commit.completes_config,
                seconds: started.elapsed().as_secs_f64(),
            }
        }
        Err(e) => fail(delivery, Some(job), store, settings, e).await,
    })
}

/// One attempt at a job: `None` when it needed no work.
async fn run_job(
    job: &Job,
    handler: &JobHandler,
    store: &dyn Store,
    settings: &LoopSettings,
) -> Result<Option<JobCommit>, JobError> {
    if !store.mark_running(job, &settings.worker_id).await? {
        return Ok(None);
    }
    let work = handler.run(job, store);
    let results = match settings.heartbeat {
        None => work.await?,
        Some(every) => {
            tokio::pin!(work);
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tokio::select! {
                    r = &mut work => break r?,
                    _ = tick.tick() => {
                        if let Err(e) = store.heartbeat(job, &settings.worker_id).await {
                            tracing::warn!(error = %e, "heartbeat not recorded");
                        }
                    }
                }
            }
        }
    };
    Ok(Some(store.record_results(job, &results).await?))
}

/// Publishes the aggregation job of the configuration `job` finished. A failure is
/// logged, not fatal: the reaper re-publishes aggregations that never complete.
async fn publish_aggregation(job: &Job, settings: &LoopSettings) {
    let Some(queue) = &settings.aggregation else {
        return;
    };
    let message = Message::Aggregate {
        v: MESSAGE_VERSION,
        run_id: job.run_id.clone(),
        model: job.model.clone(),
        dataset: job.dataset.clone(),
        mode: job.mode,
    };
    let published = match serde_json::to_vec(&message) {
        Ok(body) => queue.publish(AGGREGATE_QUEUE, body).await,
        Err(e) => Err(QueueError::Broker {
            what: "encode aggregation message",
            message: e.to_string(),
        }),
    };
    match published {
        Ok(()) => tracing::info!("configuration complete; aggregation job enqueued"),
        Err(e) => {
            tracing::warn!(error = %e, "aggregation job not enqueued; the reaper will")
        }
    }
}

/// A failed attempt: back to the queue, or after the last delivery marked failed and
/// dead-lettered with its error.
async fn fail(
    delivery: Box<dyn Delivery>,
    job: Option<Job>,
    store: &dyn Store,
    settings: &LoopSettings,
    e: JobError,
) -> JobEvent {
    let error = e.to_string();
    let last = delivery.previous_deliveries() + 1 >= settings.max_deliveries;
    let Some(job) = job else {
        // An aggregation that fails for good: dead-letter it with its error.
        tracing::error!(%error, "aggregation failed");
        if last {
            settled(delivery.dead_letter(&error).await, "dead-letter");
        } else {
            settled(delivery.nack(true).await, "nack");
        }
        return JobEvent::Rejected { reason: error };
    };
    if last {
        tracing::error!(%error, "job failed its last delivery");
        if let Err(store_err) = store.mark_failed(&job, &error).await {
            tracing::error!(%store_err, "could not mark the job failed");
        }
        settled(delivery.dead_letter(&error).await, "dead-letter");
        JobEvent::Failed { job, error }
    } else {
        tracing::warn!(%error, "job failed; returning it to the queue");
        settled(delivery.nack(true).await, "nack");
        JobEvent::Retry { job, error }
    }
}

/// Decodes a job message, or says why it cannot be handled.
pub fn decode(body: &[u8]) -> Result<Job, String> {
    match decode_work(body)? {
        Work::Job(job) => Ok(job),
        Work::Aggregate(_) => Err("an aggregation message where a job was expected".into()),
    }
}

/// Decodes a message (a job or an aggregation), or says why it cannot be handled.
pub fn decode_work(body: &[u8]) -> Result<Work, String> {
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
        Ok(Message::Job { job, .. }) => Ok(Work::Job(job)),
        Ok(Message::Aggregate {
            run_id,
            model,
            dataset,
            mode,
            ..
        }) => Ok(Work::Aggregate(ConfigRef {
            run_id,
            model,
            dataset,
            mode,
        })),
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

    #[test]
    fn decode_work_reads_aggregation_messages() {
        let body = br#"{"kind":"aggregate","v":1,"run_id":"r","model":"m","dataset":"d","mode":"self_repair"}"#;
        assert_eq!(
            decode_work(body).unwrap(),
            Work::Aggregate(ConfigRef {
                run_id: "r".into(),
                model: "m".into(),
                dataset: "d".into(),
                mode: credence_shared::Mode::SelfRepair,
            })
        );
        assert_eq!(
            decode(body).unwrap_err(),
            "an aggregation message where a job was expected"
        );
    }
}
