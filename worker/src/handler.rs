//! The job handler: what a worker does with one job, the same in both engines. The job
//! loop reads the job's inputs ([`JobInputs`]: the run's sweep as recorded in the store
//! and the shard's examples); the handler decomposes each example with the job's model,
//! runs the job's mode, and scores the claims ([`Scorer`]: parse, verify, every
//! per-example metric). It sees the store only as its caches ([`Caches`]).
//!
//! The handler is also the worker's model registry, with one way in for both engines:
//! a job's model and its run's scorer are looked up by name and by run, and built from
//! the recorded sweep on first use (once per process; a model again when its
//! fingerprint changes). The embedded engine, which loads everything while it
//! validates the sweep, hands those over up front ([`JobHandler::with_decomposer`],
//! [`JobHandler::with_scorer`]), which only fills the same registry.

use crate::decompose::{DecomposeContext, DecomposeError, Decomposer, Decomposition};
use crate::pipeline::modes::{ModeError, ModeRunner};
use crate::pipeline::scoring::{Scorer, ScorerLoadError, ScoringError, ScoringInput};
use credence_core::domain::{Example, ExampleResult};
use credence_core::domain::{Stage, StageTimes};
use credence_core::job::Job;
use credence_core::sweep::SweepSpec;
use credence_core::Claim;
use credence_infra::cache::Caches;
use credence_infra::observe::{JobObserver, ObservedEmbeddings};
use credence_infra::store::StoreError;
use futures::stream::{FuturesOrdered, StreamExt};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod afc;

/// Why a job failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The job names a model this worker has not loaded.
    #[error("job {key}: model {model:?} is not loaded by this worker")]
    UnknownModel {
        /// Job key.
        key: String,
        /// Model name.
        model: String,
    },
    /// The job's fingerprint does not match the loaded model (weights changed).
    #[error(
        "job {key}: model {model:?} has fingerprint {loaded}, the job was planned for {planned}"
    )]
    FingerprintMismatch {
        /// Job key.
        key: String,
        /// Model name.
        model: String,
        /// Fingerprint of the loaded model.
        loaded: String,
        /// Fingerprint in the job.
        planned: String,
    },
    /// Decomposition failed.
    #[error("example {example}: {source}")]
    Decompose {
        /// Example id.
        example: String,
        /// The decomposer's error.
        source: DecomposeError,
    },
    /// The model could not be built from the run's recorded sweep.
    #[error("job {key}: loading model {model:?}: {message}")]
    Load {
        /// Job key.
        key: String,
        /// Model name.
        model: String,
        /// What went wrong.
        message: String,
    },
    /// The run's sweep, as recorded in the store, cannot be read.
    #[error("job {key}: {message}")]
    RecordedSweep {
        /// Job key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The run's parser or encoder could not be loaded.
    #[error("job {key}: {source}")]
    LoadScorer {
        /// Job key.
        key: String,
        /// What failed to load.
        source: ScorerLoadError,
    },
    /// Scoring the claims failed.
    #[error("job {key}: {source}")]
    Score {
        /// Job key.
        key: String,
        /// The scorer's error.
        source: ScoringError,
    },
    /// The mode's tiers failed.
    #[error("job {key}: {source}")]
    Mode {
        /// Job key.
        key: String,
        /// What failed.
        source: ModeError,
    },
    /// The judge of an AFC job could not be asked (after the endpoint's retries).
    #[error("job {key}: the AFC judge: {source}")]
    Judge {
        /// Job key.
        key: String,
        /// What failed.
        source: crate::llm::once::OnceError,
    },
    /// An AFC job's inputs are not what it needs (an example without gold label and
    /// evidence, a run without `[afc]`).
    #[error("job {key}: {message}")]
    Afc {
        /// Job key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobError {
    /// Whether the job failed only because the store was unreachable (retry it in place,
    /// it is not the job's fault).
    pub fn is_transient(&self) -> bool {
        match self {
            JobError::Store(e) => e.is_transient(),
            JobError::Score { source, .. } => source.is_transient(),
            JobError::Decompose { source, .. } => source.is_transient(),
            JobError::Mode { source, .. } => source.is_transient(),
            JobError::Judge {
                source: crate::llm::once::OnceError::Cache(e),
                ..
            } => e.is_transient(),
            _ => false,
        }
    }
}

/// What a job works on, read by the job loop before the handler runs
/// ([`crate::job_loop`]): the run's sweep as recorded by the planner (its models, parser,
/// encoder and verifier) and the shard's examples, in dataset order.
#[derive(Debug, Clone)]
pub struct JobInputs {
    /// The run's sweep.
    pub sweep: SweepSpec,
    /// The examples of the job's shard.
    pub examples: Vec<Example>,
}

/// What a job computed, before it is written.
#[derive(Debug)]
pub enum JobOutput {
    /// A decomposition job's scored examples.
    Decomposition(Vec<ExampleResult>),
    /// An AFC job's judged claims.
    Afc(Vec<credence_core::afc::AfcResult>),
}

impl JobOutput {
    /// Examples (claims) computed.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            JobOutput::Decomposition(r) => r.len(),
            JobOutput::Afc(r) => r.len(),
        }
    }

    /// Whether nothing was computed (an empty shard).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A shard decomposed and run through a mode ([`JobHandler::claims_in_mode`]).
