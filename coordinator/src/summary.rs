//! The summary table printed at the end of a run: mean per metric per
//! model x dataset x mode, read from the run's `aggregates` like the report's tables (the
//! aggregation of each finished configuration writes them); a metric the sweep did not
//! compute shows as `-`. A configuration with a failed or unfinished job is never
//! aggregated, so it is not a row: the run names it below the table instead.

use credence_core::afc::table::AfcTable;
use credence_core::domain::{ExampleMetrics, MetricDef, MetricKind, Mode};
use credence_core::job::{ConfigRef, Job};
use credence_infra::store::RunStatistics;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Mean of each metric over one model x dataset x mode of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
    /// Examples aggregated (the most of any metric: an example whose decomposition
    /// failed has no metrics).
    pub n: u32,
    /// Mean of each metric computed for these examples, by metric name
    /// ([`ExampleMetrics::DEFS`]); a metric the sweep did not compute is absent.
    pub means: BTreeMap<String, f64>,
}

impl SummaryRow {
    /// The mean of a metric, if computed.
    pub fn mean(&self, metric: &str) -> Option<f64> {
        self.means.get(metric).copied()
    }
}

/// The summary of the configurations of `jobs` (in plan order: models, datasets and
/// modes as they first appear) from the run's aggregates; the configurations without
/// aggregates come back second.
pub fn from_aggregates(jobs: &[Job], stats: &RunStatistics) -> (Vec<SummaryRow>, Vec<ConfigRef>) {
    let mut configs: Vec<ConfigRef> = Vec::new();
    // AFC configurations have no aggregates: their table is `render_afc`'s.
    for job in jobs.iter().filter(|j| j.afc.is_none()) {
        let c = ConfigRef::of(job);
        if !configs.contains(&c) {
            configs.push(c);
        }
    }
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for c in configs {
        let mut row = SummaryRow {
            model: c.model.clone(),
            dataset: c.dataset.clone(),
            mode: c.mode,
            n: 0,
            means: BTreeMap::new(),
        };
        for a in stats
            .aggregates
            .iter()
            .filter(|a| a.model == c.model && a.dataset == c.dataset && a.mode == c.mode.as_str())
        {
            row.n = row.n.max(u32::try_from(a.n).unwrap_or(u32::MAX));
            row.means.insert(a.metric.clone(), a.mean);
        }
        if row.means.is_empty() {
            missing.push(c);
        } else {
            rows.push(row);
        }
    }
    (rows, missing)
}

/// Renders the rows as an aligned text table: the metrics with a summary label in
/// [`ExampleMetrics::DEFS`], in that order (claims with 2 decimals, flags as a
/// percentage, other metrics with 4).
pub fn render(rows: &[SummaryRow]) -> String {
    let shown: Vec<&MetricDef> = ExampleMetrics::DEFS
        .iter()
        .filter(|d| d.label.is_some())
        .collect();
    let mut header = vec!["model", "dataset", "mode", "n"];
    header.extend(shown.iter().filter_map(|d| d.label));
    let header = header;
    let cell = |d: &MetricDef, v: Option<f64>| match (d.kind, v) {
        (_, None) => "-".to_string(),
        (MetricKind::Flag, Some(v)) => format!("{:.1}", 100.0 * v),
        (MetricKind::Count, Some(v)) => format!("{v:.2}"),
        (MetricKind::Real, Some(v)) => format!("{v:.4}"),
    };
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                r.model.clone(),
                r.dataset.clone(),
                r.mode.to_string(),
                r.n.to_string(),
            ];
            row.extend(shown.iter().map(|d| cell(d, r.mean(d.name))));
            row
        })
        .collect();
    aligned(&header, &cells, 3)
}

