//! The paper's tables built from a finished run (PAPER.md "Tables to regenerate"), as
//! plain data that each format renders: per dataset the main table (model x mode with
//! Semantic-F1, EPR, AVR, RR and verify%, the best of each model's modes in bold),
//! Semantic-F1 against Jaccard-F1, the baselines, the matching ablation, tau_dup
//! sensitivity and the significance of every paired comparison; over the run the timing
//! per mode and the gating false negatives. A table the run has no figures for is
//! [`TableOutcome::Unavailable`], with the reason in one line.

use credence_core::audit;
use credence_core::audit::StoredOutput;
use credence_core::domain::{Better, ExampleMetrics, Mode, Per};
use credence_core::matching::semantic::redundancy_rate_at;
use credence_core::sweep::{ModelBackend, PromptKind, SweepSpec};
use credence_core::timing::TimingRow;
use credence_infra::store::{AggregateRecord, ComparisonRecord, RunStatistics};

use super::data::RunData;

pub(crate) mod afc;
mod claims;
mod encoder;
mod means;
mod significance;
mod timing;

use claims::{gating, repair_passes, tau_dup, REPAIR_PASSES_TITLE};
use encoder::encoder_sensitivity;
use means::{baselines, main, matching, semantic_vs_jaccard};
use significance::significance;
pub use significance::PValueOptions;
use std::collections::HashMap;
use timing::timing;

/// Every table family, in report order (the `--table` names). `encoder_sensitivity`
/// compares two runs, so it is built only when a second run is given (or it is asked for
/// by name, when it says what it needs).
pub const TABLES: [&str; 11] = [
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
    "afc",
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

impl Cell {
    /// A plain figure printed with `digits` decimals.
    pub fn number(value: f64, digits: usize) -> Cell {
        Cell::Number { value, digits }
    }
}

/// A table ready to render.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Its family (one of [`TABLES`]).
    pub name: &'static str,
    /// The dataset it covers, for per-dataset families.
    pub dataset: Option<String>,
    /// The decomposer it covers, for per-decomposer families (`afc`).
    pub decomposer: Option<String>,
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
            "afc" => match (&data.spec.afc, &data.afc) {
                (Some(spec), Some(table)) => {
                    out.extend(afc::afc(spec, table, data.spec.bootstrap.resamples))
                }
                _ if names.is_empty() => {}
                _ => out.push(unavailable(
                    name,
                    None,
                    "AFC accuracy".into(),
                    "the run has no [afc] section".into(),
                )),
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
