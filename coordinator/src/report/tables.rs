//! The paper's tables built from a finished run (PAPER.md "Tables to regenerate"), as
//! plain data that each format renders: per dataset the main table (model x mode with
//! Semantic-F1, EPR, AVR, RR and verify%, the best of each model's modes in bold),
//! Semantic-F1 against Jaccard-F1, the baselines, the matching ablation, tau_dup
//! sensitivity and the significance of every paired comparison; over the run the timing
//! per mode and the gating false negatives. A table the run has no figures for is
//! [`TableOutcome::Unavailable`], with the reason in one line.

use credence_shared::audit;
use credence_shared::domain::{ExampleMetrics, Mode, Per};
use credence_shared::metrics::semantic::redundancy_rate_at;
use credence_shared::store::{AggregateRecord, ComparisonRecord, RunStatistics, StoredOutput};
use credence_shared::sweep::{ModelBackend, PromptKind, SweepSpec};
use credence_shared::timing::TimingRow;
use std::collections::HashMap;

/// Every table family, in report order (the `--table` names).
pub const TABLES: [&str; 8] = [
    "main",
    "timing",
    "semantic_vs_jaccard",
    "baselines",
    "matching",
    "tau_dup",
    "gating",
    "significance",
];

/// The thresholds of the tau_dup sensitivity table (the paper's four and the deployed
/// 0.92).
pub const TAU_DUP: [f64; 5] = [0.80, 0.85, 0.90, 0.92, 0.95];

/// One cell of a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A label.
    Text(String),
    /// A plain figure printed with `digits` decimals.
    Number {
        /// The value.
        value: f64,
        /// Decimals.
        digits: usize,
    },
    /// A mean with its 95% interval, printed as `0.973 [0.967, 0.978]`.
    Estimate {
        /// The mean (scaled for display, e.g. verify% x 100).
        mean: f64,
        /// The interval, when the run computed one.
        ci: Option<(f64, f64)>,
        /// Decimals.
        digits: usize,
        /// The best of its group (printed in bold).
        bold: bool,
    },
    /// A p-value (printed as `<0.0001` below that).
    PValue(f64),
    /// The run has no figure for this cell.
    Missing,
}

/// A table ready to render.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Its family (one of [`TABLES`]).
    pub name: &'static str,
    /// The dataset it covers, for per-dataset families.
    pub dataset: Option<String>,
    /// Its title.
    pub title: String,
    /// Column headings.
    pub columns: Vec<String>,
    /// Rows, each with one cell per column.
    pub rows: Vec<Vec<Cell>>,
    /// What a reader needs to read it (how means are taken, what bold means).
    pub note: Option<String>,
}

/// A table, or why the run cannot fill it.
#[derive(Debug, Clone, PartialEq)]
pub enum TableOutcome {
    /// The table.
    Table(Table),
    /// The run has none of the figures it needs.
    Unavailable {
        /// Its family.
        name: &'static str,
        /// The dataset, for per-dataset families.
        dataset: Option<String>,
        /// Its title.
        title: String,
        /// Why, in one line.
        reason: String,
    },
}

/// What the tables are built from.
pub struct ReportData<'a> {
    /// The run's recorded sweep (model, dataset and mode order; which models are
    /// baselines).
    pub spec: &'a SweepSpec,
    /// The stored aggregates and comparisons.
    pub stats: &'a RunStatistics,
    /// The timing table.
    pub timing: &'a [TimingRow],
    /// Every stored output (gating, tau_dup).
    pub outputs: &'a [StoredOutput],
}

/// The metric columns of the main and baselines tables: (metric, heading, higher is
/// better, display scale, decimals).
const MAIN_METRICS: [(&str, &str, bool, f64, usize); 5] = [
    ("semantic_f1", "Semantic-F1", true, 1.0, 3),
    ("epr", "EPR", true, 1.0, 3),
    ("avr", "AVR", false, 1.0, 3),
    ("rr", "RR", false, 1.0, 3),
    ("verify_ok", "verify%", true, 100.0, 1),
];

struct Lookup<'a> {
    aggregates: HashMap<(&'a str, &'a str, &'a str, &'a str), &'a AggregateRecord>,
}

impl<'a> Lookup<'a> {
    fn new(stats: &'a RunStatistics) -> Self {
        Lookup {
            aggregates: stats
                .aggregates
                .iter()
                .map(|a| {
                    (
                        (
                            a.model.as_str(),
                            a.dataset.as_str(),
                            a.mode.as_str(),
                            a.metric.as_str(),
                        ),
                        a,
                    )
                })
                .collect(),
        }
    }

