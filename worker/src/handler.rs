//! The job handler: what a worker does with one job, the same in both engines. It reads
//! the shard's examples from the store, decomposes each with the job's model, runs the
//! job's mode, and scores the claims.

use crate::decompose::{DecomposeError, Decomposer};
use credence_shared::domain::{ExampleMetrics, ExampleResult, Mode};
use credence_shared::job::Job;
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
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Runs jobs against loaded models.
pub struct JobHandler {
    decomposers: HashMap<String, Arc<dyn Decomposer>>,
}

impl JobHandler {
    /// A handler for the given models (by sweep name).
    pub fn new(decomposers: HashMap<String, Arc<dyn Decomposer>>) -> Self {
        JobHandler { decomposers }
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
        }
        Ok(results)
    }
}
