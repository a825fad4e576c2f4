//! Atomicity (desideratum D1) on a claim's own dependency parse: the three compound
//! boundaries of PAPER.md "Decided here", one boundary node per hit.
//!
//! - `cc_subj`: a token with dep `conj` whose head has a subject child (`nsubj` or
//!   `nsubjpass`) while the token has its own subject child ("The bridge collapsed and
//!   the road was blocked"); a shared subject ("Einstein published X and received Y") or
//!   noun-phrase coordination ("Paris and Berlin") is no boundary.
//! - `advcl`: any token with dep `advcl`; with `advcl_requires_subject` only one that has
//!   a subject child (the paper's "filtered with subject-presence constraints", T 1021).
//! - `relcl_subj`: a token with dep `relcl` that has a subject child, a relative pronoun
//!   subject ("which was tested") included.

use credence_nlp::Doc;
use serde::{Deserialize, Serialize};

/// Which atomicity rule a boundary node breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AtomicityRule {
    /// Two conjoined clauses, each with its own subject.
    CcSubj,
    /// An adverbial clause.
    Advcl,
    /// A relative clause with its own subject.
    RelclSubj,
}

impl AtomicityRule {
    /// The rule's name in reports and JSON (`cc_subj`, `advcl`, `relcl_subj`).
    pub fn as_str(self) -> &'static str {
        match self {
            AtomicityRule::CcSubj => "cc_subj",
            AtomicityRule::Advcl => "advcl",
            AtomicityRule::RelclSubj => "relcl_subj",
        }
    }
}

impl std::fmt::Display for AtomicityRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One compound-boundary node of a claim's parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boundary {
    /// The rule it breaks.
    pub rule: AtomicityRule,
    /// The boundary token (the second conjunct's verb, the `advcl` or the `relcl` head),
    /// as an index into the claim's own parse.
    pub token_i: usize,
}

/// The atomicity findings for one claim.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClaimAtomicity {
    /// Boundary nodes in token order; empty for an atomic claim.
    pub boundaries: Vec<Boundary>,
}

impl ClaimAtomicity {
    /// Whether the claim has no boundary node.
    pub fn is_atomic(&self) -> bool {
        self.boundaries.is_empty()
    }
}

/// The compound-boundary nodes of one parsed claim, in token order (a token has one dep,
/// so it is at most one boundary). An empty list means the claim is atomic.
///
/// ```no_run
/// # fn main() -> Result<(), credence_nlp::NlpError> {
/// use credence_nlp::Nlp;
/// use credence_worker::pipeline::verify::{atomicity_boundaries, AtomicityRule};
/// let nlp = Nlp::load("models/en_core_web_sm")?;
/// let doc = nlp.analyze("The bridge collapsed and the road was blocked.");
/// let hits = atomicity_boundaries(&doc, false);
/// assert_eq!(hits[0].rule, AtomicityRule::CcSubj);
/// # Ok(()) }
/// ```
pub fn atomicity_boundaries(doc: &Doc, advcl_requires_subject: bool) -> Vec<Boundary> {
    let has_subject = |i: usize| !doc.subjects(i).is_empty();
    doc.tokens
        .iter()
        .filter_map(|t| {
            let rule = match t.dep.as_str() {
                "conj" if t.head != t.i && has_subject(t.head) && has_subject(t.i) => {
                    AtomicityRule::CcSubj
                }
                "advcl" if !advcl_requires_subject || has_subject(t.i) => AtomicityRule::Advcl,
                "relcl" if has_subject(t.i) => AtomicityRule::RelclSubj,
                _ => return None,
            };
            Some(Boundary { rule, token_i: t.i })
        })
        .collect()
}

/// One line of `credence verify --claims` output: a single claim's atomicity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AtomicityRecord {
    /// The input line's id.
    pub id: serde_json::Value,
    /// No boundary node.
    pub atomic: bool,
    /// Number of boundary nodes.
    pub n_viol: u32,
    /// The boundary nodes, in token order.
    pub boundaries: Vec<Boundary>,
}

impl AtomicityRecord {
    /// The record of claim `id` from its own parse.
    pub fn new(id: serde_json::Value, doc: &Doc, advcl_requires_subject: bool) -> Self {
        let boundaries = atomicity_boundaries(doc, advcl_requires_subject);
        AtomicityRecord {
            id,
            atomic: boundaries.is_empty(),
            n_viol: boundaries.len() as u32,
            boundaries,
        }
    }
}

