//! A worker process of the distributed engine: one consumer per model queue it serves
//! plus one on the aggregation queue, each running the shared consumer loop
//! ([`crate::job_loop`]) with a heartbeat, until shutdown. Models load on first use
//! (once per process) from the run's sweep as recorded in the store.
//!
//! A consumer that ends before shutdown (a panic, or an error of its queue) ends the
//! whole worker with [`ServeError::ConsumerEnded`]: a process whose `/metrics` and
//! liveness stay up with a queue left unconsumed would hide the failure from its
//! orchestrator, which replaces a process that exits non-zero.

use crate::handler::JobHandler;
use crate::job_loop::{consume, Aggregation, JobEvent, LoopSettings};
use credence_infra::observe::NoObserver;
use credence_infra::queue::{job_queue, Queue, AGGREGATE_QUEUE};
use credence_infra::store::Store;
use credence_infra::telemetry::WorkerMetrics;
use futures::FutureExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Settings of a worker process.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Model names (as in sweep files) whose queues this worker consumes.
    pub models: Vec<String>,
    /// Name of this worker in the store.
    pub worker_id: String,
    /// Deliveries after which a failing job is marked failed and dead-lettered.
    pub max_deliveries: u32,
    /// How often a running job's heartbeat is refreshed.
    pub heartbeat: Duration,
}

/// What a worker did before it stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Jobs whose results this worker committed.
    pub done: usize,
    /// Jobs skipped (already done elsewhere, or cancelled).
    pub skipped: usize,
    /// Attempts that failed and went back to the queue.
    pub retried: usize,
    /// Jobs that failed their last delivery.
    pub failed: usize,
    /// Configurations aggregated.
    pub aggregated: usize,
    /// Messages dead-lettered as unreadable or as not a planned job.
    pub rejected: usize,
}

/// Why a worker stopped serving before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A queue's consumer ended while the worker was meant to be consuming it.
    #[error(
        "the consumer of queue {queue} stopped: {reason}; the worker exits so that it is replaced"
    )]
    ConsumerEnded {
        /// The queue (logical name) left without a consumer.
        queue: String,
        /// The panic message or the queue error.
        reason: String,
    },
}

/// Consumes until `shutdown` turns true, then finishes the jobs in flight and returns.
/// Counts deliveries and job durations into `metrics` when given.
pub async fn serve(
    store: Arc<dyn Store>,
    queue: Arc<dyn Queue>,
    opts: &WorkerOptions,
    metrics: Option<WorkerMetrics>,
    shutdown: watch::Receiver<bool>,
) -> Result<WorkerReport, ServeError> {
    let handler = Arc::new(JobHandler::new(opts.models.iter().cloned()));
    serve_with(handler, store, queue, opts, metrics, shutdown).await
}

/// [`serve`] with a given job handler (tests give one whose models are in memory).
pub(crate) async fn serve_with(
    handler: Arc<JobHandler>,
    store: Arc<dyn Store>,
    queue: Arc<dyn Queue>,
    opts: &WorkerOptions,
    metrics: Option<WorkerMetrics>,
    shutdown: watch::Receiver<bool>,
) -> Result<WorkerReport, ServeError> {
    let settings = LoopSettings {
        worker_id: opts.worker_id.clone(),
        max_deliveries: opts.max_deliveries,
        heartbeat: Some(opts.heartbeat),
        aggregation: Aggregation::Enqueue(queue.clone()),
        observer: match &metrics {
            Some(m) => Arc::new(m.job.clone()),
            None => Arc::new(NoObserver),
        },
    };
    let queues: Vec<String> = opts
        .models
        .iter()
        .map(|m| job_queue(m))
        .chain(std::iter::once(AGGREGATE_QUEUE.to_string()))
        .collect();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    for q in queues {
        let (queue, handler, store, settings, events, stop) = (
            queue.clone(),
            handler.clone(),
            store.clone(),
            settings.clone(),
            events_tx.clone(),
            shutdown.clone(),
        );
        let name = q.clone();
        let consuming = async move {
            let mut consumer = queue.consume(&q).await?;
            tracing::info!(queue = %q, "consuming");
            consume(
                consumer.as_mut(),
                &handler,
                store.as_ref(),
                &settings,
                &events,
                stop,
            )
            .await
        };
        tasks.spawn(async move {
            // The panic is caught here, where the queue's name is known.
            let ended = std::panic::AssertUnwindSafe(consuming).catch_unwind().await;
            (name, ended)
        });
    }
    drop(events_tx);
    let mut report = WorkerReport::default();
    let mut events_open = true;
    loop {
        tokio::select! {
            event = events_rx.recv(), if events_open => match event {
                Some(event) => count(&mut report, metrics.as_ref(), &event),
                None => events_open = false,
            },
            joined = tasks.join_next() => {
                let Some(joined) = joined else { break };
                let (queue, ended) = joined.map_err(|e| ServeError::ConsumerEnded {
                    queue: "?".into(),
                    reason: format!("its task was cancelled: {e}"),
                })?;
                let reason = match ended {
                    Ok(Ok(())) if *shutdown.borrow() => continue,
                    Ok(Ok(())) => "its queue closed".to_string(),
                    Ok(Err(e)) => e.to_string(),
                    Err(panic) => format!("panicked: {}", panic_text(panic.as_ref())),
                };
                tracing::error!(%queue, %reason, "a consumer stopped; the worker exits");
                // Dropping the other consumers returns their deliveries to the queue.
                return Err(ServeError::ConsumerEnded { queue, reason });
            }
        }
    }
    while let Ok(event) = events_rx.try_recv() {
        count(&mut report, metrics.as_ref(), &event);
    }
    Ok(report)
}

/// The text of a panic's payload (what `panic!` was given).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// Counts one event into the report and the delivery metrics.
fn count(report: &mut WorkerReport, metrics: Option<&WorkerMetrics>, event: &JobEvent) {
    let (model, outcome) = match event {
        JobEvent::Done { job, seconds, .. } => {
            report.done += 1;
            tracing::info!(job = %job.key, seconds, "done");
            if let Some(m) = metrics {
                m.job_seconds
                    .with_label_values(&[job.model.as_str(), job.mode.as_str()])
                    .observe(*seconds);
            }
            (job.model.as_str(), "done")
        }
        JobEvent::Skipped { job } => {
            report.skipped += 1;
            (job.model.as_str(), "skipped")
        }
        JobEvent::Retry { job, .. } => {
            report.retried += 1;
            (job.model.as_str(), "retry")
        }
        JobEvent::Failed { job, .. } => {
            report.failed += 1;
            (job.model.as_str(), "failed")
        }
        JobEvent::Aggregated { config } => {
            report.aggregated += 1;
            (config.model.as_str(), "aggregated")
        }
        JobEvent::Rejected { .. } => {
            report.rejected += 1;
            ("", "rejected")
        }
    };
    if let Some(m) = metrics {
        m.deliveries.with_label_values(&[model, outcome]).inc();
    }
}

#[cfg(test)]
mod tests;
