//! The job handler: what a worker does with one job, the same in both engines. It reads
//! the shard's examples from the store, decomposes each with the job's model, runs the
//! job's mode, and scores the claims. A handler built with [`JobHandler::from_store`]
//! (a distributed worker, which is not given the sweep) loads a model the first time a
//! job needs it, from the model's spec in the run's recorded sweep, and keeps it for
//! every later job with the same fingerprint. With an encoder (the sweep's `[encoder]`)
//! it also computes Semantic-F1 and RR, embedding every distinct claim and reference of
//! the shard once through the store's embedding cache.

use crate::decompose::{DecomposeError, Decomposer};
use crate::embed::{self, CachedEncoder, EmbedError, EncoderOptions};
use credence_shared::domain::{ExampleMetrics, ExampleResult, Mode};
use credence_shared::job::Job;
use credence_shared::metrics::semantic::{redundancy_rate, semantic_f1, CosineMatrix};
use credence_shared::metrics::soft_f1::jaccard_f1;
use credence_shared::store::{Store, StoreError};
use credence_shared::sweep::{EncoderSpec, SweepSpec};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// `pipeline_version` of the base mode: the claims are the decomposer's output.
pub const PIPELINE_BASE: &str = "base";

/// `pipeline_version` of a mode with no pipeline behind it yet: the claims are the base
/// claims, unchanged, so nobody mistakes them for the paper's repair modes.
pub const PIPELINE_NONE: &str = "none";

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
    /// Embedding the claims or references failed.
    #[error("job {key}: embeddings: {source}")]
    Embed {
        /// Job key.
        key: String,
        /// The encoder's or cache's error.
        source: EmbedError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl JobError {
    /// Whether the job failed only because the store was unreachable (retry it in place,
    /// it is not the job's fault).
    pub fn is_transient(&self) -> bool {
        matches!(self, JobError::Store(e) if e.is_transient())
    }
}

/// What the handler needs for the embedding metrics.
pub struct SemanticScoring {
    /// The sweep's encoder behind the embedding cache.
    pub encoder: Arc<CachedEncoder>,
    /// Cosine at or above which two claims are duplicates (RR).
    pub tau_dup: f64,
}

impl SemanticScoring {
    /// Loads the encoder a sweep's `[encoder]` names, with the verifier's `tau_dup`.
    pub fn load(spec: &EncoderSpec, tau_dup: f64) -> Result<Self, EmbedError> {
        let options = EncoderOptions {
            batch_size: spec.batch_size as usize,
            ..EncoderOptions::default()
        };
        let encoder = embed::load_encoder(&spec.preset, spec.path.as_deref(), options)?;
        Ok(SemanticScoring {
            encoder: Arc::new(CachedEncoder::new(Arc::new(encoder))),
            tau_dup,
        })
    }
}

/// Runs jobs against loaded models.
pub struct JobHandler {
    decomposers: Mutex<HashMap<String, Arc<dyn Decomposer>>>,
    /// Models this handler may load from the store on first use (`None`: only the
    /// decomposers it was built with).
    loadable: Option<HashSet<String>>,
    /// The embedding metrics of every job (embedded engine: the sweep is known).
    semantic: Option<Arc<SemanticScoring>>,
    /// The embedding metrics per run, loaded from the run's recorded sweep (distributed
    /// workers); `None` for a run without an encoder.
    semantic_by_run: Mutex<HashMap<String, Option<Arc<SemanticScoring>>>>,
}

impl JobHandler {
    /// A handler for the given models (by sweep name).
    pub fn new(decomposers: HashMap<String, Arc<dyn Decomposer>>) -> Self {
        JobHandler {
            decomposers: Mutex::new(decomposers),
            loadable: None,
            semantic: None,
            semantic_by_run: Mutex::new(HashMap::new()),
        }
    }

    /// Also computes Semantic-F1 and RR with this encoder.
    #[must_use]
    pub fn with_semantic_scoring(mut self, scoring: Arc<SemanticScoring>) -> Self {
        self.semantic = Some(scoring);
        self
    }

    /// The encoder behind the embedding metrics given at construction, if any.
    pub fn semantic_scoring(&self) -> Option<&Arc<SemanticScoring>> {
        self.semantic.as_ref()
    }

    /// A handler that loads each of `models` on first use from the run's sweep as
    /// recorded in the store, once per process (again only if its fingerprint changes).
    pub fn from_store(models: impl IntoIterator<Item = String>) -> Self {
        JobHandler {
            decomposers: Mutex::new(HashMap::new()),
            loadable: Some(models.into_iter().collect()),
            semantic: None,
            semantic_by_run: Mutex::new(HashMap::new()),
        }
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn Decomposer>>> {
        // Every mutation is one insert, so a poisoned map is still consistent.
        self.decomposers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The loaded decomposer of a model.
    pub fn decomposer(&self, model: &str) -> Option<Arc<dyn Decomposer>> {
        self.loaded().get(model).cloned()
    }

    /// The decomposer for a job: the loaded one, or (for a handler built with
    /// [`JobHandler::from_store`]) one built from the run's recorded sweep.
    async fn decomposer_for(
        &self,
        job: &Job,
        store: &dyn Store,
    ) -> Result<Arc<dyn Decomposer>, JobError> {
        if let Some(d) = self.decomposer(&job.model) {
            if self.loadable.is_none() || d.fingerprint() == job.model_fingerprint {
                return Ok(d);
            }
        }
        let unknown = || JobError::UnknownModel {
            key: job.key.clone(),
            model: job.model.clone(),
        };
        let Some(loadable) = &self.loadable else {
            return Err(unknown());
        };
        if !loadable.contains(&job.model) {
            return Err(unknown());
        }
        let load_error = |message: String| JobError::Load {
            key: job.key.clone(),
            model: job.model.clone(),
            message,
        };
        let sweep = recorded_sweep(job, store).await?.map_err(load_error)?;
        let spec = sweep
            .models
            .iter()
            .find(|m| m.name == job.model)
            .ok_or_else(|| load_error(format!("run {:?} has no such model", job.run_id)))?;
        let decomposer: Arc<dyn Decomposer> =
            Arc::from(crate::decompose::load(spec).map_err(|e| load_error(e.to_string()))?);
        tracing::info!(model = %job.model, fingerprint = %decomposer.fingerprint(), "model loaded");
        self.loaded().insert(job.model.clone(), decomposer.clone());
        Ok(decomposer)
    }

    /// The embedding metrics of a job's run: the ones given at construction, or (for a
    /// handler built with [`JobHandler::from_store`]) the encoder of the run's recorded
    /// sweep, loaded once per run.
    async fn semantic_for(
        &self,
        job: &Job,
        store: &dyn Store,
    ) -> Result<Option<Arc<SemanticScoring>>, JobError> {
        if self.loadable.is_none() {
            return Ok(self.semantic.clone());
        }
        if let Some(known) = self.semantic_runs().get(&job.run_id) {
            return Ok(known.clone());
        }
        let embed_error = |source| JobError::Embed {
            key: job.key.clone(),
            source,
        };
        let sweep =
            recorded_sweep(job, store)
                .await?
                .map_err(|message| JobError::RecordedSweep {
                    key: job.key.clone(),
                    message,
                })?;
        let scoring = match &sweep.encoder {
            None => None,
            Some(spec) => Some(Arc::new(
                SemanticScoring::load(spec, sweep.verifier.tau_dup).map_err(embed_error)?,
            )),
        };
        self.semantic_runs()
            .insert(job.run_id.clone(), scoring.clone());
        Ok(scoring)
    }

    fn semantic_runs(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Option<Arc<SemanticScoring>>>> {
        // Every mutation is one insert, so a poisoned map is still consistent.
        self.semantic_by_run
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Computes the results of a job (without writing them).
    pub async fn run(&self, job: &Job, store: &dyn Store) -> Result<Vec<ExampleResult>, JobError> {
        let decomposer = self.decomposer_for(job, store).await?;
        if decomposer.fingerprint() != job.model_fingerprint {
            return Err(JobError::FingerprintMismatch {
                key: job.key.clone(),
                model: job.model.clone(),
                loaded: decomposer.fingerprint().to_string(),
                planned: job.model_fingerprint.clone(),
            });
        }
        let semantic = self.semantic_for(job, store).await?;
        let examples = store.shard_examples(job).await?;
        let mut results = Vec::with_capacity(examples.len());
        let mut references = Vec::with_capacity(examples.len());
        for ex in examples {
            let base =
                decomposer
                    .decompose(&ex.text)
                    .await
                    .map_err(|source| JobError::Decompose {
                        example: ex.id.clone(),
                        source,
                    })?;
            let (claims, pipeline_version) = match job.mode {
                Mode::Base => (base.claims.clone(), PIPELINE_BASE),
                Mode::Repair | Mode::SelfRepair | Mode::All => (base.claims.clone(), PIPELINE_NONE),
            };
            let metrics = ExampleMetrics {
                n_claims: claims.len() as u32,
                jaccard_f1: jaccard_f1(&claims, &ex.references).f1,
                ..ExampleMetrics::default()
            };
            results.push(ExampleResult {
                example_id: ex.id,
                base_claims: base.claims,
                claims,
                pipeline_version: pipeline_version.to_string(),
                llm_calls: base.llm_calls,
                metrics,
            });
            references.push(ex.references);
        }
        if let Some(scoring) = &semantic {
            score_semantic(scoring, store, &mut results, &references)
                .await
                .map_err(|source| JobError::Embed {
                    key: job.key.clone(),
                    source,
                })?;
        }
        Ok(results)
    }
}

/// The sweep of a job's run as recorded in the store; the inner error says what is wrong
/// with it.
async fn recorded_sweep(
    job: &Job,
    store: &dyn Store,
) -> Result<Result<SweepSpec, String>, StoreError> {
    let Some(spec_json) = store.run_spec(&job.run_id).await? else {
        return Ok(Err(format!("run {:?} is not in the store", job.run_id)));
    };
    Ok(serde_json::from_str(&spec_json).map_err(|e| format!("the run's recorded sweep: {e}")))
}

/// Fills in Semantic-F1 (average-max, claims vs references) and RR (claims vs claims)
/// of each result; all texts of the shard are embedded in one cached call.
async fn score_semantic(
    scoring: &SemanticScoring,
    store: &dyn Store,
    results: &mut [ExampleResult],
    references: &[Vec<String>],
) -> Result<(), EmbedError> {
    let texts: Vec<String> = results
        .iter()
        .zip(references)
        .flat_map(|(r, refs)| r.claims.iter().chain(refs).cloned())
        .collect();
    let vectors = scoring.encoder.embed(store, &texts).await?;
    let mut rest = vectors.as_slice();
    for (r, refs) in results.iter_mut().zip(references) {
        let (claims, after) = rest.split_at(r.claims.len());
        let (refs_v, after) = after.split_at(refs.len());
        rest = after;
        r.metrics.semantic_f1 = Some(semantic_f1(&CosineMatrix::new(claims, refs_v)).f1);
        r.metrics.rr = Some(redundancy_rate(
            &CosineMatrix::new(claims, claims),
            scoring.tau_dup,
        ));
    }
    Ok(())
}
