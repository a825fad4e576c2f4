//! The coordinator's queries on the PostgreSQL store, beyond the [`Store`] trait that
//! workers use: what to (re)publish on launch and resume, progress for `sweep status`,
//! failures, cancelling, and what the reaper repairs (stale heartbeats, lost messages,
//! aggregation jobs whose message never arrived).
//!
//! [`Store`]: crate::store::Store

use super::PgStore;
use crate::store::sql_store::{job_from_row, JobRow, JOB_COLUMNS, JOB_COLUMN_COUNT};
use crate::store::StoreError;
use credence_core::domain::Mode;
use credence_core::job::ConfigRef;
use credence_core::job::Job;
use serde::Serialize;
use sqlx::Row;
use std::time::Duration;

/// Progress of one model x dataset x mode of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigProgress {
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
    /// `running`, `aggregating` or `complete`.
    pub state: String,
    /// Jobs in the plan.
    pub jobs: u64,
    /// Jobs with committed results.
    pub done: u64,
    /// Jobs a worker is on.
    pub running: u64,
    /// Jobs waiting in the queue (or planned, not yet published).
    pub waiting: u64,
    /// Jobs that failed their last delivery.
    pub failed: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
    /// Examples in the plan.
    pub examples: u64,
    /// Examples with committed results.
    pub examples_done: u64,
    /// Examples per second since the first job started, when any finished.
    pub rate: Option<f64>,
    /// Seconds to go at that rate.
    pub eta_seconds: Option<f64>,
}

/// A job that failed its last delivery.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedJob {
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
    /// Shard index.
    pub shard: u32,
    /// Job key.
    pub job_key: String,
    /// Deliveries it had.
    pub attempts: i32,
    /// Its error text.
    pub error: String,
}

/// Where an active run stands, for the coordinator's gauges.
#[derive(Debug, Clone, PartialEq)]
pub struct RunGauges {
    /// The run.
    pub run_id: String,
    /// Jobs with committed results.
    pub done: u64,
    /// Jobs a worker is on.
    pub running: u64,
    /// Jobs planned or queued.
    pub waiting: u64,
    /// Jobs that failed their last delivery.
    pub failed: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
    /// Examples with committed results.
    pub examples_done: u64,
    /// Examples of the jobs still waiting or running.
    pub examples_open: u64,
    /// Seconds since the run's first job started (none before one did).
    pub seconds_since_start: Option<f64>,
}

impl RunGauges {
    /// Seconds until the jobs still waiting or running have results, at the run's rate
    /// so far (examples done over the seconds since its first job started): 0 when none
    /// is left (failed and cancelled jobs wait for `resume`, not for time), none before
    /// the first result.
    pub fn eta_seconds(&self) -> Option<f64> {
        if self.examples_open == 0 {
            return Some(0.0);
        }
        let elapsed = self.seconds_since_start.filter(|s| *s > 0.0)?;
        if self.examples_done == 0 {
            return None;
        }
        let rate = self.examples_done as f64 / elapsed;
        Some(self.examples_open as f64 / rate)
    }
}

/// A job whose worker stopped sending heartbeats.
#[derive(Debug, Clone)]
pub struct StaleJob {
    /// The job.
    pub job: Job,
    /// Deliveries it had.
    pub attempts: i32,
    /// The worker that went silent.
    pub worker: String,
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl PgStore {
    /// Whether the run exists.
    pub async fn run_exists(&self, run_id: &str) -> Result<bool, StoreError> {
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = $1)")
            .bind(run_id)
            .fetch_one(self.pool())
            .await
            .map_err(StoreError::query("run exists"))
    }

