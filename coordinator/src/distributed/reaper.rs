//! The reaper (`credence coordinator serve`, or inside `sweep launch --follow`): repairs
//! what crashes leave behind, every tick.
//!
//! - A running job whose heartbeat is stale lost its worker: it is returned to `queued`
//!   and re-published (the broker normally redelivers it too; the duplicate is a no-op),
//!   or marked failed once it has had `max_attempts` attempts (a job that kills workers).
//! - A queued job whose queue has no message ready after `lost_after` lost its message
//!   (e.g. a broker that lost unconfirmed state): it is re-published.
//! - A configuration whose aggregation job has not completed `lost_after` after its last
//!   job finished lost that message (its worker died between commit and publish): the
//!   aggregation job is re-published (aggregation is idempotent).
//!
//! A tick that cannot reach a server logs and waits for the next.

use super::{publish_jobs, Connections};
use credence_core::job::{Message, MESSAGE_VERSION};
use credence_infra::queue::{job_queue, Queue, AGGREGATE_QUEUE};
use credence_infra::store::Store;
use credence_infra::telemetry::ReaperMetrics;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;

/// Settings of the reaper.
#[derive(Debug, Clone)]
pub struct ReaperSettings {
    /// Time between ticks.
    pub interval: Duration,
    /// Heartbeat age after which a running job's worker is presumed dead.
    pub stale_after: Duration,
    /// Age after which a queued job with an empty queue, or an unfinished aggregation,
    /// is presumed lost.
    pub lost_after: Duration,
    /// Attempts after which a job whose workers keep dying is marked failed.
    pub max_attempts: u32,
}

/// What one tick repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Stale running jobs re-published.
    pub requeued_stale: usize,
    /// Jobs marked failed for exhausting their attempts.
    pub failed: usize,
    /// Queued jobs whose message was lost, re-published.
    pub republished_lost: usize,
    /// Aggregation jobs re-published.
    pub aggregations: usize,
}

/// One pass of the reaper.
pub async fn tick(conn: &Connections, settings: &ReaperSettings) -> anyhow::Result<TickReport> {
    let mut report = TickReport::default();
    let mut to_publish = Vec::new();
    for stale in conn.store.stale_jobs(settings.stale_after).await? {
        if stale.attempts >= settings.max_attempts as i32 {
            let error = format!(
                "worker {} stopped sending heartbeats; {} attempts, every one lost its worker",
                stale.worker, stale.attempts
            );
            conn.store.mark_failed(&stale.job, &error).await?;
            tracing::error!(job = %stale.job.key, %error, "job failed");
            report.failed += 1;
        } else if conn.store.requeue_stale(&stale.job, &stale.worker).await? {
            tracing::warn!(job = %stale.job.key, worker = %stale.worker, "stale heartbeat; re-publishing");
            to_publish.push(stale.job);
            report.requeued_stale += 1;
        }
    }
    publish_jobs(conn, &to_publish).await?;

    let mut queued: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for job in conn.store.queued_jobs(settings.lost_after).await? {
        queued.entry(job.model.clone()).or_default().push(job);
    }
    for (model, jobs) in queued {
        let (ready, _consumers) = conn.queue.depth(&job_queue(&model)).await?;
        if ready == 0 {
            tracing::warn!(%model, jobs = jobs.len(), "queued jobs with an empty queue; re-publishing");
            report.republished_lost += publish_jobs(conn, &jobs).await?;
        }
    }

    for config in conn.store.stuck_aggregations(settings.lost_after).await? {
        let body = serde_json::to_vec(&Message::Aggregate {
            v: MESSAGE_VERSION,
            run_id: config.run_id.clone(),
            model: config.model.clone(),
            dataset: config.dataset.clone(),
            mode: config.mode,
        })?;
        conn.queue.publish(AGGREGATE_QUEUE, body).await?;
        conn.store.touch_aggregation(&config).await?;
        tracing::warn!(run = %config.run_id, model = %config.model, dataset = %config.dataset, mode = %config.mode, "aggregation re-published");
        report.aggregations += 1;
    }
    Ok(report)
}

/// Ticks until `stop` turns true, counting repairs into `metrics` when given.
pub async fn serve(
    conn: &Connections,
    settings: &ReaperSettings,
    metrics: Option<ReaperMetrics>,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    loop {
        match tick(conn, settings).await {
            Ok(r) if r != TickReport::default() => {
                tracing::info!(?r, "reaper tick");
                if let Some(m) = &metrics {
                    for (kind, n) in [
                        ("stale", r.requeued_stale),
                        ("failed", r.failed),
                        ("lost", r.republished_lost),
                        ("aggregation", r.aggregations),
                    ] {
                        m.repairs.with_label_values(&[kind]).inc_by(n as u64);
                    }
                    m.stale_republished.inc_by(r.requeued_stale as u64);
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "reaper tick failed; retrying next tick")
            }
        }
        if let Some(m) = &metrics {
            match conn.store.run_gauges().await {
                Ok(runs) => m.show_runs(&runs),
                Err(e) => tracing::warn!(error = %e, "reading run progress for the metrics"),
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = stop.changed() => return Ok(()),
        }
        if *stop.borrow() {
            return Ok(());
        }
    }
}

/// Reaps every `settings.interval` until the run has settled (no job open, nothing
/// aggregating), and returns its status then; `None` when `stop` turns true first. A
/// reaper pass or a status read that fails is logged and tried again on the next tick.
pub async fn follow(
    conn: &Connections,
    run_id: &str,
    settings: &ReaperSettings,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Option<super::status::RunStatus> {
    loop {
        if let Err(e) = tick(conn, settings).await {
            tracing::warn!(error = %format!("{e:#}"), "reaper pass failed; retrying");
        }
        match super::status::read(&conn.store, run_id).await {
            Ok(s) if s.settled => return Some(s),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "status unavailable; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(settings.interval) => {}
            _ = stop.changed() => return None,
        }
    }
}
