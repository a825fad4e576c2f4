//! The one SQL store, over either engine ([`Engine`]: SQLite for the embedded engine,
//! PostgreSQL for the distributed one). Every statement is written once, with `$N`
//! placeholders and the dialect's spelling where the two differ ([`Dialect`]). Where the
//! engines differ by design, the code says so in one `match`:
//! - PostgreSQL keeps one `configs` row per model x dataset x mode and counts its jobs
//!   down under the row's lock, so that exactly one of the workers committing at once
//!   sees its configuration finished; SQLite has one writer at a time and counts the
//!   configuration's unfinished jobs inside the committing transaction.
//! - PostgreSQL records runs as `active` or `cancelled`, and jobs' plan order.
//! - A generation lease expires by PostgreSQL's clock (every worker shares it); in SQLite
//!   by the one machine's clock, in milliseconds.
//!
//! Writes are idempotent: a job's results commit in one transaction together with its
//! `done` state, keyed so that a redelivered job changes nothing.

use super::sql::{value_rows, Dialect, Engine, Record, SqlValue, Stmt};
use super::{rows, views};
use super::{
    Attempt, JobCommit, PlannedDatasetRecord, RunRecord, RunStatistics, Store, StoreError,
};
use crate::cache::{CachedGeneration, EmbeddingCache, GenerationCache, TokenUsage};
use async_trait::async_trait;
use credence_core::afc::{AfcResult, StoredAfc};
use credence_core::aggregation::Aggregation;
use credence_core::audit::StoredOutput;
use credence_core::domain::{Example, ExampleResult};
use credence_core::job::{AfcTask, ConfigRef, Job};
use credence_core::stats::ConfigValues;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};

/// Rows per multi-row insert: at most 13 values each, far below either engine's limit
/// on bound values (32,766 in SQLite, 65,535 in PostgreSQL).
const ROWS_PER_INSERT: usize = 500;

/// A store on one engine: its connection pool and where it is (host and database, or
/// file), for messages.
pub struct SqlStore<DB: sqlx::Database> {
    pub(super) pool: sqlx::Pool<DB>,
    pub(super) location: String,
}

impl<DB: sqlx::Database> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        SqlStore {
            pool: self.pool.clone(),
            location: self.location.clone(),
        }
    }
}

impl<DB: Engine> SqlStore<DB> {
    /// The connection pool, for queries the trait does not cover (reports, tests).
    pub fn pool(&self) -> &sqlx::Pool<DB> {
        &self.pool
    }

    /// Where the store is: `host:port/database` (never a password), or the file.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Runs a statement the [`Store`] trait does not cover (reports, tests); returns the
    /// rows it changed.
    pub async fn run(&self, stmt: Stmt) -> Result<u64, StoreError> {
        self.execute("statement", stmt).await
    }

    /// Every row of a query the [`Store`] trait does not cover (reports, tests).
    pub async fn query<T: Record>(&self, stmt: Stmt) -> Result<Vec<T>, StoreError> {
        self.fetch_all("query", stmt).await
    }

    /// Runs one statement outside a transaction.
    async fn execute(&self, what: &'static str, stmt: Stmt) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(StoreError::query(what))?;
        DB::execute(&mut conn, &stmt)
            .await
            .map_err(StoreError::query(what))
    }

