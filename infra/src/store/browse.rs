//! Reading a run one example at a time, for people (`credence view`): a page of a run's
//! examples, filtered and sorted in SQL ([`ExampleQuery`] -> [`ExamplePage`]), and one
//! example with every mode's stored output ([`StoredExample`]), its cached completions
//! and its texts' embeddings. Every query is bounded by the page or the example, so a
//! run of any size answers at once; `migrations/*/0006_browse.sql` adds the index the
//! per-example joins need.
//!
//! A listed row is one example of one model on one dataset; its cells are that
//! example's metrics in each mode. Filters and sorts name a mode's metric, read from
//! `metric_values` by name, so a metric added to the list can be filtered with no
//! change here.

use super::sql::{Dialect, Engine, Stmt};
use super::sql_store::SqlStore;
use super::{Store, StoreError};
use async_trait::async_trait;
use credence_core::domain::Mode;
use list_sql::{cells_stmts, count_stmt, page_stmt};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub mod afc;
mod list_sql;

/// A verifier check an example's claims can fail (the list's "failing check" filter),
/// each read from its per-example metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A claim has an atomicity boundary (`n_viol > 0`).
    NonAtomic,
    /// An entity of the source is missing from the claims (`epr < 1`).
    MissingEntity,
    /// Two claims repeat each other (`dup_count > 0`).
    Duplicate,
    /// A claim's subject is a pronoun whose antecedent it does not name
    /// (`n_unresolved > 0`).
    Pronoun,
    /// The decomposer's answer could not be parsed (`parse_failed`).
    ParseFailure,
}

impl Check {
    /// Every check, in the order the view offers them.
    pub const ALL: [Check; 5] = [
        Check::NonAtomic,
        Check::MissingEntity,
        Check::Duplicate,
        Check::Pronoun,
        Check::ParseFailure,
    ];

    /// Its name in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::NonAtomic => "non_atomic",
            Check::MissingEntity => "missing_entity",
            Check::Duplicate => "duplicate",
            Check::Pronoun => "pronoun",
            Check::ParseFailure => "parse_failure",
        }
    }

    /// The check named `name` in a URL.
    pub fn from_name(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The metric and the condition on its value `v.value` that mean the check failed.
    pub(super) fn condition(self) -> (&'static str, &'static str) {
        match self {
            Check::NonAtomic => ("n_viol", "v.value > 0"),
            Check::MissingEntity => ("epr", "v.value < 1"),
            Check::Duplicate => ("dup_count", "v.value > 0"),
            Check::Pronoun => ("n_unresolved", "v.value > 0"),
            Check::ParseFailure => ("parse_failed", "v.value > 0"),
        }
    }
}

/// What a page of examples is sorted by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SortKey {
    /// Dataset, model, then the example's place in its dataset.
    Position,
    /// The example id.
    ExampleId,
    /// A metric of one mode (examples without it last).
    Metric {
        /// The metric's name in the metric list.
        metric: String,
        /// The mode.
        mode: Mode,
    },
    /// The LLM calls of one mode.
    LlmCalls(Mode),
    /// The seconds of one mode (every stage timed for the example).
    Seconds(Mode),
}

/// A page of a run's examples: which, in what order, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct ExampleQuery {
    /// The run.
    pub run: String,
    /// Only this dataset.
    pub dataset: Option<String>,
    /// Only this model.
    pub model: Option<String>,
    /// The mode the check and "worse than base" filters look at; `None`: any mode.
    pub mode: Option<Mode>,
    /// The mode every listed example must have (one row per example and model): the
    /// filtered mode, else the run's first.
    pub anchor: Mode,
    /// Only examples failing this check (in `mode`, or in any mode).
    pub check: Option<Check>,
    /// Only examples where `mode` (or any mode) is worse than `base` on this metric, by
    /// its better direction.
    pub worse_than_base: Option<String>,
    /// The order.
    pub sort: SortKey,
    /// Descending.
    pub descending: bool,
    /// Rows skipped.
    pub offset: u64,
    /// Rows at most.
    pub limit: u64,
}

/// One mode's figures for a listed example.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModeCells {
    /// Every stored metric, by name.
    pub metrics: BTreeMap<String, f64>,
    /// LLM calls.
    pub llm_calls: i64,
    /// Seconds over the example's timed stages, when it has any.
    pub seconds: Option<f64>,
    /// Why the example could not be decomposed, if it could not.
    pub error: Option<String>,
}

/// One example of one model in a page.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedExample {
    /// Its dataset.
    pub dataset: String,
    /// The model.
    pub model: String,
    /// Its id in the dataset.
    pub example_id: String,
    /// Its place in the dataset (0-based).
    pub position: i64,
    /// The source sentence.
    pub text: String,
    /// Its figures per mode (the modes it has).
    pub modes: BTreeMap<Mode, ModeCells>,
}