struct InMode {
    bases: Vec<Decomposition>,
    errors: Vec<Option<String>>,
    outcome: crate::pipeline::modes::ModeOutcome,
}

/// Runs jobs; holds the models and scorers they need, loaded once.
pub struct JobHandler {
    /// The models this handler runs (by sweep name); a job for another is refused.
    models: HashSet<String>,
    /// The decomposer of each model loaded so far.
    decomposers: Mutex<HashMap<String, Arc<dyn Decomposer>>>,
    /// The scorer of each run seen so far.
    scorers: Mutex<HashMap<String, Arc<Scorer>>>,
    /// AFC's helpers built on loaded models' generators: each judge (by model name) and
    /// each decomposer's FActScore-prompt twin.
    afc: afc::AfcModels,
    /// One lock per model or run being loaded: the jobs that start together (one per
    /// queue) wait for one load instead of each loading the same weights.
    loading: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl JobHandler {
    /// A handler for jobs of `models` (by sweep name), each loaded from its run's recorded
    /// sweep on first use.
    pub fn new(models: impl IntoIterator<Item = String>) -> Self {
        JobHandler {
            models: models.into_iter().collect(),
            decomposers: Mutex::new(HashMap::new()),
            scorers: Mutex::new(HashMap::new()),
            afc: afc::AfcModels::default(),
            loading: Mutex::new(HashMap::new()),
        }
    }

    /// Held while `what` is loaded (and checked for again).
    async fn load_guard(&self, what: String) -> tokio::sync::OwnedMutexGuard<()> {
        let gate = lock(&self.loading).entry(what).or_default().clone();
        gate.lock_owned().await
    }

    /// Registers an already loaded decomposer of `model` (which the handler then runs),
    /// used while its fingerprint matches the jobs'.
    #[must_use]
    pub fn with_decomposer(mut self, model: &str, decomposer: Arc<dyn Decomposer>) -> Self {
        self.models.insert(model.to_string());
        lock(&self.decomposers).insert(model.to_string(), decomposer);
        self
    }

    /// Scores the jobs of `run_id` with `scorer` instead of loading one from the run's
    /// recorded sweep.
    #[must_use]
    pub fn with_scorer(self, run_id: &str, scorer: Arc<Scorer>) -> Self {
        lock(&self.scorers).insert(run_id.to_string(), scorer);
        self
    }

    /// The decomposer for a job: the loaded one while its fingerprint is the job's, else
    /// one built from the run's sweep.
    async fn decomposer_for(
        &self,
        job: &Job,
        sweep: &SweepSpec,
    ) -> Result<Arc<dyn Decomposer>, JobError> {
        if !self.models.contains(&job.model) {
            return Err(JobError::UnknownModel {
                key: job.key.clone(),
                model: job.model.clone(),
            });
        }
        self.model_named(job, &job.model, Some(&job.model_fingerprint), sweep)
            .await
    }

    /// The decomposer of the sweep's model `name` for `job`: the loaded one (while its
    /// fingerprint is `fingerprint`, when one is asked for), else one built from the
    /// run's sweep.
    async fn model_named(
        &self,
        job: &Job,
        name: &str,
        fingerprint: Option<&str>,
        sweep: &SweepSpec,
    ) -> Result<Arc<dyn Decomposer>, JobError> {
        let loaded = || {
            lock(&self.decomposers)
                .get(name)
                .filter(|d| fingerprint.is_none_or(|f| d.fingerprint() == f))
                .cloned()
        };
        if let Some(d) = loaded() {
            return Ok(d);
        }
        let _loading = self.load_guard(format!("model {name}")).await;
        if let Some(d) = loaded() {
            return Ok(d);
        }
        let load_error = |message: String| JobError::Load {
            key: job.key.clone(),
            model: name.to_string(),
            message,
        };
        let spec = sweep
            .models
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| load_error(format!("run {:?} has no such model", job.run_id)))?;
        // A local model reads gigabytes of weights: off the runtime's threads.
        let spec = spec.clone();
        let loaded = tokio::task::spawn_blocking(move || crate::decompose::load(&spec))
            .await
            .map_err(|e| load_error(format!("loading the model: {e}")))?;
        let decomposer: Arc<dyn Decomposer> =
            Arc::from(loaded.map_err(|e| load_error(e.to_string()))?);
        tracing::info!(model = %name, fingerprint = %decomposer.fingerprint(), "model loaded");
        lock(&self.decomposers).insert(name.to_string(), decomposer.clone());
        Ok(decomposer)
    }