    /// Every row of one query.
    async fn fetch_all<T: Record>(
        &self,
        what: &'static str,
        stmt: Stmt,
    ) -> Result<Vec<T>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(StoreError::query(what))?;
        DB::fetch_all(&mut conn, &stmt)
            .await
            .map_err(StoreError::query(what))
    }

    /// The first row of one query, if any.
    async fn fetch_optional<T: Record>(
        &self,
        what: &'static str,
        stmt: Stmt,
    ) -> Result<Option<T>, StoreError> {
        let mut conn = self.pool.acquire().await.map_err(StoreError::query(what))?;
        DB::fetch_optional(&mut conn, &stmt)
            .await
            .map_err(StoreError::query(what))
    }

    /// Runs statements in one transaction.
    async fn in_transaction(
        &self,
        what: &'static str,
        stmts: impl IntoIterator<Item = Stmt> + Send,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::query(what))?;
        for stmt in stmts {
            DB::execute(&mut tx, &stmt)
                .await
                .map_err(StoreError::query(what))?;
        }
        tx.commit().await.map_err(StoreError::query(what))
    }

    /// Brings the views generated from the metric list up to date when they are not,
    /// in one transaction (under an advisory lock in PostgreSQL, so that processes
    /// starting together do it once).
    /// Commits a job: its result rows (`inserts`) and its `done` state in one
    /// transaction, counting down its configuration (see [`JobCommit`]).
    async fn commit_job(&self, job: &Job, inserts: Vec<Stmt>) -> Result<JobCommit, StoreError> {
        let what = "record results";
        let mut tx = self.pool.begin().await.map_err(StoreError::query(what))?;
        for stmt in inserts {
            DB::execute(&mut tx, &stmt)
                .await
                .map_err(StoreError::query("insert results"))?;
        }
        let newly_done = DB::execute(
            &mut tx,
            &Stmt::new(format!(
                "UPDATE jobs SET state = 'done', error = NULL, finished_at = {}
                 WHERE job_key = $1 AND state <> 'done'",
                DB::DIALECT.now()
            ))
            .bind(&job.key),
        )
        .await
        .map_err(StoreError::query("mark done"))?
            == 1;
        let config = ConfigRef::of(job);
        let completes_config = match DB::DIALECT {
            // One writer at a time, and this transaction already wrote: no other commit
            // can finish a job of this configuration between the count and the commit,
            // so exactly one commit sees none left.
            Dialect::Sqlite => {
                let (left,): (i64,) = DB::fetch_optional(
                    &mut tx,
                    &config_key(
                        "SELECT count(*) FROM jobs WHERE run_id = $1 AND model = $2
                             AND dataset = $3 AND mode = $4 AND state <> 'done'",
                        &config,
                    ),
                )
                .await
                .map_err(StoreError::query("remaining jobs of the configuration"))?
                .unwrap_or((0,));
                newly_done && left == 0
            }
            // The row lock this UPDATE takes serialises the jobs of one configuration
            // finishing at once: each newly done job decrements once, so exactly one
            // commit takes the count to 0.
            Dialect::Postgres if newly_done => {
                let left: Option<(i64,)> = DB::fetch_optional(
                    &mut tx,
                    &config_key(
                        "UPDATE configs SET jobs_left = jobs_left - 1,
                             state = CASE WHEN jobs_left = 1 THEN 'aggregating' ELSE state END,
                             ready_at = CASE WHEN jobs_left = 1 THEN now() ELSE ready_at END
                         WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4
                         RETURNING jobs_left",
                        &config,
                    ),
                )
                .await
                .map_err(StoreError::query("count down the configuration"))?;
                left == Some((0,))
            }
            Dialect::Postgres => false,
        };
        tx.commit().await.map_err(StoreError::query(what))?;
        Ok(JobCommit {
            newly_done,
            completes_config,
        })
    }

    pub(super) async fn update_views(&self) -> Result<(), StoreError> {
        let what = "update generated views";
        let mut tx = self.pool.begin().await.map_err(StoreError::query(what))?;
        if DB::DIALECT == Dialect::Postgres {
            let lock =
                Stmt::new("SELECT pg_advisory_xact_lock(hashtext('credence.generated_views'))");
            DB::execute(&mut tx, &lock)
                .await
                .map_err(StoreError::query("lock generated views"))?;
        }
        let recorded: Vec<(String, String)> = DB::fetch_all(
            &mut tx,
            &Stmt::new("SELECT name, sha256 FROM generated_views"),
        )
        .await
        .map_err(StoreError::query("generated views"))?;
        let recorded: HashMap<String, String> = recorded.into_iter().collect();
        for sql in views::view_updates(DB::DIALECT, &recorded) {
            DB::execute(&mut tx, &Stmt::new(sql))
                .await
                .map_err(StoreError::query(what))?;
        }
        tx.commit().await.map_err(StoreError::query(what))
    }
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serialising plain data (strings, maps of JSON values) cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// Multi-row inserts of `rows`, [`ROWS_PER_INSERT`] at a time: `head` is the statement
/// up to `VALUES`, `tail` what follows the list, `values` one row's values.
fn inserts<R>(
    head: &str,
    tail: &str,
    rows: &[R],
    values: impl Fn(&R) -> Vec<SqlValue>,
) -> Vec<Stmt> {
    rows.chunks(ROWS_PER_INSERT)
        .map(|chunk| {
            let mut bound = Vec::new();
            let mut width = 0;
            for row in chunk {
                let v = values(row);
                width = v.len();
                bound.extend(v);
            }
            Stmt::new(format!(
                "{head} VALUES {} {tail}",
                value_rows(chunk.len(), width)
            ))
            .bind_all(bound)
        })
        .collect()
}

