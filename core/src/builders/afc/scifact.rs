//! SciFact (Wadden et al., EMNLP 2020): claims in `scifact/claims_{train,dev,test}.jsonl`
//! (`{id, claim, evidence: {doc_id: [{sentences, label}]}, cited_doc_ids}`), abstracts in
//! `scifact-corpus/corpus.jsonl` (`{doc_id, title, abstract: [sentence, ...]}`).
//!
//! A claim's label is the label of its rationales (SUPPORT, or CONTRADICT, which this
//! copy writes REFUTE); one with both is an error, one with none is [`NO_RATIONALE`]
//! (SciFact's NOT ENOUGH INFO), which the protocol drops. Evidence: the rationale
//! sentences, abstract by abstract in ascending doc id, each abstract's sentences once and
//! in abstract order; an abstract whose rationales list no sentence gives all its
//! sentences (PAPER.md: "all sentences of the cited abstracts when a claim has none").
//! Example id: `scifact-<id>`.

use super::{claim_text, Source, SourceClaim};
use crate::builders::{json_lines, line_error, BenchmarkError};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// The training split's claims, relative to the data folder.
pub const TRAIN: &str = "scifact/claims_train.jsonl";
/// The development split's claims.
pub const DEV: &str = "scifact/claims_dev.jsonl";
/// The labelled test fold's claims.
pub const TEST: &str = "scifact/claims_test.jsonl";
/// The abstracts.
pub const CORPUS: &str = "scifact-corpus/corpus.jsonl";

/// The label given to a claim without rationales.
pub const NO_RATIONALE: &str = "NOT ENOUGH INFO";

#[derive(Deserialize)]
struct RawClaim {
    id: u64,
    claim: String,
    #[serde(default)]
    evidence: BTreeMap<String, Vec<Rationale>>,
    #[serde(default)]
    cited_doc_ids: Vec<u64>,
}

#[derive(Deserialize)]
struct Rationale {
    sentences: Vec<usize>,
    label: String,
}

#[derive(Deserialize)]
struct RawDoc {
    doc_id: u64,
    #[serde(rename = "abstract")]
    sentences: Vec<String>,
}

/// Every claim of `file` (relative to `data`), in order, with its rationale sentences
/// from the corpus; a malformed line, or a rationale that points outside the corpus, is
/// an error naming it.
pub fn read(data: &Path, file: &str) -> Result<Source, BenchmarkError> {
    let corpus = read_corpus(&data.join(CORPUS))?;
    let path = data.join(file);
    let mut claims = Vec::new();
    for (line_no, raw) in json_lines::<RawClaim>(&path)? {
        let labels: BTreeSet<&str> = raw
            .evidence
            .values()
            .flatten()
            .map(|r| r.label.as_str())
            .collect();
        let label = match labels.len() {
            0 => NO_RATIONALE.to_string(),
            1 => labels.into_iter().next().unwrap_or_default().to_string(),
            _ => {
                return Err(line_error(
                    &path,
                    line_no,
                    format!(
                    "field \"evidence\": claim {} has rationales labelled {}; one label expected",
                    raw.id,
                    labels.into_iter().collect::<Vec<_>>().join(" and ")
                ),
                ))
            }
        };
        let mut docs: Vec<(u64, BTreeSet<usize>)> = Vec::new();
        for (doc, rationales) in &raw.evidence {
            let doc_id: u64 = doc.parse().map_err(|_| {
                line_error(
                    &path,
                    line_no,
                    format!("field \"evidence\": key {doc:?} is not a doc id"),
                )
            })?;
            let wanted = rationales.iter().flat_map(|r| &r.sentences).copied();
            docs.push((doc_id, wanted.collect()));
        }
        docs.sort_by_key(|&(doc_id, _)| doc_id);
        let mut evidence = Vec::new();
        let mut rationales = Vec::new();
        for (doc_id, wanted) in docs {
            let sentences = corpus.get(&doc_id).ok_or_else(|| {
                line_error(
                    &path,
                    line_no,
                    format!("field \"evidence\": doc {doc_id} is not in {CORPUS}"),
                )
            })?;
            let indices: Vec<usize> = if wanted.is_empty() {
                (0..sentences.len()).collect()
            } else {
                wanted.into_iter().collect()
            };
            for &at in &indices {
                let sentence = sentences.get(at).ok_or_else(|| {
                    line_error(
                        &path,
                        line_no,
                        format!(
                            "field \"evidence\": sentence {at} of doc {doc_id} is past its {} sentences",
                            sentences.len()
                        ),
                    )
                })?;
                let sentence = sentence.trim();
                if !sentence.is_empty() {
                    evidence.push(sentence.to_string());
                }
            }
            rationales.push(serde_json::json!({"doc_id": doc_id, "sentences": indices}));
        }
        let mut meta = serde_json::Map::new();
        meta.insert("rationales".into(), rationales.into());
        meta.insert("cited_doc_ids".into(), raw.cited_doc_ids.into());
        claims.push(SourceClaim {
            line: line_no,
            id: format!("scifact-{}", raw.id),
            text: claim_text(&path, line_no, &raw.claim)?,
            label,
            evidence,
            meta,
        });
    }
    Ok(Source { path, claims })
}

