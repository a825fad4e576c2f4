//! A run's downstream fact-checking (`[afc]`) read one claim at a time, for `credence
//! view`: a page of the claims judged, one row per decomposer and claim with each
//! setting's verdict ([`AfcQuery`] -> [`AfcPage`]), and one claim with what the judge
//! read in every setting ([`AfcClaim`]). Like the example list, every query is bounded
//! by its page or its claim.

use super::super::sql::{Dialect, Engine, SqlValue, Stmt};
use super::super::sql_store::SqlStore;
use super::super::StoreError;
use super::list_sql::push;
use credence_core::afc::{AfcSetting, JudgedClaim};
use credence_core::domain::{AfcGold, Verdict, AFC_META_KEY};
use std::collections::BTreeMap;

/// A page of a run's AFC claims: which, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfcQuery {
    /// The run.
    pub run: String,
    /// Only this decomposer.
    pub decomposer: Option<String>,
    /// Only this AFC dataset.
    pub dataset: Option<String>,
    /// Only claims this setting got wrong (its verdict is not the gold label).
    pub wrong: Option<AfcSetting>,
    /// Only claims this setting got right.
    pub right: Option<AfcSetting>,
    /// Only claims whose settings' verdicts differ.
    pub disagree: bool,
    /// Rows skipped.
    pub offset: u64,
    /// Rows at most.
    pub limit: u64,
}

/// One setting's reading of a listed claim.
#[derive(Debug, Clone, PartialEq)]
pub struct AfcCell {
    /// The verdict.
    pub verdict: Verdict,
    /// Its score.
    pub score: f64,
    /// Sub-claims judged (0: the claim whole).
    pub n_subclaims: u32,
    /// Judged whole after an empty decomposition.
    pub fell_back: bool,
}

/// One claim of one decomposer in a page.
#[derive(Debug, Clone, PartialEq)]
pub struct AfcListed {
    /// The decomposer.
    pub decomposer: String,
    /// The AFC dataset.
    pub dataset: String,
    /// The claim's id.
    pub example_id: String,
    /// Its place in the dataset (0-based).
    pub position: i64,
    /// The claim.
    pub text: String,
    /// Its gold verdict.
    pub gold: Verdict,
    /// Each setting's reading (the settings it has).
    pub settings: BTreeMap<AfcSetting, AfcCell>,
}

/// A page of claims and how many the filters leave in all.
#[derive(Debug, Clone, PartialEq)]
pub struct AfcPage {
    /// Claims matching the filters.
    pub total: u64,
    /// This page's, in order.
    pub rows: Vec<AfcListed>,
}

/// One setting's judgement of a claim, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct AfcReading {
    /// The setting.
    pub setting: AfcSetting,
    /// The mode its sub-claims came from.
    pub mode: String,
    /// The judge.
    pub judge: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Its score.
    pub score: f64,
    /// Sub-claims of the decomposition.
    pub n_subclaims: u32,
    /// Judged whole after an empty decomposition.
    pub fell_back: bool,
    /// Judgements whose answer held no label.
    pub unparsable: u32,
    /// Calls to a model for the claim in this setting.
    pub llm_calls: i64,
    /// What the judge read, in order, with its label and score.
    pub judged: Vec<JudgedClaim>,
    /// Why the claim could not be decomposed, when it could not.
    pub error: Option<String>,
}

/// One claim of one decomposer with every setting's judgement.
#[derive(Debug, Clone, PartialEq)]
pub struct AfcClaim {
    /// The decomposer.
    pub decomposer: String,
    /// The AFC dataset.
    pub dataset: String,
    /// The claim's id.
    pub example_id: String,
    /// Its place in the dataset (0-based).
    pub position: i64,
    /// The claim.
    pub text: String,
    /// Its gold verdict and evidence.
    pub gold: AfcGold,
    /// Each setting's judgement, in the paper's column order.
    pub readings: Vec<AfcReading>,
    /// Every decomposer of the run with a judgement of this claim.
    pub decomposers: Vec<String>,
}