/// Atomicity of every claim.
pub(super) fn check(claims: &[Doc], advcl_requires_subject: bool) -> Vec<ClaimAtomicity> {
    claims
        .iter()
        .map(|doc| ClaimAtomicity {
            boundaries: atomicity_boundaries(doc, advcl_requires_subject),
        })
        .collect()
}

/// AVR: the share of claims with at least one boundary node; 0 for an empty list.
pub(super) fn avr(claims: &[ClaimAtomicity]) -> f64 {
    if claims.is_empty() {
        return 0.0;
    }
    claims.iter().filter(|c| !c.is_atomic()).count() as f64 / claims.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::verify::test_doc::doc;

    fn rules(d: &Doc, strict: bool) -> Vec<(AtomicityRule, usize)> {
        atomicity_boundaries(d, strict)
            .into_iter()
            .map(|b| (b.rule, b.token_i))
            .collect()
    }

    #[test]
    fn conj_with_two_subjects_is_a_boundary() {
        // The bridge collapsed and the road was blocked
        let d = doc(&[
            ("The", "det", 1),
            ("bridge", "nsubj", 2),
            ("collapsed", "ROOT", 2),
            ("and", "cc", 2),
            ("the", "det", 5),
            ("road", "nsubjpass", 7),
            ("was", "auxpass", 7),
            ("blocked", "conj", 2),
        ]);
        assert_eq!(rules(&d, false), [(AtomicityRule::CcSubj, 7)]);
    }

    #[test]
    fn shared_subject_and_noun_coordination_pass() {
        // Einstein published X and received Y
        let d = doc(&[
            ("Einstein", "nsubj", 1),
            ("published", "ROOT", 1),
            ("X", "dobj", 1),
            ("and", "cc", 1),
            ("received", "conj", 1),
            ("Y", "dobj", 4),
        ]);
        assert!(rules(&d, false).is_empty());
        // Paris and Berlin are capitals
        let d = doc(&[
            ("Paris", "nsubj", 3),
            ("and", "cc", 0),
            ("Berlin", "conj", 0),
            ("are", "ROOT", 3),
            ("capitals", "attr", 3),
        ]);
        assert!(rules(&d, false).is_empty());
    }

    #[test]
    fn advcl_fires_unless_subject_required_and_missing() {
        // He left to catch the train: advcl without a subject
        let d = doc(&[
            ("He", "nsubj", 1),
            ("left", "ROOT", 1),
            ("to", "aux", 3),
            ("catch", "advcl", 1),
            ("the", "det", 5),
            ("train", "dobj", 3),
        ]);
        assert_eq!(rules(&d, false), [(AtomicityRule::Advcl, 3)]);
        assert!(rules(&d, true).is_empty());
        // Prices rose so the bank raised rates: advcl with a subject
        let d = doc(&[
            ("Prices", "nsubj", 1),
            ("rose", "ROOT", 1),
            ("so", "mark", 5),
            ("the", "det", 4),
            ("bank", "nsubj", 5),
            ("raised", "advcl", 1),
            ("rates", "dobj", 5),
        ]);
        assert_eq!(rules(&d, true), [(AtomicityRule::Advcl, 5)]);
    }

    #[test]
    fn relcl_needs_its_own_subject() {
        // the vaccine, which was tested, ...: relative pronoun subject
        let d = doc(&[
            ("vaccine", "nsubj", 4),
            ("which", "nsubjpass", 3),
            ("was", "auxpass", 3),
            ("tested", "relcl", 0),
            ("worked", "ROOT", 4),
        ]);
        assert_eq!(rules(&d, false), [(AtomicityRule::RelclSubj, 3)]);
        // the book I read: subject; the man seen there: no subject
        let d = doc(&[
            ("man", "nsubj", 2),
            ("seen", "relcl", 0),
            ("left", "ROOT", 2),
        ]);
        assert!(rules(&d, false).is_empty());
    }

    #[test]
    fn avr_counts_claims_not_nodes() {
        let two = ClaimAtomicity {
            boundaries: vec![
                Boundary {
                    rule: AtomicityRule::Advcl,
                    token_i: 1,
                },
                Boundary {
                    rule: AtomicityRule::CcSubj,
                    token_i: 4,
                },
            ],
        };
        assert_eq!(avr(&[]), 0.0);
        assert_eq!(avr(&[two.clone(), ClaimAtomicity::default()]), 0.5);
        assert_eq!(avr(&[two]), 1.0);
        assert_eq!(
            serde_json::to_string(&AtomicityRule::RelclSubj).unwrap(),
            "\"relcl_subj\""
        );
    }
}
