//! Caches for the expensive things (DESIGN.md invariant 3): LLM generations keyed by
//! (model fingerprint, rendered prompt, decoding parameters) and sentence embeddings keyed
//! by (encoder fingerprint, text). Both store engines implement these traits.

use crate::store::StoreError;
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

/// Generations computed once per (model fingerprint, prompt, decoding parameters).
#[async_trait]
pub trait GenerationCache: Send + Sync {
    /// The cached completion, if any.
    async fn generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Stores a completion; an entry already present is left as it is.
    async fn put_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        completion: &str,
    ) -> Result<(), StoreError>;
}
