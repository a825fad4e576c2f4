//! LIAR-PLUS (Alhindi et al., FEVER 2018), `liar-plus/dataset/jsonl/{val2,test2}.jsonl`:
//! one PolitiFact statement per line with its six-way rating and the `justification`,
//! the ruling's sentences with the verdict words removed. The JSONL, not the TSV (whose
//! test2 has broken lines). Evidence: the justification as one passage (the file marks
//! no sentence boundaries in it), trimmed; null or empty in 25 test2 and 4 val2 rows,
//! which are then dropped for want of evidence. Example id: `liar-plus-<json_file_id>`
//! without its `.json`.

use super::{claim_text, clean_sentences, Source, SourceClaim};
use crate::builders::{json_lines, line_error, BenchmarkError};
use serde::Deserialize;
use std::path::Path;

/// The validation split's file, relative to the data folder.
pub const VAL2: &str = "liar-plus/dataset/jsonl/val2.jsonl";
/// The test split's file, relative to the data folder.
pub const TEST2: &str = "liar-plus/dataset/jsonl/test2.jsonl";

#[derive(Deserialize)]
struct Raw {
    json_file_id: String,
    label: String,
    claim: String,
    #[serde(default)]
    justification: Option<String>,
}

/// Every statement of `file` (relative to `data`), in order; a malformed line is an
/// error naming it.
pub fn read(data: &Path, file: &str) -> Result<Source, BenchmarkError> {
    let path = data.join(file);
    let mut claims = Vec::new();
    for (line_no, raw) in json_lines::<Raw>(&path)? {
        let id = raw.json_file_id.trim().trim_end_matches(".json");
        if id.is_empty() {
            return Err(line_error(
                &path,
                line_no,
                "field \"json_file_id\" is empty",
            ));
        }
        let mut meta = serde_json::Map::new();
        meta.insert("json_file_id".into(), raw.json_file_id.clone().into());
        claims.push(SourceClaim {
            line: line_no,
            id: format!("liar-plus-{id}"),
            text: claim_text(&path, line_no, &raw.claim)?,
            label: raw.label,
            evidence: clean_sentences(raw.justification.as_deref()),
            meta,
        });
    }
    Ok(Source { path, claims })
}
