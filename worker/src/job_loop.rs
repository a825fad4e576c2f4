//! The consumer loop, the same in both engines: take a delivery, decode the versioned
//! message, run the job, commit its results, then ack (DESIGN.md invariant 1). A failure
//! is retried through the queue until the delivery limit, then the job is marked failed
//! and dead-lettered with its error (invariant 5). A message that cannot be decoded, or
//! that is not exactly a planned job ([`check`]), is dead-lettered at once with the
//! reason, never crashing the worker and never touching a job row or a metric label.
//! While the store is unreachable the job is retried in place with backoff (the delivery
//! stays unacked), so a database outage costs time, not deliveries; a shutdown during
//! that wait returns the message to its queue without using a delivery
//! ([`Delivery::release`]), so a rolling restart during an outage dead-letters nothing.
//! While a job runs its heartbeat is kept fresh in the store for the coordinator's
//! reaper. The commit that finishes the last job of a model x dataset x mode enqueues its
//! one aggregation job.

use crate::handler::{JobError, JobHandler, JobInputs, JobOutput};
use credence_core::domain::Stage;
use credence_core::job::ConfigRef;
use credence_core::job::{Job, Message, MESSAGE_VERSION};
use credence_infra::aggregation::aggregate_config;
use credence_infra::observe::{JobObserver, JobOutcome};
use credence_infra::queue::{Consumer, Delivery, Queue, QueueError, AGGREGATE_QUEUE};
use credence_infra::store::{Attempt, JobCommit, Store, StoreError};
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

pub(crate) use crate::heartbeat::with_heartbeat;

mod check;

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
    /// How a finished configuration is aggregated.
    pub aggregation: Aggregation,
    /// Where the job path reports what it did (outcomes, examples, stage seconds, dead
    /// letters): the one seam metrics are fed through.
    pub observer: Arc<dyn JobObserver>,
}

/// How the commit that finishes a configuration gets it aggregated
/// ([`credence_infra::aggregation::aggregate_config`] either way).
#[derive(Clone)]
pub enum Aggregation {
    /// Not at all (tests of the loop alone).
    Off,
    /// Publish an aggregation job to this queue's `credence.aggregate` (the distributed
    /// engine: any worker runs it).
    Enqueue(Arc<dyn Queue>),
    /// Run it here, after the commit and before the ack (the embedded engine).
    Inline,
}

impl std::fmt::Debug for LoopSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopSettings")
            .field("worker_id", &self.worker_id)
            .field("max_deliveries", &self.max_deliveries)
            .field("heartbeat", &self.heartbeat)
            .field(
                "aggregation",
                &match self.aggregation {
                    Aggregation::Off => "off",
                    Aggregation::Enqueue(_) => "enqueue",
                    Aggregation::Inline => "inline",
                },
            )
            .finish()
    }
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

/// Returns a delivery its worker could not run before shutting down to its queue,
/// without using one of its deliveries.
async fn release(delivery: Box<dyn Delivery>) {
    tracing::info!("shutting down while the store is unreachable: the message returns to its queue without using a delivery");
    settled(delivery.release().await, "return");
}

