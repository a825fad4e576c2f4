//! The SQL that follows from the metric list ([`ExampleMetrics::DEFS`]), the same for
//! both engines: the wide views people query, one column per metric
//! (`example_metrics`: one row per job and example; `results`: the same with the text,
//! claims and references; `config_summary`: the mean of every metric per
//! model x dataset x mode), and the queries that read `metric_values` by metric name
//! (aggregation, the audits). Stored values live in `metric_values`, one row per job,
//! example and metric, so a metric added to the list needs no migration: the views are
//! regenerated when a store opens and finds their recorded sha256 out of date.

use super::sql::{placeholders, Dialect, SqlValue, Stmt};
use credence_core::domain::ExampleMetrics;
use sha2::{Digest, Sha256};

/// A view to (re)create: its name and its `CREATE VIEW` statement.
pub(crate) struct View {
    pub name: &'static str,
    pub create: String,
}

impl View {
    /// The sha256 recorded in `generated_views`.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(self.create.as_bytes()))
    }
}

/// One column per metric, read from `metric_values` for the prediction row `p`.
fn metric_columns() -> String {
    ExampleMetrics::DEFS
        .iter()
        .map(|d| {
            format!(
                "(SELECT CAST(v.value AS {ty}) FROM metric_values v
                  WHERE v.job_key = p.job_key AND v.example_id = p.example_id
                    AND v.metric = '{name}') AS {name}",
                ty = d.kind.sql_type(),
                name = d.name
            )
        })
        .collect::<Vec<_>>()
        .join(",\n       ")
}

/// The generated views of an engine, in creation order (a later view may read an
/// earlier one; they are dropped in reverse).
pub(crate) fn views(dialect: Dialect) -> Vec<View> {
    let json = |col: &str| match dialect {
        Dialect::Sqlite => col.to_string(),
        Dialect::Postgres => format!("{col}::jsonb"),
    };
    let mut out = vec![
        View {
            name: "example_metrics",
            create: format!(
                "CREATE VIEW example_metrics AS
SELECT p.job_key, p.example_id, p.run_id, p.model, p.dataset, p.mode,
       {}
FROM predictions p",
                metric_columns()
            ),
        },
        View {
            name: "results",
            create: format!(
                "CREATE VIEW results AS
SELECT m.run_id, m.model, m.dataset, m.mode, m.example_id,
       e.text, {claims} AS claims, {refs} AS \"references\",
       {metrics},
       p.pipeline_version, p.llm_calls, p.error, {report} AS verifier, {repair} AS repair
FROM example_metrics m
JOIN predictions p ON p.job_key = m.job_key AND p.example_id = m.example_id
JOIN jobs j ON j.job_key = m.job_key
JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = m.example_id",
                claims = json("p.claims_json"),
                refs = json("e.references_json"),
                report = json("p.verifier_json"),
                repair = json("p.repair_json"),
                metrics = ExampleMetrics::DEFS
                    .iter()
                    .map(|d| format!("m.{}", d.name))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        },
    ];
    // A configuration's state: PostgreSQL keeps it in `configs`; SQLite's embedded engine
    // has one process, and the state follows from its jobs and its aggregates.
    let configs = match dialect {
        Dialect::Postgres => "configs".to_string(),
        Dialect::Sqlite => "(SELECT j.run_id, j.model, j.dataset, j.mode,
             CASE WHEN EXISTS (SELECT 1 FROM aggregates a
                               WHERE a.run_id = j.run_id AND a.model = j.model
                                 AND a.dataset = j.dataset AND a.mode = j.mode) THEN 'complete'
                  WHEN sum(j.state <> 'done') = 0 THEN 'aggregating'
                  ELSE 'running' END AS state
      FROM jobs j GROUP BY j.run_id, j.model, j.dataset, j.mode)"
            .to_string(),
    };
    let mean = |name: &str| match dialect {
        Dialect::Postgres => format!("avg(m.{name})::float8 AS {name}"),
        Dialect::Sqlite => format!("avg(m.{name}) AS {name}"),
    };
    out.push(View {
        name: "config_summary",
        create: format!(
            "CREATE VIEW config_summary AS
SELECT c.run_id, c.model, c.dataset, c.mode, c.state,
       count(m.example_id) AS n,
       {}
FROM {configs} c
LEFT JOIN example_metrics m
  ON m.run_id = c.run_id AND m.model = c.model AND m.dataset = c.dataset AND m.mode = c.mode
GROUP BY c.run_id, c.model, c.dataset, c.mode, c.state",
            ExampleMetrics::DEFS
                .iter()
                .map(|d| mean(d.name))
                .collect::<Vec<_>>()
                .join(",\n       ")
        ),
    });
    out
}