    fn get(
        &self,
        model: &str,
        dataset: &str,
        mode: Mode,
        metric: &str,
    ) -> Option<&'a AggregateRecord> {
        self.aggregates
            .get(&(model, dataset, mode.as_str(), metric))
            .copied()
    }

    fn estimate(
        &self,
        model: &str,
        dataset: &str,
        mode: Mode,
        metric: &str,
        scale: f64,
        digits: usize,
    ) -> Cell {
        match self.get(model, dataset, mode, metric) {
            None => Cell::Missing,
            Some(a) => Cell::Estimate {
                mean: a.mean * scale,
                ci: a.ci_low.zip(a.ci_high).map(|(l, h)| (l * scale, h * scale)),
                digits,
                bold: false,
            },
        }
    }

    fn has(&self, dataset: &str, metrics: &[&str]) -> bool {
        self.aggregates
            .keys()
            .any(|(_, d, _, m)| *d == dataset && metrics.contains(m))
    }
}

/// Whether a model is one of the paper's baselines: a no-model splitter, or an LLM with
/// the FActScore prompt.
fn is_baseline(spec: &SweepSpec, model: &str) -> bool {
    spec.models.iter().any(|m| {
        m.name == model
            && (matches!(
                m.backend,
                ModelBackend::SentenceSplit | ModelBackend::ConjunctionOracle
            ) || m.prompt == PromptKind::Factscore)
    })
}

/// How the means of `metrics` are taken, for a table's note.
fn means_note(metrics: &[&str]) -> String {
    let over_claims: Vec<&str> = ExampleMetrics::DEFS
        .iter()
        .filter(|d| metrics.contains(&d.name) && d.per == Per::ClaimShare)
        .map(|d| {
            MAIN_METRICS
                .iter()
                .find(|m| m.0 == d.name)
                .map_or(d.name, |m| m.1)
        })
        .collect();
    let mut note = "Means over examples with 95% percentile bootstrap intervals".to_string();
    if !over_claims.is_empty() {
        note.push_str(&format!(
            "; {} are shares of each example's claims, averaged over examples",
            over_claims.join(" and ")
        ));
    }
    note.push('.');
    note
}

/// Bolds, within each group of rows, the best cell of each column (`higher[c]`: whether
/// higher is better in column c; `None`: not compared).
fn bold_best(rows: &mut [Vec<Cell>], groups: &[std::ops::Range<usize>], higher: &[Option<bool>]) {
    for group in groups {
        if group.len() < 2 {
            continue;
        }
        for (c, better) in higher.iter().enumerate() {
            let Some(higher) = better else { continue };
            let values: Vec<Option<f64>> = rows[group.clone()]
                .iter()
                .map(|r| match r[c] {
                    Cell::Estimate { mean, .. } => Some(mean),
                    _ => None,
                })
                .collect();
            let best =
                values.iter().flatten().copied().reduce(
                    |a, b| {
                        if *higher {
                            a.max(b)
                        } else {
                            a.min(b)
                        }
                    },
                );
            let worst =
                values.iter().flatten().copied().reduce(
                    |a, b| {
                        if *higher {
                            a.min(b)
                        } else {
                            a.max(b)
                        }
                    },
                );
            let (Some(best), Some(worst)) = (best, worst) else {
                continue;
            };
            // Nothing stands out when every mode has the same figure.
            if (best - worst).abs() < 1e-12 {
                continue;
            }
            for (row, v) in rows[group.clone()].iter_mut().zip(values) {
                if v.is_some_and(|v| (v - best).abs() < 1e-12) {
                    if let Cell::Estimate { bold, .. } = &mut row[c] {
                        *bold = true;
                    }
                }
            }
        }
    }
}

/// Every table of `names` (all of [`TABLES`] when empty), in report order.
pub fn build(data: &ReportData<'_>, names: &[String]) -> Vec<TableOutcome> {
    let lookup = Lookup::new(data.stats);
    let wanted = |name: &str| names.is_empty() || names.iter().any(|n| n == name);
    let datasets: Vec<&str> = data.spec.datasets.iter().map(|d| d.id.as_str()).collect();
    let mut out = Vec::new();
    for name in TABLES {
        if !wanted(name) {
            continue;
        }
        match name {
            "timing" => out.push(timing(data.timing)),
            "gating" => out.push(gating(data.outputs)),
            _ => {
                for dataset in &datasets {
                    out.push(match name {
                        "main" => main(data.spec, &lookup, dataset),
                        "semantic_vs_jaccard" => semantic_vs_jaccard(data.spec, &lookup, dataset),
                        "baselines" => baselines(data.spec, &lookup, dataset),
                        "matching" => matching(data.spec, &lookup, dataset),
                        "tau_dup" => tau_dup(data.spec, data.outputs, dataset),
                        _ => significance(data.stats, dataset),
                    });
                }
            }
        }
    }
    out
}