/// A stored value that does not read as what its column holds.
fn corrupt(message: String) -> StoreError {
    StoreError::Corrupt {
        what: "afc_results",
        message,
    }
}

pub(in crate::store) fn verdict(s: &str) -> Result<Verdict, StoreError> {
    Verdict::ALL
        .into_iter()
        .find(|v| v.as_str() == s)
        .ok_or_else(|| corrupt(format!("verdict {s:?}")))
}

pub(in crate::store) fn count(n: i64) -> Result<u32, StoreError> {
    u32::try_from(n).map_err(|e| corrupt(format!("count {n}: {e}")))
}

pub(in crate::store) fn setting(s: &str) -> Result<AfcSetting, StoreError> {
    s.parse().map_err(corrupt)
}

/// The page's claims, grouped: `FROM ... GROUP BY ... HAVING ...`, its values from `$1`.
fn grouped(query: &AfcQuery) -> (String, Vec<SqlValue>) {
    let mut values: Vec<SqlValue> = vec![query.run.clone().into()];
    let mut sql = String::from(
        "FROM afc_results r
         JOIN jobs j ON j.job_key = r.job_key
         JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = r.example_id
         WHERE r.run_id = $1",
    );
    if let Some(m) = &query.decomposer {
        sql.push_str(&format!(" AND r.model = {}", push(&mut values, m)));
    }
    if let Some(d) = &query.dataset {
        sql.push_str(&format!(" AND r.dataset = {}", push(&mut values, d)));
    }
    sql.push_str(" GROUP BY r.model, r.dataset, r.example_id");
    let mut having = Vec::new();
    for (setting, outcome) in [(query.wrong, "<>"), (query.right, "=")] {
        if let Some(s) = setting {
            let at = push(&mut values, s.as_str());
            having.push(format!(
                "sum(CASE WHEN r.setting = {at} AND r.verdict {outcome} r.gold THEN 1 ELSE 0 END) > 0"
            ));
        }
    }
    if query.disagree {
        having.push("count(DISTINCT r.verdict) > 1".into());
    }
    if !having.is_empty() {
        sql.push_str(&format!(" HAVING {}", having.join(" AND ")));
    }
    (sql, values)
}

/// The page's claims with the count of all that match: `model, dataset, example_id,
/// position, text, gold, total`.
fn page_stmt(query: &AfcQuery) -> Stmt {
    let (from, mut values) = grouped(query);
    let limit = push(&mut values, i64::try_from(query.limit).unwrap_or(i64::MAX));
    let offset = push(&mut values, i64::try_from(query.offset).unwrap_or(i64::MAX));
    Stmt::new(format!(
        "SELECT r.model, r.dataset, r.example_id, CAST(min(e.position) AS BIGINT), min(e.text),
                min(r.gold), CAST(count(*) OVER () AS BIGINT)
         {from}
         ORDER BY r.model, r.dataset, min(e.position), r.example_id
         LIMIT {limit} OFFSET {offset}"
    ))
    .bind_all(values)
}

/// How many claims match (for a page past the end, which carries no count).
fn count_stmt(query: &AfcQuery) -> Stmt {
    let (from, values) = grouped(query);
    Stmt::new(format!(
        "SELECT CAST(count(*) AS BIGINT) FROM (SELECT r.example_id {from}) matching"
    ))
    .bind_all(values)
}

/// The settings' readings of a page's claims, one statement per decomposer and dataset
/// among them: `model, dataset, example_id, setting, verdict, score, n_subclaims,
/// fell_back`.
fn cells_stmts(dialect: Dialect, run: &str, rows: &[AfcListed]) -> Vec<Stmt> {
    let mut groups: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((r.decomposer.as_str(), r.dataset.as_str()))
            .or_default()
            .push(r.example_id.as_str());
    }
    groups
        .into_iter()
        .map(|((model, dataset), ids)| {
            Stmt::new(format!(
                "SELECT r.model, r.dataset, r.example_id, r.setting, r.verdict, r.score,
                        CAST(r.n_subclaims AS BIGINT), CAST(r.fell_back AS BIGINT)
                 FROM afc_results r
                 WHERE r.run_id = $1 AND r.model = $2 AND r.dataset = $3 AND {}",
                dialect.in_json_strings("r.example_id", "$4")
            ))
            .bind(run)
            .bind(model)
            .bind(dataset)
            .bind(serde_json::to_string(&ids).unwrap_or_default())
        })
        .collect()
}