    /// The scorer of a job's run: the one given, or one loaded from the run's sweep (once
    /// per run and process).
    async fn scorer_for(&self, job: &Job, sweep: &SweepSpec) -> Result<Arc<Scorer>, JobError> {
        let loaded = || lock(&self.scorers).get(&job.run_id).cloned();
        if let Some(known) = loaded() {
            return Ok(known);
        }
        let _loading = self.load_guard(format!("run {}", job.run_id)).await;
        if let Some(known) = loaded() {
            return Ok(known);
        }
        let (nlp, encoder, verifier) = (
            sweep.nlp.clone(),
            sweep.encoder.clone(),
            sweep.verifier.clone(),
        );
        let scorer =
            tokio::task::spawn_blocking(move || Scorer::load(&nlp, encoder.as_ref(), &verifier))
                .await
                .map_err(|e| JobError::RecordedSweep {
                    key: job.key.clone(),
                    message: format!("loading the scorer: {e}"),
                })?
                .map_err(|source| JobError::LoadScorer {
                    key: job.key.clone(),
                    source,
                })?;
        let scorer = Arc::new(scorer);
        tracing::info!(run = %job.run_id, "parser and encoder loaded");
        Ok(lock(&self.scorers)
            .entry(job.run_id.clone())
            .or_insert(scorer)
            .clone())
    }

    /// Computes the results of a job (without writing them), reporting model calls and
    /// cache lookups to `observer`: a decomposition job's scored examples, or an AFC
    /// job's judged claims ([`Job::afc`]).
    pub async fn run(
        &self,
        job: &Job,
        inputs: &JobInputs,
        caches: &dyn Caches,
        observer: &dyn JobObserver,
    ) -> Result<JobOutput, JobError> {
        match &job.afc {
            None => self
                .run_decomposition(job, inputs, caches, observer)
                .await
                .map(JobOutput::Decomposition),
            Some(task) => self
                .run_afc(job, task, inputs, caches, observer)
                .await
                .map(JobOutput::Afc),
        }
    }

    /// The job's model, checked against the fingerprint the job was planned with.
    async fn checked_decomposer(
        &self,
        job: &Job,
        sweep: &SweepSpec,
    ) -> Result<Arc<dyn Decomposer>, JobError> {
        let decomposer = self.decomposer_for(job, sweep).await?;
        if decomposer.fingerprint() != job.model_fingerprint {
            return Err(JobError::FingerprintMismatch {
                key: job.key.clone(),
                model: job.model.clone(),
                loaded: decomposer.fingerprint().to_string(),
                planned: job.model_fingerprint.clone(),
            });
        }
        Ok(decomposer)
    }

    /// Decomposes a shard with `decomposer` and runs `mode`'s tiers on it: the base
    /// decompositions, each example's error, and the mode's claims and scores.
    async fn claims_in_mode(
        &self,
        job: &Job,
        mode: credence_core::domain::Mode,
        decomposer: &dyn Decomposer,
        inputs: &JobInputs,
        caches: &dyn Caches,
        observer: &dyn JobObserver,
    ) -> Result<InMode, JobError> {
        let scorer = self.scorer_for(job, &inputs.sweep).await?;
        let examples = &inputs.examples;
        let context = DecomposeContext {
            cache: caches,
            observer,
            model: &job.model,
        };
        let (bases, errors) = decompose_shard(decomposer, examples, &context).await?;
        let base_claims: Vec<Vec<Claim>> = bases.iter().map(|b| b.claims.clone()).collect();
        let embeddings = ObservedEmbeddings::new(caches, observer);
        let scored_base = scorer
            .score(
                &embeddings,
                &ScoringInput::of_examples(examples, &base_claims),
            )
            .await
            .map_err(|source| JobError::Score {
                key: job.key.clone(),
                source,
            })?;
        let runner = ModeRunner {
            scorer: &scorer,
            embeddings: &embeddings,
            generations: caches,
            llm: decomposer.llm(),
            observer,
            model: &job.model,
        };
        let outcome = runner
            .run(mode, examples, &base_claims, scored_base)
            .await
            .map_err(|source| JobError::Mode {
                key: job.key.clone(),
                source,
            })?;
        Ok(InMode {
            bases,
            errors,
            outcome,
        })
    }

