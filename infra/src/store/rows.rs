//! Turning rows into domain values, the same for both store engines: a shard's
//! examples (checked against the job), cached embedding vectors, a configuration's
//! values, a run's outputs and statistics.

use super::StoreError;
use credence_core::domain::{Example, Mode};
use credence_core::job::Job;
use std::collections::BTreeMap;

/// `example_id, text, references_json, meta_json` of `examples`.
pub(crate) type ExampleRow = (String, String, String, String);

/// A row of [`super::views::run_outputs_sql`].
pub(crate) type OutputRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<String>,
    Option<f64>,
);

/// The part of a stored verifier report the τ_dup sensitivity table reads.
#[derive(serde::Deserialize)]
struct StoredReport {
    repetition: Option<StoredRepetition>,
}

#[derive(serde::Deserialize)]
struct StoredRepetition {
    max_later_cos: Vec<Option<f64>>,
}

/// A run's stored outputs from the rows of [`super::views::run_outputs_sql`].
pub(crate) fn run_outputs(
    rows: Vec<OutputRow>,
) -> Result<Vec<credence_core::audit::StoredOutput>, StoreError> {
    let corrupt = |what: &'static str| {
        move |e: serde_json::Error| StoreError::Corrupt {
            what,
            message: e.to_string(),
        }
    };
    rows.into_iter()
        .map(
            |(
                model,
                dataset,
                mode,
                example_id,
                text,
                refs,
                claims,
                llm_calls,
                avr,
                epr,
                rr,
                n_viol,
                verify_ok,
                report,
                semantic_f1,
            )| {
                let later_cos = match report {
                    None => None,
                    Some(json) => serde_json::from_str::<StoredReport>(&json)
                        .map_err(corrupt("predictions.verifier_json"))?
                        .repetition
                        .map(|r| r.max_later_cos),
                };
                Ok(credence_core::audit::StoredOutput {
                    mode: mode
                        .parse()
                        .map_err(
                            |e: credence_core::domain::UnknownMode| StoreError::Corrupt {
                                what: "predictions.mode",
                                message: e.to_string(),
                            },
                        )?,
                    model,
                    dataset,
                    example_id,
                    text,
                    references: serde_json::from_str(&refs)
                        .map_err(corrupt("examples.references_json"))?,
                    claims: serde_json::from_str(&claims)
                        .map_err(corrupt("predictions.claims_json"))?,
                    llm_calls: llm_calls.max(0) as u32,
                    avr,
                    epr,
                    rr,
                    n_viol,
                    verify_ok: verify_ok.map(|v| v != 0.0),
                    later_cos,
                    semantic_f1,
                })
            },
        )
        .collect()
}

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

/// `example_id, metric, value` of the configuration-values query.
pub(crate) type ValueRow = (String, Option<String>, Option<f64>);

/// The per-example vectors of a configuration from its rows (in dataset order).
pub(crate) fn config_values(rows: Vec<ValueRow>) -> credence_core::stats::ConfigValues {
    let mut ids: Vec<String> = Vec::new();
    let mut cells: Vec<(usize, String, f64)> = Vec::new();
    for (id, metric, value) in rows {
        if ids.last() != Some(&id) {
            ids.push(id);
        }
        if let (Some(metric), Some(value)) = (metric, value) {
            cells.push((ids.len() - 1, metric, value));
        }
    }
    let mut metrics: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for (i, metric, value) in cells {
        metrics
            .entry(metric)
            .or_insert_with(|| vec![None; ids.len()])[i] = Some(value);
    }
    credence_core::stats::ConfigValues {
        example_ids: ids,
        metrics,
    }
}

/// A run's statistics in a fixed order, whatever the engine's collation.
pub(crate) fn run_statistics(
    mut aggregates: Vec<super::AggregateRecord>,
    mut comparisons: Vec<super::ComparisonRecord>,
) -> super::RunStatistics {
    aggregates.sort_by(|x, y| {
        (&x.model, &x.dataset, &x.mode, &x.metric).cmp(&(&y.model, &y.dataset, &y.mode, &y.metric))
    });
    comparisons.sort_by(|x, y| {
        (
            &x.dataset, &x.a_model, &x.a_mode, &x.b_model, &x.b_mode, &x.metric,
        )
            .cmp(&(
                &y.dataset, &y.a_model, &y.a_mode, &y.b_model, &y.b_mode, &y.metric,
            ))
    });
    super::RunStatistics {
        aggregates,
        comparisons,
    }
}

/// `model, dataset, setting, example_id, gold, verdict, score, n_subclaims, fell_back,
/// unparsable` of `afc_results`.
pub(crate) type AfcRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    f64,
    i64,
    i64,
    i64,
);

/// A run's AFC results from their rows.
pub(crate) fn afc_results(
    rows: Vec<AfcRow>,
) -> Result<Vec<credence_core::afc::StoredAfc>, StoreError> {
    use super::browse::afc::{count, setting, verdict};
    use credence_core::afc::StoredAfc;
    rows.into_iter()
        .map(
            |(
                model,
                dataset,
                setting_name,
                example_id,
                gold,
                pred,
                score,
                subs,
                fell_back,
                unparsable,
            )| {
                Ok(StoredAfc {
                    setting: setting(&setting_name)?,
                    gold: verdict(&gold)?,
                    verdict: verdict(&pred)?,
                    score,
                    n_subclaims: count(subs)?,
                    fell_back: fell_back != 0,
                    unparsable: count(unparsable)?,
                    model,
                    dataset,
                    example_id,
                })
            },
        )
        .collect()
}
