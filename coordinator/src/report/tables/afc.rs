//! The AFC tables (`--table afc`), one set per decomposer: the paper's table (per AFC
//! dataset and setting: accuracy, macro-F1 and AUC with their 95% intervals, the mean
//! sub-claims, fallbacks and unparsable answers), the paired differences (each
//! decomposition setting against `none`, and CREDENCE against FActScore, with two-sided
//! p-values), and the AvgSubs summary (per decomposition setting and metric: the mean Δ
//! against `none` over datasets with its wins, and Pearson's r across datasets of the
//! mean sub-claims with the metric).

use super::{Cell, Table, TableOutcome};
use credence_core::afc::table::{AfcTable, METRICS};
use credence_core::afc::AfcSetting;
use credence_core::sweep::AfcSpec;

/// What the AFC table's settings are called in print (the paper's row labels).
fn label(setting: AfcSetting) -> &'static str {
    match setting {
        AfcSetting::None => "No decomp",
        AfcSetting::Credence => "CREDENCE-decomp",
        AfcSetting::Factscore => "FActScore-decomp",
    }
}

/// The setting a printed row label names ([`label`]).
pub(crate) fn setting_of_label(text: &str) -> Option<AfcSetting> {
    AfcSetting::ALL.into_iter().find(|s| label(*s) == text)
}

fn estimate(v: Option<credence_core::afc::table::Valued>) -> Cell {
    match v {
        Some(v) => Cell::Estimate {
            mean: v.value,
            ci: Some((v.ci_low, v.ci_high)),
            digits: 4,
            bold: false,
        },
        None => Cell::Missing,
    }
}

/// The AFC tables of a run.
pub(super) fn afc(spec: &AfcSpec, table: &AfcTable, resamples: u32) -> Vec<TableOutcome> {
    let mut models: Vec<&str> = Vec::new();
    for c in &table.cells {
        if !models.contains(&c.model.as_str()) {
            models.push(&c.model);
        }
    }
    if models.is_empty() {
        return vec![TableOutcome::Unavailable {
            name: "afc",
            dataset: None,
            title: "AFC accuracy".into(),
            reason: "the run has no AFC results yet (no AFC job finished)".into(),
        }];
    }
    let judge = &spec.judge;
    let mut out = Vec::new();
    for model in models {
        let cells: Vec<_> = table.cells.iter().filter(|c| c.model == model).collect();
        let rows = cells
            .iter()
            .map(|c| {
                let mut row = vec![
                    Cell::Text(c.dataset.clone()),
                    Cell::Text(label(c.setting).into()),
                    Cell::number(c.n as f64, 0),
                ];
                row.extend(c.metrics.iter().map(|m| estimate(*m)));
                row.push(Cell::number(c.mean_subclaims, 2));
                row.push(Cell::number(c.fell_back as f64, 0));
                row.push(Cell::number(c.unparsable as f64, 0));
                row
            })
            .collect();
        let mut columns: Vec<String> = ["Dataset", "Setting", "Claims"].map(String::from).to_vec();
        columns.extend(METRICS.iter().map(|m| m.heading().to_string()));
        columns.extend(["AvgSubs", "Fell back", "Unparsable"].map(String::from));
        out.push(TableOutcome::Table(Table {
            name: "afc",
            decomposer: Some(model.to_string()),
            dataset: None,
            title: format!("AFC: decomposer {model}, judge {judge}"),
            columns,
            rows,
            note: Some(format!(
                "Each claim judged against its dataset's own evidence by {judge} (the {} prompt); a decomposed claim is SUPPORT when SUPPORT sub-claims are a strict majority, its score the mean sub-claim score. Value [95% percentile CI] over {resamples} paired bootstrap resamples of claims. AvgSubs: mean sub-claims per claim; Fell back: empty decompositions judged whole; Unparsable: answers with no label, counted NEUTRAL.",
                credence_worker::llm::nli::VERSION
            )),
        }));
        let deltas: Vec<_> = table.deltas.iter().filter(|d| d.model == model).collect();
        let mut pairs: Vec<(&str, AfcSetting, AfcSetting)> = Vec::new();
        for d in &deltas {
            if !pairs
                .iter()
                .any(|(ds, a, b)| *ds == d.dataset && *a == d.a && *b == d.b)
            {
                pairs.push((&d.dataset, d.a, d.b));
            }
        }
        if !pairs.is_empty() {
            let rows = pairs
                .iter()
                .map(|(dataset, a, b)| {
                    let mut row = vec![
                        Cell::Text(dataset.to_string()),
                        Cell::Text(format!("{} - {}", a.as_str(), b.as_str())),
                    ];
                    for metric in METRICS {
                        match table.delta(model, dataset, *a, *b, metric) {
                            Some(d) => {
                                row.push(estimate(Some(d.delta)));
                                row.push(Cell::PValue(d.p_value));
                            }
                            None => row.extend([Cell::Missing, Cell::Missing]),
                        }
                    }
                    row
                })
                .collect();
            let mut columns: Vec<String> = vec!["Dataset".into(), "Comparison".into()];
            for m in METRICS {
                columns.push(format!("Δ {}", m.heading()));
                columns.push("p".into());
            }
            out.push(TableOutcome::Table(Table {
                name: "afc",
                decomposer: None,
                dataset: None,
                title: format!("AFC differences: decomposer {model}"),
                columns,
                rows,
                note: Some(
                    "Paired on the same claims: a - b with its 95% percentile CI and the two-sided bootstrap p-value of PAPER.md.".into(),
                ),
            }));
        }
        let mut summary = Vec::new();
        for setting in [AfcSetting::Credence, AfcSetting::Factscore] {
            for metric in METRICS {
                let ds: Vec<f64> = deltas
                    .iter()
                    .filter(|d| d.a == setting && d.b == AfcSetting::None && d.metric == metric)
                    .map(|d| d.delta.value)
                    .collect();
                let corr = table
                    .correlations
                    .iter()
                    .find(|c| c.model == model && c.setting == setting && c.metric == metric);
                let Some(corr) = corr else { continue };
                let mean = (!ds.is_empty()).then(|| ds.iter().sum::<f64>() / ds.len() as f64);
                let wins = ds.iter().filter(|d| **d > 0.0).count();
                summary.push(vec![
                    Cell::Text(label(setting).into()),
                    Cell::Text(metric.heading().into()),
                    mean.map_or(Cell::Missing, |m| Cell::number(m, 4)),
                    if ds.is_empty() {
                        Cell::Missing
                    } else {
                        Cell::Text(format!("{wins}/{}", ds.len()))
                    },
                    Cell::number(corr.n as f64, 0),
                    corr.r.map_or(Cell::Missing, |r| Cell::number(r, 3)),
                ]);
            }
        }
        if !summary.is_empty() {
            out.push(TableOutcome::Table(Table {
                name: "afc",
                decomposer: None,
                dataset: None,
                title: format!("AFC over datasets: decomposer {model}"),
                columns: ["Setting", "Metric", "Mean Δ vs none", "Wins", "Datasets", "r(AvgSubs, metric)"]
                    .map(String::from)
                    .to_vec(),
                rows: summary,
                note: Some(
                    "Mean Δ vs none over datasets and the datasets where it is above 0; r: Pearson's correlation across datasets of the mean sub-claims per claim with the metric (the paper's AvgSubs analysis; few points, exploratory).".into(),
                ),
            }));
        }
    }
    out
}
