//! PropSegmEnt dev (Chen et al. 2023), beyond the paper: Wikipedia sentences with the
//! propositions a human annotator segmented them into, as references.
//!
//! `propositions.dev.json` names each segmented sentence by (cluster, document, sentence
//! index) and holds one or more annotators' responses; `document_clusters.dev.json` holds
//! the text and tokens of the Wikipedia clusters (news clusters carry no text and are not
//! resolvable). The builder keeps sentences that resolve, have a reference response
//! (`is_reference_response`) that the annotator understood and found informational, with
//! at least one proposition, and drops repeated sentence texts. A proposition is a set of
//! token indices; its text is those tokens in order, joined as in the sentence (adjacent
//! tokens keep the sentence's own spacing, a gap becomes one space). Examples keep the
//! file's order.

use super::{json_error, read_source, BenchmarkError, Build};
use crate::domain::Example;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The propositions file; the clusters file is looked for beside it.
pub const PROPOSITIONS_FILE: &str = "propositions.dev.json";
/// The clusters file.
pub const CLUSTERS_FILE: &str = "document_clusters.dev.json";

#[derive(Deserialize)]
struct Cluster {
    cluster_id: String,
    documents: Vec<Document>,
}

#[derive(Deserialize)]
struct Document {
    document_id: String,
    #[serde(default)]
    sentences: Vec<Sentence>,
}

#[derive(Deserialize)]
struct Sentence {
    /// Absent in news clusters, which carry only masked text.
    sentence_text: Option<String>,
    tokens: Vec<Token>,
}

#[derive(Deserialize)]
struct Token {
    text: Option<String>,
    character_offset_of_token_in_sentence: usize,
}

#[derive(Deserialize)]
struct Segmentation {
    sentence_id: SentenceId,
    segmentation_responses: Vec<Response>,
}

#[derive(Deserialize)]
struct SentenceId {
    cluster_id: String,
    document_id: String,
    sentence_index: usize,
}

#[derive(Deserialize)]
struct Response {
    non_informational: bool,
    rater_did_not_understand_sentence: bool,
    #[serde(default)]
    propositions: Vec<Proposition>,
    is_reference_response: bool,
}

#[derive(Deserialize)]
struct Proposition {
    /// The README calls it `included_token_indices`; the files say `token_indices`.
    #[serde(alias = "included_token_indices")]
    token_indices: Vec<usize>,
}