fn unavailable(
    name: &'static str,
    dataset: Option<&str>,
    title: String,
    reason: String,
) -> TableOutcome {
    TableOutcome::Unavailable {
        name,
        dataset: dataset.map(str::to_string),
        title,
        reason,
    }
}

/// Rows of model x mode for a dataset with the given metric columns, each model's rows
/// grouped, the best of each column per model in bold.
fn model_mode_rows(
    lookup: &Lookup<'_>,
    dataset: &str,
    models: &[&str],
    modes: &[Mode],
    metrics: &[(&str, &str, bool, f64, usize)],
) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    let mut groups = Vec::new();
    for model in models {
        let start = rows.len();
        for &mode in modes {
            if metrics
                .iter()
                .all(|(m, ..)| lookup.get(model, dataset, mode, m).is_none())
            {
                continue;
            }
            let mut row = vec![
                Cell::Text(model.to_string()),
                Cell::Text(mode.as_str().into()),
            ];
            for (metric, _, _, scale, digits) in metrics {
                row.push(lookup.estimate(model, dataset, mode, metric, *scale, *digits));
            }
            rows.push(row);
        }
        groups.push(start..rows.len());
    }
    let mut higher = vec![None, None];
    higher.extend(metrics.iter().map(|(_, _, h, ..)| Some(*h)));
    bold_best(&mut rows, &groups, &higher);
    rows
}

fn headings(first: &[&str], metrics: &[(&str, &str, bool, f64, usize)]) -> Vec<String> {
    first
        .iter()
        .map(|s| s.to_string())
        .chain(metrics.iter().map(|(_, h, ..)| h.to_string()))
        .collect()
}

fn main(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Results on {dataset}");
    let metrics: Vec<&str> = MAIN_METRICS.iter().map(|m| m.0).collect();
    if !lookup.has(dataset, &metrics) {
        return unavailable(
            "main",
            Some(dataset),
            title,
            "the run has no aggregates for this dataset".into(),
        );
    }
    let models: Vec<&str> = spec.models.iter().map(|m| m.name.as_str()).collect();
    let rows = model_mode_rows(lookup, dataset, &models, &spec.modes, &MAIN_METRICS);
    TableOutcome::Table(Table {
        name: "main",
        dataset: Some(dataset.into()),
        title,
        columns: headings(&["Model", "Mode"], &MAIN_METRICS),
        rows,
        note: Some(format!(
            "{} verify% is the share of examples passing all three checks. Bold: the best of each model's modes.",
            means_note(&metrics)
        )),
    })
}

fn semantic_vs_jaccard(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Semantic-F1 vs Jaccard-F1 on {dataset}");
    const METRICS: [(&str, &str, bool, f64, usize); 2] = [
        ("semantic_f1", "Semantic-F1", true, 1.0, 3),
        ("jaccard_f1", "Jaccard-F1", true, 1.0, 3),
    ];
    if !lookup.has(dataset, &["semantic_f1"]) {
        return unavailable(
            "semantic_vs_jaccard",
            Some(dataset),
            title,
            "the run has no Semantic-F1 (its sweep has no [encoder])".into(),
        );
    }
    let models: Vec<&str> = spec.models.iter().map(|m| m.name.as_str()).collect();
    let mut rows = model_mode_rows(lookup, dataset, &models, &spec.modes, &METRICS);
    for row in &mut rows {
        let gap = match (&row[2], &row[3]) {
            (Cell::Estimate { mean: s, .. }, Cell::Estimate { mean: j, .. }) => Cell::Number {
                value: s - j,
                digits: 3,
            },
            _ => Cell::Missing,
        };
        row.push(gap);
    }
    let mut columns = headings(&["Model", "Mode"], &METRICS);
    columns.push("Semantic - Jaccard".into());
    TableOutcome::Table(Table {
        name: "semantic_vs_jaccard",
        dataset: Some(dataset.into()),
        title,
        columns,
        rows,
        note: Some(means_note(&["semantic_f1", "jaccard_f1"])),
    })
}

