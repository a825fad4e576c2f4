//! The distributed store: PostgreSQL, the source of truth of a distributed run.
//! Migrations from `migrations/postgres` run at start under sqlx's migrator, which holds
//! a PostgreSQL advisory lock while it applies them, so workers starting together migrate
//! once. Bulk writes bind whole columns as arrays and insert with `UNNEST`. A job's
//! results and its `done` state commit in one transaction, which also counts down its
//! configuration's `jobs_left` under the row's lock, so exactly one commit sees the
//! configuration finished.
//! The queries the coordinator needs beyond the [`Store`] trait (status, resume, cancel,
//! the reaper) live in [`ops`].

mod cache;
pub mod ops;

use super::views::{self, Dialect, SqlValue};
use super::{
    Attempt, JobCommit, PlannedDatasetRecord, RunRecord, RunStatistics, Store, StoreError,
    SummaryRow,
};
use async_trait::async_trait;
use credence_core::aggregation::Aggregation;
use credence_core::domain::{Example, ExampleResult};
use credence_core::job::ConfigRef;
use credence_core::job::Job;
use credence_core::stats::ConfigValues;
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{PgPool, Row};
use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// The PostgreSQL store.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    location: String,
}

/// Where a database URL points, as `host:port/database`, without user or password; or a
/// placeholder when the URL cannot be parsed.
pub fn describe_url(url: &str) -> String {
    match PgConnectOptions::from_str(url) {
        Ok(o) => format!(
            "{}:{}/{}",
            o.get_host(),
            o.get_port(),
            o.get_database().unwrap_or("")
        ),
        Err(_) => "an invalid database URL".into(),
    }
}

impl PgStore {
    /// Connects (one attempt, up to `connect_timeout`) and applies the migrations.
    /// Errors name `host:port/database`, never the password.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let options = PgConnectOptions::from_str(url).map_err(|_| StoreError::BadUrl)?;
        let location = describe_url(url);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options.application_name("credence"))
            .await
            .map_err(|source| StoreError::Connect {
                location: location.clone(),
                source,
            })?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                location: location.clone(),
                source,
            })?;
        let store = PgStore { pool, location };
        store.update_views().await?;
        Ok(store)
    }

    /// Recreates the views generated from the metric list when they are out of date,
    /// under a transaction-scoped advisory lock so that processes starting together
    /// do it once.
    async fn update_views(&self) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin view update"))?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('credence.generated_views'))")
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("lock generated views"))?;
        let recorded: HashMap<String, String> =
            sqlx::query_as("SELECT name, sha256 FROM generated_views")
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query("generated views"))?
                .into_iter()
                .collect();
        for stmt in views::view_updates(Dialect::Postgres, &recorded) {
            sqlx::query(&stmt)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::query("update generated views"))?;
        }
        tx.commit()
            .await
            .map_err(StoreError::query("commit view update"))
    }

    /// The connection pool, for queries the trait does not cover (reports, tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// `host:port/database` of the store.
    pub fn location(&self) -> &str {
        &self.location
    }
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serialising plain data (strings, maps of JSON values) cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// The columns of `jobs` that make up a [`Job`], in the order [`job_from_row`] reads.
pub(crate) const JOB_COLUMNS: &str = "job_key, run_id, model, model_fingerprint, dataset, \
     dataset_hash, mode, shard, start, len, config_version";

pub(crate) fn job_from_row(r: &PgRow) -> Result<Job, StoreError> {
    let int = |i: usize| -> Result<u32, StoreError> {
        u32::try_from(r.get::<i64, _>(i)).map_err(|e| StoreError::Corrupt {
            what: "jobs shard bounds",
            message: e.to_string(),
        })
    };
    Ok(Job {
        key: r.get(0),
        run_id: r.get(1),
        model: r.get(2),
        model_fingerprint: r.get(3),
        dataset: r.get(4),
        dataset_hash: r.get(5),
        mode: super::rows::mode(r.get(6), "jobs.mode")?,
        shard: int(7)?,
        start: int(8)?,
        len: int(9)?,
        config_version: r.get(10),
    })
}

