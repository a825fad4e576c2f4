//! Reports of a finished run, read once from the store ([`RunData::load`]): every
//! aggregate and comparison, and the paper's tables ([`tables`]) in Markdown, LaTeX, CSV or JSON ([`render`]), or an HTML page with
//! plots ([`html`]); the audits and the timing table as terminal text ([`text`]).

mod data;
pub mod html;
pub mod render;
pub mod tables;
pub mod text;

use credence_core::afc::table::AfcTable;
use credence_infra::store::RunStatistics;
pub use data::{afc_table, timing_table, ComparedRun, LoadOptions, RunData, REPAIR_PASSES};
use serde_json::{json, Value};

/// The formats `credence report` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Markdown: a heading and a pipe table per table.
    Md,
    /// A LaTeX document with booktabs tables (pdflatex compiles it as it is).
    Latex,
    /// Long-form CSV, one line per table cell.
    Csv,
    /// One self-contained HTML page: plots (each metric by model x mode with its 95%
    /// interval, a forest plot of every mode's difference from base) and every table.
    Html,
    /// One JSON object: `aggregates`, `comparisons`, `tables`.
    Json,
}

/// The `json` report: `{"aggregates": [{model, dataset, mode, metric, n, mean, ci_low,
/// ci_high}], "comparisons": [{model, dataset, mode, baseline, metric, diff, ci_low,
/// ci_high, p_value}], "tables": {NAME: [table, ...]}}`, and with an AFC table
/// `"afc": {cells, deltas, correlations}` at full precision. A comparison's `model`/`mode` is its system and
/// `baseline` its baseline's mode, or `MODEL/MODE` when the baseline is another model's
/// (`baseline_model` and `baseline_mode` always say both).
pub fn json(
    stats: &RunStatistics,
    tables: &[tables::TableOutcome],
    afc: Option<&AfcTable>,
) -> Value {
    let aggregates: Vec<Value> = stats
        .aggregates
        .iter()
        .map(|a| {
            json!({
                "model": a.model, "dataset": a.dataset, "mode": a.mode, "metric": a.metric,
                "n": a.n, "mean": a.mean, "ci_low": a.ci_low, "ci_high": a.ci_high,
            })
        })
        .collect();
    let comparisons: Vec<Value> = stats
        .comparisons
        .iter()
        .map(|c| {
            let baseline = if c.b_model == c.a_model {
                c.b_mode.clone()
            } else {
                format!("{}/{}", c.b_model, c.b_mode)
            };
            json!({
                "model": c.a_model, "dataset": c.dataset, "mode": c.a_mode,
                "baseline": baseline, "baseline_model": c.b_model, "baseline_mode": c.b_mode,
                "metric": c.metric, "n": c.n, "diff": c.delta, "ci_low": c.ci_low,
                "ci_high": c.ci_high, "p_value": c.p_value,
            })
        })
        .collect();
    let mut out = json!({
        "aggregates": aggregates,
        "comparisons": comparisons,
        "tables": render::json_tables(tables),
    });
    if let Some(afc) = afc {
        out["afc"] = json!(afc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use credence_infra::store::{AggregateRecord, ComparisonRecord};

    #[test]
    fn json_has_the_issue_s_fields() {
        let stats = RunStatistics {
            aggregates: vec![AggregateRecord {
                model: "m".into(),
                dataset: "d".into(),
                mode: "all".into(),
                metric: "avr".into(),
                n: 10,
                mean: 0.25,
                ci_low: Some(0.1),
                ci_high: Some(0.4),
            }],
            comparisons: ["m", "o"]
                .iter()
                .map(|b| ComparisonRecord {
                    dataset: "d".into(),
                    metric: "avr".into(),
                    a_model: "m".into(),
                    a_mode: "all".into(),
                    b_model: b.to_string(),
                    b_mode: "base".into(),
                    n: 10,
                    delta: -0.1,
                    ci_low: Some(-0.2),
                    ci_high: Some(0.0),
                    p_value: Some(0.04),
                    p_le: Some(0.02),
                    p_ge: Some(0.99),
                })
                .collect(),
        };
        let v = json(&stats, &[], None);
        assert_eq!(v["aggregates"][0]["ci_high"], 0.4);
        assert_eq!(v["comparisons"][0]["baseline"], "base");
        assert_eq!(v["comparisons"][1]["baseline"], "o/base");
        assert_eq!(v["comparisons"][1]["diff"], -0.1);
        assert_eq!(v["comparisons"][1]["p_value"], 0.04);
        assert!(v["tables"].as_object().is_some_and(|t| t.is_empty()));
    }
}
