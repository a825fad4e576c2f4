//! Decomposers: turn a sentence into a list of atomic claims. [`Decomposer`] is the one
//! interface; the baselines that need no model live here ([`sentence_split`],
//! [`conjunction_oracle`]), and [`LlmDecomposer`] puts a prompt and its parser on any
//! backend of the generation seam ([`crate::llm`]).

pub mod conjunction_oracle;
mod llm;
pub mod sentence_split;

use crate::llm::local::{self, LocalBackend, LocalSettings};
use crate::llm::openai::{self, OpenAiBackend, OpenAiSettings};
use crate::llm::retry::RetryPolicy;
use crate::llm::{GenerateError, GenerateOnce};
use async_trait::async_trait;
use credence_core::sweep::{ModelBackend, ModelSpec};
use credence_core::Claim;
use credence_infra::cache::{GenerationCache, NoCache};
use credence_infra::observe::{JobObserver, NoObserver};
use credence_infra::store::StoreError;
use std::sync::Arc;
use std::time::Duration;

pub use conjunction_oracle::ConjunctionOracle;
pub use llm::LlmDecomposer;
pub use sentence_split::SentenceSplit;

/// A decomposition that could not be produced.
#[derive(Debug, thiserror::Error)]
pub enum DecomposeError {
    /// The model could not be loaded.
    #[error("loading model {model}: {message}")]
    Load {
        /// Model name.
        model: String,
        /// What went wrong.
        message: String,
    },
    /// Generation failed.
    #[error("model {model}: {source}")]
    Generate {
        /// Model name.
        model: String,
        /// The backend's error.
        source: GenerateError,
    },
    /// The generation cache failed.
    #[error("generation cache: {0}")]
    Cache(#[from] StoreError),
}

impl DecomposeError {
    /// Whether the failure belongs to the example and is recorded as its error (see
    /// [`GenerateError::is_example_error`]) rather than failing the job.
    pub fn is_example_error(&self) -> bool {
        matches!(self, DecomposeError::Generate { source, .. } if source.is_example_error())
    }

    /// Whether the job should be retried in place because the store is unreachable. An
    /// endpoint that stays down is not: the backend waits for one that answered before
    /// (its retry policy's `outage_patience`), and past that, or for one that never
    /// answered, its job fails, is delivered again later, and is dead-lettered with the
    /// reason if it keeps failing.
    pub fn is_transient(&self) -> bool {
        matches!(self, DecomposeError::Cache(e) if e.is_transient())
    }
}

/// The claims of one sentence and what they cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decomposition {
    /// The claims, in order.
    pub claims: Vec<Claim>,
    /// LLM calls spent (0 for the baselines; 1 for an LLM, whether or not the answer
    /// came from the generation cache: the call belongs to the example, not the process).
    pub llm_calls: u32,
    /// The LLM's raw answer (none for the baselines).
    pub completion: Option<String>,
    /// Whether the answer held no claim the prompt's parser could read (none for the
    /// baselines).
    pub parse_failed: Option<bool>,
    /// Seconds the decomposition took: the model's generation time, also when the
    /// answer came from the cache (what it cost then). A baseline leaves it `None`, and
    /// [`crate::handler::decompose_shard`] fills in the call's own time.
    pub model_seconds: Option<f64>,
    /// Whether a fresh generation stopped at `max_new_tokens` (the answer may be cut
    /// off); false for the baselines and for an answer from the cache.
    pub hit_limit: bool,
}

/// What a decomposition may use besides the sentence: the generation cache (the
/// store's, in a sweep) and where to report model calls.
#[derive(Clone, Copy)]
pub struct DecomposeContext<'a> {
    /// Where generations are cached and leased.
    pub cache: &'a dyn GenerationCache,
    /// Where model calls and cache lookups are reported.
    pub observer: &'a dyn JobObserver,
    /// The model's name in the sweep (the observer's label).
    pub model: &'a str,
}

impl DecomposeContext<'static> {
    /// No cache and no observer: every call generates (`credence decompose`, benches).
    pub fn standalone() -> Self {
        DecomposeContext {
            cache: &NoCache,
            observer: &NoObserver,
            model: "",
        }
    }
}

