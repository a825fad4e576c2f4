//! Caches for the expensive things (DESIGN.md invariant 3): LLM generations keyed by
//! (model fingerprint, rendered prompt, decoding parameters) and sentence embeddings keyed
//! by (encoder fingerprint, text). Both store engines implement these traits.

use crate::error::StoreError;
use async_trait::async_trait;

/// Embeddings computed once per (encoder fingerprint, text).
#[async_trait]
pub trait EmbeddingCache: Send + Sync {
    /// Looks up `texts`; the result has one entry per text, `None` for a miss.
    async fn embeddings(
        &self,
        encoder_fingerprint: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError>;

    /// Stores embeddings; an entry already present is left as it is.
    async fn put_embeddings(
        &self,
        encoder_fingerprint: &str,
        entries: &[(String, Vec<f32>)],
    ) -> Result<(), StoreError>;
}

/// What a generation cost: token counts when the backend reports them, and the seconds
/// the model took.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenUsage {
    /// Tokens in the prompt.
    pub prompt_tokens: Option<u32>,
    /// Tokens generated.
    pub completion_tokens: Option<u32>,
    /// Seconds the model call took (all its retries included).
    pub seconds: Option<f64>,
}

/// A completion found in the generation cache.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedGeneration {
    /// The completion.
    pub completion: String,
    /// Seconds the model took to generate it, when recorded.
    pub seconds: Option<f64>,
}

/// Generations computed once per (model fingerprint, prompt, decoding parameters), with a
/// lease per key so that two workers never generate the same completion at once
/// (ARCHITECTURE.md, "every generation exactly once").
#[async_trait]
pub trait GenerationCache: Send + Sync {
    /// The cached completion, if any.
    async fn generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
    ) -> Result<Option<CachedGeneration>, StoreError>;

    /// Stores a completion and its token counts; an entry already present is left as it
    /// is.
    async fn put_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        completion: &str,
        usage: TokenUsage,
    ) -> Result<(), StoreError>;

    /// Takes the lease on generating this key for `ttl`: true when `holder` now holds
    /// it (nobody did, the last holder's lease ran out, or `holder` held it already, whose
    /// lease now runs `ttl` from now: a renewal), false while another holder's lease
    /// runs. A holder that crashes loses its lease when it runs out.
    async fn lease_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError>;

    /// Gives a lease back (after storing the completion, or after failing to make one).
    async fn release_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
    ) -> Result<(), StoreError>;
}

/// Both caches: what a job's work reads and writes besides its results (a store is one;
/// the job handler is given this, never the store).
pub trait Caches: EmbeddingCache + GenerationCache {}

impl<T: EmbeddingCache + GenerationCache + ?Sized> Caches for T {}

/// A cache that holds nothing: every lookup misses, every store is dropped and every
/// lease is granted. For one-off work outside a sweep (`credence decompose`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCache;

#[async_trait]
impl GenerationCache for NoCache {
    async fn generation(
        &self,
        _: &str,
        _: &str,
        _: &str,
    ) -> Result<Option<CachedGeneration>, StoreError> {
        Ok(None)
    }

    async fn put_generation(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &str,
        _: TokenUsage,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    async fn lease_generation(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &str,
        _: std::time::Duration,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn release_generation(
        &self,
        _: &str,
        _: &str,
        _: &str,
        _: &str,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}

#[async_trait]
impl EmbeddingCache for NoCache {
    async fn embeddings(
        &self,
        _: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        Ok(vec![None; texts.len()])
    }

    async fn put_embeddings(&self, _: &str, _: &[(String, Vec<f32>)]) -> Result<(), StoreError> {
        Ok(())
    }
}
