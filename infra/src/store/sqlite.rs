//! The embedded store: one SQLite file (WAL mode), migrations from `migrations/sqlite`.
//! A SIGKILL at any moment loses at most the transaction in flight.

use super::views::{self, Dialect, SqlValue};
use super::{
    Attempt, JobCommit, PlannedDatasetRecord, RunRecord, RunStatistics, Store, StoreError,
    SummaryRow,
};
use crate::cache::{CachedGeneration, EmbeddingCache, GenerationCache, TokenUsage};
use async_trait::async_trait;
use credence_core::aggregation::Aggregation;
use credence_core::domain::{Example, ExampleResult};
use credence_core::job::ConfigRef;
use credence_core::job::Job;
use credence_core::stats::ConfigValues;
use sha2::{Digest, Sha256};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

/// The SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and applies the migrations.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let location = path.display().to_string();
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // WAL + NORMAL is durable against a killed process; only a power cut can
            // lose the last commits.
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|source| StoreError::Connect {
                location: location.clone(),
                source,
            })?;
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate { location, source })?;
        let store = SqliteStore { pool };
        store.update_views().await?;
        Ok(store)
    }

    /// Recreates the views generated from the metric list when they are out of date.
    async fn update_views(&self) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin view update"))?;
        let recorded: HashMap<String, String> =
            sqlx::query_as("SELECT name, sha256 FROM generated_views")
                .fetch_all(&mut *tx)
                .await
                .map_err(StoreError::query("generated views"))?
                .into_iter()
                .collect();
        for stmt in views::view_updates(Dialect::Sqlite, &recorded) {
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
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

/// Metric rows per multi-row insert (4 bound values each, far below SQLite's limit).
const METRIC_ROWS_PER_INSERT: usize = 500;

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serialising plain data (strings, maps of JSON values) cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

#[async_trait]
impl Store for SqliteStore {
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
            "INSERT INTO runs (run_id, spec_json) VALUES (?, ?)
             ON CONFLICT (run_id) DO UPDATE SET spec_json = excluded.spec_json,
                 updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
        )
        .bind(&run.run_id)
        .bind(&run.spec_json)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("insert run"))?;
        for ds in datasets {
            sqlx::query(
                "INSERT INTO run_datasets (run_id, dataset_id, dataset_hash, path, n_examples)
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(&run.run_id)
            .bind(ds.id)
            .bind(&ds.data.hash)
            .bind(ds.data.path.display().to_string())
            .bind(ds.data.examples.len() as i64)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert run dataset"))?;
            for (pos, ex) in ds.data.examples.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO examples (dataset_hash, position, example_id, text, references_json, meta_json)
                     VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                )
                .bind(&ds.data.hash)
                .bind(pos as i64)
                .bind(&ex.id)
                .bind(&ex.text)
                .bind(to_json(&ex.references))
                .bind(to_json(&ex.meta))
                .execute(&mut *tx)
                .await
                .map_err(StoreError::query("insert example"))?;
            }
        }
        for job in jobs {
            sqlx::query(
                "INSERT INTO jobs (job_key, run_id, model, model_fingerprint, dataset, dataset_hash,
                                   mode, shard, start, len, config_version)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(&job.key)
            .bind(&job.run_id)
            .bind(&job.model)
            .bind(&job.model_fingerprint)
            .bind(&job.dataset)
            .bind(&job.dataset_hash)
            .bind(job.mode.as_str())
            .bind(job.shard as i64)
            .bind(job.start as i64)
            .bind(job.len as i64)
            .bind(&job.config_version)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert job"))?;
        }
        tx.commit().await.map_err(StoreError::query("commit plan"))
    }

    async fn finished_jobs(&self, run_id: &str) -> Result<HashSet<String>, StoreError> {
        let rows = sqlx::query("SELECT job_key FROM jobs WHERE run_id = ? AND state = 'done'")
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("finished jobs"))?;
        Ok(rows.into_iter().map(|r| r.get::<String, _>(0)).collect())
    }

    async fn shard_examples(&self, job: &Job) -> Result<Vec<Example>, StoreError> {
        let rows = sqlx::query_as(
            "SELECT example_id, text, references_json, meta_json FROM examples
             WHERE dataset_hash = ? AND position >= ? AND position < ? ORDER BY position",
        )
        .bind(&job.dataset_hash)
        // In i64: `start + len` of two u32s can pass u32::MAX (a panic in a debug build,
        // a wrapped, empty range in a release one).
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
        let done = sqlx::query(
            "UPDATE jobs SET state = 'running', attempts = attempts + ?, worker = ?,
                 started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                 heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             WHERE job_key = ? AND state <> 'done'",
        )
        .bind(attempt.increment())
        .bind(worker)
        .bind(&job.key)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("mark running"))?;
        Ok(done.rows_affected() == 1)
    }

    async fn heartbeat(&self, job: &Job, worker: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             WHERE job_key = ? AND worker = ? AND state = 'running'",
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
        for r in results {
            sqlx::query(
                "INSERT INTO predictions (job_key, example_id, run_id, model, dataset, mode,
                     base_claims_json, claims_json, pipeline_version, llm_calls, verifier_json,
                     repair_json, error)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(&job.key)
            .bind(&r.example_id)
            .bind(&job.run_id)
            .bind(&job.model)
            .bind(&job.dataset)
            .bind(job.mode.as_str())
            .bind(to_json(&r.base_claims))
            .bind(to_json(&r.claims))
            .bind(&r.pipeline_version)
            .bind(r.llm_calls as i64)
            .bind(r.verifier_json.as_deref())
            .bind(r.repair_json.as_deref())
            .bind(r.error.as_deref())
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert prediction"))?;
        }
        // Metric rows in multi-row inserts, each value bound as it is (bit-exact).
        let rows: Vec<(&str, &str, f64)> = results
            .iter()
            .flat_map(|r| {
                r.metrics
                    .values()
                    .map(move |(metric, v)| (r.example_id.as_str(), metric, v))
            })
            .collect();
        for chunk in rows.chunks(METRIC_ROWS_PER_INSERT) {
            let sql = format!(
                "INSERT INTO metric_values (job_key, example_id, metric, value) VALUES {}
                 ON CONFLICT DO NOTHING",
                vec!["(?, ?, ?, ?)"; chunk.len()].join(", ")
            );
            let mut q = sqlx::query(&sql);
            for (example_id, metric, value) in chunk {
                q = q
                    .bind(&job.key)
                    .bind(*example_id)
                    .bind(*metric)
                    .bind(*value);
            }
            q.execute(&mut *tx)
                .await
                .map_err(StoreError::query("insert metric values"))?;
        }
        let stage_rows: Vec<(&str, &str, f64)> = results
            .iter()
            .flat_map(|r| {
                r.stage_seconds
                    .spent()
                    .map(move |(stage, s)| (r.example_id.as_str(), stage.name(), s))
            })
            .collect();
        for chunk in stage_rows.chunks(METRIC_ROWS_PER_INSERT) {
            let sql = format!(
                "INSERT INTO stage_seconds (job_key, example_id, run_id, model, dataset, mode,
                     stage, seconds) VALUES {}
                 ON CONFLICT DO NOTHING",
                vec!["(?, ?, ?, ?, ?, ?, ?, ?)"; chunk.len()].join(", ")
            );
            let mut q = sqlx::query(&sql);
            for (example_id, stage, seconds) in chunk {
                q = q
                    .bind(&job.key)
                    .bind(*example_id)
                    .bind(&job.run_id)
                    .bind(&job.model)
                    .bind(&job.dataset)
                    .bind(job.mode.as_str())
                    .bind(*stage)
                    .bind(*seconds);
            }
            q.execute(&mut *tx)
                .await
                .map_err(StoreError::query("insert stage seconds"))?;
        }
        let newly_done = sqlx::query(
            "UPDATE jobs SET state = 'done', error = NULL,
                 finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             WHERE job_key = ? AND state <> 'done'",
        )
        .bind(&job.key)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::query("mark done"))?
        .rows_affected()
            == 1;
        // SQLite has one writer at a time and this transaction already wrote, so no
        // other commit can finish a job of this configuration between the count and
        // the commit: exactly one commit sees zero remaining.
        let remaining: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs
             WHERE run_id = ? AND model = ? AND dataset = ? AND mode = ? AND state <> 'done'",
        )
        .bind(&job.run_id)
        .bind(&job.model)
        .bind(&job.dataset)
        .bind(job.mode.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::query("remaining jobs of the configuration"))?;
        tx.commit()
            .await
            .map_err(StoreError::query("commit results"))?;
        Ok(JobCommit {
            newly_done,
            completes_config: newly_done && remaining == 0,
        })
    }

    async fn mark_failed(&self, job: &Job, error: &str) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE jobs SET state = 'failed', error = ?,
                 finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             WHERE job_key = ? AND state <> 'done'",
        )
        .bind(error)
        .bind(&job.key)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("mark failed"))?;
        Ok(())
    }

    async fn run_spec(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT spec_json FROM runs WHERE run_id = ?")
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(StoreError::query("run spec"))
    }

    async fn config_values(&self, config: &ConfigRef) -> Result<ConfigValues, StoreError> {
        let rows = sqlx::query_as(&views::config_values_sql("?1", "?2", "?3", "?4"))
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
            "SELECT count(*), coalesce(sum(state = 'done'), 0) FROM jobs
             WHERE run_id = ? AND model = ? AND dataset = ? AND mode = ?",
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
        let (aggregates_sql, comparisons_sql) = views::run_statistics_sql("?1");
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
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin aggregation"))?;
        for (sql, values) in views::aggregation_statements(aggregation, |i| format!("?{i}")) {
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
             WHERE run_id = ?",
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
        let rows = sqlx::query_as(&views::run_outputs_sql("?1"))
            .bind(run_id)
            .fetch_all(&self.pool)
            .await
            .map_err(StoreError::query("run outputs"))?;
        super::rows::run_outputs(rows)
    }

    async fn summary(&self, jobs: &[Job]) -> Result<Vec<SummaryRow>, StoreError> {
        let keys: Vec<&str> = jobs.iter().map(|j| j.key.as_str()).collect();
        let keys = to_json(&keys);
        let (means_sql, counts_sql) = views::summary_sql("SELECT value FROM json_each(?)");
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
        type JobRow = (
            String,
            String,
            String,
            String,
            String,
            String,
            String,
            i64,
            i64,
            i64,
            String,
        );
        let row: Option<JobRow> = sqlx::query_as(
            "SELECT job_key, run_id, model, model_fingerprint, dataset, dataset_hash, mode,
                    shard, start, len, config_version
             FROM jobs WHERE job_key = ?",
        )
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("planned job"))?;
        let Some((
            key,
            run_id,
            model,
            model_fingerprint,
            dataset,
            dataset_hash,
            mode,
            shard,
            start,
            len,
            config_version,
        )) = row
        else {
            return Ok(None);
        };
        let int = |v: i64| {
            u32::try_from(v).map_err(|e| StoreError::Corrupt {
                what: "jobs shard bounds",
                message: e.to_string(),
            })
        };
        Ok(Some(Job {
            key,
            run_id,
            model,
            model_fingerprint,
            dataset,
            dataset_hash,
            mode: super::rows::mode(&mode, "jobs.mode")?,
            shard: int(shard)?,
            start: int(start)?,
            len: int(len)?,
            config_version,
        }))
    }
}