/// A decomposer's model, as the self-repair tier calls it: through the same generation
/// cache and lease, with the same generation limit.
#[derive(Clone, Copy)]
pub struct LlmHandle<'a> {
    /// The generator behind the cache.
    pub once: &'a GenerateOnce,
    /// Generation limit.
    pub max_new_tokens: u32,
}

/// Something that decomposes a sentence into atomic claims.
#[async_trait]
pub trait Decomposer: Send + Sync {
    /// Fingerprint of the weights, prompt and settings: part of every job key.
    fn fingerprint(&self) -> &str;

    /// How many sentences a caller should decompose at once (an endpoint keeps many
    /// requests in flight; a baseline gains nothing from more than one).
    fn max_in_flight(&self) -> usize {
        1
    }

    /// The generator behind this decomposer whatever its prompt (`None` for the
    /// baselines): what downstream fact-checking asks with another prompt (the FActScore
    /// prompt, or the judge's), so that one model's weights are loaded once.
    fn generator(&self) -> Option<Arc<dyn crate::llm::Generator>> {
        None
    }

    /// The LLM behind this decomposer, for the self-repair tier; `None` for the
    /// baselines: the rule baselines have no model to ask, and the FActScore-prompt model
    /// runs base mode only (its other modes get the rule tier and no LLM tier).
    fn llm(&self) -> Option<LlmHandle<'_>> {
        None
    }

    /// Decomposes one sentence.
    async fn decompose(
        &self,
        sentence: &str,
        context: &DecomposeContext<'_>,
    ) -> Result<Decomposition, DecomposeError>;
}

/// Request timeout of an endpoint when the sweep gives none.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// The fingerprint of the decomposer a sweep's model names, without loading it or
/// contacting its endpoint (and without its API key): what planning and `sweep launch`
/// put into job keys. Equal to [`Decomposer::fingerprint`] of the loaded decomposer.
pub fn fingerprint(spec: &ModelSpec) -> Result<String, DecomposeError> {
    match &spec.backend {
        ModelBackend::SentenceSplit => Ok(SentenceSplit::FINGERPRINT.to_string()),
        ModelBackend::ConjunctionOracle => Ok(ConjunctionOracle::FINGERPRINT.to_string()),
        ModelBackend::Openai { .. }
        | ModelBackend::Gguf { .. }
        | ModelBackend::Safetensors { .. } => {
            let generator = generator_fingerprint(spec)?.unwrap_or_default();
            Ok(LlmDecomposer::fingerprint_of(&generator, spec.prompt))
        }
    }
}

/// The fingerprint of the generator behind a sweep's LLM model (`None` for the
/// baselines), without loading it: what the AFC judge's and the FActScore twin's
/// fingerprints start from.
pub fn generator_fingerprint(spec: &ModelSpec) -> Result<Option<String>, DecomposeError> {
    match &spec.backend {
        ModelBackend::SentenceSplit | ModelBackend::ConjunctionOracle => Ok(None),
        ModelBackend::Openai {
            base_url,
            api_model,
            ..
        } => Ok(Some(crate::llm::openai::fingerprint(
            base_url,
            api_model,
            spec.max_new_tokens,
        ))),
        ModelBackend::Gguf { .. } | ModelBackend::Safetensors { .. } => {
            let settings = local_settings(spec)?;
            local::fingerprint(&settings)
                .map(Some)
                .map_err(|e| DecomposeError::Load {
                    model: spec.name.clone(),
                    message: e.to_string(),
                })
        }
    }
}

