//! The paper's tables built from a finished run (PAPER.md "Tables to regenerate"), as
//! plain data that each format renders: per dataset the main table (model x mode with
//! Semantic-F1, EPR, AVR, RR and verify%, the best of each model's modes in bold),
//! Semantic-F1 against Jaccard-F1, the baselines, the matching ablation, tau_dup
//! sensitivity and the significance of every paired comparison; over the run the timing
//! per mode and the gating false negatives. A table the run has no figures for is
//! [`TableOutcome::Unavailable`], with the reason in one line.

use credence_shared::audit;
use credence_shared::domain::{Better, ExampleMetrics, Mode, Per};
use credence_shared::matching::semantic::redundancy_rate_at;
use credence_shared::store::{AggregateRecord, ComparisonRecord, RunStatistics, StoredOutput};
use credence_shared::sweep::{ModelBackend, PromptKind, SweepSpec};
use credence_shared::timing::TimingRow;

use super::data::RunData;
use std::collections::HashMap;

/// Every table family, in report order (the `--table` names). `encoder_sensitivity`
/// compares two runs, so it is built only when a second run is given (or it is asked for
/// by name, when it says what it needs).
pub const TABLES: [&str; 10] = [
    "main",
    "timing",
    "semantic_vs_jaccard",
    "baselines",
    "matching",
    "tau_dup",
    "repair_passes",
    "gating",
    "encoder_sensitivity",
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

/// A metric column of a model x mode table.
#[derive(Debug, Clone, Copy)]
struct MetricColumn {
    /// The metric's name (its aggregates' `metric`).
    metric: &'static str,
    /// The column heading.
    heading: &'static str,
    /// Whether higher is better, for the bold best of each model's modes; `None`: the
    /// column is not compared (nothing in it is bold).
    higher: Option<bool>,
    /// Display scale (verify% x 100).
    scale: f64,
    /// Decimals.
    digits: usize,
}

/// The column of a metric, as its definition ([`ExampleMetrics::DEFS`]) presents it.
fn col(metric: &'static str) -> MetricColumn {
    let shown = ExampleMetrics::def(metric)
        .unwrap_or_else(|| panic!("{metric} is not in ExampleMetrics::DEFS"))
        .presentation;
    MetricColumn {
        metric,
        heading: shown.heading,
        higher: shown.better.map(|b| b == Better::Higher),
        scale: shown.scale(),
        digits: shown.digits,
    }
}

impl MetricColumn {
    /// The column under another heading, compared with nothing (the matching table's
    /// four views of one quantity).
    fn as_view(self, heading: &'static str) -> MetricColumn {
        MetricColumn {
            heading,
            higher: None,
            ..self
        }
    }
}

/// The metrics of the main and baselines tables (and the HTML report's plots).
pub(super) const MAIN: [&str; 5] = ["semantic_f1", "epr", "avr", "rr", "verify_ok"];

/// The metric columns of the main and baselines tables.
fn main_metrics() -> [MetricColumn; 5] {
    MAIN.map(col)
}

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
        .map(|d| d.presentation.heading)
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
pub fn build(data: &RunData, names: &[String]) -> Vec<TableOutcome> {
    let lookup = Lookup::new(&data.stats);
    let wanted = |name: &str| names.is_empty() || names.iter().any(|n| n == name);
    let datasets: Vec<&str> = data.spec.datasets.iter().map(|d| d.id.as_str()).collect();
    let mut out = Vec::new();
    for name in TABLES {
        if !wanted(name) {
            continue;
        }
        match name {
            "timing" => out.push(timing(&data.timing)),
            "gating" => out.push(gating(&data.outputs)),
            "repair_passes" => match &data.repair_passes {
                Some(Ok(rows)) => out.push(repair_passes(rows)),
                Some(Err(reason)) => out.push(unavailable(
                    name,
                    None,
                    REPAIR_PASSES_TITLE.into(),
                    reason.clone(),
                )),
                None => {}
            },
            "encoder_sensitivity" => match &data.compare {
                Some(other) => out.push(encoder_sensitivity(
                    &data.spec,
                    &data.outputs,
                    (&other.run, &other.spec, &other.outputs),
                )),
                None if names.is_empty() => {}
                None => out.push(unavailable(
                    name,
                    None,
                    "Encoder sensitivity of Semantic-F1".into(),
                    "give --compare RUN: the same sweep run with another [encoder]".into(),
                )),
            },
            _ => {
                for dataset in &datasets {
                    out.push(match name {
                        "main" => main(&data.spec, &lookup, dataset),
                        "semantic_vs_jaccard" => semantic_vs_jaccard(&data.spec, &lookup, dataset),
                        "baselines" => baselines(&data.spec, &lookup, dataset),
                        "matching" => matching(&data.spec, &lookup, dataset),
                        "tau_dup" => tau_dup(&data.spec, &data.outputs, dataset),
                        _ => significance(&data.stats, dataset, data.p_values),
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
    metrics: &[MetricColumn],
) -> Vec<Vec<Cell>> {
    let mut rows = Vec::new();
    let mut groups = Vec::new();
    for model in models {
        let start = rows.len();
        for &mode in modes {
            if metrics
                .iter()
                .all(|c| lookup.get(model, dataset, mode, c.metric).is_none())
            {
                continue;
            }
            let mut row = vec![
                Cell::Text(model.to_string()),
                Cell::Text(mode.as_str().into()),
            ];
            for c in metrics {
                row.push(lookup.estimate(model, dataset, mode, c.metric, c.scale, c.digits));
            }
            rows.push(row);
        }
        groups.push(start..rows.len());
    }
    let mut higher = vec![None, None];
    higher.extend(metrics.iter().map(|c| c.higher));
    bold_best(&mut rows, &groups, &higher);
    rows
}

fn headings(first: &[&str], metrics: &[MetricColumn]) -> Vec<String> {
    first
        .iter()
        .map(|s| s.to_string())
        .chain(metrics.iter().map(|c| c.heading.to_string()))
        .collect()
}

fn main(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Results on {dataset}");
    let columns = main_metrics();
    let metrics: Vec<&str> = columns.iter().map(|m| m.metric).collect();
    if !lookup.has(dataset, &metrics) {
        return unavailable(
            "main",
            Some(dataset),
            title,
            "the run has no aggregates for this dataset".into(),
        );
    }
    let models: Vec<&str> = spec.models.iter().map(|m| m.name.as_str()).collect();
    let rows = model_mode_rows(lookup, dataset, &models, &spec.modes, &columns);
    TableOutcome::Table(Table {
        name: "main",
        dataset: Some(dataset.into()),
        title,
        columns: headings(&["Model", "Mode"], &columns),
        rows,
        note: Some(format!(
            "{} verify% is the share of examples passing all three checks. Bold: the best of each model's modes.",
            means_note(&metrics)
        )),
    })
}

fn semantic_vs_jaccard(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Semantic-F1 vs Jaccard-F1 on {dataset}");
    let metrics = ["semantic_f1", "jaccard_f1"].map(col);
    if !lookup.has(dataset, &["semantic_f1"]) {
        return unavailable(
            "semantic_vs_jaccard",
            Some(dataset),
            title,
            "the run has no Semantic-F1 (its sweep has no [encoder])".into(),
        );
    }
    let models: Vec<&str> = spec.models.iter().map(|m| m.name.as_str()).collect();
    let mut rows = model_mode_rows(lookup, dataset, &models, &spec.modes, &metrics);
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
    let mut columns = headings(&["Model", "Mode"], &metrics);
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
    let mut metrics = main_metrics().to_vec();
    metrics.push(col("parse_failed"));
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
            means_note(&main_metrics().map(|m| m.metric))
        )),
    })
}

fn matching(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Matching ablation on {dataset}");
    // Four views of one quantity, compared across columns rather than modes: nothing
    // is bold.
    let metrics = [
        col("semantic_f1").as_view("Unconstrained"),
        col("semantic_hungarian_f1").as_view("Hungarian"),
        col("semantic_thresholded_f1").as_view("Thresholded (0.90)"),
        col("semantic_tanimoto_f1").as_view("Tanimoto"),
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
    let rows = model_mode_rows(lookup, dataset, &models, &spec.modes, &metrics);
    TableOutcome::Table(Table {
        name: "matching",
        dataset: Some(dataset.into()),
        title,
        columns: headings(&["Model", "Mode"], &metrics),
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

const REPAIR_PASSES_TITLE: &str = "Rule repair passes over the base claims";

/// The paper's multi-pass table from the convergence audit: per dataset and model, AVR,
/// RR and Semantic-F1 of the base claims and after one pass, and the examples a second
/// pass still improved ("P2 better").
fn repair_passes(rows: &[audit::ConvergenceRow]) -> TableOutcome {
    if rows.is_empty() {
        return unavailable(
            "repair_passes",
            None,
            REPAIR_PASSES_TITLE.into(),
            "the run has no base outputs".into(),
        );
    }
    let number = |value: f64, digits: usize| Cell::Number { value, digits };
    let opt = |v: Option<f64>, digits: usize| v.map_or(Cell::Missing, |v| number(v, digits));
    let diff = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
    let passes = rows.iter().map(|r| r.passes).max().unwrap_or(0);
    TableOutcome::Table(Table {
        name: "repair_passes",
        dataset: None,
        title: format!("{REPAIR_PASSES_TITLE} ({passes} passes)"),
        columns: [
            "Dataset",
            "Model",
            "n",
            "Base AVR",
            "Pass-1 AVR",
            "ΔAVR",
            "Base RR",
            "Pass-1 RR",
            "ΔRR",
            "ΔSemantic-F1",
            "P2 better",
            "T1 breaks",
            "Fixed point (mean passes)",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .filter_map(|r| {
                let (base, one) = (r.per_pass.first()?, r.per_pass.get(1)?);
                Some(vec![
                    Cell::Text(r.dataset.clone()),
                    Cell::Text(r.model.clone()),
                    number(r.n as f64, 0),
                    number(base.avr, 4),
                    number(one.avr, 4),
                    number(one.avr - base.avr, 4),
                    opt(base.rr, 4),
                    opt(one.rr, 4),
                    opt(diff(one.rr, base.rr), 4),
                    opt(diff(one.semantic_f1, base.semantic_f1), 4),
                    r.p2_better.map_or(Cell::Missing, |p| {
                        Cell::Text(format!("{p}/{}", r.n))
                    }),
                    Cell::Text(format!("{}/{}", r.t1.any, r.n)),
                    r.fixed_points.mean.map_or(Cell::Missing, |m| number(m, 2)),
                ])
            })
            .collect(),
        note: Some("The rule tier run again, one pass at a time, over the stored base claims with the run's parser, encoder and settings (credence audit convergence has every figure). Δ: pass 1 minus base. P2 better: examples whose second pass lowered AVR or RR below the first's. T1 breaks: examples where a pass raised n_viol or RR or lowered EPR.".into()),
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

/// Which p-value the significance table prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PValueOptions {
    /// The one-sided "not better" share (Δ* <= 0 where higher is better, Δ* >= 0 where
    /// lower is better) instead of the two-sided p-value of PAPER.md.
    pub one_sided: bool,
    /// Holm's step-down adjustment across each table's tests.
    pub holm: bool,
}

fn significance(stats: &RunStatistics, dataset: &str, options: PValueOptions) -> TableOutcome {
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
        let adjusted = credence_shared::stats::paired::holm(
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
        dataset: Some(dataset.into()),
        title,
        columns: ["Model", "Comparison", "Metric", "n", "Difference", "p"]
            .map(String::from)
            .to_vec(),
        rows,
        note: Some(format!("Difference: mean(system) - mean(baseline) on the same examples, with its 95% paired bootstrap interval (verify% in points); p: {which}. Bold: p < 0.05.")),
    })
}

fn encoder_name(spec: &SweepSpec) -> String {
    spec.encoder
        .as_ref()
        .map_or("no encoder".into(), |e| e.preset.clone())
}

/// Semantic-F1 of this run against another run of the same examples with another
/// encoder (the paper's Appendix on encoder sensitivity): Pearson's r and Spearman's rho
/// over the examples both scored, the share of model pairs whose order by mean
/// Semantic-F1 is the same in both runs (per dataset and mode), and the mean offset of
/// the other run.
fn encoder_sensitivity(
    spec: &SweepSpec,
    outputs: &[StoredOutput],
    (other_run, other_spec, other): (&str, &SweepSpec, &[StoredOutput]),
) -> TableOutcome {
    use credence_shared::stats::correlation::{pearson, spearman};
    let title = format!(
        "Encoder sensitivity of Semantic-F1: {} (this run) vs {} ({other_run})",
        encoder_name(spec),
        encoder_name(other_spec)
    );
    type Key<'a> = (&'a str, &'a str, Mode, &'a str);
    fn key(o: &StoredOutput) -> Key<'_> {
        (
            o.model.as_str(),
            o.dataset.as_str(),
            o.mode,
            o.example_id.as_str(),
        )
    }
    let theirs: HashMap<Key<'_>, f64> = other
        .iter()
        .filter_map(|o| Some((key(o), o.semantic_f1?)))
        .collect();
    let pairs: Vec<(Key<'_>, f64, f64)> = outputs
        .iter()
        .filter_map(|o| Some((key(o), o.semantic_f1?, *theirs.get(&key(o))?)))
        .collect();
    if pairs.len() < 2 {
        return unavailable(
            "encoder_sensitivity",
            None,
            title,
            "the two runs share fewer than two examples with Semantic-F1 (same models, datasets and modes?)".into(),
        );
    }
    let (mine, other_values): (Vec<f64>, Vec<f64>) = pairs.iter().map(|(_, a, b)| (*a, *b)).unzip();
    // Mean Semantic-F1 per (dataset, mode, model) in each run, over the paired examples.
    let mut means: HashMap<(&str, Mode, &str), (f64, f64, usize)> = HashMap::new();
    for ((model, dataset, mode, _), a, b) in &pairs {
        let e = means
            .entry((*dataset, *mode, *model))
            .or_insert((0.0, 0.0, 0));
        e.0 += a;
        e.1 += b;
        e.2 += 1;
    }
    let mut preserved = 0;
    let mut total = 0;
    let mut groups: Vec<(&str, Mode)> = means.keys().map(|(d, m, _)| (*d, *m)).collect();
    groups.sort();
    groups.dedup();
    for (dataset, mode) in groups {
        let models: Vec<(f64, f64)> = means
            .iter()
            .filter(|((d, m, _), _)| *d == dataset && *m == mode)
            .map(|(_, (a, b, n))| (a / *n as f64, b / *n as f64))
            .collect();
        for i in 0..models.len() {
            for j in (i + 1)..models.len() {
                total += 1;
                let order = |x: f64, y: f64| x.partial_cmp(&y);
                preserved +=
                    usize::from(order(models[i].0, models[j].0) == order(models[i].1, models[j].1));
            }
        }
    }
    let n = pairs.len();
    let offset = other_values
        .iter()
        .zip(&mine)
        .map(|(b, a)| b - a)
        .sum::<f64>()
        / n as f64;
    let number = |value: f64, digits: usize| Cell::Number { value, digits };
    TableOutcome::Table(Table {
        name: "encoder_sensitivity",
        dataset: None,
        title,
        columns: ["Encoder", "n", "Pearson r", "Spearman rho", "Rank preservation", "Mean offset (pp)"]
            .map(String::from)
            .to_vec(),
        rows: vec![vec![
            Cell::Text(encoder_name(other_spec)),
            number(n as f64, 0),
            pearson(&mine, &other_values).map_or(Cell::Missing, |r| number(r, 3)),
            spearman(&mine, &other_values).map_or(Cell::Missing, |r| number(r, 3)),
            if total == 0 {
                Cell::Missing
            } else {
                Cell::Text(format!(
                    "{preserved}/{total} ({:.1}%)",
                    100.0 * preserved as f64 / total as f64
                ))
            },
            number(100.0 * offset, 1),
        ]],
        note: Some("Per-example Semantic-F1 of the other run against this run's on the same examples, models and modes. Rank preservation: model pairs, per dataset and mode, whose order by mean Semantic-F1 is the same in both runs. Mean offset: the other run minus this run, in points.".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(encoder: &str) -> SweepSpec {
        let toml = format!(
            "[sweep]\nname = \"r\"\nmodes = [\"base\"]\n[encoder]\npreset = \"{encoder}\"\n\
             [[models]]\nname = \"a\"\nbackend = \"sentence-split\"\n\
             [[models]]\nname = \"b\"\nbackend = \"conjunction-oracle\"\n\
             [[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n"
        );
        credence_shared::sweep::parse(
            &toml,
            std::path::Path::new("t.toml"),
            std::path::Path::new("."),
        )
        .expect("a valid sweep")
    }

    fn outputs(values: &[(&str, f64)]) -> Vec<StoredOutput> {
        values
            .iter()
            .enumerate()
            .map(|(i, (model, f1))| StoredOutput {
                model: model.to_string(),
                dataset: "d".into(),
                mode: Mode::Base,
                example_id: format!("e{}", i % 3),
                text: "S.".into(),
                references: Vec::new(),
                claims: Vec::new(),
                llm_calls: 0,
                avr: None,
                epr: None,
                rr: None,
                n_viol: None,
                verify_ok: None,
                later_cos: None,
                semantic_f1: Some(*f1),
            })
            .collect()
    }

    #[test]
    fn encoder_sensitivity_correlates_paired_examples_and_counts_kept_ranks() {
        let mine = outputs(&[
            ("a", 0.9),
            ("a", 0.8),
            ("a", 0.7),
            ("b", 0.6),
            ("b", 0.5),
            ("b", 0.4),
        ]);
        // The other encoder scores 5 points lower and keeps a above b.
        let lower: Vec<(&str, f64)> = [
            ("a", 0.85),
            ("a", 0.75),
            ("a", 0.65),
            ("b", 0.55),
            ("b", 0.45),
            ("b", 0.35),
        ]
        .to_vec();
        let other = outputs(&lower);
        let TableOutcome::Table(t) = encoder_sensitivity(
            &spec("all-MiniLM-L6-v2"),
            &mine,
            ("o", &spec("bge-large-en-v1.5"), &other),
        ) else {
            panic!("no table");
        };
        assert!(
            t.title
                .contains("all-MiniLM-L6-v2 (this run) vs bge-large-en-v1.5 (o)"),
            "{}",
            t.title
        );
        let row = &t.rows[0];
        assert_eq!(
            row[1],
            Cell::Number {
                value: 6.0,
                digits: 0
            }
        );
        assert!(matches!(row[2], Cell::Number { value, .. } if (value - 1.0).abs() < 1e-12));
        assert!(matches!(row[3], Cell::Number { value, .. } if (value - 1.0).abs() < 1e-12));
        assert_eq!(row[4], Cell::Text("1/1 (100.0%)".into()));
        assert!(matches!(row[5], Cell::Number { value, .. } if (value + 5.0).abs() < 1e-9));

        // An encoder that puts b above a breaks the one pair's order.
        let flipped = outputs(&[
            ("a", 0.2),
            ("a", 0.3),
            ("a", 0.1),
            ("b", 0.9),
            ("b", 0.8),
            ("b", 0.7),
        ]);
        let TableOutcome::Table(t) =
            encoder_sensitivity(&spec("x"), &mine, ("o", &spec("y"), &flipped))
        else {
            panic!("no table");
        };
        assert_eq!(t.rows[0][4], Cell::Text("0/1 (0.0%)".into()));
        assert!(matches!(t.rows[0][2], Cell::Number { value, .. } if value < 0.0));
        // Nothing in common: the table says so.
        assert!(matches!(
            encoder_sensitivity(&spec("x"), &mine, ("o", &spec("y"), &[])),
            TableOutcome::Unavailable { .. }
        ));
    }

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
