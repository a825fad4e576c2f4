//! The store: where plans, results, caches and aggregates live. [`Store`] is the one
//! interface; [`sqlite::SqliteStore`] is the embedded engine, [`postgres::PgStore`] the
//! distributed one. Writes are idempotent: a job's results commit in one transaction
//! together with its `done` state, keyed so that a redelivered job changes nothing.

pub mod postgres;
mod rows;
pub mod sqlite;

use crate::cache::{EmbeddingCache, GenerationCache};
use crate::dataset::LoadedDataset;
use crate::domain::{Example, ExampleResult, Mode};
use crate::job::Job;
use async_trait::async_trait;
use serde::Serialize;
use std::collections::HashSet;

/// A store operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or opened; names where, never the password.
    #[error("cannot open the store at {location}: {source}")]
    Connect {
        /// Host or file, without credentials.
        location: String,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// The database URL cannot be parsed. The URL itself is not shown: it may hold a
    /// password.
    #[error("invalid database URL (not shown, it may hold a password): expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")]
    BadUrl,
    /// Applying the migrations failed.
    #[error("migrating the store at {location}: {source}")]
    Migrate {
        /// Host or file, without credentials.
        location: String,
        /// The migrator's error.
        source: sqlx::migrate::MigrateError,
    },
    /// A query failed.
    #[error("store query ({what}): {source}")]
    Query {
        /// What the query was for.
        what: &'static str,
        /// The driver's error.
        source: sqlx::Error,
    },
    /// Data in the store could not be decoded.
    #[error("corrupt store data ({what}): {message}")]
    Corrupt {
        /// What was being read.
        what: &'static str,
        /// What is wrong.
        message: String,
    },
}

impl StoreError {
    /// Wraps a driver error with what the query was for.
    pub fn query(what: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| StoreError::Query { what, source }
    }

    /// Whether the error is the database being unreachable (restarting, network down,
    /// pool exhausted) rather than something wrong with the data: the same operation
    /// may succeed later, so a worker backs off and retries instead of failing the job.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Connect { source, .. } | StoreError::Query { source, .. } => {
                is_transient_sqlx(source)
            }
            StoreError::BadUrl | StoreError::Migrate { .. } | StoreError::Corrupt { .. } => false,
        }
    }
}

fn is_transient_sqlx(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // Class 08: connection exceptions; 57P01-03: admin shutdown, crash
            // shutdown, cannot connect now (the server is starting or stopping);
            // 40001/40P01: serialization failure and deadlock, retried by design.
            code.starts_with("08")
                || matches!(&*code, "57P01" | "57P02" | "57P03" | "40001" | "40P01")
        }),
        _ => false,
    }
}

/// One model x dataset x mode of a run: the unit the aggregates are computed over.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct ConfigRef {
    /// Run id.
    pub run_id: String,
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
}

impl ConfigRef {
    /// The configuration a job belongs to.
    pub fn of(job: &Job) -> Self {
        ConfigRef {
            run_id: job.run_id.clone(),
            model: job.model.clone(),
            dataset: job.dataset.clone(),
            mode: job.mode,
        }
    }
}

/// What committing a job's results did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[must_use = "a commit that completes its configuration must enqueue the aggregation job"]
pub struct JobCommit {
    /// This commit moved the job to `done` (false for a redelivered, already done job).
    pub newly_done: bool,
    /// This commit finished the last job of its model x dataset x mode: the caller
    /// enqueues the one aggregation job of that configuration. True for exactly one
    /// commit per configuration.
    pub completes_config: bool,
}

/// A run as recorded in the store.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// The run id (the sweep's name).
    pub run_id: String,
    /// The sweep, as validated, serialised to JSON (what ran).
    pub spec_json: String,
}

/// A dataset of a run, as the planner saw it.
#[derive(Debug, Clone)]
pub struct PlannedDatasetRecord<'a> {
    /// Dataset id from the sweep.
    pub id: &'a str,
    /// The loaded dataset.
    pub data: &'a LoadedDataset,
}