/// The `job_key, run_id, ... config_version` columns of `jobs`, in [`Job`] order.
pub(crate) type JobRow = (
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
    Option<String>,
);

/// The columns of `jobs` a [`JobRow`] reads.
pub(crate) const JOB_COLUMNS: &str = "job_key, run_id, model, model_fingerprint, dataset, \
     dataset_hash, mode, shard, start, len, config_version, afc_json";

/// How many columns [`JOB_COLUMNS`] names (where a query's further columns start).
pub(crate) const JOB_COLUMN_COUNT: usize = 12;

/// A planned job read back.
pub(crate) fn job_from_row(row: JobRow) -> Result<Job, StoreError> {
    let (
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
        afc_json,
    ) = row;
    let int = |v: i64| {
        u32::try_from(v).map_err(|e| StoreError::Corrupt {
            what: "jobs shard bounds",
            message: e.to_string(),
        })
    };
    Ok(Job {
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
        afc: afc_json
            .map(|j| {
                serde_json::from_str(&j).map_err(|e| StoreError::Corrupt {
                    what: "jobs.afc_json",
                    message: e.to_string(),
                })
            })
            .transpose()?,
    })
}

/// The statement that reads the rows of a configuration's key columns.
fn config_key(sql: &str, config: &ConfigRef) -> Stmt {
    Stmt::new(sql)
        .bind(&config.run_id)
        .bind(&config.model)
        .bind(&config.dataset)
        .bind(config.mode.as_str())
}

#[async_trait]
impl<DB: Engine> Store for SqlStore<DB> {
    async fn record_plan(
        &self,
        run: &RunRecord,
        datasets: &[PlannedDatasetRecord<'_>],
        jobs: &[Job],
    ) -> Result<(), StoreError> {
        let dialect = DB::DIALECT;
        let mut stmts = vec![Stmt::new(format!(
            "INSERT INTO runs (run_id, spec_json) VALUES ($1, $2)
             ON CONFLICT (run_id) DO UPDATE SET spec_json = excluded.spec_json,
                 {}updated_at = {}",
            if dialect == Dialect::Postgres {
                "state = 'active', "
            } else {
                ""
            },
            dialect.now()
        ))
        .bind(&run.run_id)
        .bind(&run.spec_json)];
        for ds in datasets {
            stmts.push(
                Stmt::new(
                    "INSERT INTO run_datasets (run_id, dataset_id, dataset_hash, path, n_examples)
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                )
                .bind(&run.run_id)
                .bind(ds.id)
                .bind(&ds.data.hash)
                .bind(ds.data.path.display().to_string())
                .bind(ds.data.examples.len() as i64),
            );
            let examples: Vec<(usize, &Example)> = ds.data.examples.iter().enumerate().collect();
            stmts.extend(inserts(
                "INSERT INTO examples (dataset_hash, position, example_id, text, references_json,
                     meta_json)",
                "ON CONFLICT DO NOTHING",
                &examples,
                |(pos, ex)| {
                    vec![
                        ds.data.hash.as_str().into(),
                        (*pos as i64).into(),
                        ex.id.as_str().into(),
                        ex.text.as_str().into(),
                        to_json(&ex.references).into(),
                        to_json(&ex.meta).into(),
                    ]
                },
            ));
        }
        let ordered: Vec<(usize, &Job)> = jobs.iter().enumerate().collect();
        let job_values = |(order, j): &(usize, &Job)| {
            let afc_json = j.afc.as_ref().map(to_json);
            let mut v: Vec<SqlValue> = vec![
                j.key.as_str().into(),
                j.run_id.as_str().into(),
                j.model.as_str().into(),
                j.model_fingerprint.as_str().into(),
                j.dataset.as_str().into(),
                j.dataset_hash.as_str().into(),
                j.mode.as_str().into(),
                i64::from(j.shard).into(),
                i64::from(j.start).into(),
                i64::from(j.len).into(),
                j.config_version.as_str().into(),
                afc_json.as_deref().into(),
            ];
            if dialect == Dialect::Postgres {
                v.push((*order as i64).into());
            }
            v
        };
        let job_columns = match dialect {
            Dialect::Sqlite => format!("INSERT INTO jobs ({JOB_COLUMNS})"),
            Dialect::Postgres => format!("INSERT INTO jobs ({JOB_COLUMNS}, plan_order)"),
        };
        if dialect == Dialect::Postgres {
            // Each job names its configuration's row (a foreign key).
            stmts.extend(config_rows(&run.run_id, jobs));
        }
        stmts.extend(inserts(
            &job_columns,
            "ON CONFLICT DO NOTHING",
            &ordered,
            job_values,
        ));
        if dialect == Dialect::Postgres {
            stmts.extend(count_config_jobs(&run.run_id));
        }
        self.in_transaction("record plan", stmts).await
    }

