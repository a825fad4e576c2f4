//! The generation and embedding caches in PostgreSQL (DESIGN.md invariant 3): keyed by
//! fingerprint and content hash, first write wins.

use super::{sha256_hex, PgStore};
use crate::cache::{EmbeddingCache, GenerationCache};
use crate::store::StoreError;
use async_trait::async_trait;
use sqlx::Row;
use std::collections::HashMap;

#[async_trait]
impl EmbeddingCache for PgStore {
    async fn embeddings(
        &self,
        encoder_fingerprint: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let hashes: Vec<String> = texts.iter().map(|t| sha256_hex(t)).collect();
        let rows = sqlx::query(
            "SELECT text_sha256, vector FROM embedding_cache
             WHERE encoder_fingerprint = $1 AND text_sha256 = ANY($2)",
        )
        .bind(encoder_fingerprint)
        .bind(&hashes)
        .fetch_all(&self.pool)
        .await
        .map_err(StoreError::query("embedding cache lookup"))?;
        let mut found: HashMap<String, Vec<f32>> = HashMap::with_capacity(rows.len());
        for r in rows {
            found.insert(r.get(0), crate::store::rows::vector(r.get(1))?);
        }
        Ok(hashes.iter().map(|h| found.get(h).cloned()).collect())
    }

    async fn put_embeddings(
        &self,
        encoder_fingerprint: &str,
        entries: &[(String, Vec<f32>)],
    ) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(StoreError::query("begin embeddings"))?;
        for (text, v) in entries {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            sqlx::query(
                "INSERT INTO embedding_cache (encoder_fingerprint, text_sha256, text, dim, vector)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            )
            .bind(encoder_fingerprint)
            .bind(sha256_hex(text))
            .bind(text)
            .bind(v.len() as i32)
            .bind(bytes)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::query("insert embedding"))?;
        }
        tx.commit()
            .await
            .map_err(StoreError::query("commit embeddings"))
    }
}

#[async_trait]
impl GenerationCache for PgStore {
    async fn generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
    ) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT completion FROM generation_cache
             WHERE model_fingerprint = $1 AND prompt_sha256 = $2 AND params = $3",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("generation cache lookup"))
    }

    async fn put_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        completion: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO generation_cache (model_fingerprint, prompt_sha256, params, prompt, completion)
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(prompt)
        .bind(completion)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert generation"))?;
        Ok(())
    }
}
