//! The significance table: every paired comparison of a dataset, two-sided or one-sided,
//! optionally Holm-adjusted.

use super::*;

/// Which p-value the significance table prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PValueOptions {
    /// The one-sided "not better" share (Δ* <= 0 where higher is better, Δ* >= 0 where
    /// lower is better) instead of the two-sided p-value of PAPER.md.
    pub one_sided: bool,
    /// Holm's step-down adjustment across each table's tests.
    pub holm: bool,
}

pub(super) fn significance(
    stats: &RunStatistics,
    dataset: &str,
    options: PValueOptions,
) -> TableOutcome {
    let title = format!("Paired comparisons on {dataset}");
    let main = main_metrics();
    let compared: Vec<&ComparisonRecord> = stats
        .comparisons
        .iter()
        .filter(|c| c.dataset == dataset && main.iter().any(|m| m.metric == c.metric))
        .collect();
    if compared.is_empty() {
        return unavailable(
            "significance",
            Some(dataset),
            title,
            "the run has no paired comparisons on this dataset".into(),
        );
    }
    let metric = |name: &str| main.iter().find(|m| m.metric == name);
    let mut p: Vec<Option<f64>> = compared
        .iter()
        .map(|c| match (options.one_sided, metric(&c.metric)) {
            (false, _) => c.p_value,
            (
                true,
                Some(MetricColumn {
                    higher: Some(true), ..
                }),
            ) => c.p_le,
            (true, _) => c.p_ge,
        })
        .collect();
    if options.holm {
        let present: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_some()).collect();
        let adjusted = credence_core::stats::paired::holm(
            &present
                .iter()
                .map(|&i| p[i].unwrap_or(1.0))
                .collect::<Vec<_>>(),
        );
        for (&i, a) in present.iter().zip(adjusted) {
            p[i] = Some(a);
        }
    }
    let rows = compared
        .iter()
        .zip(&p)
        .map(|(c, p)| {
            let scale = if c.metric == "verify_ok" { 100.0 } else { 1.0 };
            let b = if c.b_model == c.a_model {
                c.b_mode.clone()
            } else {
                format!("{}/{}", c.b_model, c.b_mode)
            };
            vec![
                Cell::Text(c.a_model.clone()),
                Cell::Text(format!("{} vs {b}", c.a_mode)),
                Cell::Text(metric(&c.metric).map_or(c.metric.clone(), |m| m.heading.to_string())),
                Cell::Number {
                    value: c.n as f64,
                    digits: 0,
                },
                Cell::Estimate {
                    mean: c.delta * scale,
                    ci: c.ci_low.zip(c.ci_high).map(|(l, h)| (l * scale, h * scale)),
                    digits: if scale == 1.0 { 3 } else { 1 },
                    bold: p.is_some_and(|p| p < 0.05),
                },
                p.map_or(Cell::Missing, Cell::PValue),
            ]
        })
        .collect();
    let which = match (options.one_sided, options.holm) {
        (false, false) => "two-sided paired bootstrap p-value".to_string(),
        (true, false) => "one-sided share of resampled differences that are not an improvement (<= 0 where higher is better, >= 0 for AVR and RR)".to_string(),
        (false, true) => format!("two-sided paired bootstrap p-value, Holm-adjusted over the table's {} tests", compared.len()),
        (true, true) => format!("one-sided \"not better\" share, Holm-adjusted over the table's {} tests", compared.len()),
    };
    TableOutcome::Table(Table {
        name: "significance",
        decomposer: None,
        dataset: Some(dataset.into()),
        title,
        columns: ["Model", "Comparison", "Metric", "n", "Difference", "p"]
            .map(String::from)
            .to_vec(),
        rows,
        note: Some(format!("Difference: mean(system) - mean(baseline) on the same examples, with its 95% paired bootstrap interval (verify% in points); p: {which}. Bold: p < 0.05.")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comparison(metric: &str, p: f64, p_le: f64, p_ge: f64) -> ComparisonRecord {
        ComparisonRecord {
            dataset: "d".into(),
            metric: metric.into(),
            a_model: "a".into(),
            a_mode: "all".into(),
            b_model: "a".into(),
            b_mode: "base".into(),
            n: 10,
            delta: 0.1,
            ci_low: Some(0.0),
            ci_high: Some(0.2),
            p_value: Some(p),
            p_le: Some(p_le),
            p_ge: Some(p_ge),
        }
    }

    fn p_column(t: &TableOutcome) -> Vec<f64> {
        let TableOutcome::Table(t) = t else {
            panic!("no table")
        };
        t.rows
            .iter()
            .map(|r| match r[5] {
                Cell::PValue(p) => p,
                ref other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn significance_prints_two_sided_one_sided_or_holm_adjusted_p() {
        let stats = RunStatistics {
            aggregates: Vec::new(),
            comparisons: vec![
                comparison("semantic_f1", 0.01, 0.005, 0.996),
                comparison("avr", 0.04, 0.98, 0.02),
                comparison("epr", 0.03, 0.015, 0.99),
            ],
        };
        let two = significance(&stats, "d", PValueOptions::default());
        assert_eq!(p_column(&two), [0.01, 0.04, 0.03]);
        // One-sided: "not better" is <= 0 for Semantic-F1 and EPR, >= 0 for AVR.
        let one = significance(
            &stats,
            "d",
            PValueOptions {
                one_sided: true,
                holm: false,
            },
        );
        assert_eq!(p_column(&one), [0.005, 0.02, 0.015]);
        let holm = significance(
            &stats,
            "d",
            PValueOptions {
                one_sided: false,
                holm: true,
            },
        );
        assert_eq!(p_column(&holm), [0.03, 0.06, 0.06]);
        let TableOutcome::Table(t) = holm else {
            unreachable!()
        };
        assert!(t
            .note
            .unwrap()
            .contains("Holm-adjusted over the table's 3 tests"));
        // Bold follows the printed p: after Holm only the first stays below 0.05.
        let bold: Vec<bool> = t
            .rows
            .iter()
            .map(|r| matches!(r[4], Cell::Estimate { bold: true, .. }))
            .collect();
        assert_eq!(bold, [true, false, false]);
    }
}
