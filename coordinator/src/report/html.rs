//! The HTML report: one self-contained file (inline CSS and SVG, no script, nothing
//! fetched) with, per dataset, each main metric by model x mode with its 95% interval,
//! a forest plot of every mode's difference from `base` with its interval, for a run
//! with `[afc]` a forest plot per decomposer and metric of each AFC setting's
//! difference, and then every table of the report. The plots are drawn by plotters' SVG backend.

use super::render;
use super::tables::TableOutcome;
use credence_core::afc::table::{AfcTable, METRICS};
use credence_core::domain::{ExampleMetrics, Mode};
use credence_core::sweep::SweepSpec;
use credence_infra::store::RunStatistics;
use plotters::prelude::*;

/// The metrics plotted (the main table's), each with its heading and display scale
/// from its definition.
fn plotted() -> Vec<(&'static str, &'static str, f64)> {
    super::tables::MAIN
        .into_iter()
        .filter_map(ExampleMetrics::def)
        .map(|d| (d.name, d.presentation.heading, d.presentation.scale()))
        .collect()
}

/// One row of an interval plot: its label, the estimate and its interval.
struct Interval {
    label: String,
    mean: f64,
    low: f64,
    high: f64,
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222;max-width:1200px}\
table{border-collapse:collapse;margin:0.5em 0 0.3em}\
th,td{padding:3px 9px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}\
th{border-bottom:2px solid #444}td.label,th.label{text-align:left}\
p.note{font-size:0.85em;color:#555;max-width:60em}\
figure.plot{display:inline-block;margin:0.5em 1em 0.5em 0}\
figcaption{font-size:0.85em;color:#555}";

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The narrowest span an interval plot's axis is given: when every value is (nearly)
/// equal, as EPR at 1 or RR at 0 across a table, the axis is this wide around them
/// rather than a few thousandths (ticks such as 0.9990, 1.0005 read as differences).
const MIN_AXIS_SPAN: f64 = 0.05;

/// The axis of an interval plot: every interval and mean (and 0 with `zero`), at least
/// [`MIN_AXIS_SPAN`] wide, with 8% of the span as margin on each side.
fn axis_range(rows: &[Interval], zero: bool) -> (f64, f64) {
    let mut lo = rows
        .iter()
        .map(|r| r.low.min(r.mean))
        .fold(f64::INFINITY, f64::min);
    let mut hi = rows
        .iter()
        .map(|r| r.high.max(r.mean))
        .fold(f64::NEG_INFINITY, f64::max);
    if zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if hi - lo < MIN_AXIS_SPAN {
        let middle = (lo + hi) / 2.0;
        (lo, hi) = (middle - MIN_AXIS_SPAN / 2.0, middle + MIN_AXIS_SPAN / 2.0);
    }
    let pad = (hi - lo) * 0.08;
    (lo - pad, hi + pad)
}

/// Draws one interval plot: a row per interval, top to bottom, a horizontal bar from
/// `low` to `high` with a dot at the mean; with `zero`, a vertical line at 0.
fn interval_plot(title: &str, axis: &str, rows: &[Interval], zero: bool) -> Result<String, String> {
    let n = rows.len();
    let height = 90 + 24 * n as u32;
    let (lo, hi) = axis_range(rows, zero);
    let mut svg = String::new();
    {
        let err = |e: DrawingAreaErrorKind<_>| format!("drawing {title}: {e}");
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(250)
            .build_cartesian_2d(lo..hi, (0..n).into_segmented())
            .map_err(err)?;
        let labels: Vec<String> = rows.iter().rev().map(|r| r.label.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .x_desc(axis)
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        if zero {
            chart
                .draw_series(LineSeries::new(
                    [(0.0, SegmentValue::Exact(0)), (0.0, SegmentValue::Last)],
                    BLACK.mix(0.5).stroke_width(1),
                ))
                .map_err(err)?;
        }
        let color = RGBColor(31, 96, 170);
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                ErrorBar::new_horizontal(
                    SegmentValue::CenterOf(n - 1 - i),
                    r.low,
                    r.mean,
                    r.high,
                    color.filled().stroke_width(2),
                    8,
                )
            }))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    // Mark the plot for readers and tests: the root element gets a class.
    Ok(svg.replacen("<svg ", "<svg class=\"plot\" role=\"img\" ", 1))
}

/// The plots of one dataset: each metric by model x mode, then each metric's difference
/// from base (a forest plot), for what the run has.
fn dataset_plots(
    spec: &SweepSpec,
    stats: &RunStatistics,
    dataset: &str,
) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let modes: Vec<Mode> = spec.modes.clone();
    for (metric, heading, scale) in plotted() {
        let mut rows = Vec::new();
        for model in &spec.models {
            for mode in &modes {
                if let Some(a) = stats.aggregates.iter().find(|a| {
                    a.dataset == dataset
                        && a.model == model.name
                        && a.mode == mode.as_str()
                        && a.metric == metric
                }) {
                    rows.push(Interval {
                        label: format!("{} / {}", model.name, mode.as_str()),
                        mean: a.mean * scale,
                        low: a.ci_low.unwrap_or(a.mean) * scale,
                        high: a.ci_high.unwrap_or(a.mean) * scale,
                    });
                }
            }
        }
        if !rows.is_empty() {
            let title = format!("{heading} on {dataset}");
            let svg = interval_plot(&title, &format!("{heading} (mean, 95% CI)"), &rows, false)?;
            out.push((title, svg));
        }
    }
    for (metric, heading, scale) in plotted() {
        let rows: Vec<Interval> = stats
            .comparisons
            .iter()
            .filter(|c| {
                c.dataset == dataset
                    && c.metric == metric
                    && c.b_mode == "base"
                    && c.b_model == c.a_model
            })
            .map(|c| Interval {
                label: format!("{} / {} - base", c.a_model, c.a_mode),
                mean: c.delta * scale,
                low: c.ci_low.unwrap_or(c.delta) * scale,
                high: c.ci_high.unwrap_or(c.delta) * scale,
            })
            .collect();
        if !rows.is_empty() {
            let title = format!("{heading}: mode - base on {dataset}");
            let svg = interval_plot(
                &title,
                &format!("difference in {heading} (95% CI)"),
                &rows,
                true,
            )?;
            out.push((title, svg));
        }
    }
    Ok(out)
}

/// The AFC plots: per decomposer and metric, each setting's difference from `none` (and
/// CREDENCE's from FActScore) per dataset, with its 95% interval.
fn afc_plots(afc: &AfcTable) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut models: Vec<&str> = Vec::new();
    for d in &afc.deltas {
        if !models.contains(&d.model.as_str()) {
            models.push(&d.model);
        }
    }
    for model in models {
        for metric in METRICS {
            let rows: Vec<Interval> = afc
                .deltas
                .iter()
                .filter(|d| d.model == model && d.metric == metric)
                .map(|d| Interval {
                    label: format!("{}: {} - {}", d.dataset, d.a, d.b),
                    mean: d.delta.value,
                    low: d.delta.ci_low,
                    high: d.delta.ci_high,
                })
                .collect();
            if rows.is_empty() {
                continue;
            }
            let title = format!(
                "AFC {}: differences between settings ({model})",
                metric.heading()
            );
            let svg = interval_plot(
                &title,
                &format!("difference in {} (95% CI)", metric.heading()),
                &rows,
                true,
            )?;
            out.push((title, svg));
        }
    }
    Ok(out)
}