    async fn finished_jobs(&self, run_id: &str) -> Result<HashSet<String>, StoreError> {
        let keys: Vec<(String,)> = self
            .fetch_all(
                "finished jobs",
                Stmt::new("SELECT job_key FROM jobs WHERE run_id = $1 AND state = 'done'")
                    .bind(run_id),
            )
            .await?;
        Ok(keys.into_iter().map(|(k,)| k).collect())
    }

    async fn shard_examples(&self, job: &Job) -> Result<Vec<Example>, StoreError> {
        let rows = self
            .fetch_all(
                "shard examples",
                Stmt::new(
                    "SELECT example_id, text, references_json, meta_json FROM examples
                     WHERE dataset_hash = $1 AND position >= $2 AND position < $3
                     ORDER BY position",
                )
                .bind(&job.dataset_hash)
                // In i64: `start + len` of two u32s can pass u32::MAX (a panic in a debug
                // build, a wrapped, empty range in a release one).
                .bind(i64::from(job.start))
                .bind(i64::from(job.start) + i64::from(job.len)),
            )
            .await?;
        super::rows::shard_examples(job, rows)
    }

    async fn mark_running(
        &self,
        job: &Job,
        worker: &str,
        attempt: Attempt,
    ) -> Result<Option<u32>, StoreError> {
        let now = DB::DIALECT.now();
        let attempts: Option<(i32,)> = self
            .fetch_optional(
                "mark running",
                Stmt::new(format!(
                    "UPDATE jobs SET state = 'running', attempts = attempts + $1, worker = $2,
                         started_at = {now}, heartbeat_at = {now}
                     WHERE job_key = $3 AND state NOT IN ('done', 'cancelled')
                     RETURNING attempts"
                ))
                .bind(attempt.increment())
                .bind(worker)
                .bind(&job.key),
            )
            .await?;
        Ok(attempts.map(|(n,)| u32::try_from(n).unwrap_or(0)))
    }

    async fn heartbeat(&self, job: &Job, worker: &str) -> Result<(), StoreError> {
        self.execute(
            "heartbeat",
            Stmt::new(format!(
                "UPDATE jobs SET heartbeat_at = {}
                 WHERE job_key = $1 AND worker = $2 AND state = 'running'",
                DB::DIALECT.now()
            ))
            .bind(&job.key)
            .bind(worker),
        )
        .await
        .map(|_| ())
    }

    async fn record_results(
        &self,
        job: &Job,
        results: &[ExampleResult],
    ) -> Result<JobCommit, StoreError> {
        self.commit_job(job, result_inserts(job, results)).await
    }

    async fn record_afc_results(
        &self,
        job: &Job,
        results: &[AfcResult],
    ) -> Result<JobCommit, StoreError> {
        let Some(afc) = &job.afc else {
            return Err(StoreError::Corrupt {
                what: "AFC results",
                message: format!("job {} is not an AFC job", job.key),
            });
        };
        self.commit_job(job, afc_inserts(job, afc, results)).await
    }

    async fn afc_results(&self, run_id: &str) -> Result<Vec<StoredAfc>, StoreError> {
        let rows: Vec<rows::AfcRow> = self
            .fetch_all(
                "AFC results",
                Stmt::new(
                    "SELECT r.model, r.dataset, r.setting, r.example_id, r.gold, r.verdict,
                         r.score, r.n_subclaims, r.fell_back, r.unparsable
                     FROM afc_results r
                     JOIN jobs j ON j.job_key = r.job_key
                     JOIN examples e ON e.dataset_hash = j.dataset_hash
                         AND e.example_id = r.example_id
                     WHERE r.run_id = $1
                     ORDER BY r.model, r.dataset, r.setting, e.position",
                )
                .bind(run_id),
            )
            .await?;
        rows::afc_results(rows)
    }

