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

/// An embedding cache that keeps in memory every vector it looked up or stored, in front
/// of another: for work that asks for the same texts again and again (the convergence
/// audit's passes over a run), each text costs one lookup of `inner` at most.
pub struct MemoEmbeddings<'a> {
    inner: &'a dyn EmbeddingCache,
    memo: std::sync::Mutex<std::collections::HashMap<(String, String), Vec<f32>>>,
}

impl<'a> MemoEmbeddings<'a> {
    /// An empty memo in front of `inner`.
    pub fn new(inner: &'a dyn EmbeddingCache) -> Self {
        MemoEmbeddings {
            inner,
            memo: Default::default(),
        }
    }

    fn memo(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String), Vec<f32>>> {
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl EmbeddingCache for MemoEmbeddings<'_> {
    async fn embeddings(
        &self,
        encoder_fingerprint: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let key = |t: &String| (encoder_fingerprint.to_string(), t.clone());
        let mut out: Vec<Option<Vec<f32>>> = {
            let memo = self.memo();
            texts.iter().map(|t| memo.get(&key(t)).cloned()).collect()
        };
        let missing: Vec<String> = texts
            .iter()
            .zip(&out)
            .filter(|(_, v)| v.is_none())
            .map(|(t, _)| t.clone())
            .collect();
        if missing.is_empty() {
            return Ok(out);
        }
        let found = self.inner.embeddings(encoder_fingerprint, &missing).await?;
        let found: std::collections::HashMap<&String, Vec<f32>> = missing
            .iter()
            .zip(found)
            .filter_map(|(t, v)| v.map(|v| (t, v)))
            .collect();
        let mut memo = self.memo();
        for (t, slot) in texts.iter().zip(out.iter_mut()) {
            if slot.is_none() {
                if let Some(v) = found.get(t) {
                    memo.insert(key(t), v.clone());
                    *slot = Some(v.clone());
                }
            }
        }
        Ok(out)
    }

    async fn put_embeddings(
        &self,
        encoder_fingerprint: &str,
        entries: &[(String, Vec<f32>)],
    ) -> Result<(), StoreError> {
        self.inner
            .put_embeddings(encoder_fingerprint, entries)
            .await?;
        let mut memo = self.memo();
        for (t, v) in entries {
            memo.insert((encoder_fingerprint.to_string(), t.clone()), v.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod memo_tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts the texts it is asked for; knows only "known".
    #[derive(Default)]
    struct Counting(AtomicUsize);

    #[async_trait]
    impl EmbeddingCache for Counting {
        async fn embeddings(
            &self,
            _: &str,
            texts: &[String],
        ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts
                .iter()
                .map(|t| (t == "known").then(|| vec![1.0]))
                .collect())
        }

        async fn put_embeddings(
            &self,
            _: &str,
            _: &[(String, Vec<f32>)],
        ) -> Result<(), StoreError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn each_text_is_looked_up_in_the_inner_cache_once_found_or_stored() {
        let inner = Counting::default();
        let memo = MemoEmbeddings::new(&inner);
        let texts = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let first = memo
            .embeddings("e", &texts(&["known", "new"]))
            .await
            .unwrap();
        assert_eq!(first, vec![Some(vec![1.0]), None]);
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        memo.put_embeddings("e", &[("new".into(), vec![2.0])])
            .await
            .unwrap();
        let again = memo
            .embeddings("e", &texts(&["new", "known"]))
            .await
            .unwrap();
        assert_eq!(again, vec![Some(vec![2.0]), Some(vec![1.0])]);
        assert_eq!(
            inner.0.load(Ordering::SeqCst),
            2,
            "both answered from memory"
        );
        let other = memo.embeddings("f", &texts(&["known"])).await.unwrap();
        assert_eq!(other, vec![Some(vec![1.0])]);
        assert_eq!(
            inner.0.load(Ordering::SeqCst),
            3,
            "another encoder is another key"
        );
    }
}
