//! The report's tables as Markdown, LaTeX (a whole document with booktabs tables, ready
//! for pdflatex), CSV (long form: one row per cell, for pandas or a spreadsheet) and JSON
//! values. A mean with its interval prints as `0.973 [0.967, 0.978]`; a table the run
//! cannot fill prints its reason in one line.

use super::tables::{Cell, Table, TableOutcome};
use serde_json::{json, Value};

/// A cell as text (a mean with its interval as `0.973 [0.967, 0.978]`).
pub(super) fn plain(cell: &Cell) -> String {
    match cell {
        Cell::Text(t) => t.clone(),
        Cell::Number { value, digits } => format!("{value:.digits$}"),
        Cell::Estimate {
            mean, ci, digits, ..
        } => match ci {
            Some((lo, hi)) => format!("{mean:.digits$} [{lo:.digits$}, {hi:.digits$}]"),
            None => format!("{mean:.digits$}"),
        },
        Cell::PValue(p) if *p < 1e-4 => "<0.0001".into(),
        Cell::PValue(p) => format!("{p:.4}"),
        Cell::Missing => "–".into(),
    }
}

/// Whether a cell prints in bold.
pub(super) fn bold(cell: &Cell) -> bool {
    matches!(cell, Cell::Estimate { bold: true, .. })
}

/// Every table as Markdown: a heading, a pipe table and its note.
pub fn markdown(tables: &[TableOutcome]) -> String {
    let mut out = String::new();
    for t in tables {
        match t {
            TableOutcome::Unavailable { title, reason, .. } => {
                out.push_str(&format!("### {title}\n\nNot available: {reason}.\n\n"));
            }
            TableOutcome::Table(t) => {
                out.push_str(&format!("### {}\n\n", t.title));
                let escape = |s: &str| s.replace('|', "\\|");
                out.push_str(&format!(
                    "| {} |\n",
                    t.columns
                        .iter()
                        .map(|c| escape(c))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ));
                out.push_str(&format!(
                    "|{}\n",
                    t.columns
                        .iter()
                        .enumerate()
                        .map(|(i, _)| if i < first_numeric(t) {
                            " --- |"
                        } else {
                            " ---: |"
                        })
                        .collect::<String>()
                ));
                for row in &t.rows {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|c| {
                            let s = escape(&plain(c));
                            if bold(c) {
                                format!("**{s}**")
                            } else {
                                s
                            }
                        })
                        .collect();
                    out.push_str(&format!("| {} |\n", cells.join(" | ")));
                }
                if let Some(note) = &t.note {
                    out.push_str(&format!("\n{note}\n"));
                }
                out.push('\n');
            }
        }
    }
    out
}

/// The index of the first column that holds figures (left-aligned before it).
pub(super) fn first_numeric(t: &Table) -> usize {
    (0..t.columns.len())
        .find(|&c| {
            t.rows
                .iter()
                .any(|r| !matches!(r.get(c), Some(Cell::Text(_)) | None))
        })
        .unwrap_or(t.columns.len())
}

fn latex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\textbackslash{}"),
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                out.push('\\');
                out.push(ch);
            }
            '~' => out.push_str("\\textasciitilde{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            '–' => out.push_str("--"),
            '≥' => out.push_str("$\\geq$"),
            'Δ' => out.push_str("$\\Delta$"),
            '<' => out.push_str("\\textless{}"),
            '>' => out.push_str("\\textgreater{}"),
            _ => out.push(ch),
        }
    }
    out
}

