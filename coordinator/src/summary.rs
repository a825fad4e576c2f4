//! The summary table printed at the end of a run: mean per metric per
//! model x dataset x mode; a metric the sweep did not compute shows as `-`.

use credence_core::domain::{ExampleMetrics, MetricDef, MetricKind};
use credence_infra::store::SummaryRow;
use std::fmt::Write;

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
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, row: &[String]| {
        for (i, (c, w)) in row.iter().zip(&widths).enumerate() {
            // Text columns align left, numbers right.
            if i < 3 {
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
    for row in &cells {
        line(&mut out, row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use credence_core::Mode;

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
