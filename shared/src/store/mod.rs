//! The store: where plans, results, caches and aggregates live. [`Store`] is the one
//! interface; [`sqlite::SqliteStore`] is the embedded engine (PostgreSQL comes with the
//! distributed engine). Writes are idempotent: a job's results commit in one transaction
//! together with its `done` state, keyed so that a redelivered job changes nothing.

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

    /// Notes that `worker` started (another attempt at) the job.
    async fn mark_running(&self, job: &Job, worker: &str) -> Result<(), StoreError>;

    /// Writes a job's results and marks it done, in one transaction. A second call for
    /// the same job changes nothing.
    async fn record_results(&self, job: &Job, results: &[ExampleResult]) -> Result<(), StoreError>;

    /// Marks a job failed with its error text (after its last delivery).
    async fn mark_failed(&self, job: &Job, error: &str) -> Result<(), StoreError>;

    /// Mean metrics per model x dataset x mode over the given jobs' results, in plan
    /// order (models, datasets and modes in the order they first appear in `jobs`).
    async fn summary(&self, jobs: &[Job]) -> Result<Vec<SummaryRow>, StoreError>;
}
