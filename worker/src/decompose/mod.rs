//! Decomposers: turn a sentence into a list of atomic claims. [`Decomposer`] is the one
//! interface; the baselines that need no model live here ([`sentence_split`],
//! [`conjunction_oracle`]); LLM backends implement the same trait.

pub mod conjunction_oracle;
pub mod sentence_split;

use async_trait::async_trait;
use credence_shared::sweep::{ModelBackend, ModelSpec};
use credence_shared::Claim;

pub use conjunction_oracle::ConjunctionOracle;
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
    /// The backend is named in the sweep but this build cannot run it.
    #[error("model {model}: backend {backend:?} cannot run in this build: {reason}")]
    Unsupported {
        /// Model name.
        model: String,
        /// Backend name.
        backend: &'static str,
        /// Why.
        reason: String,
    },
    /// Generation failed.
    #[error("model {model}: {message}")]
    Generate {
        /// Model name.
        model: String,
        /// What went wrong.
        message: String,
    },
}

/// The claims of one sentence and what they cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Decomposition {
    /// The claims, in order.
    pub claims: Vec<Claim>,
    /// LLM calls spent (0 for the baselines).
    pub llm_calls: u32,
}

/// Something that decomposes a sentence into atomic claims.
#[async_trait]
pub trait Decomposer: Send + Sync {
    /// Fingerprint of the weights and settings: part of every job key and cache key.
    fn fingerprint(&self) -> &str;

    /// Decomposes one sentence.
    async fn decompose(&self, sentence: &str) -> Result<Decomposition, DecomposeError>;
}

/// Builds the decomposer a sweep's model names.
pub fn load(spec: &ModelSpec) -> Result<Box<dyn Decomposer>, DecomposeError> {
    match &spec.backend {
        ModelBackend::SentenceSplit => Ok(Box::new(SentenceSplit::new())),
        ModelBackend::ConjunctionOracle => Ok(Box::new(ConjunctionOracle::new())),
        other @ (ModelBackend::Gguf { .. }
        | ModelBackend::Safetensors { .. }
        | ModelBackend::Openai { .. }) => Err(DecomposeError::Unsupported {
            model: spec.name.clone(),
            backend: other.name(),
            reason: "LLM decomposers are not built yet; use sentence-split or conjunction-oracle"
                .into(),
        }),
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