/// A page of examples and how many the filters leave in all.
#[derive(Debug, Clone, PartialEq)]
pub struct ExamplePage {
    /// Examples matching the filters.
    pub total: u64,
    /// This page's, in order.
    pub rows: Vec<ListedExample>,
}

/// One mode's stored output of an example.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeOutput {
    /// The mode.
    pub mode: Mode,
    /// The base decomposition's claims (JSON array).
    pub base_claims_json: String,
    /// This mode's claims (JSON array).
    pub claims_json: String,
    /// The verifier's report on the claims (JSON).
    pub verifier_json: Option<String>,
    /// What the repair tiers did (JSON).
    pub repair_json: Option<String>,
    /// Why the example could not be decomposed.
    pub error: Option<String>,
    /// LLM calls.
    pub llm_calls: i64,
    /// What produced the claims.
    pub pipeline_version: String,
    /// The job's model fingerprint (the generator's, `+`, the prompt's version).
    pub model_fingerprint: String,
    /// Every stored metric, by name.
    pub metrics: BTreeMap<String, f64>,
    /// Seconds per stage.
    pub stage_seconds: Vec<(String, f64)>,
}

/// One example of one model with every mode's output.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredExample {
    /// Its dataset.
    pub dataset: String,
    /// The model.
    pub model: String,
    /// Its id.
    pub example_id: String,
    /// Its place in the dataset (0-based).
    pub position: i64,
    /// The source sentence.
    pub text: String,
    /// The references (JSON array).
    pub references_json: String,
    /// Its metadata (JSON object).
    pub meta_json: String,
    /// Each mode's output, in mode order.
    pub outputs: Vec<ModeOutput>,
    /// Every model of the run with an output for this example.
    pub models: Vec<String>,
}

/// The sha256 (hex) under which the caches key a text.
pub fn text_sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A store read one example at a time.
#[async_trait]
pub trait ExampleBrowser: Store {
    /// A page of a run's examples.
    async fn example_page(&self, query: &ExampleQuery) -> Result<ExamplePage, StoreError>;

    /// One example of one model with every mode's output; `None` when the run has none.
    async fn stored_example(
        &self,
        run: &str,
        dataset: &str,
        model: &str,
        example_id: &str,
    ) -> Result<Option<StoredExample>, StoreError>;

    /// A page of a run's AFC claims (one row per decomposer and claim).
    async fn afc_page(&self, query: &afc::AfcQuery) -> Result<afc::AfcPage, StoreError>;

    /// One AFC claim of one decomposer with every setting's judgement; `None` when the
    /// run judged none.
    async fn afc_claim(
        &self,
        run: &str,
        dataset: &str,
        decomposer: &str,
        example_id: &str,
    ) -> Result<Option<afc::AfcClaim>, StoreError>;

    /// The completions cached for `prompt` (the generation cache's prompt text) under any
    /// of `fingerprints`, oldest first.
    async fn cached_completions(
        &self,
        fingerprints: &[String],
        prompt: &str,
    ) -> Result<Vec<String>, StoreError>;

    /// The encoders with cached embeddings.
    async fn encoder_fingerprints(&self) -> Result<Vec<String>, StoreError>;

    /// Brings the query planner's statistics of the tables the pages read up to date
    /// where they are stale (PostgreSQL: more rows changed since the last ANALYZE than
    /// autovacuum's default threshold, 50 + 10%); the tables analyzed. A database whose
    /// autovacuum is off (or has not run since a sweep wrote it) otherwise plans the list
    /// as nested loops over every example: 361 ms for the first page of the paper-size
    /// rehearsal's database, 23 ms once analyzed. SQLite plans without statistics here.
    async fn refresh_statistics(&self) -> Result<Vec<String>, StoreError>;
}

/// The tables [`ExampleBrowser`]'s pages read.
const BROWSED_TABLES: [&str; 6] = [
    "predictions",
    "afc_results",
    "examples",
    "jobs",
    "metric_values",
    "stage_seconds",
];

/// `stmt` bound to one example of one model: `$1` run, `$2` dataset, `$3` model, `$4`
/// example id.
fn of_example(stmt: Stmt, run: &str, dataset: &str, model: &str, example_id: &str) -> Stmt {
    stmt.bind(run).bind(dataset).bind(model).bind(example_id)
}

fn parse_mode(mode: &str) -> Result<Mode, StoreError> {
    mode.parse().map_err(
        |e: credence_core::domain::UnknownMode| StoreError::Corrupt {
            what: "predictions.mode",
            message: e.to_string(),
        },
    )
}

type CellRow = (
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<f64>,
    Option<String>,
    Option<f64>,
);

type OutputRow = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    String,
    String,
);

