//! The embedded engine: the whole sweep in one process, on the in-process queue and a
//! SQLite file. Resumes by difference (jobs with committed results are not redone), so a
//! run stopped by Ctrl-C or SIGKILL continues where it was when started again.

use crate::planning::{load_decomposers, prepare, Plan};
use crate::progress::RunProgress;
use crate::summary::SummaryRow;
use anyhow::Context;
use credence_core::job::ConfigRef;
use credence_core::job::Message;
use credence_core::sweep::SweepSpec;
use credence_infra::aggregation::aggregate_config;
use credence_infra::queue::{job_queue, memory::MemoryQueue, Queue};
use credence_infra::store::{sqlite::SqliteStore, PlannedDatasetRecord, RunRecord, Store};
use credence_worker::decompose::Decomposer;
use credence_worker::embed::CacheCounts;
use credence_worker::handler::JobHandler;
use credence_worker::job_loop::{consume, Aggregation, JobEvent, LoopSettings};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// Settings of an embedded run.
#[derive(Clone)]
pub struct RunOptions {
    /// The SQLite file.
    pub db: PathBuf,
    /// Concurrent worker tasks.
    pub workers: usize,
    /// Deliveries before a failing job is marked failed.
    pub max_deliveries: u32,
    /// Show progress bars.
    pub progress: bool,
    /// Where the job path reports stage seconds, jobs, examples, LLM requests and cache
    /// lookups (Prometheus with `credence run --metrics-addr`).
    pub observer: Arc<dyn credence_infra::observe::JobObserver>,
}

/// How a run ended.
#[derive(Debug)]
pub struct RunReport {
    /// Jobs in the plan.
    pub planned: usize,
    /// Jobs that already had results when the run started.
    pub already_done: usize,
    /// Jobs completed by this run.
    pub completed: usize,
    /// Jobs that failed their last delivery, with their errors.
    pub failed: Vec<(String, String)>,
    /// Messages dead-lettered as unreadable.
    pub rejected: usize,
    /// Whether Ctrl-C stopped the run early.
    pub interrupted: bool,
    /// Mean metrics per aggregated model x dataset x mode, in plan order.
    pub summary: Vec<SummaryRow>,
    /// The configurations of the plan not aggregated (a job failed or did not run).
    pub unaggregated: Vec<ConfigRef>,
    /// Embedding cache hits and misses of this run (distinct texts per job), if the
    /// sweep has an encoder.
    pub embedding_cache: Option<CacheCounts>,
    /// The AFC table of what is stored, if the sweep has `[afc]`.
    pub afc: Option<credence_core::afc::table::AfcTable>,
}