fn baselines(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Baselines on {dataset}");
    let models: Vec<&str> = spec
        .models
        .iter()
        .filter(|m| is_baseline(spec, &m.name))
        .map(|m| m.name.as_str())
        .collect();
    if models.is_empty() {
        return unavailable(
            "baselines",
            Some(dataset),
            title,
            "the run has no baseline (sentence-split, conjunction-oracle or a FActScore-prompt model)".into(),
        );
    }
    let mut metrics = MAIN_METRICS.to_vec();
    metrics.push(("parse_failed", "parse failures %", false, 100.0, 1));
    let rows = model_mode_rows(lookup, dataset, &models, &[Mode::Base], &metrics);
    if rows.is_empty() {
        return unavailable(
            "baselines",
            Some(dataset),
            title,
            "the run has no base-mode aggregates for its baselines".into(),
        );
    }
    TableOutcome::Table(Table {
        name: "baselines",
        dataset: Some(dataset.into()),
        title,
        columns: headings(&["Model", "Mode"], &metrics),
        rows,
        note: Some(format!(
            "{} Parse failures: FActScore answers with no \"- \" bullet, scored as empty lists.",
            means_note(&MAIN_METRICS.map(|m| m.0))
        )),
    })
}

fn matching(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Matching ablation on {dataset}");
    const METRICS: [(&str, &str, bool, f64, usize); 4] = [
        ("semantic_f1", "Unconstrained", true, 1.0, 3),
        ("semantic_hungarian_f1", "Hungarian", true, 1.0, 3),
        (
            "semantic_thresholded_f1",
            "Thresholded (0.90)",
            true,
            1.0,
            3,
        ),
        ("semantic_tanimoto_f1", "Tanimoto", true, 1.0, 3),
    ];
    if !lookup.has(dataset, &["semantic_hungarian_f1"]) {
        return unavailable(
            "matching",
            Some(dataset),
            title,
            "the run has no Semantic-F1 ablations (its sweep has no [encoder])".into(),
        );
    }
    let models: Vec<&str> = spec.models.iter().map(|m| m.name.as_str()).collect();
    let mut rows = model_mode_rows(lookup, dataset, &models, &spec.modes, &METRICS);
    for row in &mut rows {
        for cell in &mut row[2..] {
            if let Cell::Estimate { bold, .. } = cell {
                *bold = false;
            }
        }
    }
    TableOutcome::Table(Table {
        name: "matching",
        dataset: Some(dataset.into()),
        title,
        columns: headings(&["Model", "Mode"], &METRICS),
        rows,
        note: Some("Semantic-F1 under each matching: average-max (the paper's), one-to-one Hungarian, counting only cosines >= 0.90, and Tanimoto similarity cos / (2 - cos). Means over examples with 95% percentile bootstrap intervals.".into()),
    })
}

fn tau_dup(spec: &SweepSpec, outputs: &[StoredOutput], dataset: &str) -> TableOutcome {
    let title = format!("RR at each tau_dup on {dataset} (base outputs)");
    let mut rows = Vec::new();
    for model in &spec.models {
        let lists: Vec<&Vec<Option<f64>>> = outputs
            .iter()
            .filter(|o| o.model == model.name && o.dataset == dataset && o.mode == Mode::Base)
            .filter_map(|o| o.later_cos.as_ref())
            .collect();
        if lists.is_empty() {
            continue;
        }
        let mut row = vec![
            Cell::Text(model.name.clone()),
            Cell::Number {
                value: lists.len() as f64,
                digits: 0,
            },
        ];
        for tau in TAU_DUP {
            let mean = lists
                .iter()
                .map(|l| redundancy_rate_at(l, tau))
                .sum::<f64>()
                / lists.len() as f64;
            row.push(Cell::Number {
                value: mean,
                digits: 4,
            });
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return unavailable(
            "tau_dup",
            Some(dataset),
            title,
            "the run stored no claim similarities (its sweep has no [encoder], or no base mode)"
                .into(),
        );
    }
    let mut columns = vec!["Model".to_string(), "n".to_string()];
    columns.extend(TAU_DUP.iter().map(|t| format!("RR@{t:.2}")));
    TableOutcome::Table(Table {
        name: "tau_dup",
        dataset: Some(dataset.into()),
        title,
        columns,
        rows,
        note: Some("RR recomputed at each threshold from the stored cosine of each claim to its closest later claim (no re-embedding); mean over examples.".into()),
    })
}

fn timing(rows: &[TimingRow]) -> TableOutcome {
    let title = "Seconds per example by mode".to_string();
    if rows.is_empty() {
        return unavailable("timing", None, title, "the run has no stage timings".into());
    }
    let number = |value: f64, digits: usize| Cell::Number { value, digits };
    TableOutcome::Table(Table {
        name: "timing",
        dataset: None,
        title,
        columns: ["Model", "Mode", "n", "Mean s", "Std s", "P50 s", "Examples/min"]
            .map(String::from)
            .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    Cell::Text(r.model.clone()),
                    Cell::Text(r.mode.as_str().into()),
                    number(r.examples as f64, 0),
                    number(r.mean, 4),
                    number(r.std, 4),
                    number(r.p50, 4),
                    number(r.per_minute, 1),
                ]
            })
            .collect(),
        note: Some("Seconds each example spent in its mode's stages (verify: base plus parse, embed and verify, from the base jobs), over every dataset.".into()),
    })
}