type PageRow = (String, String, String, i64, String, String, i64);
type CellRow = (String, String, String, String, String, f64, i64, i64);
type ReadingRow = (
    String,
    String,
    String,
    String,
    f64,
    i64,
    i64,
    i64,
    i64,
    String,
    Option<String>,
);

/// A page of a run's AFC claims.
pub(super) async fn afc_page<DB: Engine>(
    store: &SqlStore<DB>,
    query: &AfcQuery,
) -> Result<AfcPage, StoreError> {
    let found: Vec<PageRow> = store.query(page_stmt(query)).await?;
    let total = match found.first() {
        Some(r) => r.6,
        None => store
            .query::<(i64,)>(count_stmt(query))
            .await?
            .first()
            .map_or(0, |r| r.0),
    };
    let mut rows = found
        .into_iter()
        .map(
            |(decomposer, dataset, example_id, position, text, gold, _)| {
                Ok(AfcListed {
                    decomposer,
                    dataset,
                    example_id,
                    position,
                    text,
                    gold: verdict(&gold)?,
                    settings: BTreeMap::new(),
                })
            },
        )
        .collect::<Result<Vec<_>, StoreError>>()?;
    let at: BTreeMap<(String, String, String), usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let key = (
                r.decomposer.clone(),
                r.dataset.clone(),
                r.example_id.clone(),
            );
            (key, i)
        })
        .collect();
    for stmt in cells_stmts(DB::DIALECT, &query.run, &rows) {
        for (model, dataset, id, s, v, score, subs, fell_back) in
            store.query::<CellRow>(stmt).await?
        {
            if let Some(&i) = at.get(&(model, dataset, id)) {
                rows[i].settings.insert(
                    setting(&s)?,
                    AfcCell {
                        verdict: verdict(&v)?,
                        score,
                        n_subclaims: count(subs)?,
                        fell_back: fell_back != 0,
                    },
                );
            }
        }
    }
    Ok(AfcPage {
        total: u64::try_from(total).unwrap_or(0),
        rows,
    })
}

