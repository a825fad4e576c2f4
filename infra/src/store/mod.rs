//! The store: where plans, results, caches and aggregates live. [`Store`] is the one
//! interface, and [`sql_store::SqlStore`] its one implementation, over either engine
//! ([`sql`]): [`sqlite::SqliteStore`] for the embedded engine, [`postgres::PgStore`] for
//! the distributed one. Writes are idempotent: a job's results commit in one transaction
//! together with its `done` state, keyed so that a redelivered job changes nothing.

pub mod browse;
pub mod postgres;
mod rows;
pub mod sql;
pub mod sql_store;
pub mod sqlite;
mod views;

use crate::cache::Caches;
pub use crate::error::StoreError;
use async_trait::async_trait;
use credence_core::afc::{AfcResult, StoredAfc};
use credence_core::aggregation::Aggregation;
use credence_core::audit::StoredOutput;
use credence_core::dataset::LoadedDataset;
use credence_core::domain::{Example, ExampleResult};
use credence_core::job::{ConfigRef, Job};
use credence_core::stats::ConfigValues;
use credence_core::sweep::SweepSpec;
use serde::Serialize;
use std::collections::HashSet;

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

/// One stored `aggregates` row.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct AggregateRecord {
    /// Model.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: String,
    /// Metric.
    pub metric: String,
    /// Examples.
    pub n: i64,
    /// Mean over examples.
    pub mean: f64,
    /// Lower end of the 95% interval.
    pub ci_low: Option<f64>,
    /// Upper end of the 95% interval.
    pub ci_high: Option<f64>,
}

/// One stored `comparisons` row: a - b on one dataset.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
pub struct ComparisonRecord {
    /// Dataset id.
    pub dataset: String,
    /// Metric.
    pub metric: String,
    /// a's model.
    pub a_model: String,
    /// a's mode.
    pub a_mode: String,
    /// b's model.
    pub b_model: String,
    /// b's mode.
    pub b_mode: String,
    /// Examples compared.
    pub n: i64,
    /// mean(a) - mean(b).
    pub delta: f64,
    /// Lower end of its 95% interval.
    pub ci_low: Option<f64>,
    /// Upper end of its 95% interval.
    pub ci_high: Option<f64>,
    /// Two-sided paired bootstrap p-value.
    pub p_value: Option<f64>,
    /// Share of resampled differences <= 0 (the one-sided "not better" share when
    /// higher is better).
    pub p_le: Option<f64>,
    /// Share of resampled differences >= 0 (the same when lower is better).
    pub p_ge: Option<f64>,
}

/// A run's statistics as stored.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RunStatistics {
    /// Means and intervals.
    pub aggregates: Vec<AggregateRecord>,
    /// Paired comparisons.
    pub comparisons: Vec<ComparisonRecord>,
}

/// What a [`Store::mark_running`] call is: a new attempt at the job (a delivery taken
/// off the queue), or the same delivery tried again in place after the store was
/// unreachable, which must not count against the job's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The first call for a delivery: `attempts` goes up by one.
    New,
    /// The same delivery again (a retry in place): `attempts` stays as it is.
    SameDelivery,
}

impl Attempt {
    /// What this call adds to `attempts`.
    pub fn increment(self) -> i64 {
        match self {
            Attempt::New => 1,
            Attempt::SameDelivery => 0,
        }
    }
}

/// The store interface shared by both engines.
#[async_trait]
pub trait Store: Caches + Send + Sync {
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

    /// Notes that `worker` started (another attempt at) the job; only an
    /// [`Attempt::New`] counts in `attempts`. Returns the job's attempts so far, this one
    /// included, or `None`, changing nothing, when the job needs no work: already done
    /// (a redelivered message) or cancelled.
    async fn mark_running(
        &self,
        job: &Job,
        worker: &str,
        attempt: Attempt,
    ) -> Result<Option<u32>, StoreError>;

    /// Refreshes the heartbeat of a running job, so the reaper knows its worker lives.
    async fn heartbeat(&self, job: &Job, worker: &str) -> Result<(), StoreError>;

    /// Writes a job's results and marks it done, in one transaction. A second call for
    /// the same job changes nothing.
    async fn record_results(
        &self,
        job: &Job,
        results: &[ExampleResult],
    ) -> Result<JobCommit, StoreError>;

    /// Writes an AFC job's results ([`Job::afc`]) and marks it done, in one transaction,
    /// as [`Store::record_results`] does for a decomposition job.
    async fn record_afc_results(
        &self,
        job: &Job,
        results: &[AfcResult],
    ) -> Result<JobCommit, StoreError>;

    /// Every AFC result of a run, ordered by decomposer, AFC dataset, setting and the
    /// claim's place in its dataset (what `credence report --table afc` reads).
    async fn afc_results(&self, run_id: &str) -> Result<Vec<StoredAfc>, StoreError>;