/// Mean of each metric over one model x dataset x mode of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
    /// Examples with results.
    pub n: u32,
    /// Mean number of claims.
    pub claims: f64,
    /// Mean Jaccard-F1.
    pub jaccard_f1: f64,
    /// Mean Semantic-F1, when computed.
    pub semantic_f1: Option<f64>,
    /// Mean EPR, when computed.
    pub epr: Option<f64>,
    /// Mean AVR, when computed.
    pub avr: Option<f64>,
    /// Mean RR, when computed.
    pub rr: Option<f64>,
    /// Share of verified examples, when computed.
    pub verify: Option<f64>,
}

/// The store interface shared by both engines.
#[async_trait]
pub trait Store: EmbeddingCache + GenerationCache + Send + Sync {
    /// Records a run, its datasets' examples and its planned jobs. Idempotent: what is
    /// already there is kept, so re-planning a run never loses results.
    async fn record_plan(
        &self,
        run: &RunRecord,
        datasets: &[PlannedDatasetRecord<'_>],
        jobs: &[Job],
    ) -> Result<(), StoreError>;

    /// Keys of the jobs of `run_id` whose results are committed.
    async fn finished_jobs(&self, run_id: &str) -> Result<HashSet<String>, StoreError>;

    /// The examples of a job's shard, in dataset order.
    async fn shard_examples(&self, job: &Job) -> Result<Vec<Example>, StoreError>;

    /// Notes that `worker` started (another attempt at) the job. Returns false, changing
    /// nothing, when the job needs no work: already done (a redelivered message) or
    /// cancelled.
    async fn mark_running(&self, job: &Job, worker: &str) -> Result<bool, StoreError>;

    /// Refreshes the heartbeat of a running job, so the reaper knows its worker lives.
    async fn heartbeat(&self, job: &Job, worker: &str) -> Result<(), StoreError>;

    /// Writes a job's results and marks it done, in one transaction. A second call for
    /// the same job changes nothing.
    async fn record_results(
        &self,
        job: &Job,
        results: &[ExampleResult],
    ) -> Result<JobCommit, StoreError>;

    /// Marks a job failed with its error text (after its last delivery).
    async fn mark_failed(&self, job: &Job, error: &str) -> Result<(), StoreError>;

    /// The sweep of a run as recorded by [`Store::record_plan`] (JSON), if the run exists.
    async fn run_spec(&self, run_id: &str) -> Result<Option<String>, StoreError>;

    /// The aggregation job of a configuration: writes the mean of each metric over its
    /// examples to `aggregates` (replacing earlier values, so a repeat is harmless) and
    /// marks the configuration complete.
    async fn aggregate_config(&self, config: &ConfigRef) -> Result<(), StoreError>;

    /// Mean metrics per model x dataset x mode over the given jobs' results, in plan
    /// order (models, datasets and modes in the order they first appear in `jobs`).
    async fn summary(&self, jobs: &[Job]) -> Result<Vec<SummaryRow>, StoreError>;
}

/// The metrics averaged by an aggregation job, as (name, SQL expression over
/// `example_metrics`).
pub(crate) const AGGREGATED_METRICS: [(&str, &str); 7] = [
    ("n_claims", "n_claims"),
    ("jaccard_f1", "jaccard_f1"),
    ("semantic_f1", "semantic_f1"),
    ("epr", "epr"),
    ("avr", "avr"),
    ("rr", "rr"),
    ("verify", "VERIFIED"),
];

/// A `SELECT metric, v` over the example metrics of one configuration, one row per
/// example and metric; `verified` is the dialect's cast of the boolean to a number and
/// the four placeholders are the configuration's run, model, dataset and mode.
pub(crate) fn metric_values_sql(
    verified: &str,
    run: &str,
    model: &str,
    dataset: &str,
    mode: &str,
) -> String {
    AGGREGATED_METRICS
        .iter()
        .map(|(name, expr)| {
            let expr = if *expr == "VERIFIED" { verified } else { expr };
            format!(
                "SELECT '{name}' AS metric, CAST({expr} AS DOUBLE PRECISION) AS v FROM example_metrics
                 WHERE run_id = {run} AND model = {model} AND dataset = {dataset} AND mode = {mode}"
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}
