//! COVID-Fact (Saakyan et al., ACL 2021), `covidfact/COVIDFACT_dataset.jsonl`: one
//! `{claim, label, evidence, gold_source, flair}` per line, no id (the example id is the
//! line number). Evidence: the record's `evidence`, 1-5 sentences of the source
//! abstract, in the file's order.

use super::{claim_text, clean_sentences, Source, SourceClaim};
use crate::builders::{json_lines, BenchmarkError};
use serde::Deserialize;
use std::path::Path;

/// The claims file, relative to the data folder.
pub const FILE: &str = "covidfact/COVIDFACT_dataset.jsonl";

#[derive(Deserialize)]
struct Raw {
    claim: String,
    label: String,
    evidence: Vec<String>,
    #[serde(default)]
    gold_source: String,
    #[serde(default)]
    flair: String,
}

/// Every claim of the file, in order; a malformed line is an error naming it.
pub fn read(data: &Path) -> Result<Source, BenchmarkError> {
    let path = data.join(FILE);
    let mut claims = Vec::new();
    for (line_no, raw) in json_lines::<Raw>(&path)? {
        let mut meta = serde_json::Map::new();
        meta.insert("flair".into(), raw.flair.into());
        meta.insert("gold_source".into(), raw.gold_source.into());
        claims.push(SourceClaim {
            line: line_no,
            id: format!("covidfact-{line_no}"),
            text: claim_text(&path, line_no, &raw.claim)?,
            label: raw.label,
            evidence: clean_sentences(&raw.evidence),
            meta,
        });
    }
    Ok(Source { path, claims })
}
