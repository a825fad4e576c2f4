//! A worker process of the distributed engine: one consumer per model queue it serves
//! plus one on the aggregation queue, each running the shared consumer loop
//! ([`crate::job_loop`]) with a heartbeat, until shutdown. Models load on first use
//! (once per process) from the run's sweep as recorded in the store.

use crate::handler::JobHandler;
use crate::job_loop::{consume, Aggregation, JobEvent, LoopSettings};
use credence_shared::observe::NoObserver;
use credence_shared::queue::{job_queue, Queue, QueueError, AGGREGATE_QUEUE};
use credence_shared::store::Store;
use credence_shared::telemetry::WorkerMetrics;
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
    /// Messages dead-lettered as unreadable.
    pub rejected: usize,
}

/// Consumes until `shutdown` turns true, then finishes the jobs in flight and returns.
/// Counts deliveries and job durations into `metrics` when given.
pub async fn serve(
    store: Arc<dyn Store>,
    queue: Arc<dyn Queue>,
    opts: &WorkerOptions,
    metrics: Option<WorkerMetrics>,
    shutdown: watch::Receiver<bool>,
) -> Result<WorkerReport, QueueError> {
    let handler = Arc::new(JobHandler::from_store(opts.models.iter().cloned()));
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
        let (queue, handler, store, settings, events, shutdown) = (
            queue.clone(),
            handler.clone(),
            store.clone(),
            settings.clone(),
            events_tx.clone(),
            shutdown.clone(),
        );
        tasks.spawn(async move {
            let mut consumer = queue.consume(&q).await?;
            tracing::info!(queue = %q, "consuming");
            consume(
                consumer.as_mut(),
                &handler,
                store.as_ref(),
                &settings,
                &events,
                shutdown,
            )
            .await
        });
    }
    drop(events_tx);
    let mut report = WorkerReport::default();
    while let Some(event) = events_rx.recv().await {
        let (model, outcome) = match &event {
            JobEvent::Done { job, seconds, .. } => {
                report.done += 1;
                tracing::info!(job = %job.key, seconds, "done");
                if let Some(m) = &metrics {
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
        if let Some(m) = &metrics {
            m.deliveries.with_label_values(&[model, outcome]).inc();
        }
    }
    while let Some(res) = tasks.join_next().await {
        match res {
            Ok(r) => r?,
            Err(e) => {
                return Err(QueueError::Broker {
                    what: "consumer task",
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(report)
}