#[async_trait]
impl Store for PgStore {
    async fn record_plan(
        &self,
        run: &RunRecord,
        datasets: &[PlannedDatasetRecord<'_>],
        jobs: &[Job],
    ) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin plan"))?;
        sqlx::query(
            "INSERT INTO runs (run_id, spec_json) VALUES ($1, $2)
             ON CONFLICT (run_id) DO UPDATE SET spec_json = excluded.spec_json,
                 state = 'active', updated_at = now()",
        )
        .bind(&run.run_id)
        .bind(&run.spec_json)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("insert run"))?;
        for ds in datasets {
            sqlx::query(
                "INSERT INTO run_datasets (run_id, dataset_id, dataset_hash, path, n_examples)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            )
            .bind(&run.run_id)
            .bind(ds.id)
            .bind(&ds.data.hash)
            .bind(ds.data.path.display().to_string())
            .bind(ds.data.examples.len() as i64)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert run dataset"))?;
            let ex = &ds.data.examples;
            sqlx::query(
                "INSERT INTO examples (dataset_hash, position, example_id, text, references_json, meta_json)
                 SELECT $1, * FROM UNNEST($2::int8[], $3::text[], $4::text[], $5::text[], $6::text[])
                 ON CONFLICT DO NOTHING",
            )
            .bind(&ds.data.hash)
            .bind((0..ex.len() as i64).collect::<Vec<_>>())
            .bind(ex.iter().map(|e| e.id.as_str()).collect::<Vec<_>>())
            .bind(ex.iter().map(|e| e.text.as_str()).collect::<Vec<_>>())
            .bind(ex.iter().map(|e| to_json(&e.references)).collect::<Vec<_>>())
            .bind(ex.iter().map(|e| to_json(&e.meta)).collect::<Vec<_>>())
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert examples"))?;
        }
        let mut configs: Vec<&Job> = Vec::new();
        let mut seen = HashSet::new();
        for j in jobs {
            if seen.insert((&j.model, &j.dataset, j.mode)) {
                configs.push(j);
            }
        }
        sqlx::query(
            "INSERT INTO configs (run_id, model, dataset, mode)
             SELECT $1, * FROM UNNEST($2::text[], $3::text[], $4::text[])
             ON CONFLICT DO NOTHING",
        )
        .bind(&run.run_id)
        .bind(configs.iter().map(|j| j.model.as_str()).collect::<Vec<_>>())
        .bind(
            configs
                .iter()
                .map(|j| j.dataset.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(configs.iter().map(|j| j.mode.as_str()).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("insert configurations"))?;
        let col = |f: fn(&Job) -> &str| jobs.iter().map(f).collect::<Vec<&str>>();
        let num = |f: fn(&Job) -> u32| jobs.iter().map(|j| i64::from(f(j))).collect::<Vec<_>>();
        sqlx::query(
            "INSERT INTO jobs (job_key, run_id, model, model_fingerprint, dataset, dataset_hash,
                               mode, shard, start, len, config_version, plan_order)
             SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                                  $6::text[], $7::text[], $8::int8[], $9::int8[], $10::int8[],
                                  $11::text[], $12::int8[])
             ON CONFLICT DO NOTHING",
        )
        .bind(col(|j| j.key.as_str()))
        .bind(col(|j| j.run_id.as_str()))
        .bind(col(|j| j.model.as_str()))
        .bind(col(|j| j.model_fingerprint.as_str()))
        .bind(col(|j| j.dataset.as_str()))
        .bind(col(|j| j.dataset_hash.as_str()))
        .bind(col(|j| j.mode.as_str()))
        .bind(num(|j| j.shard))
        .bind(num(|j| j.start))
        .bind(num(|j| j.len))
        .bind(col(|j| j.config_version.as_str()))
        .bind((0..jobs.len() as i64).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("insert jobs"))?;
        // Lock the run's configurations (in a fixed order, as workers lock one at a
        // time) before counting: a worker that already counted its job down has then
        // committed, and one that has not will count down after this commit.
        sqlx::query(
            "SELECT 1 FROM configs WHERE run_id = $1 ORDER BY model, dataset, mode FOR UPDATE",
        )
        .bind(&run.run_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(StoreError::query("lock configurations"))?;
        sqlx::query(
            "UPDATE configs c SET jobs_left = sub.n,
                 state = CASE WHEN sub.n > 0 THEN 'running' ELSE c.state END
             FROM (SELECT model, dataset, mode, count(*) FILTER (WHERE state <> 'done') AS n
                   FROM jobs WHERE run_id = $1 GROUP BY model, dataset, mode) sub
             WHERE c.run_id = $1 AND c.model = sub.model AND c.dataset = sub.dataset
               AND c.mode = sub.mode",
        )
        .bind(&run.run_id)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("count jobs per configuration"))?;
        tx.commit().await.map_err(StoreError::query("commit plan"))
    }