#[async_trait]
impl<DB: Engine> ExampleBrowser for SqlStore<DB> {
    async fn example_page(&self, query: &ExampleQuery) -> Result<ExamplePage, StoreError> {
        type PageRow = (String, String, String, i64, String, i64);
        let rows: Vec<PageRow> = match query.sort {
            SortKey::Position | SortKey::ExampleId => self.query(page_stmt(query)).await?,
            _ => {
                let with_sort: Vec<(String, String, String, i64, String, i64, Option<f64>)> =
                    self.query(page_stmt(query)).await?;
                with_sort
                    .into_iter()
                    .map(|(d, m, id, pos, text, total, _)| (d, m, id, pos, text, total))
                    .collect()
            }
        };
        // The page's rows carry the count; a page past the end needs it asked.
        let total = match rows.first() {
            Some(r) => r.5,
            None => {
                let (total,): (i64,) = self
                    .query(count_stmt(query))
                    .await?
                    .into_iter()
                    .next()
                    .unwrap_or((0,));
                total
            }
        };
        let mut rows: Vec<ListedExample> = rows
            .into_iter()
            .map(
                |(dataset, model, example_id, position, text, _)| ListedExample {
                    dataset,
                    model,
                    example_id,
                    position,
                    text,
                    modes: BTreeMap::new(),
                },
            )
            .collect();
        if !rows.is_empty() {
            let mut cells: Vec<CellRow> = Vec::new();
            for stmt in cells_stmts(DB::DIALECT, &query.run, &rows) {
                cells.extend(self.query::<CellRow>(stmt).await?);
            }
            let at: std::collections::HashMap<(String, String, String), usize> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    (
                        (r.dataset.clone(), r.model.clone(), r.example_id.clone()),
                        i,
                    )
                })
                .collect();
            for (dataset, model, id, mode, calls, error, seconds, metric, value) in cells {
                let Some(&i) = at.get(&(dataset, model, id)) else {
                    continue;
                };
                let cell = rows[i].modes.entry(parse_mode(&mode)?).or_default();
                cell.llm_calls = calls;
                cell.error = error;
                cell.seconds = seconds;
                if let (Some(metric), Some(value)) = (metric, value) {
                    cell.metrics.insert(metric, value);
                }
            }
        }
        Ok(ExamplePage {
            total: u64::try_from(total).unwrap_or(0),
            rows,
        })
    }

    async fn afc_page(&self, query: &afc::AfcQuery) -> Result<afc::AfcPage, StoreError> {
        afc::afc_page(self, query).await
    }

    async fn afc_claim(
        &self,
        run: &str,
        dataset: &str,
        decomposer: &str,
        example_id: &str,
    ) -> Result<Option<afc::AfcClaim>, StoreError> {
        afc::afc_claim(self, run, dataset, decomposer, example_id).await
    }

    async fn stored_example(
        &self,
        run: &str,
        dataset: &str,
        model: &str,
        example_id: &str,
    ) -> Result<Option<StoredExample>, StoreError> {
        let outputs: Vec<OutputRow> = self
            .query(of_example(
                Stmt::new(
                    "SELECT p.mode, p.base_claims_json, p.claims_json, p.verifier_json,
                            p.repair_json, p.error, CAST(p.llm_calls AS BIGINT),
                            p.pipeline_version, j.model_fingerprint
                     FROM predictions p JOIN jobs j ON j.job_key = p.job_key
                     WHERE p.run_id = $1 AND p.dataset = $2 AND p.model = $3
                       AND p.example_id = $4",
                ),
                run,
                dataset,
                model,
                example_id,
            ))
            .await?;
        if outputs.is_empty() {
            return Ok(None);
        }
        let example: Option<(i64, String, String, String)> = self
            .query(of_example(
                Stmt::new(
                    "SELECT CAST(e.position AS BIGINT), e.text, e.references_json, e.meta_json
                     FROM predictions p
                     JOIN jobs j ON j.job_key = p.job_key
                     JOIN examples e ON e.dataset_hash = j.dataset_hash
                          AND e.example_id = p.example_id
                     WHERE p.run_id = $1 AND p.dataset = $2 AND p.model = $3
                       AND p.example_id = $4
                     LIMIT 1",
                ),
                run,
                dataset,
                model,
                example_id,
            ))
            .await?
            .into_iter()
            .next();
        let Some((position, text, references_json, meta_json)) = example else {
            return Err(StoreError::Corrupt {
                what: "examples",
                message: format!("example {example_id:?} of {dataset:?} has outputs but no text"),
            });
        };
        let metrics: Vec<(String, String, f64)> = self
            .query(of_example(
                Stmt::new(
                    "SELECT p.mode, v.metric, v.value FROM predictions p
                     JOIN metric_values v ON v.job_key = p.job_key AND v.example_id = p.example_id
                     WHERE p.run_id = $1 AND p.dataset = $2 AND p.model = $3
                       AND p.example_id = $4",
                ),
                run,
                dataset,
                model,
                example_id,
            ))
            .await?;
        let stages: Vec<(String, String, f64)> = self
            .query(of_example(
                Stmt::new(
                    "SELECT p.mode, s.stage, s.seconds FROM predictions p
                     JOIN stage_seconds s ON s.job_key = p.job_key AND s.example_id = p.example_id
                     WHERE p.run_id = $1 AND p.dataset = $2 AND p.model = $3
                       AND p.example_id = $4
                     ORDER BY s.stage",
                ),
                run,
                dataset,
                model,
                example_id,
            ))
            .await?;
        let models: Vec<(String,)> = self
            .query(
                Stmt::new(
                    "SELECT DISTINCT model FROM predictions
                     WHERE run_id = $1 AND dataset = $2 AND example_id = $3 ORDER BY model",
                )
                .bind(run)
                .bind(dataset)
                .bind(example_id),
            )
            .await?;
        let mut outputs = outputs
            .into_iter()
            .map(
                |(mode, base, claims, verifier, repair, error, calls, version, fingerprint)| {
                    let mode_name = mode.clone();
                    Ok(ModeOutput {
                        mode: parse_mode(&mode)?,
                        base_claims_json: base,
                        claims_json: claims,
                        verifier_json: verifier,
                        repair_json: repair,
                        error,
                        llm_calls: calls,
                        pipeline_version: version,
                        model_fingerprint: fingerprint,
                        metrics: metrics
                            .iter()
                            .filter(|(m, _, _)| *m == mode_name)
                            .map(|(_, k, v)| (k.clone(), *v))
                            .collect(),
                        stage_seconds: stages
                            .iter()
                            .filter(|(m, _, _)| *m == mode_name)
                            .map(|(_, s, v)| (s.clone(), *v))
                            .collect(),
                    })
                },
            )
            .collect::<Result<Vec<_>, StoreError>>()?;
        outputs.sort_by_key(|o| Mode::PAPER.iter().position(|m| *m == o.mode));
        Ok(Some(StoredExample {
            dataset: dataset.to_string(),
            model: model.to_string(),
            example_id: example_id.to_string(),
            position,
            text,
            references_json,
            meta_json,
            outputs,
            models: models.into_iter().map(|(m,)| m).collect(),
        }))
    }

    async fn cached_completions(
        &self,
        fingerprints: &[String],
        prompt: &str,
    ) -> Result<Vec<String>, StoreError> {
        if fingerprints.is_empty() {
            return Ok(Vec::new());
        }
        let list = serde_json::to_string(fingerprints).unwrap_or_default();
        let rows: Vec<(String,)> = self
            .query(
                Stmt::new(format!(
                    "SELECT completion FROM generation_cache
                     WHERE {} AND prompt_sha256 = $2 ORDER BY created_at",
                    DB::DIALECT.in_json_strings("model_fingerprint", "$1")
                ))
                .bind(list)
                .bind(text_sha256(prompt)),
            )
            .await?;
        Ok(rows.into_iter().map(|(c,)| c).collect())
    }

    async fn encoder_fingerprints(&self) -> Result<Vec<String>, StoreError> {
        let rows: Vec<(String,)> = self
            .query(Stmt::new(
                "SELECT DISTINCT encoder_fingerprint FROM embedding_cache ORDER BY 1",
            ))
            .await?;
        Ok(rows.into_iter().map(|(f,)| f).collect())
    }

    async fn refresh_statistics(&self) -> Result<Vec<String>, StoreError> {
        if DB::DIALECT != Dialect::Postgres {
            return Ok(Vec::new());
        }
        let tables = serde_json::to_string(&BROWSED_TABLES).unwrap_or_default();
        let stale: Vec<(String,)> = self
            .query(
                Stmt::new(
                    "SELECT relname::text FROM pg_stat_user_tables
                     WHERE schemaname = current_schema()
                       AND relname = ANY(ARRAY(SELECT json_array_elements_text($1::json)))
                       AND n_mod_since_analyze > 50 + 0.1 * n_live_tup
                     ORDER BY relname",
                )
                .bind(tables),
            )
            .await?;
        let stale: Vec<String> = stale.into_iter().map(|(t,)| t).collect();
        // Names from BROWSED_TABLES only, as the catalogue spells them.
        for table in &stale {
            if BROWSED_TABLES.contains(&table.as_str()) {
                self.run(Stmt::new(format!("ANALYZE {table}"))).await?;
            }
        }
        Ok(stale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_round_trip_their_names() {
        for c in Check::ALL {
            assert_eq!(Check::from_name(c.as_str()), Some(c));
        }
        assert_eq!(Check::from_name("atomic"), None);
    }
}