/// Each abstract's sentences by doc id; a malformed line or a repeated doc id is an error
/// naming its line.
fn read_corpus(path: &Path) -> Result<HashMap<u64, Vec<String>>, BenchmarkError> {
    let mut docs = HashMap::new();
    for (line_no, doc) in json_lines::<RawDoc>(path)? {
        if docs.insert(doc.doc_id, doc.sentences).is_some() {
            return Err(line_error(
                path,
                line_no,
                format!("doc_id {} appears twice", doc.doc_id),
            ));
        }
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data folder holding `claims_dev.jsonl` and `corpus.jsonl` with the given lines.
    fn folder(claims: &[&str], corpus: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (file, lines) in [(DEV, claims), (CORPUS, corpus)] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        }
        dir
    }

    const CORPUS_LINES: [&str; 2] = [
        r#"{"doc_id": 20, "title": "T", "abstract": ["A0.", " A1. ", "A2."], "structured": false}"#,
        r#"{"doc_id": 3, "title": "T", "abstract": ["B0.", "B1."], "structured": false}"#,
    ];

    #[test]
    fn rationale_sentences_in_doc_then_sentence_order() {
        let dir = folder(
            &[
                r#"{"id": 1, "claim": " C1 ", "evidence": {"20": [{"sentences": [2], "label": "SUPPORT"}, {"sentences": [1, 2], "label": "SUPPORT"}], "3": [{"sentences": [1], "label": "SUPPORT"}]}, "cited_doc_ids": [20, 3]}"#,
                r#"{"id": 2, "claim": "C2", "evidence": {}, "cited_doc_ids": [3]}"#,
                r#"{"id": 3, "claim": "C3", "evidence": {"3": [{"sentences": [], "label": "CONTRADICT"}]}, "cited_doc_ids": [3]}"#,
            ],
            &CORPUS_LINES,
        );
        let source = read(dir.path(), DEV).unwrap();
        let c = &source.claims;
        assert_eq!(c[0].id, "scifact-1");
        assert_eq!(c[0].text, "C1");
        assert_eq!(c[0].label, "SUPPORT");
        assert_eq!(c[0].evidence, ["B1.", "A1.", "A2."]);
        assert_eq!(
            c[0].meta["rationales"],
            serde_json::json!([{"doc_id": 3, "sentences": [1]}, {"doc_id": 20, "sentences": [1, 2]}])
        );
        assert_eq!(c[1].label, NO_RATIONALE);
        assert!(c[1].evidence.is_empty());
        // A rationale with no sentence listed: the whole abstract.
        assert_eq!(c[2].label, "CONTRADICT");
        assert_eq!(c[2].evidence, ["B0.", "B1."]);
    }

    #[test]
    fn bad_rationales_name_the_line() {
        let cases = [
            (
                r#"{"id": 1, "claim": "C", "evidence": {"3": [{"sentences": [0], "label": "SUPPORT"}], "20": [{"sentences": [0], "label": "CONTRADICT"}]}}"#,
                ":1: field \"evidence\": claim 1 has rationales labelled CONTRADICT and SUPPORT; one label expected",
            ),
            (
                r#"{"id": 1, "claim": "C", "evidence": {"7": [{"sentences": [0], "label": "SUPPORT"}]}}"#,
                ":1: field \"evidence\": doc 7 is not in scifact-corpus/corpus.jsonl",
            ),
            (
                r#"{"id": 1, "claim": "C", "evidence": {"3": [{"sentences": [2], "label": "SUPPORT"}]}}"#,
                ":1: field \"evidence\": sentence 2 of doc 3 is past its 2 sentences",
            ),
            (
                r#"{"id": 1, "claim": "C", "evidence": {"3": [{"label": "SUPPORT"}]}}"#,
                ":1: invalid JSON at column",
            ),
            (
                r#"{"id": 1, "claim": "  ", "evidence": {}}"#,
                ":1: field \"claim\" is empty",
            ),
        ];
        for (line, want) in cases {
            let dir = folder(&[line], &CORPUS_LINES);
            let e = read(dir.path(), DEV).unwrap_err().to_string();
            let path = dir.path().join(DEV);
            assert!(e.starts_with(&format!("{}{want}", path.display())), "{e}");
        }
        let dir = folder(&[], &[CORPUS_LINES[1], CORPUS_LINES[1]]);
        let e = read(dir.path(), DEV).unwrap_err().to_string();
        assert!(e.ends_with("corpus.jsonl:2: doc_id 3 appears twice"), "{e}");
    }
}