    async fn mark_failed(&self, job: &Job, error: &str) -> Result<(), StoreError> {
        self.execute(
            "mark failed",
            Stmt::new(format!(
                "UPDATE jobs SET state = 'failed', error = $1, finished_at = {}
                 WHERE job_key = $2 AND state <> 'done'",
                DB::DIALECT.now()
            ))
            .bind(error)
            .bind(&job.key),
        )
        .await
        .map(|_| ())
    }

    async fn run_spec(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(String,)> = self
            .fetch_optional(
                "run spec",
                Stmt::new("SELECT spec_json FROM runs WHERE run_id = $1").bind(run_id),
            )
            .await?;
        Ok(row.map(|(spec,)| spec))
    }

    async fn config_values(&self, config: &ConfigRef) -> Result<ConfigValues, StoreError> {
        let rows = self
            .fetch_all(
                "configuration values",
                config_key(&views::config_values_sql("$1", "$2", "$3", "$4"), config),
            )
            .await?;
        Ok(super::rows::config_values(rows))
    }

    async fn config_finished(&self, config: &ConfigRef) -> Result<bool, StoreError> {
        let (jobs, done): (i64, i64) = self
            .fetch_optional(
                "configuration finished",
                config_key(
                    "SELECT count(*), coalesce(sum(CASE WHEN state = 'done' THEN 1 ELSE 0 END), 0)
                     FROM jobs WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4",
                    config,
                ),
            )
            .await?
            .unwrap_or((0, 0));
        Ok(jobs > 0 && jobs == done)
    }

    async fn run_statistics(&self, run_id: &str) -> Result<RunStatistics, StoreError> {
        let (aggregates_sql, comparisons_sql) = views::run_statistics_sql("$1");
        let aggregates = self
            .fetch_all("run aggregates", Stmt::new(aggregates_sql).bind(run_id))
            .await?;
        let comparisons = self
            .fetch_all("run comparisons", Stmt::new(comparisons_sql).bind(run_id))
            .await?;
        Ok(super::rows::run_statistics(aggregates, comparisons))
    }

    async fn write_aggregation(&self, aggregation: &Aggregation) -> Result<(), StoreError> {
        let mut stmts = views::aggregation_statements(aggregation);
        if DB::DIALECT == Dialect::Postgres {
            stmts.push(config_key(
                "UPDATE configs SET state = 'complete', completed_at = now(),
                     aggregations = aggregations + 1
                 WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4",
                &aggregation.config,
            ));
        }
        self.in_transaction("write aggregation", stmts).await
    }