    /// Marks a job failed with its error text (after its last delivery).
    async fn mark_failed(&self, job: &Job, error: &str) -> Result<(), StoreError>;

    /// The sweep of a run as recorded by [`Store::record_plan`] (JSON), if the run exists.
    async fn run_spec(&self, run_id: &str) -> Result<Option<String>, StoreError>;

    /// The sweep of a run as recorded by [`Store::record_plan`], parsed: `None` when the
    /// run is not in the store, [`StoreError::Corrupt`] when its record does not parse.
    /// Every reader of a run's settings (the job handler, aggregation, the report, the
    /// audit) goes through here.
    async fn recorded_sweep(&self, run_id: &str) -> Result<Option<SweepSpec>, StoreError> {
        let Some(json) = self.run_spec(run_id).await? else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| StoreError::Corrupt {
                what: "recorded sweep",
                message: format!("run {run_id:?}: {e}"),
            })
    }

    /// The recorded sweep of a run that must be in the store: as
    /// [`Store::recorded_sweep`], with [`StoreError::UnknownRun`] when it is not.
    async fn run_sweep(&self, run_id: &str) -> Result<SweepSpec, StoreError> {
        self.recorded_sweep(run_id)
            .await?
            .ok_or_else(|| StoreError::UnknownRun {
                run_id: run_id.to_string(),
            })
    }

    /// The per-example values of every metric of a configuration, examples in dataset
    /// order; what [`crate::aggregation::aggregate_config`] computes on.
    async fn config_values(&self, config: &ConfigRef) -> Result<ConfigValues, StoreError>;

    /// Whether every job of a configuration is done (false when it has no jobs).
    async fn config_finished(&self, config: &ConfigRef) -> Result<bool, StoreError>;

    /// Every `aggregates` and `comparisons` row of a run, sorted by configuration and
    /// metric (what `credence report` prints).
    async fn run_statistics(&self, run_id: &str) -> Result<RunStatistics, StoreError>;

    /// Writes an aggregation in one transaction: replaces the configuration's
    /// `aggregates` rows and the `comparisons` rows of each pair it carries, and marks
    /// the configuration complete (in the distributed engine). A repeat is harmless.
    async fn write_aggregation(&self, aggregation: &Aggregation) -> Result<(), StoreError>;

    /// Every `stage_seconds` row of a run (the timing table's input).
    async fn stage_seconds(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::timing::StageRow>, StoreError>;

    /// The LLM calls of each model and mode of a run, summed over its stored outputs (the
    /// timing table's calls per example), without reading the outputs themselves.
    async fn llm_calls(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::timing::LlmCalls>, StoreError>;

    /// The generations cached for each model of a run, by the model's generator (a job's
    /// fingerprint is its generator's, `+`, its prompt's version): how many, and their
    /// answer tokens as the backends reported them. The cache is shared by every run of
    /// the store, so a model's generations of other runs with the same generator count
    /// too (`credence sweep plan --pilot` reads a pilot's answer lengths from it).
    async fn generation_usage(&self, run_id: &str) -> Result<Vec<GenerationUsage>, StoreError>;

    /// Every stored output of a run with its source and references, ordered by model,
    /// dataset, mode and dataset position (what `credence audit` reads).
    async fn run_outputs(&self, run_id: &str) -> Result<Vec<StoredOutput>, StoreError>;

    /// The job planned under `key`, as the planner recorded it; `None` when no job has
    /// that key. A worker checks each message against it before running anything: a
    /// queue message is input from the network, the plan is the truth.
    async fn planned_job(&self, key: &str) -> Result<Option<Job>, StoreError>;
}

/// The cached generations of one model of a run ([`Store::generation_usage`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationUsage {
    /// The model's name in the run.
    pub model: String,
    /// Cached generations.
    pub generations: u64,
    /// Those whose backend reported its answer tokens.
    pub with_tokens: u64,
    /// Their answer tokens in all.
    pub completion_tokens: u64,
}

/// A `stage_seconds` row read back from either engine.
pub(crate) fn stage_row(
    model: String,
    dataset: String,
    mode: &str,
    example_id: String,
    stage: &str,
    seconds: f64,
) -> Result<credence_core::timing::StageRow, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt {
        what: "stage_seconds",
        message,
    };
    Ok(credence_core::timing::StageRow {
        model,
        dataset,
        mode: mode
            .parse()
            .map_err(|e: credence_core::domain::UnknownMode| corrupt(e.to_string()))?,
        example_id,
        stage: credence_core::domain::Stage::from_name(stage)
            .ok_or_else(|| corrupt(format!("unknown stage {stage:?}")))?,
        seconds,
    })
}
