//! The list's SQL: one [`ExampleQuery`] as the statement of its page (with the count of
//! every row it matches, in the same pass), the statement counting it, and the
//! statements reading a page's cells. A listed row is the anchor mode's prediction `p`;
//! what concerns another mode reads it through `q` (the same example's prediction in
//! that mode, an index lookup on `predictions_by_example`).

use super::{ExampleQuery, ListedExample, SortKey};
use crate::store::sql::{Dialect, SqlValue, Stmt};
use credence_core::domain::{Better, ExampleMetrics, Mode};
use std::collections::BTreeMap;

/// The condition that `q` is a prediction of the listed row `p`'s example.
const SAME_EXAMPLE: &str = "q.run_id = p.run_id AND q.model = p.model AND q.dataset = p.dataset
       AND q.example_id = p.example_id";

/// The listed row's job and example (its position and text).
const JOINS: &str = "
         JOIN jobs j ON j.job_key = p.job_key
         JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = p.example_id";

/// Binds `value` as the next placeholder of `values`; returns the placeholder.
pub(super) fn push(values: &mut Vec<SqlValue>, value: impl Into<SqlValue>) -> String {
    values.push(value.into());
    format!("${}", values.len())
}

/// The listed rows' `FROM ... WHERE`, its values from `$1` (then the sort's), the sort
/// expression, and how many of the values are the filters'.
fn list_from(query: &ExampleQuery) -> (String, Vec<SqlValue>, Option<String>, usize) {
    let mut values: Vec<SqlValue> = vec![query.run.clone().into(), query.anchor.as_str().into()];
    let mut sql = format!("FROM predictions p{JOINS} WHERE p.run_id = $1 AND p.mode = $2");
    if let Some(d) = &query.dataset {
        sql.push_str(&format!(" AND p.dataset = {}", push(&mut values, d)));
    }
    if let Some(m) = &query.model {
        sql.push_str(&format!(" AND p.model = {}", push(&mut values, m)));
    }
    // A listed row is the anchor mode's prediction `p`: what concerns that mode reads
    // `p`'s own values (one index lookup per row), other modes go through `q`.
    let anchor = query.anchor;
    if let Some(check) = query.check {
        let (metric, condition) = check.condition();
        let at = push(&mut values, metric);
        let sub = match query.mode {
            Some(m) if m == anchor => format!(
                "SELECT 1 FROM metric_values v
                 WHERE v.job_key = p.job_key AND v.example_id = p.example_id
                   AND v.metric = {at} AND {condition}"
            ),
            Some(m) => {
                let mode = push(&mut values, m.as_str());
                format!(
                    "SELECT 1 FROM predictions q
                     JOIN metric_values v ON v.job_key = q.job_key AND v.example_id = q.example_id
                     WHERE {SAME_EXAMPLE} AND q.mode = {mode} AND v.metric = {at} AND {condition}"
                )
            }
            None => format!(
                "SELECT 1 FROM predictions q
                 JOIN metric_values v ON v.job_key = q.job_key AND v.example_id = q.example_id
                 WHERE {SAME_EXAMPLE} AND v.metric = {at} AND {condition}"
            ),
        };
        sql.push_str(&format!(" AND EXISTS ({sub})"));
    }
    if let Some(metric) = &query.worse_than_base {
        let worse = match ExampleMetrics::def(metric).and_then(|d| d.presentation.better) {
            Some(Better::Lower) => ">",
            _ => "<",
        };
        let at = push(&mut values, metric);
        let sub = match query.mode {
            // The mode's own value `v` against base's `w`.
            Some(m) if m == anchor => format!(
                "SELECT 1 FROM metric_values v
                 JOIN predictions b ON b.run_id = p.run_id AND b.model = p.model
                      AND b.dataset = p.dataset AND b.example_id = p.example_id AND b.mode = 'base'
                 JOIN metric_values w ON w.job_key = b.job_key AND w.example_id = b.example_id
                      AND w.metric = v.metric
                 WHERE v.job_key = p.job_key AND v.example_id = p.example_id
                   AND v.metric = {at} AND v.value {worse} w.value"
            ),
            Some(m) => {
                let mode = push(&mut values, m.as_str());
                format!(
                    "SELECT 1 FROM predictions q
                     JOIN metric_values v ON v.job_key = q.job_key AND v.example_id = q.example_id
                     JOIN predictions b ON b.run_id = q.run_id AND b.model = q.model
                          AND b.dataset = q.dataset AND b.example_id = q.example_id
                          AND b.mode = 'base'
                     JOIN metric_values w ON w.job_key = b.job_key AND w.example_id = b.example_id
                          AND w.metric = v.metric
                     WHERE {SAME_EXAMPLE} AND q.mode = {mode} AND v.metric = {at}
                       AND v.value {worse} w.value"
                )
            }
            // Any mode: the row is base's when the caller anchors there (`w` is `p`'s).
            None if anchor == Mode::Base => format!(
                "SELECT 1 FROM metric_values w
                 JOIN predictions q ON {SAME_EXAMPLE} AND q.mode <> 'base'
                 JOIN metric_values v ON v.job_key = q.job_key AND v.example_id = q.example_id
                      AND v.metric = w.metric
                 WHERE w.job_key = p.job_key AND w.example_id = p.example_id
                   AND w.metric = {at} AND v.value {worse} w.value"
            ),
            None => format!(
                "SELECT 1 FROM predictions q
                 JOIN metric_values v ON v.job_key = q.job_key AND v.example_id = q.example_id
                 JOIN predictions b ON b.run_id = q.run_id AND b.model = q.model
                      AND b.dataset = q.dataset AND b.example_id = q.example_id AND b.mode = 'base'
                 JOIN metric_values w ON w.job_key = b.job_key AND w.example_id = b.example_id
                      AND w.metric = v.metric
                 WHERE {SAME_EXAMPLE} AND q.mode <> 'base' AND v.metric = {at}
                   AND v.value {worse} w.value"
            ),
        };
        sql.push_str(&format!(" AND EXISTS ({sub})"));
    }
    // The sort's values come last, so that the count can leave them out.
    let filters = values.len();
    let of_mode = |values: &mut Vec<SqlValue>, m: Mode, own: &str, other: &str| {
        if m == anchor {
            own.to_string()
        } else {
            let mode = push(values, m.as_str());
            format!("{other} AND q.mode = {mode})")
        }
    };
    let sort = match &query.sort {
        SortKey::Position | SortKey::ExampleId => None,
        SortKey::Metric { metric, mode } => {
            let metric = push(&mut values, metric);
            Some(of_mode(
                &mut values,
                *mode,
                &format!(
                    "(SELECT v.value FROM metric_values v
                       WHERE v.job_key = p.job_key AND v.example_id = p.example_id
                         AND v.metric = {metric})"
                ),
                &format!(
                    "(SELECT v.value FROM predictions q
                       JOIN metric_values v ON v.job_key = q.job_key AND v.example_id = q.example_id
                      WHERE {SAME_EXAMPLE} AND v.metric = {metric}"
                ),
            ))
        }
        SortKey::LlmCalls(mode) => Some(of_mode(
            &mut values,
            *mode,
            "p.llm_calls",
            &format!("(SELECT q.llm_calls FROM predictions q WHERE {SAME_EXAMPLE}"),
        )),
        SortKey::Seconds(mode) => Some(of_mode(
            &mut values,
            *mode,
            "(SELECT sum(s.seconds) FROM stage_seconds s
               WHERE s.job_key = p.job_key AND s.example_id = p.example_id)",
            &format!(
                "(SELECT sum(s.seconds) FROM predictions q
                   JOIN stage_seconds s ON s.job_key = q.job_key AND s.example_id = q.example_id
                  WHERE {SAME_EXAMPLE}"
            ),
        )),
    };
    (sql, values, sort, filters)
}