    async fn stage_seconds(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::timing::StageRow>, StoreError> {
        let rows: Vec<(String, String, String, String, String, f64)> = self
            .fetch_all(
                "stage seconds",
                Stmt::new(
                    "SELECT model, dataset, mode, example_id, stage, seconds FROM stage_seconds
                     WHERE run_id = $1",
                )
                .bind(run_id),
            )
            .await?;
        rows.into_iter()
            .map(|(model, dataset, mode, example, stage, seconds)| {
                super::stage_row(model, dataset, &mode, example, &stage, seconds)
            })
            .collect()
    }

    async fn llm_calls(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::timing::LlmCalls>, StoreError> {
        let rows: Vec<(String, String, i64, i64)> = self
            .fetch_all(
                "LLM calls",
                Stmt::new(
                    "SELECT model, mode, CAST(sum(llm_calls) AS BIGINT), count(*) FROM predictions
                     WHERE run_id = $1 GROUP BY model, mode ORDER BY model, mode",
                )
                .bind(run_id),
            )
            .await?;
        rows.into_iter()
            .map(|(model, mode, calls, outputs)| {
                let corrupt = |message: String| StoreError::Corrupt {
                    what: "predictions.llm_calls",
                    message,
                };
                Ok(credence_core::timing::LlmCalls {
                    mode: mode
                        .parse()
                        .map_err(|e: credence_core::domain::UnknownMode| corrupt(e.to_string()))?,
                    calls: u64::try_from(calls)
                        .map_err(|_| corrupt(format!("{model}/{mode}: {calls} calls")))?,
                    outputs: u64::try_from(outputs).unwrap_or(0),
                    model,
                })
            })
            .collect()
    }

    async fn generation_usage(
        &self,
        run_id: &str,
    ) -> Result<Vec<super::GenerationUsage>, StoreError> {
        let rows: Vec<(String, i64, i64, Option<i64>)> = self
            .fetch_all(
                "generation usage",
                Stmt::new(
                    "SELECT j.model, count(*), count(g.completion_tokens),
                            CAST(sum(g.completion_tokens) AS BIGINT)
                     FROM generation_cache g
                     JOIN (SELECT DISTINCT model, model_fingerprint FROM jobs WHERE run_id = $1) j
                       ON substr(j.model_fingerprint, 1, length(g.model_fingerprint) + 1)
                          = g.model_fingerprint || '+'
                     GROUP BY j.model ORDER BY j.model",
                )
                .bind(run_id),
            )
            .await?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Ok(rows
            .into_iter()
            .map(
                |(model, generations, with_tokens, tokens)| super::GenerationUsage {
                    model,
                    generations: count(generations),
                    with_tokens: count(with_tokens),
                    completion_tokens: tokens.map_or(0, count),
                },
            )
            .collect())
    }

    async fn run_outputs(&self, run_id: &str) -> Result<Vec<StoredOutput>, StoreError> {
        let rows = self
            .fetch_all(
                "run outputs",
                Stmt::new(views::run_outputs_sql("$1")).bind(run_id),
            )
            .await?;
        super::rows::run_outputs(rows)
    }

    async fn planned_job(&self, key: &str) -> Result<Option<Job>, StoreError> {
        let row: Option<JobRow> = self
            .fetch_optional(
                "planned job",
                Stmt::new(format!("SELECT {JOB_COLUMNS} FROM jobs WHERE job_key = $1")).bind(key),
            )
            .await?;
        row.map(job_from_row).transpose()
    }
}

/// PostgreSQL's `configs` rows of a plan: one per model x dataset x mode.
fn config_rows(run_id: &str, jobs: &[Job]) -> Vec<Stmt> {
    let mut seen = HashSet::new();
    let configs: Vec<&Job> = jobs
        .iter()
        .filter(|j| seen.insert((&j.model, &j.dataset, j.mode)))
        .collect();
    inserts(
        "INSERT INTO configs (run_id, model, dataset, mode)",
        "ON CONFLICT DO NOTHING",
        &configs,
        |j| {
            vec![
                run_id.into(),
                j.model.as_str().into(),
                j.dataset.as_str().into(),
                j.mode.as_str().into(),
            ]
        },
    )
}

/// Sets each of a run's PostgreSQL `configs` rows to its count of jobs not done. The
/// rows are locked first (in a fixed order, as workers lock one at a time): a worker
/// that already counted its job down has then committed, and one that has not will
/// count down after this commit.
fn count_config_jobs(run_id: &str) -> Vec<Stmt> {
    vec![
        Stmt::new(
            "SELECT 1 FROM configs WHERE run_id = $1 ORDER BY model, dataset, mode FOR UPDATE",
        )
        .bind(run_id),
        Stmt::new(
            "UPDATE configs c SET jobs_left = sub.n,
                 state = CASE WHEN sub.n > 0 THEN 'running' ELSE c.state END
             FROM (SELECT model, dataset, mode, count(*) FILTER (WHERE state <> 'done') AS n
                   FROM jobs WHERE run_id = $1 GROUP BY model, dataset, mode) sub
             WHERE c.run_id = $1 AND c.model = sub.model AND c.dataset = sub.dataset
               AND c.mode = sub.mode",
        )
        .bind(run_id),
    ]
}

/// An AFC job's `afc_results` rows, as multi-row inserts.
fn afc_inserts(job: &Job, afc: &AfcTask, results: &[AfcResult]) -> Vec<Stmt> {
    inserts(
        "INSERT INTO afc_results (job_key, example_id, run_id, model, dataset, setting, mode,
             judge, gold, verdict, score, n_subclaims, fell_back, unparsable, llm_calls,
             judged_json, error)",
        "ON CONFLICT DO NOTHING",
        results,
        |r| {
            vec![
                job.key.as_str().into(),
                r.example_id.as_str().into(),
                job.run_id.as_str().into(),
                job.model.as_str().into(),
                afc.dataset.as_str().into(),
                afc.setting.as_str().into(),
                job.mode.as_str().into(),
                afc.judge.as_str().into(),
                r.gold.as_str().into(),
                r.verdict.as_str().into(),
                r.score.into(),
                i64::from(r.n_subclaims).into(),
                i64::from(r.fell_back).into(),
                i64::from(r.unparsable()).into(),
                i64::from(r.llm_calls).into(),
                to_json(&r.judged).into(),
                r.error.as_deref().into(),
            ]
        },
    )
}

/// A job's predictions, metric values and stage seconds, as multi-row inserts.
fn result_inserts(job: &Job, results: &[ExampleResult]) -> Vec<Stmt> {
    let mut stmts = inserts(
        "INSERT INTO predictions (job_key, example_id, run_id, model, dataset, mode,
             base_claims_json, claims_json, pipeline_version, llm_calls, verifier_json,
             repair_json, error)",
        "ON CONFLICT DO NOTHING",
        results,
        |r| {
            vec![
                job.key.as_str().into(),
                r.example_id.as_str().into(),
                job.run_id.as_str().into(),
                job.model.as_str().into(),
                job.dataset.as_str().into(),
                job.mode.as_str().into(),
                to_json(&r.base_claims).into(),
                to_json(&r.claims).into(),
                r.pipeline_version.as_str().into(),
                i64::from(r.llm_calls).into(),
                r.verifier_json.as_deref().into(),
                r.repair_json.as_deref().into(),
                r.error.as_deref().into(),
            ]
        },
    );
    // Each value bound as it is (bit-exact).
    let metrics: Vec<(&str, &str, f64)> = results
        .iter()
        .flat_map(|r| {
            r.metrics
                .values()
                .map(move |(metric, v)| (r.example_id.as_str(), metric, v))
        })
        .collect();
    stmts.extend(inserts(
        "INSERT INTO metric_values (job_key, example_id, metric, value)",
        "ON CONFLICT DO NOTHING",
        &metrics,
        |(example, metric, value)| {
            vec![
                job.key.as_str().into(),
                (*example).into(),
                (*metric).into(),
                (*value).into(),
            ]
        },
    ));
    let stages: Vec<(&str, &str, f64)> = results
        .iter()
        .flat_map(|r| {
            r.stage_seconds
                .spent()
                .map(move |(stage, s)| (r.example_id.as_str(), stage.name(), s))
        })
        .collect();
    stmts.extend(inserts(
        "INSERT INTO stage_seconds (job_key, example_id, run_id, model, dataset, mode, stage,
             seconds)",
        "ON CONFLICT DO NOTHING",
        &stages,
        |(example, stage, seconds)| {
            vec![
                job.key.as_str().into(),
                (*example).into(),
                job.run_id.as_str().into(),
                job.model.as_str().into(),
                job.dataset.as_str().into(),
                job.mode.as_str().into(),
                (*stage).into(),
                (*seconds).into(),
            ]
        },
    ));
    stmts
}

