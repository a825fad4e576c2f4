//! The embedding cache in front of an encoder (DESIGN.md invariant 3): vectors are kept
//! in the store keyed by (encoder fingerprint, text), so each distinct sentence of a
//! sweep is encoded once, across jobs, modes, workers and reruns.

use super::{EmbedError, Encoder};
use credence_infra::cache::EmbeddingCache;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Distinct texts found in the cache (hits) and encoded (misses).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheCounts {
    /// Texts whose vector came from the cache.
    pub hits: u64,
    /// Texts the encoder had to encode.
    pub misses: u64,
}

/// An encoder behind the store's embedding cache, counting hits and misses. Calls are
/// serialised (the encoder already uses every core), so two jobs that need the same new
/// sentence at once do not both encode it: the second finds it in the cache.
pub struct CachedEncoder {
    encoder: Arc<dyn Encoder>,
    one_at_a_time: tokio::sync::Mutex<()>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl CachedEncoder {
    /// Puts `encoder` behind a cache.
    pub fn new(encoder: Arc<dyn Encoder>) -> Self {
        CachedEncoder {
            encoder,
            one_at_a_time: tokio::sync::Mutex::new(()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The encoder.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        &self.encoder
    }

    /// Hits and misses so far.
    pub fn counts(&self) -> CacheCounts {
        CacheCounts {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// One vector per text, in order: cached vectors where the cache has them, the rest
    /// encoded (on a blocking thread, each distinct text once) and stored.
    pub async fn embed<C: EmbeddingCache + ?Sized>(
        &self,
        cache: &C,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let _turn = self.one_at_a_time.lock().await;
        let fingerprint = self.encoder.fingerprint().to_string();
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(texts.len());
        let mut distinct: Vec<String> = Vec::new();
        let slot: Vec<usize> = texts
            .iter()
            .map(|t| {
                *index.entry(t.as_str()).or_insert_with(|| {
                    distinct.push(t.clone());
                    distinct.len() - 1
                })
            })
            .collect();
        let cached = cache.embeddings(&fingerprint, &distinct).await?;
        let dim = self.encoder.dim();
        let mut vectors: Vec<Option<Vec<f32>>> = Vec::with_capacity(distinct.len());
        let mut missing: Vec<usize> = Vec::new();
        for (i, v) in cached.into_iter().enumerate() {
            match v {
                Some(v) if v.len() == dim => vectors.push(Some(v)),
                Some(v) => {
                    return Err(EmbedError::Cache(
                        credence_infra::store::StoreError::Corrupt {
                            what: "embedding_cache.vector",
                            message: format!(
                                "encoder {} has dimension {dim}, the cached vector of {:?} has {}",
                                &fingerprint[..12.min(fingerprint.len())],
                                distinct[i],
                                v.len()
                            ),
                        },
                    ))
                }
                None => {
                    vectors.push(None);
                    missing.push(i);
                }
            }
        }
        self.hits
            .fetch_add((distinct.len() - missing.len()) as u64, Ordering::Relaxed);
        self.misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        if !missing.is_empty() {
            let to_encode: Vec<String> = missing.iter().map(|&i| distinct[i].clone()).collect();
            let encoder = self.encoder.clone();
            let encoded = tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = to_encode.iter().map(String::as_str).collect();
                encoder.encode(&refs).map(|v| (to_encode, v))
            })
            .await
            .map_err(|e| EmbedError::Task(e.to_string()))??;
            let (to_encode, new_vectors) = encoded;
            let entries: Vec<(String, Vec<f32>)> = to_encode.into_iter().zip(new_vectors).collect();
            cache.put_embeddings(&fingerprint, &entries).await?;
            for (&i, (_, v)) in missing.iter().zip(entries) {
                vectors[i] = Some(v);
            }
        }
        let vectors: Vec<Vec<f32>> = vectors.into_iter().map(Option::unwrap_or_default).collect();
        Ok(slot.into_iter().map(|s| vectors[s].clone()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use credence_infra::store::sqlite::SqliteStore;

    /// A model-free encoder for the cache's bookkeeping: a text's vector is its byte
    /// histogram over 4 buckets, counted calls.
    struct Histogram {
        calls: AtomicU64,
    }

    impl Encoder for Histogram {
        fn fingerprint(&self) -> &str {
            "histogram-4"
        }
        fn dim(&self) -> usize {
            4
        }
        fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            self.calls.fetch_add(texts.len() as u64, Ordering::Relaxed);
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0f32; 4];
                    for b in t.bytes() {
                        v[(b % 4) as usize] += 1.0;
                    }
                    v
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn each_distinct_text_is_encoded_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("c.db")).await.unwrap();
        let enc = Arc::new(Histogram {
            calls: AtomicU64::new(0),
        });
        let cached = CachedEncoder::new(enc.clone());
        let texts: Vec<String> = ["a b", "cc", "a b", "ddd"].map(String::from).to_vec();
        let first = cached.embed(&store, &texts).await.unwrap();
        assert_eq!(first[0], first[2]);
        assert_eq!(first[1], enc.encode(&["cc"]).unwrap()[0]);
        assert_eq!(cached.counts(), CacheCounts { hits: 0, misses: 3 });
        let second = cached
            .embed(&store, &["ddd".to_string(), "new".to_string()])
            .await
            .unwrap();
        assert_eq!(second[0], first[3]);
        assert_eq!(cached.counts(), CacheCounts { hits: 1, misses: 4 });
        // 3 + 1 texts encoded by the cache, 1 by the direct call above.
        assert_eq!(enc.calls.load(Ordering::Relaxed), 5);
    }
}