    /// Every job of the run without committed results, in plan order.
    pub async fn unfinished_jobs(&self, run_id: &str) -> Result<Vec<Job>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE run_id = $1 AND state <> 'done'
             ORDER BY plan_order"
        ))
        .bind(run_id)
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("unfinished jobs"))?;
        rows.iter().map(job_of).collect()
    }

    /// Jobs by key (those that exist), in plan order.
    pub async fn jobs_by_key(&self, keys: &[String]) -> Result<Vec<Job>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE job_key = ANY($1) ORDER BY run_id, plan_order"
        ))
        .bind(keys)
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("jobs by key"))?;
        rows.iter().map(job_of).collect()
    }

    /// Notes that the jobs' messages are on the queue (after the broker confirmed them).
    /// Jobs already done keep their state; running ones too (their worker may be alive).
    pub async fn mark_queued(&self, keys: &[String]) -> Result<u64, StoreError> {
        let r = sqlx::query(
            "UPDATE jobs SET publishes = publishes + 1,
                 state = CASE WHEN state IN ('done', 'running') THEN state ELSE 'queued' END,
                 queued_at = CASE WHEN state IN ('done', 'running') THEN queued_at ELSE now() END,
                 error = CASE WHEN state = 'done' THEN error ELSE NULL END
             WHERE job_key = ANY($1)",
        )
        .bind(keys)
        .execute(self.pool())
        .await
        .map_err(StoreError::query("mark queued"))?;
        Ok(r.rows_affected())
    }

    /// Cancels a run: every job without results is marked `cancelled` (workers skip
    /// their messages); `resume` undoes it. Returns the number of jobs cancelled.
    pub async fn cancel_run(&self, run_id: &str) -> Result<u64, StoreError> {
        let mut tx = self
            .pool()
            .begin()
            .await
            .map_err(StoreError::query("begin cancel"))?;
        sqlx::query("UPDATE runs SET state = 'cancelled', updated_at = now() WHERE run_id = $1")
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("cancel run"))?;
        let n = sqlx::query(
            "UPDATE jobs SET state = 'cancelled', finished_at = now()
             WHERE run_id = $1 AND state IN ('planned', 'queued', 'running', 'failed')",
        )
        .bind(run_id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("cancel jobs"))?
        .rows_affected();
        tx.commit()
            .await
            .map_err(StoreError::query("commit cancel"))?;
        Ok(n)
    }

    /// Makes a cancelled run active again (before its jobs are re-published).
    pub async fn reopen_run(&self, run_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE runs SET state = 'active', updated_at = now() WHERE run_id = $1")
            .bind(run_id)
            .execute(self.pool())
            .await
            .map_err(StoreError::query("reopen run"))?;
        Ok(())
    }

    /// Progress per model x dataset x mode, in plan order.
    pub async fn progress(&self, run_id: &str) -> Result<Vec<ConfigProgress>, StoreError> {
        let rows = sqlx::query(
            "SELECT p.model, p.dataset, p.mode, c.state, p.jobs, p.done, p.running, p.waiting,
                    p.failed, p.cancelled, p.examples::int8, coalesce(p.examples_done, 0)::int8,
                    extract(epoch FROM (p.last_finished - p.first_started))::float8
             FROM job_progress p
             JOIN configs c USING (run_id, model, dataset, mode)
             JOIN (SELECT model, dataset, mode, min(plan_order) AS o FROM jobs
                   WHERE run_id = $1 GROUP BY model, dataset, mode) ord
               USING (model, dataset, mode)
             WHERE p.run_id = $1 ORDER BY ord.o",
        )
        .bind(run_id)
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("progress"))?;
        rows.iter()
            .map(|r| {
                let mode: String = r.get(2);
                let n = |i: usize| r.get::<i64, _>(i).max(0) as u64;
                let examples = n(10);
                let examples_done = n(11);
                let elapsed: Option<f64> = r.get(12);
                let rate = elapsed
                    .filter(|e| *e > 0.0 && examples_done > 0)
                    .map(|e| examples_done as f64 / e);
                Ok(ConfigProgress {
                    model: r.get(0),
                    dataset: r.get(1),
                    mode: crate::store::rows::mode(&mode, "jobs.mode")?,
                    state: r.get(3),
                    jobs: n(4),
                    done: n(5),
                    running: n(6),
                    waiting: n(7),
                    failed: n(8),
                    cancelled: n(9),
                    examples,
                    examples_done,
                    rate,
                    eta_seconds: rate.map(|r| (examples - examples_done) as f64 / r),
                })
            })
            .collect()
    }

    /// Jobs and examples of every active (not cancelled) run, by state.
    pub async fn run_gauges(&self) -> Result<Vec<RunGauges>, StoreError> {
        let rows = sqlx::query(
            "SELECT j.run_id,
                    count(*) FILTER (WHERE j.state = 'done'),
                    count(*) FILTER (WHERE j.state = 'running'),
                    count(*) FILTER (WHERE j.state IN ('planned', 'queued')),
                    count(*) FILTER (WHERE j.state = 'failed'),
                    count(*) FILTER (WHERE j.state = 'cancelled'),
                    coalesce(sum(j.len) FILTER (WHERE j.state = 'done'), 0)::int8,
                    coalesce(sum(j.len) FILTER
                        (WHERE j.state IN ('planned', 'queued', 'running')), 0)::int8,
                    extract(epoch FROM (now() - min(j.started_at)))::float8
             FROM jobs j JOIN runs r USING (run_id)
             WHERE r.state = 'active'
             GROUP BY j.run_id ORDER BY j.run_id",
        )
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("run gauges"))?;
        Ok(rows
            .iter()
            .map(|r| {
                let n = |i: usize| r.get::<i64, _>(i).max(0) as u64;
                RunGauges {
                    run_id: r.get(0),
                    done: n(1),
                    running: n(2),
                    waiting: n(3),
                    failed: n(4),
                    cancelled: n(5),
                    examples_done: n(6),
                    examples_open: n(7),
                    seconds_since_start: r.get(8),
                }
            })
            .collect())
    }

    /// Jobs of the run that failed their last delivery, in plan order.
    pub async fn failures(&self, run_id: &str) -> Result<Vec<FailedJob>, StoreError> {
        let rows = sqlx::query(
            "SELECT model, dataset, mode, shard, job_key, attempts, coalesce(error, '')
             FROM jobs WHERE run_id = $1 AND state = 'failed' ORDER BY plan_order",
        )
        .bind(run_id)
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("failures"))?;
        rows.iter()
            .map(|r| {
                let mode: String = r.get(2);
                Ok(FailedJob {
                    model: r.get(0),
                    dataset: r.get(1),
                    mode: crate::store::rows::mode(&mode, "jobs.mode")?,
                    shard: r.get::<i64, _>(3) as u32,
                    job_key: r.get(4),
                    attempts: r.get(5),
                    error: r.get(6),
                })
            })
            .collect()
    }

    /// Running jobs of active runs whose heartbeat is older than `stale_after`.
    pub async fn stale_jobs(&self, stale_after: Duration) -> Result<Vec<StaleJob>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS}, attempts, coalesce(worker, '') FROM jobs
             WHERE state = 'running' AND heartbeat_at < now() - make_interval(secs => $1)
               AND run_id IN (SELECT run_id FROM runs WHERE state = 'active')
             ORDER BY heartbeat_at LIMIT 1000"
        ))
        .bind(secs(stale_after))
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("stale jobs"))?;
        rows.iter()
            .map(|r| {
                Ok(StaleJob {
                    job: job_of(r)?,
                    attempts: r.get(JOB_COLUMN_COUNT),
                    worker: r.get(JOB_COLUMN_COUNT + 1),
                })
            })
            .collect()
    }

    /// Queued jobs of active runs published longer than `lost_after` ago (if their queue
    /// is empty, their message was lost).
    pub async fn queued_jobs(&self, lost_after: Duration) -> Result<Vec<Job>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs
             WHERE state = 'queued' AND queued_at < now() - make_interval(secs => $1)
               AND run_id IN (SELECT run_id FROM runs WHERE state = 'active')
             ORDER BY queued_at LIMIT 10000"
        ))
        .bind(secs(lost_after))
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("queued jobs"))?;
        rows.iter().map(job_of).collect()
    }

    /// Configurations whose last job finished more than `lost_after` ago but whose
    /// aggregation job has not completed (its message was lost with a dying worker).
    pub async fn stuck_aggregations(
        &self,
        lost_after: Duration,
    ) -> Result<Vec<ConfigRef>, StoreError> {
        let rows = sqlx::query(
            "SELECT run_id, model, dataset, mode FROM configs
             WHERE state = 'aggregating' AND ready_at < now() - make_interval(secs => $1)",
        )
        .bind(secs(lost_after))
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("stuck aggregations"))?;
        rows.iter()
            .map(|r| {
                let mode: String = r.get(3);
                Ok(ConfigRef {
                    run_id: r.get(0),
                    model: r.get(1),
                    dataset: r.get(2),
                    mode: crate::store::rows::mode(&mode, "configs.mode")?,
                })
            })
            .collect()
    }

    /// Restarts the aggregation clock of a configuration whose message was re-published.
    pub async fn touch_aggregation(&self, config: &ConfigRef) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE configs SET ready_at = now()
             WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4
               AND state = 'aggregating'",
        )
        .bind(&config.run_id)
        .bind(&config.model)
        .bind(&config.dataset)
        .bind(config.mode.as_str())
        .execute(self.pool())
        .await
        .map_err(StoreError::query("touch aggregation"))?;
        Ok(())
    }

    /// Returns a stale running job to `queued` (its message is re-published), unless a
    /// worker took it up again meanwhile.
    pub async fn requeue_stale(&self, job: &Job, worker: &str) -> Result<bool, StoreError> {
        let r = sqlx::query(
            "UPDATE jobs SET state = 'queued', queued_at = now(), publishes = publishes + 1
             WHERE job_key = $1 AND state = 'running' AND coalesce(worker, '') = $2",
        )
        .bind(&job.key)
        .bind(worker)
        .execute(self.pool())
        .await
        .map_err(StoreError::query("requeue stale job"))?;
        Ok(r.rows_affected() == 1)
    }

    /// Per-state job counts of a run, for tests and scripts.
    pub async fn state_counts(&self, run_id: &str) -> Result<Vec<(String, i64)>, StoreError> {
        sqlx::query_as(
            "SELECT state, count(*) FROM jobs WHERE run_id = $1 GROUP BY state ORDER BY state",
        )
        .bind(run_id)
        .fetch_all(self.pool())
        .await
        .map_err(StoreError::query("state counts"))
    }
}

/// The [`Job`] in the first columns of a row ([`JOB_COLUMNS`]).
fn job_of(row: &sqlx::postgres::PgRow) -> Result<Job, StoreError> {
    let columns: JobRow = sqlx::FromRow::from_row(row).map_err(StoreError::query("job columns"))?;
    job_from_row(columns)
}
