//! Turning rows into domain values, the same for both store engines: a shard's
//! examples (checked against the job), cached embedding vectors, and summary rows in
//! plan order.

use super::{StoreError, SummaryRow};
use crate::domain::{Example, Mode};
use crate::job::Job;
use std::collections::HashMap;

/// `example_id, text, references_json, meta_json` of `examples`.
pub(crate) type ExampleRow = (String, String, String, String);

/// `model, dataset, mode, count, claims, jaccard_f1, semantic_f1, epr, avr, rr, verify`.
pub(crate) type SummaryTuple = (
    String,
    String,
    String,
    i64,
    f64,
    f64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

/// The examples of a job's shard, which must be exactly the `len` the job expects.
pub(crate) fn shard_examples(job: &Job, rows: Vec<ExampleRow>) -> Result<Vec<Example>, StoreError> {
    let corrupt = |e: serde_json::Error| StoreError::Corrupt {
        what: "example",
        message: e.to_string(),
    };
    let examples = rows
        .into_iter()
        .map(|(id, text, references, meta)| {
            Ok(Example {
                id,
                text,
                references: serde_json::from_str(&references).map_err(corrupt)?,
                meta: serde_json::from_str(&meta).map_err(corrupt)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    if examples.len() != job.len as usize {
        return Err(StoreError::Corrupt {
            what: "shard examples",
            message: format!(
                "job {} expects {} examples at {} of dataset {}, the store has {}",
                job.key,
                job.len,
                job.start,
                job.dataset_hash,
                examples.len()
            ),
        });
    }
    Ok(examples)
}

/// A cached embedding: little-endian f32s.
pub(crate) fn vector(bytes: &[u8]) -> Result<Vec<f32>, StoreError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(StoreError::Corrupt {
            what: "embedding_cache.vector",
            message: format!("{} bytes is not a whole number of f32", bytes.len()),
        });
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// A mode read from the store.
pub(crate) fn mode(s: &str, what: &'static str) -> Result<Mode, StoreError> {
    s.parse::<Mode>().map_err(|e| StoreError::Corrupt {
        what,
        message: e.to_string(),
    })
}

/// Summary rows in plan order (models, datasets and modes as they first appear in
/// `jobs`).
pub(crate) fn summary(
    rows: Vec<SummaryTuple>,
    jobs: &[Job],
) -> Result<Vec<SummaryRow>, StoreError> {
    let mut out = rows
        .into_iter()
        .map(
            |(model, dataset, m, n, claims, jaccard_f1, semantic_f1, epr, avr, rr, verify)| {
                Ok(SummaryRow {
                    model,
                    dataset,
                    mode: mode(&m, "example_metrics.mode")?,
                    n: n as u32,
                    claims,
                    jaccard_f1,
                    semantic_f1,
                    epr,
                    avr,
                    rr,
                    verify,
                })
            },
        )
        .collect::<Result<Vec<_>, StoreError>>()?;
    let mut order = HashMap::new();
    for j in jobs {
        let n = order.len();
        order
            .entry((j.model.clone(), j.dataset.clone(), j.mode))
            .or_insert(n);
    }
    out.sort_by_key(|row| {
        order
            .get(&(row.model.clone(), row.dataset.clone(), row.mode))
            .copied()
    });
    Ok(out)
}