/// Runs a sweep to completion (or until `stop` turns true).
pub async fn run(
    sweep: SweepSpec,
    opts: &RunOptions,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<RunReport> {
    // Everything that can fail validation happens before the store is touched.
    let plan = prepare(sweep)?;
    let decomposers = load_decomposers(&plan.sweep)?;
    let store = SqliteStore::open(&opts.db)
        .await
        .with_context(|| format!("opening the results database {}", opts.db.display()))?;
    execute(plan, decomposers, Arc::new(store), opts, stop).await
}

async fn execute(
    plan: Plan,
    decomposers: HashMap<String, Arc<dyn Decomposer>>,
    store: Arc<SqliteStore>,
    opts: &RunOptions,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<RunReport> {
    let Plan {
        sweep,
        datasets,
        scorer,
        jobs,
    } = plan;
    let run = RunRecord {
        run_id: sweep.name.clone(),
        spec_json: serde_json::to_string(&sweep)?,
    };
    let records: Vec<PlannedDatasetRecord<'_>> = datasets
        .iter()
        .map(|(id, data)| PlannedDatasetRecord { id, data })
        .collect();
    store.record_plan(&run, &records, &jobs).await?;
    let finished = store.finished_jobs(&run.run_id).await?;
    let pending: Vec<_> = jobs.iter().filter(|j| !finished.contains(&j.key)).collect();
    tracing::info!(
        planned = jobs.len(),
        done = finished.len(),
        pending = pending.len(),
        "plan recorded"
    );

    let queue = MemoryQueue::new(opts.max_deliveries);
    let mut queues: Vec<String> = Vec::new();
    for job in &pending {
        let q = job_queue(&job.model);
        if !queues.contains(&q) {
            queues.push(q.clone());
        }
        queue
            .publish(&q, serde_json::to_vec(&Message::job((*job).clone()))?)
            .await?;
    }
    queue.close();

    let progress = opts.progress.then(|| RunProgress::new(&jobs, &finished));
    let handler = decomposers
        .iter()
        .fold(JobHandler::new([]), |h, (model, d)| {
            h.with_decomposer(model, d.clone())
        })
        .with_scorer(&run.run_id, scorer.clone());
    let handler = Arc::new(handler);
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..opts.workers.max(1) {
        let (queue, queues, handler, store, events, stop) = (
            queue.clone(),
            queues.clone(),
            handler.clone(),
            store.clone(),
            events_tx.clone(),
            stop.clone(),
        );
        let settings = LoopSettings {
            worker_id: format!("embedded-{}-{w}", std::process::id()),
            max_deliveries: opts.max_deliveries,
            heartbeat: None,
            aggregation: Aggregation::Inline,
            observer: opts.observer.clone(),
        };
        tasks.spawn(async move {
            // Every worker drains the model queues in order; all models are loaded here.
            for q in &queues {
                let mut consumer = queue.consume(q).await?;
                consume(
                    consumer.as_mut(),
                    &handler,
                    store.as_ref(),
                    &settings,
                    &events,
                    stop.clone(),
                )
                .await?;
                if *stop.borrow() {
                    break;
                }
            }
            Ok::<_, credence_infra::queue::QueueError>(())
        });
    }
    drop(events_tx);

    let mut report = RunReport {
        planned: jobs.len(),
        already_done: finished.len(),
        completed: 0,
        failed: Vec::new(),
        rejected: 0,
        interrupted: false,
        summary: Vec::new(),
        unaggregated: Vec::new(),
        embedding_cache: None,
        afc: None,
    };
    let mut aggregated: HashSet<ConfigRef> = HashSet::new();
    while let Some(event) = events_rx.recv().await {
        match event {
            JobEvent::Done {
                job,
                completes_config,
                ..
            } => {
                if completes_config {
                    aggregated.insert(ConfigRef::of(&job));
                }
                report.completed += 1;
                if let Some(p) = &progress {
                    p.job_done(&job);
                }
            }
            JobEvent::Retry { .. } | JobEvent::Skipped { .. } | JobEvent::Aggregated { .. } => {}
            JobEvent::Failed { job, error } => report.failed.push((
                job.key.clone(),
                format!(
                    "{} / {} / {} shard {}: {error}",
                    job.model, job.dataset, job.mode, job.shard
                ),
            )),
            JobEvent::Rejected { .. } => report.rejected += 1,
        }
    }
    while let Some(res) = tasks.join_next().await {
        res.context("a worker task panicked")??;
    }
    if let Some(p) = &progress {
        p.finish();
    }
    report.interrupted = *stop.borrow()
        && report.already_done + report.completed + report.failed.len() < report.planned;
    // A configuration finished by an earlier, interrupted run may have missed its
    // aggregation (killed between the commit and the aggregation): aggregate every
    // finished configuration this run did not. Aggregation overwrites, so this is safe.
    if !report.interrupted {
        let mut configs: Vec<ConfigRef> = Vec::new();
        for job in &jobs {
            let c = ConfigRef::of(job);
            if !aggregated.contains(&c) && !configs.contains(&c) {
                configs.push(c);
            }
        }
        for c in configs {
            if store.config_finished(&c).await? {
                aggregate_config(store.as_ref(), &c)
                    .await
                    .with_context(|| {
                        format!("aggregating {} / {} / {}", c.model, c.dataset, c.mode)
                    })?;
            }
        }
    }
    (report.summary, report.unaggregated) =
        crate::summary::from_aggregates(&jobs, &store.run_statistics(&run.run_id).await?);
    report.embedding_cache = scorer.encoder.as_ref().map(|e| e.counts());
    if sweep.afc.is_some() {
        report.afc = Some(crate::report::afc_table(store.as_ref(), &run.run_id, &sweep).await?);
    }
    Ok(report)
}