/// The statements that bring the generated views up to date, given the sha256 recorded
/// for each (`generated_views`), or nothing when every view is current. Run them in one
/// transaction: every view is dropped (in reverse) and created again, since a view may
/// read another.
pub(crate) fn view_updates(
    dialect: Dialect,
    recorded: &std::collections::HashMap<String, String>,
) -> Vec<String> {
    let views = views(dialect);
    let current = views.len() == recorded.len()
        && views
            .iter()
            .all(|v| recorded.get(v.name) == Some(&v.sha256()));
    if current {
        return Vec::new();
    }
    let mut stmts: Vec<String> = views
        .iter()
        .rev()
        .map(|v| format!("DROP VIEW IF EXISTS {}", v.name))
        .collect();
    stmts.push("DELETE FROM generated_views".into());
    for v in &views {
        stmts.push(v.create.clone());
        stmts.push(format!(
            "INSERT INTO generated_views (name, sha256) VALUES ('{}', '{}')",
            v.name,
            v.sha256()
        ));
    }
    stmts
}

/// `example_id, metric, value` of every example of one configuration, in dataset order
/// (`metric` and `value` NULL for an example without metrics); the four placeholders are
/// the configuration's run, model, dataset and mode.
pub(crate) fn config_values_sql(run: &str, model: &str, dataset: &str, mode: &str) -> String {
    format!(
        "SELECT p.example_id, v.metric, v.value
         FROM predictions p
         JOIN jobs j ON j.job_key = p.job_key
         JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = p.example_id
         LEFT JOIN metric_values v ON v.job_key = p.job_key AND v.example_id = p.example_id
         WHERE p.run_id = {run} AND p.model = {model} AND p.dataset = {dataset} AND p.mode = {mode}
         ORDER BY e.position, v.metric"
    )
}

/// Every stored output of a run with its source, references and the metrics the audits
/// read (`credence audit`): `model, dataset, mode, example_id, text, references_json,
/// claims_json, llm_calls, avr, epr, rr, n_viol, verify_ok, verifier_json, semantic_f1`,
/// examples in dataset order.
pub(crate) fn run_outputs_sql(run: &str) -> String {
    let metric = |name: &str| {
        format!(
            "(SELECT v.value FROM metric_values v
              WHERE v.job_key = p.job_key AND v.example_id = p.example_id AND v.metric = '{name}')"
        )
    };
    format!(
        "SELECT p.model, p.dataset, p.mode, p.example_id, e.text, e.references_json,
                p.claims_json, p.llm_calls, {avr}, {epr}, {rr}, {n_viol}, {verify_ok},
                p.verifier_json, {semantic_f1}
         FROM predictions p
         JOIN jobs j ON j.job_key = p.job_key
         JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = p.example_id
         WHERE p.run_id = {run}
         ORDER BY p.model, p.dataset, p.mode, e.position",
        avr = metric("avr"),
        epr = metric("epr"),
        rr = metric("rr"),
        n_viol = metric("n_viol"),
        verify_ok = metric("verify_ok"),
        semantic_f1 = metric("semantic_f1"),
    )
}