#[async_trait]
impl EmbeddingCache for SqliteStore {
    async fn embeddings(
        &self,
        encoder_fingerprint: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let hashes: Vec<String> = texts.iter().map(|t| sha256_hex(t)).collect();
        let rows = sqlx::query(
            "SELECT text_sha256, vector FROM embedding_cache
             WHERE encoder_fingerprint = ? AND text_sha256 IN (SELECT value FROM json_each(?))",
        )
        .bind(encoder_fingerprint)
        .bind(to_json(&hashes))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("embedding cache lookup"))?;
        let mut found: HashMap<String, Vec<f32>> = HashMap::with_capacity(rows.len());
        for r in rows {
            found.insert(r.get(0), super::rows::vector(r.get(1))?);
        }
        Ok(hashes.iter().map(|h| found.get(h).cloned()).collect())
    }

    async fn put_embeddings(
        &self,
        encoder_fingerprint: &str,
        entries: &[(String, Vec<f32>)],
    ) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin embeddings"))?;
        for (text, v) in entries {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            sqlx::query(
                "INSERT INTO embedding_cache (encoder_fingerprint, text_sha256, text, dim, vector)
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(encoder_fingerprint)
            .bind(sha256_hex(text))
            .bind(text)
            .bind(v.len() as i64)
            .bind(bytes)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert embedding"))?;
        }
        tx.commit()
            .await
            .map_err(StoreError::query("commit embeddings"))
    }
}