/// The statement counting a query's rows.
pub(super) fn count_stmt(query: &ExampleQuery) -> Stmt {
    let (from, mut values, _, filters) = list_from(query);
    values.truncate(filters);
    // Every prediction has its job and its example: the count needs neither join.
    let from = from.replacen(JOINS, "", 1);
    Stmt::new(format!("SELECT count(*) {from}")).bind_all(values)
}

/// The statement of a query's page: `dataset, model, example_id, position, text,
/// total` (the rows the filters leave, counted in the same pass), then the sort value.
pub(super) fn page_stmt(query: &ExampleQuery) -> Stmt {
    let (from, mut values, sort, _) = list_from(query);
    let dir = if query.descending { "DESC" } else { "ASC" };
    let order = match (&query.sort, &sort) {
        (_, Some(_)) => {
            format!("sort_value {dir} NULLS LAST, p.dataset, p.model, e.position")
        }
        (SortKey::ExampleId, None) => format!("p.example_id {dir}, p.dataset, p.model"),
        (_, None) => format!("p.dataset {dir}, p.model {dir}, e.position {dir}"),
    };
    let sort_column = sort.map_or(String::new(), |s| format!(", {s} AS sort_value"));
    values.push(i64::try_from(query.limit).unwrap_or(i64::MAX).into());
    let limit = values.len();
    values.push(i64::try_from(query.offset).unwrap_or(i64::MAX).into());
    let offset = values.len();
    Stmt::new(format!(
        "SELECT p.dataset, p.model, p.example_id, CAST(e.position AS BIGINT), e.text,
                CAST(count(*) OVER () AS BIGINT){sort_column}
         {from} ORDER BY {order} LIMIT ${limit} OFFSET ${offset}"
    ))
    .bind_all(values)
}

