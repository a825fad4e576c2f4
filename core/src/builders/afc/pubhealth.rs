//! PubHealth (Kotonya & Toni, EMNLP 2020), the test split as processed by an ML
//! Reproducibility Challenge reproduction: `pubhealth/pubhealth_test.csv`, a header row,
//! then one record per line with the columns `Unnamed: 0` (the row of the original
//! `test.tsv`), `claim`, `top_k` (the 5 sentences of the article most similar to the
//! claim, joined by the reproducers), `label` and `explanation`. Evidence: `top_k` as
//! one passage, as the file gives it (its sentence boundaries are not recorded);
//! `explanation`, the fact-checkers' verdict text, is not evidence and not used.
//! Example id: `pubhealth-<Unnamed: 0>`.

use super::{claim_text, clean_sentences, Source, SourceClaim};
use crate::builders::agnews::parse_csv_line;
use crate::builders::{line_error, read_source, BenchmarkError};
use std::path::Path;

/// The claims file, relative to the data folder.
pub const FILE: &str = "pubhealth/pubhealth_test.csv";

/// The columns read, by header name.
const COLUMNS: [&str; 4] = ["Unnamed: 0", "claim", "top_k", "label"];

/// Every claim of the file, in order; a malformed line is an error naming it and the
/// column.
pub fn read(data: &Path) -> Result<Source, BenchmarkError> {
    let path = data.join(FILE);
    let text = read_source(&path)?;
    let mut lines = text.lines().enumerate();
    let header = match lines.next() {
        Some((_, h)) => parse_csv_line(h).map_err(|m| line_error(&path, 1, m))?,
        None => return Err(line_error(&path, 1, "empty file; expected a header row")),
    };
    let mut at = [0usize; 4];
    for (slot, name) in at.iter_mut().zip(COLUMNS) {
        *slot = header.iter().position(|h| h == name).ok_or_else(|| {
            line_error(
                &path,
                1,
                format!("no column {name:?} in the header (it has {header:?})"),
            )
        })?;
    }
    let [row_at, claim_at, top_k_at, label_at] = at;
    let mut claims = Vec::new();
    for (i, line) in lines {
        let line_no = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let fields = parse_csv_line(line).map_err(|m| line_error(&path, line_no, m))?;
        if fields.len() != header.len() {
            return Err(line_error(
                &path,
                line_no,
                format!(
                    "expected {} columns as in the header, found {}",
                    header.len(),
                    fields.len()
                ),
            ));
        }
        let row: u64 = fields[row_at].trim().parse().map_err(|_| {
            line_error(
                &path,
                line_no,
                format!(
                    "column \"Unnamed: 0\" (the original row) {:?} is not a row number",
                    fields[row_at]
                ),
            )
        })?;
        let mut meta = serde_json::Map::new();
        meta.insert("row".into(), row.into());
        claims.push(SourceClaim {
            line: line_no,
            id: format!("pubhealth-{row}"),
            text: claim_text(&path, line_no, &fields[claim_at])?,
            label: fields[label_at].trim().to_string(),
            evidence: clean_sentences([&fields[top_k_at]]),
            meta,
        });
    }
    Ok(Source { path, claims })
}