#[async_trait]
impl GenerationCache for SqliteStore {
    async fn generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
    ) -> Result<Option<CachedGeneration>, StoreError> {
        let row = sqlx::query(
            "SELECT completion, seconds FROM generation_cache
             WHERE model_fingerprint = ? AND prompt_sha256 = ? AND params = ?",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("generation cache lookup"))?;
        Ok(row.map(|r| CachedGeneration {
            completion: r.get(0),
            seconds: r.get(1),
        }))
    }

    async fn put_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        completion: &str,
        usage: TokenUsage,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO generation_cache (model_fingerprint, prompt_sha256, params, prompt, completion,
                 prompt_tokens, completion_tokens, seconds)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(prompt)
        .bind(completion)
        .bind(usage.prompt_tokens.map(i64::from))
        .bind(usage.completion_tokens.map(i64::from))
        .bind(usage.seconds)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert generation"))?;
        Ok(())
    }

    async fn lease_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        // One file, one machine: the local clock is every holder's clock.
        let now = unix_millis();
        let held: Option<String> = sqlx::query_scalar(
            "INSERT INTO generation_leases (model_fingerprint, prompt_sha256, params, holder, expires_ms)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (model_fingerprint, prompt_sha256, params) DO UPDATE
                 SET holder = excluded.holder, expires_ms = excluded.expires_ms
                 WHERE generation_leases.expires_ms < ?
                    OR generation_leases.holder = excluded.holder
             RETURNING holder",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(holder)
        .bind(now.saturating_add(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX)))
        .bind(now)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("lease generation"))?;
        Ok(held.as_deref() == Some(holder))
    }

    async fn release_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "DELETE FROM generation_leases
             WHERE model_fingerprint = ? AND prompt_sha256 = ? AND params = ? AND holder = ?",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(holder)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("release generation lease"))?;
        Ok(())
    }
}

/// Milliseconds since the Unix epoch by the local clock.
fn unix_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests;
