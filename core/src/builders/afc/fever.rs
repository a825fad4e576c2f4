//! FEVER 1.0 (Thorne et al., NAACL 2018), `fever/paper_dev.jsonl`: 9,999 claims with
//! labels and evidence *pointers* (Wikipedia page and sentence number) but no Wikipedia
//! text. The only evidence text at hand is FEVER-Symmetric's (Schuster et al., EMNLP
//! 2019): one gold evidence sentence per original FEVER dev claim in
//! `fever-symmetric/{v0.1_full,v0.2_dev,v0.2_test}.jsonl`, in FEVER's tokenisation.
//!
//! A paper_dev claim gets the sentence of the first FEVER-Symmetric row (files in that
//! order, then lines) with its id, the same label, and the same claim text once FEVER's
//! tokenisation is undone ([`same_claim`]); the synthetic rows (ids with a `000000{2,3,4}`
//! suffix) never match an id of paper_dev. The sentence is detokenised ([`detokenize`]).
//! Every other claim has no evidence text and is dropped. Example id: `fever-<id>`.

use super::{claim_text, Source, SourceClaim};
use crate::builders::{json_lines, line_error, BenchmarkError};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// The claims file, relative to the data folder.
pub const FILE: &str = "fever/paper_dev.jsonl";

/// FEVER-Symmetric's files, in the order their rows are preferred.
pub const SYMMETRIC: [&str; 3] = [
    "fever-symmetric/v0.1_full.jsonl",
    "fever-symmetric/v0.2_dev.jsonl",
    "fever-symmetric/v0.2_test.jsonl",
];

#[derive(Deserialize)]
struct RawClaim {
    id: u64,
    label: String,
    claim: String,
}

#[derive(Deserialize)]
struct RawSymmetric {
    id: String,
    label: String,
    claim: String,
    /// v0.1's name for the sentence.
    evidence_sentence: Option<String>,
    /// v0.2's name for it.
    evidence: Option<String>,
}

/// A FEVER-Symmetric row that may give a paper_dev claim its evidence.
struct SymmetricRow {
    /// `file:line`, for meta.
    place: String,
    label: String,
    claim: String,
    sentence: String,
}

/// Every claim of paper_dev, in order, with the FEVER-Symmetric sentence where one
/// matches; a malformed line of any of the four files is an error naming it.
pub fn read(data: &Path) -> Result<Source, BenchmarkError> {
    let symmetric = read_symmetric(data)?;
    let path = data.join(FILE);
    let mut claims = Vec::new();
    for (line_no, raw) in json_lines::<RawClaim>(&path)? {
        let text = claim_text(&path, line_no, &raw.claim)?;
        let matched = symmetric.get(&raw.id).and_then(|rows| {
            rows.iter()
                .find(|r| r.label == raw.label && same_claim(&text, &r.claim))
        });
        let mut meta = serde_json::Map::new();
        let evidence = match matched {
            Some(row) => {
                meta.insert("evidence_from".into(), row.place.clone().into());
                vec![detokenize(&row.sentence)]
            }
            None => Vec::new(),
        };
        claims.push(SourceClaim {
            line: line_no,
            id: format!("fever-{}", raw.id),
            text,
            label: raw.label,
            evidence: evidence.into_iter().filter(|s| !s.is_empty()).collect(),
            meta,
        });
    }
    Ok(Source { path, claims })
}

/// FEVER-Symmetric's rows by FEVER id (ids that are not numbers cannot match one and are
/// left out), in preference order.
fn read_symmetric(data: &Path) -> Result<HashMap<u64, Vec<SymmetricRow>>, BenchmarkError> {
    let mut rows: HashMap<u64, Vec<SymmetricRow>> = HashMap::new();
    for file in SYMMETRIC {
        let path = data.join(file);
        for (line_no, raw) in json_lines::<RawSymmetric>(&path)? {
            let Some(sentence) = raw.evidence_sentence.or(raw.evidence) else {
                return Err(line_error(
                    &path,
                    line_no,
                    "no field \"evidence_sentence\" (v0.1) or \"evidence\" (v0.2)",
                ));
            };
            let Ok(id) = raw.id.trim().parse::<u64>() else {
                continue;
            };
            rows.entry(id).or_default().push(SymmetricRow {
                place: format!("{file}:{line_no}"),
                label: raw.label,
                claim: raw.claim,
                sentence,
            });
        }
    }
    Ok(rows)
}

/// A FEVER token as the text it stands for: `-LRB-` `(`, `-RSB-` `]`, ..., the
/// tokeniser's quotes `` `` `` and `''` a straight double quote.
fn untoken(token: &str) -> &str {
    match token {
        "-LRB-" => "(",
        "-RRB-" => ")",
        "-LSB-" => "[",
        "-RSB-" => "]",
        "-LCB-" => "{",
        "-RCB-" => "}",
        "``" | "''" => "\"",
        t => t,
    }
}

