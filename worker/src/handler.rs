//! The job handler: what a worker does with one job, the same in both engines. It reads
//! the shard's examples from the store, decomposes each with the job's model, runs the
//! job's mode, and scores the claims. With an encoder (the sweep's `[encoder]`) it also
//! computes Semantic-F1 and RR, embedding every distinct claim and reference of the
//! shard once through the store's embedding cache.

use crate::decompose::{DecomposeError, Decomposer};
use crate::embed::{CachedEncoder, EmbedError};
use credence_shared::domain::{ExampleMetrics, ExampleResult, Mode};
use credence_shared::job::Job;
use credence_shared::metrics::semantic::{redundancy_rate, semantic_f1, CosineMatrix};
use credence_shared::metrics::soft_f1::jaccard_f1;
use credence_shared::store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::Arc;

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

/// What the handler needs for the embedding metrics.
pub struct SemanticScoring {
    /// The sweep's encoder behind the embedding cache.
    pub encoder: Arc<CachedEncoder>,
    /// Cosine at or above which two claims are duplicates (RR).
    pub tau_dup: f64,
}

/// Runs jobs against loaded models.
pub struct JobHandler {
    decomposers: HashMap<String, Arc<dyn Decomposer>>,
    semantic: Option<SemanticScoring>,
}

impl JobHandler {
    /// A handler for the given models (by sweep name).
    pub fn new(decomposers: HashMap<String, Arc<dyn Decomposer>>) -> Self {
        JobHandler {
            decomposers,
            semantic: None,
        }
    }

    /// Also computes Semantic-F1 and RR with this encoder.
    #[must_use]
    pub fn with_semantic_scoring(mut self, scoring: SemanticScoring) -> Self {
        self.semantic = Some(scoring);
        self
    }

    /// The encoder behind the embedding metrics, if any.
    pub fn semantic_scoring(&self) -> Option<&SemanticScoring> {
        self.semantic.as_ref()
    }

    /// The loaded decomposer of a model.
    pub fn decomposer(&self, model: &str) -> Option<&Arc<dyn Decomposer>> {
        self.decomposers.get(model)
    }

    /// Computes the results of a job (without writing them).
    pub async fn run(&self, job: &Job, store: &dyn Store) -> Result<Vec<ExampleResult>, JobError> {
        let decomposer =
            self.decomposers
                .get(&job.model)
                .ok_or_else(|| JobError::UnknownModel {
                    key: job.key.clone(),
                    model: job.model.clone(),
                })?;
        if decomposer.fingerprint() != job.model_fingerprint {
            return Err(JobError::FingerprintMismatch {
                key: job.key.clone(),
                model: job.model.clone(),
                loaded: decomposer.fingerprint().to_string(),
                planned: job.model_fingerprint.clone(),
            });
        }
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
        if let Some(scoring) = &self.semantic {
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
