//! The distributed engine's coordinator: connecting to PostgreSQL and RabbitMQ
//! ([`Connections`]), launching a sweep (plan in one transaction, then publish with
//! confirms and mark the jobs queued), resuming by difference, cancelling, progress
//! ([`status`]), the reaper ([`reaper`]) that repairs what crashes leave behind, and the
//! dead-letter queue as people see it ([`dead_letters`]).

pub mod dead_letters;
pub mod reaper;
pub mod status;

use crate::planning::prepare;
use anyhow::Context;
use clap::Args;
use credence_core::job::{Job, Message};
use credence_core::sweep::SweepSpec;
use credence_infra::queue::job_queue;
use credence_infra::queue::rabbitmq::{RabbitQueue, RabbitSettings};
use credence_infra::queue::Queue;
use credence_infra::store::postgres::PgStore;
use credence_infra::store::{PlannedDatasetRecord, RunRecord, Store, StoreError};
use std::time::Duration;

/// Where the distributed engine's servers are; shared by every distributed command.
#[derive(Args, Debug, Clone)]
pub struct ConnectArgs {
    /// PostgreSQL URL, e.g. postgres://credence:PASSWORD@db:5432/credence.
    #[arg(
        long = "database",
        env = "CREDENCE_DATABASE_URL",
        hide_env_values = true
    )]
    pub database: String,
    /// RabbitMQ URL, e.g. amqp://credence:PASSWORD@mq:5672/%2f.
    #[arg(long = "broker", env = "CREDENCE_BROKER_URL", hide_env_values = true)]
    pub broker: String,
    /// Replaces `credence` in queue names (separate deployments on one broker).
    #[arg(long, env = "CREDENCE_QUEUE_NAMESPACE", default_value = "credence")]
    pub queue_namespace: String,
    /// Deliveries of a job before it is marked failed and dead-lettered; also the
    /// queues' `x-delivery-limit` (every process of a deployment must agree).
    #[arg(long, env = "CREDENCE_DELIVERY_LIMIT", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub delivery_limit: u32,
    /// Messages a consumer holds unacknowledged at once.
    #[arg(long, default_value_t = 1)]
    pub prefetch: u16,
    /// Seconds a worker may hold a job before the broker takes it back: the job queues'
    /// `x-consumer-timeout` (RabbitMQ 3.12+; older brokers use their global
    /// `consumer_timeout`). Longer than the longest job (one shard), with margin; every
    /// process of a deployment must agree.
    #[arg(long, env = "CREDENCE_CONSUMER_TIMEOUT", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(60..=2_592_000))]
    pub consumer_timeout: u64,
}

/// An open store and queue.
pub struct Connections {
    /// The PostgreSQL store.
    pub store: PgStore,
    /// The RabbitMQ queue.
    pub queue: RabbitQueue,
    /// Deliveries before a job fails.
    pub delivery_limit: u32,
}

impl Connections {
    /// Closes the broker connection and the database pool in order. Call it before a
    /// command returns: a connection left open when the runtime stops makes lapin log
    /// `ERROR` lines after a clean run.
    pub async fn close(&self) {
        self.queue.close().await;
        self.store.pool().close().await;
    }
}

impl ConnectArgs {
    /// The queue settings these arguments describe.
    pub fn rabbit_settings(&self, reconnect_for: Option<Duration>) -> RabbitSettings {
        RabbitSettings {
            url: self.broker.clone(),
            namespace: self.queue_namespace.clone(),
            delivery_limit: self.delivery_limit,
            prefetch: self.prefetch.max(1),
            reconnect_for,
            consumer_timeout: Duration::from_secs(self.consumer_timeout),
        }
    }

    /// Connects to both servers. A command-line tool gives up on a lost broker after
    /// `reconnect_for`; a long-running process passes `None` and waits it out.
    pub async fn connect(&self, reconnect_for: Option<Duration>) -> anyhow::Result<Connections> {
        let store = PgStore::connect(&self.database, 4).await?;
        let queue = RabbitQueue::connect(self.rabbit_settings(reconnect_for)).await?;
        Ok(Connections {
            store,
            queue,
            delivery_limit: self.delivery_limit,
        })
    }