/// The statements that write an aggregation, in order, with their bound values: for
/// the configuration, delete its aggregates and insert one row per metric; for each
/// pair, delete its comparisons and insert one row per metric.
pub(crate) fn aggregation_statements(agg: &credence_core::aggregation::Aggregation) -> Vec<Stmt> {
    use SqlValue::{Int, Real, Text};
    let c = &agg.config;
    let settings = [
        Int(agg.bootstrap.resamples as i64),
        Int(agg.bootstrap.seed as i64),
        Text(agg.method.as_str().into()),
    ];
    let mut out = vec![Stmt::new(
        "DELETE FROM aggregates WHERE run_id = $1 AND model = $2 AND dataset = $3 AND mode = $4",
    )
    .bind(&c.run_id)
    .bind(&c.model)
    .bind(&c.dataset)
    .bind(c.mode.as_str())];
    for e in &agg.estimates {
        out.push(
            Stmt::new(format!(
                "INSERT INTO aggregates (run_id, model, dataset, mode, metric, n, mean, ci_low,
                     ci_high, resamples, seed, method) VALUES ({})",
                placeholders(1, 12)
            ))
            .bind(&c.run_id)
            .bind(&c.model)
            .bind(&c.dataset)
            .bind(c.mode.as_str())
            .bind(&e.metric)
            .bind(e.n as i64)
            .bind(e.mean)
            .bind(e.ci.low)
            .bind(e.ci.high)
            .bind_all(settings.iter().cloned()),
        );
    }
    for pair in &agg.comparisons {
        let key = [
            Text(c.run_id.clone()),
            Text(c.dataset.clone()),
            Text(pair.a.model.clone()),
            Text(pair.a.mode.as_str().into()),
            Text(pair.b.model.clone()),
            Text(pair.b.mode.as_str().into()),
        ];
        out.push(
            Stmt::new(
                "DELETE FROM comparisons WHERE run_id = $1 AND dataset = $2 AND a_model = $3
                     AND a_mode = $4 AND b_model = $5 AND b_mode = $6",
            )
            .bind_all(key.iter().cloned()),
        );
        for m in &pair.metrics {
            let d = &m.diff;
            out.push(
                Stmt::new(format!(
                    "INSERT INTO comparisons (run_id, dataset, a_model, a_mode, b_model, b_mode,
                         metric, n, delta, ci_low, ci_high, p_value, p_le, p_ge, resamples,
                         seed, method) VALUES ({})",
                    placeholders(1, 17)
                ))
                .bind_all(key.iter().cloned())
                .bind_all([
                    Text(m.metric.clone()),
                    Int(d.n as i64),
                    Real(d.diff),
                    Real(d.ci.low),
                    Real(d.ci.high),
                    Real(d.test.p_value),
                    Real(d.test.p_le),
                    Real(d.test.p_ge),
                ])
                .bind_all(settings.iter().cloned()),
            );
        }
    }
    out
}

/// A run's `aggregates` and `comparisons` rows; `run` is the placeholder of the run id.
/// Sorted in the caller (the engines' text collations differ).
pub(crate) fn run_statistics_sql(run: &str) -> (String, String) {
    (
        format!(
            "SELECT model, dataset, mode, metric, n, mean, ci_low, ci_high
             FROM aggregates WHERE run_id = {run}"
        ),
        format!(
            "SELECT dataset, metric, a_model, a_mode, b_model, b_mode, n, delta, ci_low,
                    ci_high, p_value, p_le, p_ge
             FROM comparisons WHERE run_id = {run}"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_a_column_of_every_view() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            for view in views(dialect) {
                for d in ExampleMetrics::DEFS {
                    assert!(
                        view.create.contains(&format!(" AS {}", d.name))
                            || view.create.contains(&format!("m.{}", d.name)),
                        "{} lacks {}",
                        view.name,
                        d.name
                    );
                }
            }
        }
        assert_eq!(views(Dialect::Sqlite).len(), 3);
        assert_eq!(views(Dialect::Postgres).len(), 3);
    }

    #[test]
    fn views_are_rebuilt_only_when_out_of_date() {
        let mut recorded = std::collections::HashMap::new();
        let all = view_updates(Dialect::Sqlite, &recorded);
        assert_eq!(all[0], "DROP VIEW IF EXISTS config_summary");
        assert_eq!(all.len(), 3 + 1 + 3 * 2);
        for v in views(Dialect::Sqlite) {
            recorded.insert(v.name.to_string(), v.sha256());
        }
        assert!(view_updates(Dialect::Sqlite, &recorded).is_empty());
        recorded.insert("results".into(), "0".repeat(64));
        assert_eq!(view_updates(Dialect::Sqlite, &recorded).len(), 10);
    }
}
