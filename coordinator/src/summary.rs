//! The summary table printed at the end of a run: mean per metric per
//! model x dataset x mode; a metric the sweep did not compute shows as `-`.

use credence_shared::store::SummaryRow;
use std::fmt::Write;

/// Renders the rows as an aligned text table.
pub fn render(rows: &[SummaryRow]) -> String {
    let header = [
        "model",
        "dataset",
        "mode",
        "n",
        "claims",
        "jaccard_f1",
        "semantic_f1",
        "epr",
        "avr",
        "rr",
        "verify%",
    ];
    let opt = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.model.clone(),
                r.dataset.clone(),
                r.mode.to_string(),
                r.n.to_string(),
                format!("{:.2}", r.claims),
                format!("{:.4}", r.jaccard_f1),
                opt(r.semantic_f1),
                opt(r.epr),
                opt(r.avr),
                opt(r.rr),
                r.verify
                    .map_or_else(|| "-".to_string(), |v| format!("{:.1}", 100.0 * v)),
            ]
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
    line(&mut out, &header.map(String::from));
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
    use credence_shared::Mode;

    #[test]
    fn renders_aligned_columns_with_dashes_for_missing_metrics() {
        let rows = [SummaryRow {
            model: "oracle".into(),
            dataset: "sample".into(),
            mode: Mode::SelfRepair,
            n: 40,
            claims: 2.125,
            jaccard_f1: 0.91234,
            semantic_f1: None,
            epr: Some(1.0),
            avr: None,
            rr: None,
            verify: Some(0.5),
        }];
        let t = render(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "model   dataset  mode          n  claims  jaccard_f1  semantic_f1     epr  avr  rr  verify%");
        assert_eq!(lines[2], "oracle  sample   self_repair  40    2.12      0.9123            -  1.0000    -   -     50.0");
    }
}