#[async_trait]
impl<DB: Engine> EmbeddingCache for SqlStore<DB> {
    async fn embeddings(
        &self,
        encoder_fingerprint: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let hashes: Vec<String> = texts.iter().map(|t| sha256_hex(t)).collect();
        let rows: Vec<(String, Vec<u8>)> = self
            .fetch_all(
                "embedding cache lookup",
                Stmt::new(format!(
                    "SELECT text_sha256, vector FROM embedding_cache
                     WHERE encoder_fingerprint = $1 AND {}",
                    DB::DIALECT.in_json_strings("text_sha256", "$2")
                ))
                .bind(encoder_fingerprint)
                .bind(to_json(&hashes)),
            )
            .await?;
        let mut found: HashMap<String, Vec<f32>> = HashMap::with_capacity(rows.len());
        for (hash, bytes) in rows {
            found.insert(hash, super::rows::vector(&bytes)?);
        }
        Ok(hashes.iter().map(|h| found.get(h).cloned()).collect())
    }

    async fn put_embeddings(
        &self,
        encoder_fingerprint: &str,
        entries: &[(String, Vec<f32>)],
    ) -> Result<(), StoreError> {
        let stmts = inserts(
            "INSERT INTO embedding_cache (encoder_fingerprint, text_sha256, text, dim, vector)",
            "ON CONFLICT DO NOTHING",
            entries,
            |(text, v)| {
                vec![
                    encoder_fingerprint.into(),
                    sha256_hex(text).into(),
                    text.as_str().into(),
                    (v.len() as i64).into(),
                    v.iter()
                        .flat_map(|x| x.to_le_bytes())
                        .collect::<Vec<u8>>()
                        .into(),
                ]
            },
        );
        self.in_transaction("insert embeddings", stmts).await
    }
}