/// The clusters file that belongs to a propositions file.
pub fn clusters_path(propositions: &Path) -> PathBuf {
    propositions.with_file_name(CLUSTERS_FILE)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, BenchmarkError> {
    let text = read_source(path)?;
    serde_json::from_str(&text).map_err(|e| json_error(path, 1, &e))
}

/// The text of a proposition: its tokens in sentence order, adjacent ones joined by the
/// sentence's own spacing, gaps by one space. None if an index is out of range.
pub fn proposition_text(
    sentence: &str,
    tokens: &[(usize, &str)],
    indices: &[usize],
) -> Option<String> {
    let mut idx: Vec<usize> = indices.to_vec();
    idx.sort_unstable();
    idx.dedup();
    let chars: Vec<char> = sentence.chars().collect();
    let mut out = String::new();
    let mut prev: Option<usize> = None;
    for &i in &idx {
        let &(offset, text) = tokens.get(i)?;
        if let Some(p) = prev {
            let (p_off, p_text) = tokens[p];
            if i == p + 1 {
                let gap_start = (p_off + p_text.chars().count()).min(chars.len());
                let gap_end = offset.min(chars.len()).max(gap_start);
                if gap_end > gap_start {
                    out.push(' ');
                }
            } else {
                out.push(' ');
            }
        }
        out.push_str(text);
        prev = Some(i);
    }
    Some(out)
}

/// Builds propsegment-dev from the propositions file (the clusters file beside it).
pub fn build(propositions_path: &Path) -> Result<Build, BenchmarkError> {
    let clusters_path = clusters_path(propositions_path);
    let clusters: Vec<Cluster> = read_json(&clusters_path)?;
    let segmentations: Vec<Segmentation> = read_json(propositions_path)?;
    let mut sentences: HashMap<(&str, &str, usize), &Sentence> = HashMap::new();
    for c in &clusters {
        for d in &c.documents {
            for (i, s) in d.sentences.iter().enumerate() {
                if s.sentence_text.is_some() {
                    sentences.insert((c.cluster_id.as_str(), d.document_id.as_str(), i), s);
                }
            }
        }
    }
    let mut built = Build {
        examples: Vec::new(),
        funnel: Vec::new(),
    };
    built.step(
        "segmented sentences in propositions.dev.json",
        segmentations.len(),
    );
    let resolved: Vec<(&Segmentation, &Sentence)> = segmentations
        .iter()
        .filter_map(|s| {
            let id = &s.sentence_id;
            sentences
                .get(&(
                    id.cluster_id.as_str(),
                    id.document_id.as_str(),
                    id.sentence_index,
                ))
                .map(|sentence| (s, *sentence))
        })
        .collect();
    built.step("with text in the Wikipedia clusters", resolved.len());
    let referenced: Vec<(&Segmentation, &Sentence, &Response)> = resolved
        .into_iter()
        .filter_map(|(s, sentence)| {
            let r = s
                .segmentation_responses
                .iter()
                .find(|r| r.is_reference_response)?;
            Some((s, sentence, r))
        })
        .collect();
    built.step("with a reference response", referenced.len());
    let usable: Vec<_> = referenced
        .into_iter()
        .filter(|(_, _, r)| {
            !r.non_informational
                && !r.rater_did_not_understand_sentence
                && !r.propositions.is_empty()
        })
        .collect();
    built.step("understood, informational, >= 1 proposition", usable.len());
    let mut seen = HashSet::new();
    for (seg, sentence, response) in usable {
        let text = sentence.sentence_text.clone().unwrap_or_default();
        if !seen.insert(text.clone()) {
            continue;
        }
        let tokens: Vec<(usize, &str)> = sentence
            .tokens
            .iter()
            .map(|t| {
                (
                    t.character_offset_of_token_in_sentence,
                    t.text.as_deref().unwrap_or(""),
                )
            })
            .collect();
        let id = &seg.sentence_id;
        let references = response
            .propositions
            .iter()
            .map(|p| {
                proposition_text(&text, &tokens, &p.token_indices).ok_or_else(|| {
                    BenchmarkError::Invalid {
                        path: propositions_path.to_path_buf(),
                        message: format!(
                            "sentence {}/{}/{}: a token index is beyond its {} tokens",
                            id.cluster_id,
                            id.document_id,
                            id.sentence_index,
                            tokens.len()
                        ),
                    }
                })
            })
            .collect::<Result<Vec<String>, BenchmarkError>>()?;
        let mut meta = serde_json::Map::new();
        meta.insert("source".into(), "propsegment/propositions.dev.json".into());
        meta.insert("cluster_id".into(), id.cluster_id.clone().into());
        meta.insert("document_id".into(), id.document_id.clone().into());
        meta.insert("sentence_index".into(), id.sentence_index.into());
        built.examples.push(Example {
            id: format!("propsegment-{}-{}", id.document_id, id.sentence_index),
            text,
            references,
            meta,
        });
    }
    built.step(
        "first occurrence of each sentence text",
        built.examples.len(),
    );
    Ok(built)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn propositions_keep_the_sentence_spacing() {
        let s = "This film marks the directorial debut for production designer Robert Stromberg.";
        let words = [
            "This",
            "film",
            "marks",
            "the",
            "directorial",
            "debut",
            "for",
            "production",
            "designer",
            "Robert",
            "Stromberg",
            ".",
        ];
        let mut tokens = Vec::new();
        let mut at = 0;
        for w in words {
            let off = s[at..].find(w).unwrap() + at;
            tokens.push((s[..off].chars().count(), w));
            at = off + w.len();
        }
        assert_eq!(
            proposition_text(s, &tokens, &[1, 2, 3, 4, 5, 6, 9, 10]).unwrap(),
            "film marks the directorial debut for Robert Stromberg"
        );
        assert_eq!(
            proposition_text(s, &tokens, &[11, 7, 8, 9, 10]).unwrap(),
            "production designer Robert Stromberg."
        );
        assert_eq!(proposition_text(s, &tokens, &[12]), None);
    }
}