/// Runs `op` until it succeeds or fails for a reason other than the store being
/// unreachable, backing off between tries; `None` if shutdown came first. The first try
/// runs to its end (a job in flight is finished at shutdown); once the store has been
/// found unreachable, a shutdown also cancels a try in progress, since a store call can
/// hang on a stalled database for longer than an orchestrator's grace period.
async fn retry_transient<T, F, Fut>(
    mut shutdown: watch::Receiver<bool>,
    what: &str,
    mut op: F,
) -> Option<Result<T, JobError>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, JobError>>,
{
    let mut backoff = Duration::from_millis(250);
    let mut outage = false;
    loop {
        let tried = if outage {
            tokio::select! {
                r = op() => r,
                _ = shutdown.changed() => return None,
            }
        } else {
            op().await
        };
        match tried {
            Err(e) if e.is_transient() => {
                outage = true;
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
            let checked = against_plan(delivery, None, store, settings, shutdown.clone(), || {
                check::check_aggregation(store, &config)
            });
            let delivery = match checked.await {
                Ok(delivery) => delivery,
                Err(ended) => return ended,
            };
            let Some(done) = retry_transient(shutdown, "aggregation", || async {
                aggregate_config(store, &config)
                    .await
                    .map(|_| ())
                    .map_err(JobError::from)
            })
            .await
            else {
                release(delivery).await;
                return None;
            };
            return Some(match done {
                Ok(()) => {
                    settled(delivery.ack().await, "ack");
                    JobEvent::Aggregated { config }
                }
                Err(e) => fail(delivery, None, store, settings, e, None).await,
            });
        }
        Err(reason) => {
            tracing::warn!(%reason, "dead-lettering an unreadable message");
            settings.observer.dead_letter("unreadable");
            settled(delivery.dead_letter(&reason).await, "dead-letter");
            return Some(JobEvent::Rejected { reason });
        }
    };
    let started = std::time::Instant::now();
    let checked = against_plan(
        delivery,
        Some(&job),
        store,
        settings,
        shutdown.clone(),
        || check::check_job(store, &job),
    );
    let delivery = match checked.await {
        Ok(delivery) => delivery,
        Err(ended) => return ended,
    };
    // Only a job checked against the plan names a model: metric labels stay bounded.
    settings.observer.current_model(&job.model);
    let span = tracing::info_span!("job", key = %key_prefix(&job.key), model = %job.model, dataset = %job.dataset, mode = %job.mode, shard = job.shard);
    // The job's attempts as the store counted them, once this delivery's attempt is
    // recorded (0 before): a retry in place is not a new one.
    let ran = AtomicU32::new(0);
    let Some(outcome) = retry_transient(shutdown.clone(), "job", || {
        run_job(&job, handler, store, settings, &ran)
    })
    .instrument(span)
    .await
    else {
        release(delivery).await;
        return None;
    };
    let event = match outcome {
        Ok(None) => {
            settled(delivery.ack().await, "ack");
            JobEvent::Skipped { job }
        }
        Ok(Some((commit, examples))) => {
            if commit.completes_config {
                match &settings.aggregation {
                    Aggregation::Off => {}
                    Aggregation::Enqueue(queue) => publish_aggregation(&job, queue.as_ref()).await,
                    Aggregation::Inline => {
                        let config = ConfigRef::of(&job);
                        let done = retry_transient(shutdown, "aggregation", || async {
                            aggregate_config(store, &config)
                                .await
                                .map_err(JobError::from)
                        })
                        .await;
                        if let Some(Err(e)) = done {
                            // The results are committed; the engine re-aggregates at its end.
                            tracing::error!(error = %e, "aggregation failed");
                        }
                    }
                }
            }
            settled(delivery.ack().await, "ack");
            settings
                .observer
                .examples(&job.model, job.mode, examples as u64);
            JobEvent::Done {
                job,
                completes_config: commit.completes_config,
                seconds: started.elapsed().as_secs_f64(),
            }
        }
        Err(e) => {
            let ran = Some(ran.load(Ordering::SeqCst)).filter(|&n| n > 0);
            fail(delivery, Some(job), store, settings, e, ran).await
        }
    };
    let (job, outcome) = match &event {
        JobEvent::Done { job, .. } => (job, JobOutcome::Done),
        JobEvent::Skipped { job } => (job, JobOutcome::Skipped),
        JobEvent::Retry { job, .. } => (job, JobOutcome::Retry),
        JobEvent::Failed { job, .. } => (job, JobOutcome::Failed),
        JobEvent::Aggregated { .. } | JobEvent::Rejected { .. } => return Some(event),
    };
    let seconds = started.elapsed().as_secs_f64();
    settings
        .observer
        .job(&job.model, job.mode, outcome, seconds);
    Some(event)
}

/// The first 12 characters of a job key, for logs. A key comes off the network and may
/// hold any text, so it is cut at a character boundary, never at a byte offset.
fn key_prefix(key: &str) -> &str {
    key.char_indices()
        .nth(12)
        .map_or(key, |(end, _)| &key[..end])
}

/// One try at a job: `None` when it needed no work. `ran` holds the job's attempts as
/// the store counted them once a try of this delivery recorded its attempt (0 before),
/// so that a later try of the same delivery is not a new attempt.
async fn run_job(
    job: &Job,
    handler: &JobHandler,
    store: &dyn Store,
    settings: &LoopSettings,
    ran: &AtomicU32,
) -> Result<Option<(JobCommit, usize)>, JobError> {
    let attempt = if ran.load(Ordering::SeqCst) > 0 {
        Attempt::SameDelivery
    } else {
        Attempt::New
    };
    let Some(attempts) = store
        .mark_running(job, &settings.worker_id, attempt)
        .await?
    else {
        return Ok(None);
    };
    ran.store(attempts.max(1), Ordering::SeqCst);
    let inputs = read_inputs(job, store).await?;
    let work = handler.run(job, &inputs, store, &*settings.observer);
    let results = match settings.heartbeat {
        None => work.await?,
        Some(every) => {
            with_heartbeat(work, every, || async {
                if let Err(e) = store.heartbeat(job, &settings.worker_id).await {
                    tracing::warn!(error = %e, "heartbeat not recorded");
                }
            })
            .await?
        }
    };
    let writing = std::time::Instant::now();
    let commit = match &results {
        JobOutput::Decomposition(rows) => store.record_results(job, rows).await?,
        JobOutput::Afc(rows) => store.record_afc_results(job, rows).await?,
    };
    settings
        .observer
        .stage(&job.model, Stage::Store, writing.elapsed().as_secs_f64());
    Ok(Some((commit, results.len())))
}

/// A job's inputs, read once per try: the run's sweep as recorded and the shard's
/// examples. A run missing from the store or a record that does not parse fails the job
/// ([`JobError::RecordedSweep`]); an unreachable store is a transient
/// [`JobError::Store`], retried in place.
async fn read_inputs(job: &Job, store: &dyn Store) -> Result<JobInputs, JobError> {
    let sweep = match store.run_sweep(&job.run_id).await {
        Ok(sweep) => sweep,
        Err(e @ (StoreError::UnknownRun { .. } | StoreError::Corrupt { .. })) => {
            return Err(JobError::RecordedSweep {
                key: job.key.clone(),
                message: e.to_string(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    let examples = store.shard_examples(job).await?;
    Ok(JobInputs { sweep, examples })
}

/// Publishes the aggregation job of the configuration `job` finished. A failure is
/// logged, not fatal: the reaper re-publishes aggregations that never complete.
async fn publish_aggregation(job: &Job, queue: &dyn Queue) {
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

/// Checks a message against the plan (`check`), through store outages: `Ok` gives the
/// delivery back to be run; `Err` is its end: returned to its queue at shutdown (`None`),
/// refused, or failed when the store kept failing for another reason.
async fn against_plan<F, Fut>(
    delivery: Box<dyn Delivery>,
    job: Option<&Job>,
    store: &dyn Store,
    settings: &LoopSettings,
    shutdown: watch::Receiver<bool>,
    mut check: F,
) -> Result<Box<dyn Delivery>, Option<JobEvent>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Result<(), check::Refused>, StoreError>>,
{
    let checked = retry_transient(shutdown, "checking a message", || {
        let asked = check();
        async move { asked.await.map_err(JobError::from) }
    })
    .await;
    match checked {
        None => {
            release(delivery).await;
            Err(None)
        }
        Some(Ok(Ok(()))) => Ok(delivery),
        Some(Ok(Err(refused))) => {
            if let Some(job) = job {
                tracing::warn!(key = %key_prefix(&job.key), "refusing a job message");
            }
            Err(Some(refuse(delivery, refused, settings).await))
        }
        // A job's key is the content key of its fields, so the job named is this one.
        Some(Err(e)) => Err(Some(
            fail(delivery, job.cloned(), store, settings, e, None).await,
        )),
    }
}

/// A message that is not what it claims: dead-lettered once with the reason, never
/// retried (another delivery would be refused the same way).
async fn refuse(
    delivery: Box<dyn Delivery>,
    refused: check::Refused,
    settings: &LoopSettings,
) -> JobEvent {
    let reason = refused.to_string();
    tracing::warn!(%reason, "dead-lettering a message that does not match the plan");
    settings.observer.dead_letter("forged");
    settled(delivery.dead_letter(&reason).await, "dead-letter");
    JobEvent::Rejected { reason }
}

/// A failed attempt: back to the queue, or after the last delivery marked failed and
/// dead-lettered with its error. `ran` is the job's attempts as the store counted them,
/// when this delivery's attempt was recorded.
///
/// The broker counts every delivery, also those no worker ran: the messages a consumer
/// had prefetched when its connection was lost return counted. So the delivery at the
/// limit is the last only when the store ran at least as many attempts as the broker
/// counted; otherwise it returns to the queue without using a delivery, and the job is
/// dead-lettered after `max_deliveries` attempts that ran, not fewer.
async fn fail(
    delivery: Box<dyn Delivery>,
    job: Option<Job>,
    store: &dyn Store,
    settings: &LoopSettings,
    e: JobError,
    ran: Option<u32>,
) -> JobEvent {
    let error = e.to_string();
    let counted = delivery.previous_deliveries() + 1;
    let at_limit = counted >= settings.max_deliveries;
    let last = at_limit && ran.is_none_or(|ran| ran >= counted);
    let Some(job) = job else {
        // An aggregation that fails for good: dead-letter it with its error.
        tracing::error!(%error, "aggregation failed");
        if last {
            settings.observer.dead_letter("aggregation");
            settled(delivery.dead_letter(&error).await, "dead-letter");
        } else {
            settled(delivery.nack(true).await, "nack");
        }
        return JobEvent::Rejected { reason: error };
    };
    if last {
        tracing::error!(%error, "job failed its last delivery");
        settings.observer.dead_letter("failed");
        if let Err(store_err) = store.mark_failed(&job, &error).await {
            tracing::error!(%store_err, "could not mark the job failed");
        }
        settled(delivery.dead_letter(&error).await, "dead-letter");
        JobEvent::Failed { job, error }
    } else if at_limit {
        tracing::warn!(%error, deliveries = counted, ran = ran.unwrap_or(0), "job failed; the broker counted deliveries that never ran, so it returns to the queue without using one");
        settled(delivery.release().await, "return");
        JobEvent::Retry { job, error }
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
    match Message::decode(body).map_err(|e| e.to_string())? {
        Message::Job { job, .. } => Ok(Work::Job(job)),
        Message::Aggregate {
            run_id,
            model,
            dataset,
            mode,
            ..
        } => Ok(Work::Aggregate(ConfigRef {
            run_id,
            model,
            dataset,
            mode,
        })),
    }
}

#[cfg(test)]
mod tests;