/// Whether a claim as paper_dev writes it and one in FEVER's tokenisation are the same
/// text: equal once the bracket and quote tokens are mapped back and all white space is
/// removed (the tokeniser only adds spaces around tokens and renames brackets and quotes).
pub fn same_claim(plain: &str, tokenised: &str) -> bool {
    let compact = |s: &str| -> String {
        s.split_whitespace()
            .map(untoken)
            .flat_map(str::chars)
            .collect()
    };
    compact(plain) == compact(tokenised)
}

/// A sentence in FEVER's tokenisation as plain text: bracket and quote tokens mapped back, then the
/// spacing of punctuation, clitics and quotes undone as for WikiSplit
/// ([`crate::builders::wikisplit::detokenize`]).
pub fn detokenize(tokenised: &str) -> String {
    // FEVER writes `` for closing quotes too: straight quotes, which the WikiSplit rules
    // pair as they come.
    let tokens: Vec<&str> = tokenised.split_whitespace().map(untoken).collect();
    crate::builders::wikisplit::detokenize(&tokens.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_compare_across_the_tokenisation() {
        assert!(same_claim(
            "Damon Albarn's debut album was released in 2011.",
            "Damon Albarn 's debut album was released in 2011 ."
        ));
        assert!(same_claim(
            "Dub music grew out of R&B.",
            "Dub music grew out of R & B ."
        ));
        assert!(same_claim(
            "James Jones's nickname is not \"Champ\".",
            "James Jones 's nickname is not `` Champ '' ."
        ));
        assert!(same_claim(
            "Soul Food (film) was released.",
            "Soul Food -LRB- film -RRB- was released ."
        ));
        assert!(!same_claim(
            "Damon Albarn's debut album was released in 2014.",
            "Damon Albarn 's debut album was released in 2011 ."
        ));
    }

    #[test]
    fn evidence_sentences_are_detokenised() {
        assert_eq!(
            detokenize(
                "Telemundo -LRB- -LSB- teleˈmundo -RSB- -RRB- is an American Spanish-language network owned by Comcast ."
            ),
            "Telemundo ([teleˈmundo]) is an American Spanish-language network owned by Comcast."
        );
        assert_eq!(
            detokenize("He starred in `` Up '' , the 2009 film 's hit ."),
            "He starred in \"Up\", the 2009 film's hit."
        );
        assert_eq!(
            detokenize("produced by Kenneth `` Babyface `` Edmonds , and `` Up '' ."),
            "produced by Kenneth \"Babyface\" Edmonds, and \"Up\"."
        );
    }

    /// A data folder with paper_dev and the three FEVER-Symmetric files.
    fn folder(claims: &[&str], symmetric: [&[&str]; 3]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let files = std::iter::once((FILE, claims)).chain(SYMMETRIC.into_iter().zip(symmetric));
        for (file, lines) in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        }
        dir
    }

    #[test]
    fn a_claim_takes_the_first_matching_row_with_its_label_and_text() {
        let dir = folder(
            &[
                r#"{"id": 5, "verifiable": "VERIFIABLE", "label": "SUPPORTS", "claim": "A is B.", "evidence": []}"#,
                r#"{"id": 6, "verifiable": "VERIFIABLE", "label": "REFUTES", "claim": "C is D.", "evidence": []}"#,
                r#"{"id": 7, "verifiable": "VERIFIABLE", "label": "REFUTES", "claim": "E is F.", "evidence": []}"#,
            ],
            [
                &[
                    r#"{"id": "6", "label": "SUPPORTS", "claim": "C is D .", "evidence_sentence": "wrong label ."}"#,
                ],
                &[
                    r#"{"id": "5", "claim": "A is B .", "evidence": "A -LRB- x -RRB- is B .", "label": "SUPPORTS"}"#,
                    r#"{"id": "6", "claim": "C is D .", "evidence": "C is not D .", "label": "REFUTES"}"#,
                    r#"{"id": "7", "claim": "E is G .", "evidence": "other claim .", "label": "REFUTES"}"#,
                ],
                &[
                    r#"{"id": "5", "claim": "A is B .", "evidence": "later row .", "label": "SUPPORTS"}"#,
                ],
            ],
        );
        let source = read(dir.path()).unwrap();
        let c = &source.claims;
        assert_eq!(c[0].id, "fever-5");
        assert_eq!(c[0].evidence, ["A (x) is B."]);
        assert_eq!(
            c[0].meta["evidence_from"],
            "fever-symmetric/v0.2_dev.jsonl:1"
        );
        assert_eq!(c[1].evidence, ["C is not D."]);
        assert!(c[2].evidence.is_empty());
        assert!(!c[2].meta.contains_key("evidence_from"));

        let dir = folder(
            &[],
            [
                &[],
                &[r#"{"id": "5", "claim": "A is B .", "label": "SUPPORTS"}"#],
                &[],
            ],
        );
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "v0.2_dev.jsonl:1: no field \"evidence_sentence\" (v0.1) or \"evidence\" (v0.2)"
            ),
            "{e}"
        );
    }
}
