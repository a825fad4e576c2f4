//! Modality consistency (MC), a diagnostic: the share of the source's reporting verbs
//! that some claim keeps (PAPER.md "Decided here"). The verbs are the 27 forms of the
//! paper's Appendix B lexicon, matched as whole tokens of the parse, case-insensitively,
//! without lemmatisation (the paper limits coverage to the listed forms).

use credence_nlp::Doc;
use serde::{Deserialize, Serialize};

/// The 27 reporting verbs of Appendix B, defined with the other paper word lists in
/// `credence_core::lexicon`.
pub use credence_core::lexicon::REPORTING_VERBS;

/// Reporting verbs of the source and which of them the claims keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModalityReport {
    /// V(S): the distinct lexicon verbs of S, lower-cased, in order of first appearance.
    pub source_verbs: Vec<String>,
    /// The verbs of V(S) that occur in some claim, in the same order.
    pub kept: Vec<String>,
    /// |kept| / |V(S)|; 1 when V(S) is empty.
    pub mc: f64,
}

/// The distinct lexicon verbs of a parsed text, lower-cased, in order of appearance.
pub fn reporting_verbs(doc: &Doc) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in &doc.tokens {
        let word = t.text.to_lowercase();
        if REPORTING_VERBS.contains(&word.as_str()) && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// The MC report of `claims` against `source`.
pub(super) fn check(source: &Doc, claims: &[Doc]) -> ModalityReport {
    let source_verbs = reporting_verbs(source);
    let in_claims: Vec<String> = claims.iter().flat_map(reporting_verbs).collect();
    let kept: Vec<String> = source_verbs
        .iter()
        .filter(|v| in_claims.contains(v))
        .cloned()
        .collect();
    let mc = if source_verbs.is_empty() {
        1.0
    } else {
        kept.len() as f64 / source_verbs.len() as f64
    };
    ModalityReport {
        source_verbs,
        kept,
        mc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::verify::test_doc::doc;

    fn words(text: &str) -> Doc {
        let triples: Vec<(&str, &str, usize)> = text.split(' ').map(|w| (w, "dep", 0)).collect();
        doc(&triples)
    }

    #[test]
    fn whole_tokens_case_insensitive_no_lemmas() {
        let s = words("Officials SAID the firm denied it and says more");
        assert_eq!(reporting_verbs(&s), ["said", "denied"]);
        let r = check(
            &s,
            &[words("The firm denied it"), words("Officials say so")],
        );
        assert_eq!(r.kept, ["denied"]);
        assert_eq!(r.mc, 0.5);
        assert_eq!(check(&words("It rained"), &[]).mc, 1.0);
        assert_eq!(check(&words("He said so"), &[]).mc, 0.0);
    }
}