fn gating(outputs: &[StoredOutput]) -> TableOutcome {
    let title = "Gating false negatives".to_string();
    let rows = audit::gating(outputs);
    if rows.is_empty() {
        return unavailable(
            "gating",
            None,
            title,
            "the run has no example with both a base and a repair output".into(),
        );
    }
    let number = |value: f64, digits: usize| Cell::Number { value, digits };
    TableOutcome::Table(Table {
        name: "gating",
        dataset: None,
        title,
        columns: [
            "Model",
            "Dataset",
            "n",
            "Gated %",
            "FN %",
            "Mean FN AVR",
            "Base verify%",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    Cell::Text(r.model.clone().unwrap_or_else(|| "Overall".into())),
                    Cell::Text(r.dataset.clone().unwrap_or_else(|| "all".into())),
                    number(r.n as f64, 0),
                    number(100.0 * r.gated, 1),
                    number(100.0 * r.false_negative, 1),
                    r.mean_fn_avr.map_or(Cell::Missing, |a| number(a, 3)),
                    r.base_verify_ok
                        .map_or(Cell::Missing, |v| number(100.0 * v, 1)),
                ]
            })
            .collect(),
        note: Some(format!(
            "Gated: the repair claims equal the base claims. FN: gated with base AVR > {}.",
            audit::FN_AVR
        )),
    })
}

fn significance(stats: &RunStatistics, dataset: &str) -> TableOutcome {
    let title = format!("Paired comparisons on {dataset}");
    let metrics: Vec<&str> = MAIN_METRICS.iter().map(|m| m.0).collect();
    let compared: Vec<&ComparisonRecord> = stats
        .comparisons
        .iter()
        .filter(|c| c.dataset == dataset && metrics.contains(&c.metric.as_str()))
        .collect();
    if compared.is_empty() {
        return unavailable(
            "significance",
            Some(dataset),
            title,
            "the run has no paired comparisons on this dataset".into(),
        );
    }
    let heading = |metric: &str| {
        MAIN_METRICS
            .iter()
            .find(|m| m.0 == metric)
            .map_or(metric.to_string(), |m| m.1.to_string())
    };
    let rows = compared
        .iter()
        .map(|c| {
            let scale = if c.metric == "verify_ok" { 100.0 } else { 1.0 };
            let b = if c.b_model == c.a_model {
                c.b_mode.clone()
            } else {
                format!("{}/{}", c.b_model, c.b_mode)
            };
            vec![
                Cell::Text(c.a_model.clone()),
                Cell::Text(format!("{} vs {b}", c.a_mode)),
                Cell::Text(heading(&c.metric)),
                Cell::Number {
                    value: c.n as f64,
                    digits: 0,
                },
                Cell::Estimate {
                    mean: c.delta * scale,
                    ci: c.ci_low.zip(c.ci_high).map(|(l, h)| (l * scale, h * scale)),
                    digits: if scale == 1.0 { 3 } else { 1 },
                    bold: c.p_value.is_some_and(|p| p < 0.05),
                },
                c.p_value.map_or(Cell::Missing, Cell::PValue),
            ]
        })
        .collect();
    TableOutcome::Table(Table {
        name: "significance",
        dataset: Some(dataset.into()),
        title,
        columns: ["Model", "Comparison", "Metric", "n", "Difference", "p"]
            .map(String::from)
            .to_vec(),
        rows,
        note: Some("Difference: mean(system) - mean(baseline) on the same examples, with its 95% paired bootstrap interval (verify% in points); p: two-sided paired bootstrap p-value. Bold: p < 0.05.".into()),
    })
}