    async fn finished_jobs(&self, run_id: &str) -> Result<HashSet<String>, StoreError> {
        let keys: Vec<String> =
            sqlx::query_scalar("SELECT job_key FROM jobs WHERE run_id = $1 AND state = 'done'")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await
                .map_err(StoreError::query("finished jobs"))?;
        Ok(keys.into_iter().collect())
    }

    async fn shard_examples(&self, job: &Job) -> Result<Vec<Example>, StoreError> {
        let rows = sqlx::query_as(
            "SELECT example_id, text, references_json, meta_json FROM examples
             WHERE dataset_hash = $1 AND position >= $2 AND position < $3 ORDER BY position",
        )
        .bind(&job.dataset_hash)
        .bind(i64::from(job.start))
        .bind(i64::from(job.start) + i64::from(job.len))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("shard examples"))?;
        super::rows::shard_examples(job, rows)
    }

    async fn mark_running(
        &self,
        job: &Job,
        worker: &str,
        attempt: Attempt,
    ) -> Result<bool, StoreError> {
        let updated = sqlx::query(
            "UPDATE jobs SET state = 'running', attempts = attempts + $3::int, worker = $1,
                 started_at = now(), heartbeat_at = now()
             WHERE job_key = $2 AND state NOT IN ('done', 'cancelled')",
        )
        .bind(worker)
        .bind(&job.key)
        .bind(attempt.increment() as i32)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("mark running"))?;
        Ok(updated.rows_affected() == 1)
    }

    async fn heartbeat(&self, job: &Job, worker: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET heartbeat_at = now()
             WHERE job_key = $1 AND worker = $2 AND state = 'running'",
        )
        .bind(&job.key)
        .bind(worker)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("heartbeat"))?;
        Ok(())
    }

    async fn record_results(
        &self,
        job: &Job,
        results: &[ExampleResult],
    ) -> Result<JobCommit, StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin results"))?;
        insert_results(&mut tx, job, results).await?;
        let newly_done = sqlx::query(
            "UPDATE jobs SET state = 'done', error = NULL, finished_at = now()
             WHERE job_key = $1 AND state <> 'done'",
        )
        .bind(&job.key)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("mark done"))?
        .rows_affected()
            == 1;
        let mut completes_config = false;
        if newly_done {
            // The row lock this UPDATE takes serialises the jobs of one configuration
            // finishing at once: each newly done job decrements once, so exactly one
            // commit takes the count to 0.
            let left: Option<i64> = sqlx::query_scalar(
                "UPDATE configs SET jobs_left = jobs_left - 1,
                     state = CASE WHEN jobs_left = 1 THEN 'aggregating' ELSE state END,
                     ready_at = CASE WHEN jobs_left = 1 THEN now() ELSE ready_at END
                 WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4
                 RETURNING jobs_left",
            )
            .bind(&job.run_id)
            .bind(&job.model)
            .bind(&job.dataset)
            .bind(job.mode.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::query("count down the configuration"))?;
            completes_config = left == Some(0);
        }
        tx.commit()
            .await
            .map_err(StoreError::query("commit results"))?;
        Ok(JobCommit {
            newly_done,
            completes_config,
        })
    }

    async fn mark_failed(&self, job: &Job, error: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET state = 'failed', error = $1, finished_at = now()
             WHERE job_key = $2 AND state <> 'done'",
        )
        .bind(error)
        .bind(&job.key)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("mark failed"))?;
        Ok(())
    }

    async fn run_spec(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT spec_json FROM runs WHERE run_id = $1")
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("run spec"))
    }

    async fn config_values(&self, config: &ConfigRef) -> Result<ConfigValues, StoreError> {
        let rows = sqlx::query_as(&views::config_values_sql("$1", "$2", "$3", "$4"))
            .bind(&config.run_id)
            .bind(&config.model)
            .bind(&config.dataset)
            .bind(config.mode.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("configuration values"))?;
        Ok(super::rows::config_values(rows))
    }

    async fn config_finished(&self, config: &ConfigRef) -> Result<bool, StoreError> {
        let (jobs, done): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE state = 'done') FROM jobs
             WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4",
        )
        .bind(&config.run_id)
        .bind(&config.model)
        .bind(&config.dataset)
        .bind(config.mode.as_str())
        .fetch_one(&self.pool)
        .await
        .map_err(StoreError::query("configuration finished"))?;
        Ok(jobs > 0 && jobs == done)
    }

    async fn run_statistics(&self, run_id: &str) -> Result<RunStatistics, StoreError> {
        let (aggregates_sql, comparisons_sql) = views::run_statistics_sql("$1");
        let aggregates = sqlx::query_as(&aggregates_sql)
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("run aggregates"))?;
        let comparisons = sqlx::query_as(&comparisons_sql)
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("run comparisons"))?;
        Ok(super::rows::run_statistics(aggregates, comparisons))
    }

    async fn write_aggregation(&self, aggregation: &Aggregation) -> Result<(), StoreError> {
        let config = &aggregation.config;
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin aggregation"))?;
        for (sql, values) in views::aggregation_statements(aggregation, |i| format!("${i}")) {
            let mut q = sqlx::query(&sql);
            for v in values {
                q = match v {
                    SqlValue::Text(t) => q.bind(t),
                    SqlValue::Int(i) => q.bind(i),
                    SqlValue::Real(x) => q.bind(x),
                };
            }
            q.execute(&mut *tx)
                .await
                .map_err(StoreError::query("write aggregation"))?;
        }
        sqlx::query(
            "UPDATE configs SET state = 'complete', completed_at = now(),
                 aggregations = aggregations + 1
             WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4",
        )
        .bind(&config.run_id)
        .bind(&config.model)
        .bind(&config.dataset)
        .bind(config.mode.as_str())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("mark configuration complete"))?;
        tx.commit()
            .await
            .map_err(StoreError::query("commit aggregation"))
    }

    async fn stage_seconds(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::timing::StageRow>, StoreError> {
        let rows: Vec<(String, String, String, String, String, f64)> = sqlx::query_as(
            "SELECT model, dataset, mode, example_id, stage, seconds FROM stage_seconds
             WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("stage seconds"))?;
        rows.into_iter()
            .map(|(model, dataset, mode, example, stage, seconds)| {
                super::stage_row(model, dataset, &mode, example, &stage, seconds)
            })
            .collect()
    }

    async fn run_outputs(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::audit::StoredOutput>, StoreError> {
        let rows = sqlx::query_as(&views::run_outputs_sql("$1"))
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("run outputs"))?;
        super::rows::run_outputs(rows)
    }

    async fn summary(&self, jobs: &[Job]) -> Result<Vec<SummaryRow>, StoreError> {
        let keys: Vec<&str> = jobs.iter().map(|j| j.key.as_str()).collect();
        let (means_sql, counts_sql) = views::summary_sql("SELECT unnest($1::text[])");
        let counts = sqlx::query_as(&counts_sql)
            .bind(&keys)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("summary counts"))?;
        let means = sqlx::query_as(&means_sql)
            .bind(&keys)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("summary means"))?;
        super::rows::summary(counts, means, jobs)
    }

    async fn planned_job(&self, key: &str) -> Result<Option<Job>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE job_key = $1"
        ))
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("planned job"))?;
        row.as_ref().map(job_from_row).transpose()
    }
}