    /// Connects to both servers as a long-running process does, waiting out an
    /// unreachable database however long it takes (a worker restarted during an outage
    /// waits for it rather than crash-looping), backing off from 250 ms to 5 s; `None`
    /// when `stop` turns true first. Other errors (a bad URL, a migration that fails)
    /// come back at once.
    pub async fn connect_waiting(
        &self,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> anyhow::Result<Option<Connections>> {
        let mut backoff = Duration::from_millis(250);
        loop {
            match self.connect(None).await {
                Ok(conn) => return Ok(Some(conn)),
                Err(e)
                    if e.downcast_ref::<StoreError>()
                        .is_some_and(StoreError::is_transient) =>
                {
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "the store is unreachable; waiting for it before consuming");
                }
                Err(e) => return Err(e),
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stop.wait_for(|s| *s) => return Ok(None),
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }
}

/// What launching or resuming did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LaunchReport {
    /// The run.
    pub run_id: String,
    /// Jobs in the plan.
    pub planned: usize,
    /// Jobs that already had results.
    pub already_done: usize,
    /// Jobs published now.
    pub published: usize,
}

/// `sweep launch`: validates the sweep (datasets, models) before writing anything,
/// records the plan in one transaction, then publishes every job without results and
/// marks them queued. With `plan_only` nothing is published (`resume` does it).
pub async fn launch(
    sweep: SweepSpec,
    conn: &Connections,
    plan_only: bool,
) -> anyhow::Result<LaunchReport> {
    let plan = prepare(sweep)?;
    let run = RunRecord {
        run_id: plan.sweep.name.clone(),
        spec_json: serde_json::to_string(&plan.sweep)?,
    };
    let records: Vec<PlannedDatasetRecord<'_>> = plan
        .datasets
        .iter()
        .map(|(id, data)| PlannedDatasetRecord { id, data })
        .collect();
    conn.store
        .record_plan(&run, &records, &plan.jobs)
        .await
        .context("recording the plan")?;
    let finished = conn.store.finished_jobs(&run.run_id).await?;
    let pending: Vec<Job> = plan
        .jobs
        .iter()
        .filter(|j| !finished.contains(&j.key))
        .cloned()
        .collect();
    tracing::info!(run = %run.run_id, planned = plan.jobs.len(), pending = pending.len(), "plan recorded");
    let published = if plan_only {
        0
    } else {
        publish_jobs(conn, &pending).await?
    };
    Ok(LaunchReport {
        run_id: run.run_id,
        planned: plan.jobs.len(),
        already_done: finished.len(),
        published,
    })
}

/// `sweep resume`: re-publishes every job of the run without results (planned but never
/// published, lost, failed, or cancelled), after making a cancelled run active again.
pub async fn resume(run_id: &str, conn: &Connections) -> anyhow::Result<LaunchReport> {
    if !conn.store.run_exists(run_id).await? {
        anyhow::bail!(
            "no run {run_id:?} in the store at {}",
            conn.store.location()
        );
    }
    conn.store.reopen_run(run_id).await?;
    let pending = conn.store.unfinished_jobs(run_id).await?;
    let finished = conn.store.finished_jobs(run_id).await?;
    let published = publish_jobs(conn, &pending).await?;
    Ok(LaunchReport {
        run_id: run_id.to_string(),
        planned: pending.len() + finished.len(),
        already_done: finished.len(),
        published,
    })
}

/// Marks jobs queued, then publishes them onto their models' queues (confirmed by the
/// broker). Marking first matters: a cancelled or failed job must be runnable before its
/// message can reach a worker, or the worker would skip it. A crash between the two
/// leaves jobs `queued` without messages: `resume` (or the reaper, seeing their queue
/// empty) publishes them again; duplicates are no-ops in the store.
pub async fn publish_jobs(conn: &Connections, jobs: &[Job]) -> anyhow::Result<usize> {
    let mut by_queue: Vec<(String, Vec<Vec<u8>>, Vec<String>)> = Vec::new();
    for job in jobs {
        let q = job_queue(&job.model);
        let body = serde_json::to_vec(&Message::job(job.clone()))?;
        match by_queue.iter_mut().find(|(name, _, _)| *name == q) {
            Some((_, bodies, keys)) => {
                bodies.push(body);
                keys.push(job.key.clone());
            }
            None => by_queue.push((q, vec![body], vec![job.key.clone()])),
        }
    }
    for (q, bodies, keys) in by_queue {
        conn.store.mark_queued(&keys).await?;
        conn.queue
            .publish_batch(&q, bodies)
            .await
            .with_context(|| format!("publishing to {}", conn.queue.physical(&q)))?;
    }
    Ok(jobs.len())
}
