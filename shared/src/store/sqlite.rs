//! The embedded store: one SQLite file (WAL mode), migrations from `migrations/sqlite`.
//! A SIGKILL at any moment loses at most the transaction in flight.

use super::{ConfigRef, JobCommit, PlannedDatasetRecord, RunRecord, Store, StoreError, SummaryRow};
use crate::cache::{EmbeddingCache, GenerationCache};
use crate::domain::{Example, ExampleResult};
use crate::job::Job;
use async_trait::async_trait;
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
        Ok(SqliteStore { pool })
    }

    /// The connection pool, for queries the trait does not cover (reports, tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

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
        .bind(job.start as i64)
        .bind((job.start + job.len) as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("shard examples"))?;
        super::rows::shard_examples(job, rows)
    }

    async fn mark_running(&self, job: &Job, worker: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE jobs SET state = 'running', attempts = attempts + 1, worker = ?,
                 started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
                 heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
             WHERE job_key = ? AND state <> 'done'",
        )
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
                     base_claims_json, claims_json, pipeline_version, llm_calls)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
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
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert prediction"))?;
            let m = &r.metrics;
            sqlx::query(
                "INSERT INTO example_metrics (job_key, example_id, run_id, model, dataset, mode,
                     n_claims, jaccard_f1, semantic_f1, epr, avr, rr, verified, n_viol)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(&job.key)
            .bind(&r.example_id)
            .bind(&job.run_id)
            .bind(&job.model)
            .bind(&job.dataset)
            .bind(job.mode.as_str())
            .bind(m.n_claims as i64)
            .bind(m.jaccard_f1)
            .bind(m.semantic_f1)
            .bind(m.epr)
            .bind(m.avr)
            .bind(m.rr)
            .bind(m.verified)
            .bind(m.n_viol.map(i64::from))
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert example metrics"))?;
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

    async fn aggregate_config(&self, config: &ConfigRef) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "INSERT INTO aggregates (run_id, model, dataset, mode, metric, n, mean)
             SELECT ?1, ?2, ?3, ?4, metric, count(v), avg(v) FROM ({}) AS per_metric
             GROUP BY metric HAVING count(v) > 0
             ON CONFLICT (run_id, model, dataset, mode, metric)
             DO UPDATE SET n = excluded.n, mean = excluded.mean",
            super::metric_values_sql("verified", "?1", "?2", "?3", "?4")
        ))
        .bind(&config.run_id)
        .bind(&config.model)
        .bind(&config.dataset)
        .bind(config.mode.as_str())
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("aggregate configuration"))?;
        Ok(())
    }

    async fn summary(&self, jobs: &[Job]) -> Result<Vec<SummaryRow>, StoreError> {
        let keys: Vec<&str> = jobs.iter().map(|j| j.key.as_str()).collect();
        let rows = sqlx::query_as(
            "SELECT model, dataset, mode, count(*), avg(n_claims), avg(jaccard_f1),
                    avg(semantic_f1), avg(epr), avg(avr), avg(rr), avg(verified)
             FROM example_metrics WHERE job_key IN (SELECT value FROM json_each(?))
             GROUP BY model, dataset, mode",
        )
        .bind(to_json(&keys))
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("summary"))?;
        super::rows::summary(rows, jobs)
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
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(
            "SELECT completion FROM generation_cache
             WHERE model_fingerprint = ? AND prompt_sha256 = ? AND params = ?",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("generation cache lookup"))?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn put_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        completion: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO generation_cache (model_fingerprint, prompt_sha256, params, prompt, completion)
             VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(prompt)
        .bind(completion)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert generation"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