    /// A decomposition job: decompose, run the mode, score every example.
    async fn run_decomposition(
        &self,
        job: &Job,
        inputs: &JobInputs,
        caches: &dyn Caches,
        observer: &dyn JobObserver,
    ) -> Result<Vec<ExampleResult>, JobError> {
        let decomposer = self.checked_decomposer(job, &inputs.sweep).await?;
        let InMode {
            bases,
            errors,
            outcome,
        } = self
            .claims_in_mode(job, job.mode, &*decomposer, inputs, caches, observer)
            .await?;
        let examples = &inputs.examples;
        let score_error = |source| JobError::Score {
            key: job.key.clone(),
            source,
        };
        let mut results = Vec::with_capacity(examples.len());
        let mut shard_times = StageTimes::default();
        for (i, ((ex, base), error)) in examples.iter().zip(bases).zip(errors).enumerate() {
            let scored = &outcome.scored.examples[i];
            let mut metrics = scored.metrics.clone();
            metrics.parse_failed = base.parse_failed;
            let repair_json = match &outcome.traces[i] {
                Some(trace) => Some(to_json(trace).map_err(score_error)?),
                None => None,
            };
            let mut stage_seconds = outcome.scored.times[i];
            stage_seconds.add(Stage::Decompose, base.model_seconds.unwrap_or(0.0));
            shard_times.add_all(&stage_seconds);
            results.push(ExampleResult {
                example_id: ex.id.clone(),
                base_claims: base.claims,
                claims: outcome.claims[i].clone(),
                pipeline_version: outcome.pipeline_version.clone(),
                llm_calls: base.llm_calls + outcome.tier_calls[i],
                verifier_json: Some(to_json(&scored.report).map_err(score_error)?),
                repair_json,
                error,
                metrics,
                stage_seconds,
            });
        }
        // The shard's seconds per stage, for the stage histograms (writing the results,
        // the last stage, is reported by the loop that writes them).
        for (stage, seconds) in shard_times.spent() {
            observer.stage(&job.model, stage, seconds);
        }
        Ok(results)
    }
}

/// Decomposes a shard's examples, as many at once as the decomposer keeps in flight, in
/// example order. An example whose decomposition fails for its own sake (an unusable
/// answer after every retry) gets an empty claim list and its error; any other failure
/// fails the job.
pub async fn decompose_shard(
    decomposer: &dyn Decomposer,
    examples: &[Example],
    context: &DecomposeContext<'_>,
) -> Result<(Vec<Decomposition>, Vec<Option<String>>), JobError> {
    // A window of calls in flight, answers taken in example order. (A plain loop rather
    // than stream combinators: their closures trip the compiler's Send inference.)
    let window = decomposer.max_in_flight().max(1);
    let mut queued = examples.iter();
    let mut in_flight = FuturesOrdered::new();
    let mut outcomes: Vec<Result<Decomposition, DecomposeError>> =
        Vec::with_capacity(examples.len());
    loop {
        while in_flight.len() < window {
            let Some(ex) = queued.next() else { break };
            in_flight.push_back(async move {
                let clock = Instant::now();
                let mut outcome = decomposer.decompose(&ex.text, context).await;
                if let Ok(d) = &mut outcome {
                    d.model_seconds.get_or_insert(clock.elapsed().as_secs_f64());
                }
                outcome
            });
        }
        match in_flight.next().await {
            Some(outcome) => outcomes.push(outcome),
            None => break,
        }
    }
    let mut bases = Vec::with_capacity(examples.len());
    let mut errors = Vec::with_capacity(examples.len());
    for (ex, outcome) in examples.iter().zip(outcomes) {
        match outcome {
            Ok(d) => {
                bases.push(d);
                errors.push(None);
            }
            Err(e) if e.is_example_error() => {
                tracing::warn!(example = %ex.id, error = %e, "example not decomposed; recorded as its error");
                bases.push(Decomposition {
                    llm_calls: 1,
                    ..Decomposition::default()
                });
                errors.push(Some(e.to_string()));
            }
            Err(source) => {
                return Err(JobError::Decompose {
                    example: ex.id.clone(),
                    source,
                })
            }
        }
    }
    Ok((bases, errors))
}

/// The scoring inputs of a shard's examples with one claim list each.
fn to_json<T: serde::Serialize>(value: &T) -> Result<String, ScoringError> {
    serde_json::to_string(value).map_err(|e| ScoringError::Report(e.to_string()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every mutation is one insert, so a poisoned map is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}
