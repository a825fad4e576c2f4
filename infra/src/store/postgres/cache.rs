//! The generation and embedding caches in PostgreSQL (DESIGN.md invariant 3): keyed by
//! fingerprint and content hash, first write wins.

use super::{sha256_hex, PgStore};
use crate::cache::{CachedGeneration, EmbeddingCache, GenerationCache, TokenUsage};
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
    ) -> Result<Option<CachedGeneration>, StoreError> {
        let row = sqlx::query(
            "SELECT completion, seconds FROM generation_cache
             WHERE model_fingerprint = $1 AND prompt_sha256 = $2 AND params = $3",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("generation cache lookup"))?;
        Ok(row.map(|r| CachedGeneration {
            completion: r.get(0),
            seconds: r.get(1),
        }))
    }

    async fn put_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        completion: &str,
        usage: TokenUsage,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO generation_cache (model_fingerprint, prompt_sha256, params, prompt, completion,
                 prompt_tokens, completion_tokens, seconds)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(prompt)
        .bind(completion)
        .bind(usage.prompt_tokens.map(i64::from))
        .bind(usage.completion_tokens.map(i64::from))
        .bind(usage.seconds)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("insert generation"))?;
        Ok(())
    }

    async fn lease_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        // Expiry by the database's clock, the one clock every worker shares.
        let held: Option<String> = sqlx::query_scalar(
            "INSERT INTO generation_leases (model_fingerprint, prompt_sha256, params, holder, expires_at)
             VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
             ON CONFLICT (model_fingerprint, prompt_sha256, params) DO UPDATE
                 SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                 WHERE generation_leases.expires_at < now()
                    OR generation_leases.holder = EXCLUDED.holder
             RETURNING holder",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(holder)
        .bind(ttl.as_secs_f64())
        .fetch_optional(&self.pool)
        .await
        .map_err(StoreError::query("lease generation"))?;
        Ok(held.as_deref() == Some(holder))
    }

    async fn release_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "DELETE FROM generation_leases
             WHERE model_fingerprint = $1 AND prompt_sha256 = $2 AND params = $3 AND holder = $4",
        )
        .bind(model_fingerprint)
        .bind(sha256_hex(prompt))
        .bind(params)
        .bind(holder)
        .execute(&self.pool)
        .await
        .map_err(StoreError::query("release generation lease"))?;
        Ok(())
    }
}