/// Every table as one LaTeX document (article; booktabs rules in longtables, which break
/// across pages), ready for pdflatex.
pub fn latex(run: &str, tables: &[TableOutcome]) -> String {
    let mut out = String::from(
        "\\documentclass{article}\n\\usepackage[margin=2cm,landscape]{geometry}\n\
         \\usepackage[T1]{fontenc}\n\\usepackage{booktabs}\n\\usepackage{longtable}\n\\begin{document}\n",
    );
    out.push_str(&format!(
        "\\section*{{credence report: {}}}\n",
        latex_escape(run)
    ));
    for t in tables {
        match t {
            TableOutcome::Unavailable { title, reason, .. } => {
                out.push_str(&format!(
                    "\\paragraph{{{}}} Not available: {}.\n\n",
                    latex_escape(title),
                    latex_escape(reason)
                ));
            }
            TableOutcome::Table(t) => {
                let numeric = first_numeric(t);
                let spec: String = (0..t.columns.len())
                    .map(|i| if i < numeric { 'l' } else { 'r' })
                    .collect();
                out.push_str(&format!("\\begin{{longtable}}{{{spec}}}\n"));
                out.push_str(&format!(
                    "\\caption{{{}}} \\\\\n\\toprule\n",
                    latex_escape(&t.title)
                ));
                let header = t
                    .columns
                    .iter()
                    .map(|c| latex_escape(c))
                    .collect::<Vec<_>>()
                    .join(" & ");
                out.push_str(&format!("{header} \\\\\n\\midrule\n\\endhead\n"));
                for row in &t.rows {
                    let cells: Vec<String> = row
                        .iter()
                        .map(|c| {
                            let s = latex_escape(&plain(c));
                            if bold(c) {
                                format!("\\textbf{{{s}}}")
                            } else {
                                s
                            }
                        })
                        .collect();
                    out.push_str(&format!("{} \\\\\n", cells.join(" & ")));
                }
                out.push_str("\\bottomrule\n\\end{longtable}\n");
                if let Some(note) = &t.note {
                    out.push_str(&format!("{{\\footnotesize {}}}\n", latex_escape(note)));
                }
                out.push_str("\\bigskip\n\n");
            }
        }
    }
    out.push_str("\\end{document}\n");
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Every table in long form: `table,dataset,row,column,value,ci_low,ci_high,bold`, one
/// line per cell (labels in `value`; a missing figure has an empty `value`). A table the
/// run cannot fill gives one line with its reason in `value` and column `unavailable`.
pub fn csv(tables: &[TableOutcome]) -> String {
    let mut out = String::from("table,dataset,row,column,value,ci_low,ci_high,bold\n");
    for t in tables {
        match t {
            TableOutcome::Unavailable {
                name,
                dataset,
                reason,
                ..
            } => {
                out.push_str(&format!(
                    "{name},{},,unavailable,{},,,\n",
                    csv_field(dataset.as_deref().unwrap_or("")),
                    csv_field(reason)
                ));
            }
            TableOutcome::Table(t) => {
                let dataset = csv_field(t.dataset.as_deref().unwrap_or(""));
                for (r, row) in t.rows.iter().enumerate() {
                    for (column, cell) in t.columns.iter().zip(row) {
                        let (value, lo, hi) = match cell {
                            Cell::Text(s) => (csv_field(s), String::new(), String::new()),
                            Cell::Number { value, .. } | Cell::PValue(value) => {
                                (value.to_string(), String::new(), String::new())
                            }
                            Cell::Estimate { mean, ci, .. } => (
                                mean.to_string(),
                                ci.map_or(String::new(), |c| c.0.to_string()),
                                ci.map_or(String::new(), |c| c.1.to_string()),
                            ),
                            Cell::Missing => (String::new(), String::new(), String::new()),
                        };
                        out.push_str(&format!(
                            "{},{dataset},{r},{},{value},{lo},{hi},{}\n",
                            t.name,
                            csv_field(column),
                            bold(cell)
                        ));
                    }
                }
            }
        }
    }
    out
}

fn cell_json(cell: &Cell) -> Value {
    match cell {
        Cell::Text(t) => json!(t),
        Cell::Number { value, .. } | Cell::PValue(value) => json!(value),
        Cell::Estimate { mean, ci, bold, .. } => json!({
            "mean": mean,
            "ci_low": ci.map(|c| c.0),
            "ci_high": ci.map(|c| c.1),
            "bold": bold,
        }),
        Cell::Missing => Value::Null,
    }
}

/// The tables as the JSON report's `tables` object: each family's tables under its name,
/// as a list (one per dataset for per-dataset families).
pub fn json_tables(tables: &[TableOutcome]) -> Value {
    let mut out = serde_json::Map::new();
    for t in tables {
        let (name, value) = match t {
            TableOutcome::Unavailable {
                name,
                dataset,
                title,
                reason,
            } => (
                *name,
                json!({"dataset": dataset, "title": title, "unavailable": reason}),
            ),
            TableOutcome::Table(t) => (
                t.name,
                json!({
                    "dataset": t.dataset,
                    "title": t.title,
                    "columns": t.columns,
                    "rows": t.rows.iter().map(|r| r.iter().map(cell_json).collect::<Vec<_>>()).collect::<Vec<_>>(),
                    "note": t.note,
                }),
            ),
        };
        out.entry(name)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .expect("every entry is a list")
            .push(value);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Vec<TableOutcome> {
        vec![
            TableOutcome::Table(Table {
                name: "main",
                decomposer: None,
                dataset: Some("d_1".into()),
                title: "Results on d_1".into(),
                columns: vec!["Model".into(), "Mode".into(), "AVR".into()],
                rows: vec![
                    vec![
                        Cell::Text("m".into()),
                        Cell::Text("base".into()),
                        Cell::Estimate {
                            mean: 0.9731,
                            ci: Some((0.9672, 0.9784)),
                            digits: 3,
                            bold: true,
                        },
                    ],
                    vec![
                        Cell::Text("m".into()),
                        Cell::Text("all".into()),
                        Cell::Missing,
                    ],
                ],
                note: Some("AVR: 5% of claims".into()),
            }),
            TableOutcome::Unavailable {
                name: "timing",
                dataset: None,
                title: "Seconds per example by mode".into(),
                reason: "the run has no stage timings".into(),
            },
        ]
    }

    #[test]
    fn estimates_print_with_their_interval_in_every_format() {
        let t = table();
        let md = markdown(&t);
        assert!(
            md.contains("| m | base | **0.973 [0.967, 0.978]** |"),
            "{md}"
        );
        assert!(md.contains("| m | all | – |"), "{md}");
        assert!(
            md.contains("Not available: the run has no stage timings."),
            "{md}"
        );
        let tex = latex("run_1", &t);
        assert!(tex.contains("\\textbf{0.973 [0.967, 0.978]}"), "{tex}");
        assert!(
            tex.contains("Results on d\\_1") && tex.contains("5\\% of claims"),
            "{tex}"
        );
        assert!(tex.contains("\\toprule") && tex.ends_with("\\end{document}\n"));
        let csv = csv(&t);
        assert!(
            csv.contains("main,d_1,0,AVR,0.9731,0.9672,0.9784,true\n"),
            "{csv}"
        );
        assert!(csv.contains("timing,,,unavailable,the run has no stage timings,,,\n"));
        let json = json_tables(&t);
        assert_eq!(json["main"][0]["rows"][0][2]["ci_high"], 0.9784);
        assert!(json["main"][0]["rows"][1][2].is_null());
        assert_eq!(
            json["timing"][0]["unavailable"],
            "the run has no stage timings"
        );
    }
}