/// The AFC results of an embedded run as an aligned text table: per decomposer, AFC
/// dataset and setting, the claims and their accuracy, macro-F1 and AUC (the intervals
/// and differences are `credence report --table afc`'s).
pub fn render_afc(table: &AfcTable) -> String {
    let header = [
        "decomposer",
        "afc dataset",
        "setting",
        "n",
        "acc",
        "macro-f1",
        "auc",
        "subs",
    ];
    let cells: Vec<Vec<String>> = table
        .cells
        .iter()
        .map(|c| {
            let mut row = vec![
                c.model.clone(),
                c.dataset.clone(),
                c.setting.to_string(),
                c.n.to_string(),
            ];
            row.extend(
                c.metrics
                    .iter()
                    .map(|m| m.map_or("-".to_string(), |v| format!("{:.4}", v.value))),
            );
            row.push(format!("{:.2}", c.mean_subclaims));
            row
        })
        .collect();
    aligned(&header, &cells, 3)
}

/// `header` and `cells` as aligned columns: the first `text` left, the others right.
fn aligned(header: &[&str], cells: &[Vec<String>], text: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: &[String]| {
        for (i, (c, w)) in row.iter().zip(&widths).enumerate() {
            // Text columns align left, numbers right.
            if i < text {
                let _ = write!(out, "{c:<w$}  ");
            } else {
                let _ = write!(out, "{c:>w$}  ");
            }
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out.push('\n');
    };
    line(
        &mut out,
        &header.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
    );
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &rule);
    for row in cells {
        line(&mut out, row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use credence_infra::store::AggregateRecord;

    #[test]
    fn rows_follow_the_plan_and_unaggregated_configurations_are_named() {
        let jobs = credence_core::job::plan(
            "run",
            &[credence_core::job::PlannedModel {
                name: "m".into(),
                fingerprint: "f".into(),
            }],
            &[credence_core::job::PlannedDataset {
                id: "d".into(),
                hash: "h".into(),
                len: 4,
            }],
            &[Mode::Base, Mode::Repair, Mode::All],
            2,
            "c",
        );
        let record = |mode: &str, metric: &str, n: i64, mean: f64| AggregateRecord {
            model: "m".into(),
            dataset: "d".into(),
            mode: mode.into(),
            metric: metric.into(),
            n,
            mean,
            ci_low: None,
            ci_high: None,
        };
        let stats = RunStatistics {
            aggregates: vec![
                record("all", "jaccard_f1", 4, 0.75),
                record("base", "jaccard_f1", 3, 0.5),
                record("base", "n_claims", 4, 2.0),
                // Another run's configuration of the same name is not this plan's.
                AggregateRecord {
                    model: "other".into(),
                    ..record("base", "n_claims", 4, 9.0)
                },
            ],
            comparisons: Vec::new(),
        };
        let (rows, missing) = from_aggregates(&jobs, &stats);
        let shown: Vec<(Mode, u32, Option<f64>)> = rows
            .iter()
            .map(|r| (r.mode, r.n, r.mean("jaccard_f1")))
            .collect();
        assert_eq!(
            shown,
            [(Mode::Base, 4, Some(0.5)), (Mode::All, 4, Some(0.75))]
        );
        assert_eq!(rows[0].mean("n_claims"), Some(2.0));
        assert_eq!(rows[1].mean("n_claims"), None);
        assert_eq!(
            missing.iter().map(|c| c.mode).collect::<Vec<_>>(),
            [Mode::Repair]
        );
    }

    #[test]
    fn renders_aligned_columns_with_dashes_for_missing_metrics() {
        let means = [
            ("n_claims", 2.125),
            ("jaccard_f1", 0.91234),
            ("epr", 1.0),
            ("verify_ok", 0.5),
            ("mc", 0.75),
        ];
        let rows = [SummaryRow {
            model: "oracle".into(),
            dataset: "sample".into(),
            mode: Mode::SelfRepair,
            n: 40,
            means: means.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }];
        let t = render(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "model   dataset  mode          n  claims  jaccard_f1  semantic_f1     epr  avr  rr  verify%      mc");
        assert_eq!(lines[2], "oracle  sample   self_repair  40    2.12      0.9123            -  1.0000    -   -     50.0  0.7500");
    }
}