/// One claim of one decomposer with every setting's judgement; `None` when the run
/// judged none.
pub(super) async fn afc_claim<DB: Engine>(
    store: &SqlStore<DB>,
    run: &str,
    dataset: &str,
    decomposer: &str,
    example_id: &str,
) -> Result<Option<AfcClaim>, StoreError> {
    let found: Vec<ReadingRow> = store
        .query(
            Stmt::new(
                "SELECT r.setting, r.mode, r.judge, r.verdict, r.score,
                        CAST(r.n_subclaims AS BIGINT), CAST(r.fell_back AS BIGINT),
                        CAST(r.unparsable AS BIGINT), CAST(r.llm_calls AS BIGINT),
                        r.judged_json, r.error
                 FROM afc_results r
                 WHERE r.run_id = $1 AND r.dataset = $2 AND r.model = $3
                   AND r.example_id = $4",
            )
            .bind(run)
            .bind(dataset)
            .bind(decomposer)
            .bind(example_id),
        )
        .await?;
    if found.is_empty() {
        return Ok(None);
    }
    let mut readings = found
        .into_iter()
        .map(
            |(s, mode, judge, v, score, subs, fell_back, unparsable, calls, judged, error)| {
                Ok(AfcReading {
                    setting: setting(&s)?,
                    mode,
                    judge,
                    verdict: verdict(&v)?,
                    score,
                    n_subclaims: count(subs)?,
                    fell_back: fell_back != 0,
                    unparsable: count(unparsable)?,
                    llm_calls: calls,
                    judged: serde_json::from_str(&judged)
                        .map_err(|e| corrupt(format!("judged_json of {example_id:?}: {e}")))?,
                    error,
                })
            },
        )
        .collect::<Result<Vec<_>, StoreError>>()?;
    readings.sort_by_key(|r| AfcSetting::ALL.iter().position(|s| *s == r.setting));
    let example: Option<(i64, String, String)> = store
        .query(
            Stmt::new(
                "SELECT CAST(e.position AS BIGINT), e.text, e.meta_json
                 FROM afc_results r
                 JOIN jobs j ON j.job_key = r.job_key
                 JOIN examples e ON e.dataset_hash = j.dataset_hash
                      AND e.example_id = r.example_id
                 WHERE r.run_id = $1 AND r.dataset = $2 AND r.model = $3
                   AND r.example_id = $4
                 LIMIT 1",
            )
            .bind(run)
            .bind(dataset)
            .bind(decomposer)
            .bind(example_id),
        )
        .await?
        .into_iter()
        .next();
    let Some((position, text, meta_json)) = example else {
        return Err(corrupt(format!(
            "claim {example_id:?} of {dataset:?} has judgements but no text"
        )));
    };
    let gold = serde_json::from_str::<serde_json::Value>(&meta_json)
        .ok()
        .and_then(|meta| meta.get(AFC_META_KEY).cloned())
        .ok_or_else(|| corrupt(format!("claim {example_id:?} has no meta.{AFC_META_KEY}")))
        .and_then(|gold| {
            serde_json::from_value::<AfcGold>(gold)
                .map_err(|e| corrupt(format!("meta.{AFC_META_KEY} of {example_id:?}: {e}")))
        })?;
    let decomposers: Vec<(String,)> = store
        .query(
            Stmt::new(
                "SELECT DISTINCT model FROM afc_results
                 WHERE run_id = $1 AND dataset = $2 AND example_id = $3 ORDER BY model",
            )
            .bind(run)
            .bind(dataset)
            .bind(example_id),
        )
        .await?;
    Ok(Some(AfcClaim {
        decomposer: decomposer.to_string(),
        dataset: dataset.to_string(),
        example_id: example_id.to_string(),
        position,
        text,
        gold,
        readings,
        decomposers: decomposers.into_iter().map(|(m,)| m).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query() -> AfcQuery {
        AfcQuery {
            run: "r".into(),
            decomposer: Some("m".into()),
            dataset: Some("d".into()),
            wrong: Some(AfcSetting::Credence),
            right: Some(AfcSetting::None),
            disagree: true,
            offset: 50,
            limit: 25,
        }
    }

    #[test]
    fn every_value_is_bound_in_placeholder_order() {
        let stmt = page_stmt(&query());
        // run, decomposer, dataset, wrong, right, limit, offset.
        assert_eq!(stmt.values().len(), 7);
        for i in 1..=7 {
            assert!(
                stmt.sql().contains(&format!("${i}")),
                "${i}: {}",
                stmt.sql()
            );
        }
        assert!(!stmt.sql().contains("$8"));
        let sql = stmt.sql();
        assert!(
            sql.contains("r.setting = $4 AND r.verdict <> r.gold"),
            "{sql}"
        );
        assert!(
            sql.contains("r.setting = $5 AND r.verdict = r.gold"),
            "{sql}"
        );
        assert!(sql.contains("count(DISTINCT r.verdict) > 1"), "{sql}");
        assert_eq!(count_stmt(&query()).values().len(), 5);
        // No filter, no HAVING.
        let all = AfcQuery {
            decomposer: None,
            dataset: None,
            wrong: None,
            right: None,
            disagree: false,
            ..query()
        };
        assert!(!page_stmt(&all).sql().contains("HAVING"));
    }

    #[test]
    fn stored_labels_read_back_or_are_named_corrupt() {
        assert_eq!(verdict("SUPPORT").unwrap(), Verdict::Support);
        assert_eq!(verdict("REFUTE").unwrap(), Verdict::Refute);
        assert!(verdict("support")
            .unwrap_err()
            .to_string()
            .contains("verdict"));
        assert!(count(-1).is_err());
        assert_eq!(setting("credence").unwrap(), AfcSetting::Credence);
        assert!(setting("all").is_err());
    }
}