#[async_trait]
impl<DB: Engine> GenerationCache for SqlStore<DB> {
    async fn generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
    ) -> Result<Option<CachedGeneration>, StoreError> {
        let row: Option<(String, Option<f64>)> = self
            .fetch_optional(
                "generation cache lookup",
                Stmt::new(
                    "SELECT completion, seconds FROM generation_cache
                     WHERE model_fingerprint = $1 AND prompt_sha256 = $2 AND params = $3",
                )
                .bind(model_fingerprint)
                .bind(sha256_hex(prompt))
                .bind(params),
            )
            .await?;
        Ok(row.map(|(completion, seconds)| CachedGeneration {
            completion,
            seconds,
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
        self.execute(
            "insert generation",
            Stmt::new(
                "INSERT INTO generation_cache (model_fingerprint, prompt_sha256, params, prompt,
                     completion, prompt_tokens, completion_tokens, seconds)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
            )
            .bind(model_fingerprint)
            .bind(sha256_hex(prompt))
            .bind(params)
            .bind(prompt)
            .bind(completion)
            .bind(usage.prompt_tokens.map(i64::from))
            .bind(usage.completion_tokens.map(i64::from))
            .bind(usage.seconds),
        )
        .await
        .map(|_| ())
    }

    async fn lease_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let key = Stmt::new(match DB::DIALECT {
            // Expiry by the database's clock, the one clock every worker shares.
            Dialect::Postgres => {
                "INSERT INTO generation_leases (model_fingerprint, prompt_sha256, params, holder,
                     expires_at)
                 VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
                 ON CONFLICT (model_fingerprint, prompt_sha256, params) DO UPDATE
                     SET holder = excluded.holder, expires_at = excluded.expires_at
                     WHERE generation_leases.expires_at < now()
                        OR generation_leases.holder = excluded.holder
                 RETURNING holder"
            }
            // One file, one machine: the local clock is every holder's clock.
            Dialect::Sqlite => {
                "INSERT INTO generation_leases (model_fingerprint, prompt_sha256, params, holder,
                     expires_ms)
                 VALUES ($1, $2, $3, $4, $6 + $5)
                 ON CONFLICT (model_fingerprint, prompt_sha256, params) DO UPDATE
                     SET holder = excluded.holder, expires_ms = excluded.expires_ms
                     WHERE generation_leases.expires_ms < $6
                        OR generation_leases.holder = excluded.holder
                 RETURNING holder"
            }
        })
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(holder);
        let stmt = match DB::DIALECT {
            Dialect::Postgres => key.bind(ttl.as_secs_f64()),
            Dialect::Sqlite => key
                .bind(i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX / 2))
                .bind(unix_millis()),
        };
        let held: Option<(String,)> = self.fetch_optional("lease generation", stmt).await?;
        Ok(held.is_some_and(|(h,)| h == holder))
    }

    async fn release_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        self.execute(
            "release generation lease",
            Stmt::new(
                "DELETE FROM generation_leases
                 WHERE model_fingerprint = $1 AND prompt_sha256 = $2 AND params = $3
                   AND holder = $4",
            )
            .bind(model_fingerprint)
            .bind(sha256_hex(prompt))
            .bind(params)
            .bind(holder),
        )
        .await
        .map(|_| ())
    }
}

/// Milliseconds since the Unix epoch by the local clock (a lease's expiry in SQLite).
fn unix_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2))
}

#[cfg(test)]
mod tests {
    #[test]
    fn job_column_count_is_the_number_of_columns_named() {
        assert_eq!(
            super::JOB_COLUMNS.split(',').count(),
            super::JOB_COLUMN_COUNT
        );
    }
}