/// Where a cell of a model x mode table links in `credence view` at `view` (its base
/// URL): the list filtered to the row's dataset, model and mode, sorted by the column's
/// metric (worst first) when the column is one.
fn cell_link(
    view: &str,
    t: &super::tables::Table,
    row: &[super::tables::Cell],
    column: &str,
) -> Option<String> {
    use super::tables::Cell;
    if t.name == "afc" {
        return afc_cell_link(view, t, row, column);
    }
    if t.columns.first().map(String::as_str) != Some("Model")
        || t.columns.get(1).map(String::as_str) != Some("Mode")
    {
        return None;
    }
    let (Some(Cell::Text(model)), Some(Cell::Text(mode))) = (row.first(), row.get(1)) else {
        return None;
    };
    let mode: Mode = mode.parse().ok()?;
    let metric = ExampleMetrics::DEFS
        .iter()
        .find(|d| d.presentation.heading == column)
        .map(|d| d.name);
    let worst_first = match metric
        .and_then(ExampleMetrics::def)
        .and_then(|d| d.presentation.better)
    {
        Some(credence_core::domain::Better::Lower) => "desc",
        _ => "asc",
    };
    let state = crate::view::query::ListState {
        dataset: t.dataset.clone(),
        model: Some(model.clone()),
        mode: Some(mode.as_str().to_string()),
        sort: metric.map(|m| format!("{m}.{mode}")),
        dir: metric.map(|_| worst_first.to_string()),
        ..Default::default()
    };
    Some(format!(
        "{}{}",
        view.trim_end_matches('/'),
        crate::view::list_href(&state)
    ))
}