/// How a sweep's GGUF or safetensors model is loaded (with the worker's
/// [`local::KV_MEMORY_VAR`], if set).
pub fn local_settings(spec: &ModelSpec) -> Result<LocalSettings, DecomposeError> {
    let (path, format) = match &spec.backend {
        ModelBackend::Gguf { path } => (path.clone(), local::Format::Gguf),
        ModelBackend::Safetensors { path } => (path.clone(), local::Format::Safetensors),
        _ => unreachable!("local_settings of a model that is not local"),
    };
    let kv_memory = local::kv_memory_from_env().map_err(|message| DecomposeError::Load {
        model: spec.name.clone(),
        message,
    })?;
    Ok(LocalSettings {
        path,
        format,
        dtype: spec.dtype,
        device: spec.device,
        max_new_tokens: spec.max_new_tokens,
        max_batch: local::default_max_batch(spec.device),
        generation_timeout: spec.generation_timeout(),
        kv_memory,
    })
}

/// Builds the decomposer a sweep's model names. Nothing is sent to an endpoint and no
/// weights are read beyond what the fingerprint needs.
pub fn load(spec: &ModelSpec) -> Result<Box<dyn Decomposer>, DecomposeError> {
    match &spec.backend {
        ModelBackend::SentenceSplit => {
            // The pipeline folder the verifier finds by default ($CREDENCE_MODELS_DIR or
            // the checkout's models/).
            let dir = crate::embed::locate(credence_nlp::PIPELINE_NAME, None);
            let splitter = SentenceSplit::load(&dir).map_err(|e| DecomposeError::Load {
                model: spec.name.clone(),
                message: e.to_string(),
            })?;
            Ok(Box::new(splitter))
        }
        ModelBackend::ConjunctionOracle => Ok(Box::new(ConjunctionOracle::new())),
        ModelBackend::Openai {
            base_url,
            api_model,
            api_key_env,
            request_timeout_s,
            max_concurrency,
        } => {
            let settings = OpenAiSettings {
                base_url: base_url.clone(),
                api_model: api_model.clone(),
                api_key_env: api_key_env.clone(),
                max_new_tokens: spec.max_new_tokens,
                request_timeout: request_timeout_s.map_or(DEFAULT_REQUEST_TIMEOUT, |s| {
                    Duration::from_secs(u64::from(s))
                }),
                max_concurrency: max_concurrency.map_or(256, |n| n as usize),
                retry: RetryPolicy::default(),
                max_response_bytes: openai::DEFAULT_MAX_RESPONSE_BYTES,
            };
            let backend = OpenAiBackend::new(&settings).map_err(|e| DecomposeError::Load {
                model: spec.name.clone(),
                message: e.to_string(),
            })?;
            Ok(Box::new(LlmDecomposer::new(
                Arc::new(backend),
                spec.prompt,
                spec.max_new_tokens,
            )))
        }
        ModelBackend::Gguf { .. } | ModelBackend::Safetensors { .. } => {
            let backend =
                LocalBackend::load(&local_settings(spec)?).map_err(|e| DecomposeError::Load {
                    model: spec.name.clone(),
                    message: e.to_string(),
                })?;
            Ok(Box::new(LlmDecomposer::new(
                Arc::new(backend),
                spec.prompt,
                spec.max_new_tokens,
            )))
        }
    }
}

/// Tidies a clause into a claim: trims, drops trailing commas or semicolons, capitalises
/// the first letter and ends it with a full stop when it has no final punctuation.
pub fn as_claim(clause: &str) -> Option<Claim> {
    let t = clause.trim().trim_end_matches([',', ';', ':', ' ']).trim();
    if t.chars().all(|c| !c.is_alphanumeric()) {
        return None;
    }
    let mut out = String::with_capacity(t.len() + 1);
    let mut chars = t.chars();
    if let Some(first) = chars.next() {
        out.extend(first.to_uppercase());
    }
    out.push_str(chars.as_str());
    let ends = out.trim_end_matches(['"', '\'', ')', '\u{201d}', '\u{2019}']);
    if !ends.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_claim_tidies_clauses() {
        assert_eq!(
            as_claim(" the road was closed, ").as_deref(),
            Some("The road was closed.")
        );
        assert_eq!(as_claim("Is it?").as_deref(), Some("Is it?"));
        assert_eq!(as_claim("\"He left.\"").as_deref(), Some("\"He left.\""));
        assert_eq!(as_claim(" ; , "), None);
    }
}