/// Inserts a job's predictions and metrics, two statements whatever the shard size.
async fn insert_results(
    tx: &mut sqlx::PgConnection,
    job: &Job,
    results: &[ExampleResult],
) -> Result<(), StoreError> {
    let ids: Vec<&str> = results.iter().map(|r| r.example_id.as_str()).collect();
    sqlx::query(
        "INSERT INTO predictions (job_key, example_id, run_id, model, dataset, mode,
             base_claims_json, claims_json, pipeline_version, llm_calls, verifier_json,
             repair_json, error)
         SELECT $1, t.example_id, $2, $3, $4, $5, t.base, t.claims, t.pipeline, t.calls, t.report,
                t.repair, t.error
         FROM UNNEST($6::text[], $7::text[], $8::text[], $9::text[], $10::int8[], $11::text[],
                     $12::text[], $13::text[])
              AS t(example_id, base, claims, pipeline, calls, report, repair, error)
         ON CONFLICT DO NOTHING",
    )
    .bind(&job.key)
    .bind(&job.run_id)
    .bind(&job.model)
    .bind(&job.dataset)
    .bind(job.mode.as_str())
    .bind(&ids)
    .bind(
        results
            .iter()
            .map(|r| to_json(&r.base_claims))
            .collect::<Vec<_>>(),
    )
    .bind(
        results
            .iter()
            .map(|r| to_json(&r.claims))
            .collect::<Vec<_>>(),
    )
    .bind(
        results
            .iter()
            .map(|r| r.pipeline_version.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(
        results
            .iter()
            .map(|r| i64::from(r.llm_calls))
            .collect::<Vec<_>>(),
    )
    .bind(
        results
            .iter()
            .map(|r| r.verifier_json.as_deref())
            .collect::<Vec<_>>(),
    )
    .bind(
        results
            .iter()
            .map(|r| r.repair_json.as_deref())
            .collect::<Vec<_>>(),
    )
    .bind(
        results
            .iter()
            .map(|r| r.error.as_deref())
            .collect::<Vec<_>>(),
    )
    .execute(&mut *tx)
    .await
    .map_err(StoreError::query("insert predictions"))?;
    let mut example_ids: Vec<&str> = Vec::new();
    let mut metrics: Vec<&str> = Vec::new();
    let mut values: Vec<f64> = Vec::new();
    for r in results {
        for (metric, v) in r.metrics.values() {
            example_ids.push(&r.example_id);
            metrics.push(metric);
            values.push(v);
        }
    }
    sqlx::query(
        "INSERT INTO metric_values (job_key, example_id, metric, value)
         SELECT $1, t.example_id, t.metric, t.value
         FROM UNNEST($2::text[], $3::text[], $4::float8[]) AS t(example_id, metric, value)
         ON CONFLICT DO NOTHING",
    )
    .bind(&job.key)
    .bind(&example_ids)
    .bind(&metrics)
    .bind(&values)
    .execute(&mut *tx)
    .await
    .map_err(StoreError::query("insert metric values"))?;
    let mut example_ids: Vec<&str> = Vec::new();
    let mut stages: Vec<&str> = Vec::new();
    let mut seconds: Vec<f64> = Vec::new();
    for r in results {
        for (stage, s) in r.stage_seconds.spent() {
            example_ids.push(&r.example_id);
            stages.push(stage.name());
            seconds.push(s);
        }
    }
    sqlx::query(
        "INSERT INTO stage_seconds (job_key, example_id, run_id, model, dataset, mode, stage, seconds)
         SELECT $1, t.example_id, $2, $3, $4, $5, t.stage, t.seconds
         FROM UNNEST($6::text[], $7::text[], $8::float8[]) AS t(example_id, stage, seconds)
         ON CONFLICT DO NOTHING",
    )
    .bind(&job.key)
    .bind(&job.run_id)
    .bind(&job.model)
    .bind(&job.dataset)
    .bind(job.mode.as_str())
    .bind(&example_ids)
    .bind(&stages)
    .bind(&seconds)
    .execute(&mut *tx)
    .await
    .map_err(StoreError::query("insert stage seconds"))?;
    Ok(())
}