/// Where a cell of a decomposer's AFC table links in `credence view` at `view`: a
/// metric to the AFC claims of the row's dataset that its setting got wrong, the claim
/// count to all of them.
fn afc_cell_link(
    view: &str,
    t: &super::tables::Table,
    row: &[super::tables::Cell],
    column: &str,
) -> Option<String> {
    use super::tables::Cell;
    let decomposer = t.decomposer.as_ref()?;
    let (Some(Cell::Text(dataset)), Some(Cell::Text(setting))) = (row.first(), row.get(1)) else {
        return None;
    };
    let setting = super::tables::afc::setting_of_label(setting)?;
    let wrong = match column {
        "Claims" => None,
        c if credence_core::afc::table::METRICS
            .iter()
            .any(|m| m.heading() == c) =>
        {
            Some(setting.as_str().to_string())
        }
        _ => return None,
    };
    let state = crate::view::afc::AfcState {
        decomposer: Some(decomposer.clone()),
        dataset: Some(dataset.clone()),
        wrong,
        ..Default::default()
    };
    Some(format!(
        "{}{}",
        view.trim_end_matches('/'),
        crate::view::afc::afc_href(&state)
    ))
}

/// A view address as a base URL (`127.0.0.1:8321` gets `http://`).
fn view_base(view: &str) -> String {
    if view.contains("://") {
        view.to_string()
    } else {
        format!("http://{view}")
    }
}