/// The statements of the per-mode cells of a page's rows, one per dataset and model
/// among them (each an index lookup by example id): `dataset, model, example_id, mode,
/// llm_calls, error, seconds, metric, value`.
pub(super) fn cells_stmts(dialect: Dialect, run: &str, rows: &[ListedExample]) -> Vec<Stmt> {
    let mut groups: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for r in rows {
        groups
            .entry((r.dataset.as_str(), r.model.as_str()))
            .or_default()
            .push(r.example_id.as_str());
    }
    groups
        .into_iter()
        .map(|((dataset, model), ids)| {
            Stmt::new(format!(
                "SELECT p.dataset, p.model, p.example_id, p.mode, CAST(p.llm_calls AS BIGINT),
                        p.error,
                        (SELECT sum(s.seconds) FROM stage_seconds s
                          WHERE s.job_key = p.job_key AND s.example_id = p.example_id),
                        v.metric, v.value
                 FROM predictions p
                 LEFT JOIN metric_values v
                        ON v.job_key = p.job_key AND v.example_id = p.example_id
                 WHERE p.run_id = $1 AND p.model = $2 AND p.dataset = $3 AND {}",
                dialect.in_json_strings("p.example_id", "$4")
            ))
            .bind(run)
            .bind(model)
            .bind(dataset)
            .bind(serde_json::to_string(&ids).unwrap_or_default())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::browse::Check;

    fn query() -> ExampleQuery {
        ExampleQuery {
            run: "r".into(),
            dataset: Some("d".into()),
            model: None,
            mode: Some(Mode::Repair),
            anchor: Mode::Repair,
            check: Some(Check::Pronoun),
            worse_than_base: Some("avr".into()),
            sort: SortKey::Metric {
                metric: "semantic_f1".into(),
                mode: Mode::Base,
            },
            descending: true,
            offset: 50,
            limit: 25,
        }
    }

    #[test]
    fn every_value_is_bound_in_placeholder_order() {
        let bound = |stmt: &Stmt| {
            let n = stmt.values().len();
            for i in 1..=n {
                assert!(
                    stmt.sql().contains(&format!("${i}")),
                    "${i} in {}",
                    stmt.sql()
                );
            }
            assert!(
                !stmt.sql().contains(&format!("${}", n + 1)),
                "{}",
                stmt.sql()
            );
            n
        };
        // run, anchor, dataset, check metric, worse metric (both the anchor's own), sort
        // metric and mode (another mode's), limit, offset.
        let stmt = page_stmt(&query());
        assert_eq!(bound(&stmt), 9);
        // A lower-is-better metric is worse when higher.
        assert!(stmt.sql().contains("v.value > w.value"), "{}", stmt.sql());
        assert!(stmt.sql().contains("sort_value DESC"));
        assert_eq!(bound(&count_stmt(&query())), 5);
        assert!(!count_stmt(&query()).sql().contains("JOIN examples"));
        // Any mode, under each anchor, and each sort key.
        for anchor in [Mode::Base, Mode::All] {
            for sort in [
                SortKey::Position,
                SortKey::ExampleId,
                SortKey::LlmCalls(Mode::Base),
                SortKey::Seconds(Mode::All),
            ] {
                let q = ExampleQuery {
                    mode: None,
                    anchor,
                    sort,
                    ..query()
                };
                bound(&page_stmt(&q));
                bound(&count_stmt(&q));
            }
        }
    }
}