fn table_html(t: &TableOutcome, view: Option<&str>) -> String {
    match t {
        TableOutcome::Unavailable { title, reason, .. } => format!(
            "<h3>{}</h3>\n<p class=\"note\">Not available: {}.</p>\n",
            escape(title),
            escape(reason)
        ),
        TableOutcome::Table(t) => {
            let mut out = format!("<h3>{}</h3>\n<table>\n<tr>", escape(&t.title));
            let numeric = render::first_numeric(t);
            for (i, c) in t.columns.iter().enumerate() {
                let class = if i < numeric { " class=\"label\"" } else { "" };
                out.push_str(&format!("<th{class}>{}</th>", escape(c)));
            }
            out.push_str("</tr>\n");
            for row in &t.rows {
                out.push_str("<tr>");
                for (i, cell) in row.iter().enumerate() {
                    let class = if i < numeric { " class=\"label\"" } else { "" };
                    let text = escape(&render::plain(cell));
                    let link = view
                        .filter(|_| i >= numeric)
                        .and_then(|v| cell_link(v, t, row, &t.columns[i]));
                    let text = match link {
                        Some(href) => format!("<a href=\"{}\">{text}</a>", escape(&href)),
                        None => text,
                    };
                    if render::bold(cell) {
                        out.push_str(&format!("<td{class}><b>{text}</b></td>"));
                    } else {
                        out.push_str(&format!("<td{class}>{text}</td>"));
                    }
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</table>\n");
            if let Some(note) = &t.note {
                out.push_str(&format!("<p class=\"note\">{}</p>\n", escape(note)));
            }
            out
        }
    }
}

/// The whole report as one HTML page; with `view` (the address `credence view` serves
/// the run at), each figure of a model x mode table links to the view's list of those
/// examples.
pub fn html(
    run: &str,
    spec: &SweepSpec,
    stats: &RunStatistics,
    tables: &[TableOutcome],
    afc: Option<&AfcTable>,
    view: Option<&str>,
) -> Result<String, String> {
    let view = view.map(view_base);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>credence report: {run}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>credence report: {run}</h1>\n",
        run = escape(run)
    );
    for dataset in &spec.datasets {
        let plots = dataset_plots(spec, stats, &dataset.id)?;
        if plots.is_empty() {
            continue;
        }
        out.push_str(&format!("<h2>{}</h2>\n", escape(&dataset.id)));
        for (title, svg) in plots {
            out.push_str(&format!(
                "<figure class=\"plot\">{svg}<figcaption>{}</figcaption></figure>\n",
                escape(&title)
            ));
        }
    }
    if let Some(afc) = afc {
        let plots = afc_plots(afc)?;
        if !plots.is_empty() {
            out.push_str("<h2>Downstream fact-checking (AFC)</h2>\n");
        }
        for (title, svg) in plots {
            out.push_str(&format!(
                "<figure class=\"plot\">{svg}<figcaption>{}</figcaption></figure>\n",
                escape(&title)
            ));
        }
    }
    out.push_str("<h2>Tables</h2>\n");
    for t in tables {
        out.push_str(&table_html(t, view.as_deref()));
    }
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(mean: f64, low: f64, high: f64) -> Interval {
        Interval {
            label: "m".into(),
            mean,
            low,
            high,
        }
    }

    #[test]
    fn model_mode_cells_link_to_the_view_filtered_to_them() {
        use super::super::tables::{Cell, Table};
        let table = Table {
            name: "main",
            decomposer: None,
            dataset: Some("sample".into()),
            title: "Results on sample".into(),
            columns: vec!["Model".into(), "Mode".into(), "AVR".into(), "other".into()],
            rows: vec![vec![
                Cell::Text("smol<lm>".into()),
                Cell::Text("repair".into()),
                Cell::Number {
                    value: 0.1,
                    digits: 3,
                },
                Cell::Number {
                    value: 1.0,
                    digits: 3,
                },
            ]],
            note: None,
        };
        let html = table_html(
            &TableOutcome::Table(table.clone()),
            Some(&view_base("127.0.0.1:8321")),
        );
        // AVR is better lower: its worst examples first.
        assert!(
            html.contains(
                "<a href=\"http://127.0.0.1:8321/?dataset=sample&amp;model=smol%3Clm%3E&amp;mode=repair&amp;sort=avr.repair&amp;dir=desc\">0.100</a>"
            ),
            "{html}"
        );
        // A column that is no metric links to the filtered list, unsorted; labels do not link.
        assert!(html.contains("mode=repair\">1.000</a>"), "{html}");
        assert!(
            html.contains("<td class=\"label\">smol&lt;lm&gt;</td>"),
            "{html}"
        );
        assert!(!table_html(&TableOutcome::Table(table), None).contains("href"));
    }

    #[test]
    fn afc_cells_link_to_the_claims_their_setting_got_wrong() {
        use super::super::tables::{Cell, Table};
        let metric = credence_core::afc::table::METRICS[0].heading().to_string();
        let table = Table {
            name: "afc",
            decomposer: Some("qwen3-8b".into()),
            dataset: None,
            title: "AFC: decomposer qwen3-8b, judge qwen3-8b".into(),
            columns: vec![
                "Dataset".into(),
                "Setting".into(),
                "Claims".into(),
                metric,
                "Fell back".into(),
            ],
            rows: vec![vec![
                Cell::Text("covidfact".into()),
                Cell::Text("CREDENCE-decomp".into()),
                Cell::number(100.0, 0),
                Cell::number(0.75, 4),
                Cell::number(2.0, 0),
            ]],
            note: None,
        };
        let html = table_html(
            &TableOutcome::Table(table.clone()),
            Some(&view_base("127.0.0.1:8321")),
        );
        assert!(
            html.contains("<a href=\"http://127.0.0.1:8321/afc?decomposer=qwen3-8b&amp;dataset=covidfact&amp;wrong=credence\">0.7500</a>"),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"http://127.0.0.1:8321/afc?decomposer=qwen3-8b&amp;dataset=covidfact\">100</a>"),
            "{html}"
        );
        assert_eq!(html.matches("href").count(), 2, "{html}");
        // The difference tables (no decomposer field) do not link.
        let diffs = Table {
            decomposer: None,
            ..table
        };
        assert!(!table_html(&TableOutcome::Table(diffs), Some("http://v")).contains("href"));
    }

    #[test]
    fn equal_values_get_a_readable_axis_and_spread_ones_their_own() {
        // Issue 35: EPR at 1 everywhere drew an axis from 0.999 to 1.0008.
        let (lo, hi) = axis_range(&[interval(1.0, 1.0, 1.0), interval(1.0, 1.0, 1.0)], false);
        assert!(hi - lo >= MIN_AXIS_SPAN, "{lo}..{hi}");
        assert!(((lo + hi) / 2.0 - 1.0).abs() < 1e-12 && lo < 1.0 && hi > 1.0);
        // RR at 0 with the zero line.
        let (lo, hi) = axis_range(&[interval(0.0, 0.0, 0.0)], true);
        assert!(
            lo <= -MIN_AXIS_SPAN / 2.0 && hi >= MIN_AXIS_SPAN / 2.0,
            "{lo}..{hi}"
        );
        // A spread table keeps its own range, 8% margin each side.
        let (lo, hi) = axis_range(&[interval(0.5, 0.2, 0.8)], false);
        assert!((lo - (0.2 - 0.048)).abs() < 1e-12 && (hi - (0.8 + 0.048)).abs() < 1e-12);
    }
}
