//! Self-containment, the pipeline figure's stage-3 diagnostic: a claim whose subject is an
//! unresolved personal pronoun while the source names who or what it stands for
//! (PAPER.md "Decided here"). Not part of verify%; it opens the gate in mode `all` and the
//! rule tier replaces the pronoun by the antecedent.
//!
//! A claim is flagged when
//! - the subject (`nsubj`/`nsubjpass`) of its root (the first sentence's) is "he", "she",
//!   "it" or "they", or has "his", "her", "its" or "their" as a `poss` or `det` child;
//! - no PERSON, ORG, GPE or LOC entity of the claim's own parse starts before that pronoun;
//! - S holds a compatible entity: he/she → PERSON; it → ORG, GPE, LOC; they → ORG,
//!   PERSON, GPE.
//!
//! The antecedent is the last compatible entity of S that starts before the first token
//! of S spelled like the claim's root (case-insensitive), else S's first compatible
//! entity (also when the root's word is not in S).

use credence_nlp::{Doc, Token};
use serde::{Deserialize, Serialize};

/// An unresolved pronoun subject and the source entity it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PronounFlag {
    /// The claim's index.
    pub claim: usize,
    /// The pronoun's token index in the claim's own parse.
    pub token_i: usize,
    /// The pronoun as written.
    pub pronoun: String,
    /// The antecedent's text in S.
    pub antecedent: String,
    /// The antecedent's NER label.
    pub antecedent_label: String,
}

/// Entity labels that name a subject; one of them before the pronoun resolves it.
const NAMING_LABELS: [&str; 4] = ["PERSON", "ORG", "GPE", "LOC"];

/// The entity labels a personal pronoun (or its possessive) can stand for.
fn compatible_labels(pronoun: &str) -> Option<&'static [&'static str]> {
    match pronoun {
        "he" | "she" | "his" | "her" => Some(&["PERSON"]),
        "it" | "its" => Some(&["ORG", "GPE", "LOC"]),
        "they" | "their" => Some(&["ORG", "PERSON", "GPE"]),
        _ => None,
    }
}

/// The flags of every claim, in claim order.
pub(super) fn check(source: &Doc, claims: &[Doc]) -> Vec<PronounFlag> {
    claims
        .iter()
        .enumerate()
        .filter_map(|(n, claim)| flag(source, claim, n))
        .collect()
}

fn lower(t: &Token) -> String {
    t.text.to_lowercase()
}

/// The root's pronoun subject, or the subject's possessive pronoun, with its labels.
fn pronoun_subject(claim: &Doc) -> Option<(&Token, &'static [&'static str])> {
    let root = claim.tokens.iter().find(|t| t.head == t.i)?;
    claim.subjects(root.i).into_iter().find_map(|subj| {
        let word = lower(subj);
        if matches!(word.as_str(), "he" | "she" | "it" | "they") {
            return Some((subj, compatible_labels(&word)?));
        }
        claim
            .children(subj.i)
            .filter(|c| c.dep == "poss" || c.dep == "det")
            .find_map(|c| {
                let word = lower(c);
                matches!(word.as_str(), "his" | "her" | "its" | "their").then_some(())?;
                Some((c, compatible_labels(&word)?))
            })
    })
}

fn flag(source: &Doc, claim: &Doc, n: usize) -> Option<PronounFlag> {
    let (pronoun, labels) = pronoun_subject(claim)?;
    let named_before = claim
        .ents
        .iter()
        .any(|e| e.start < pronoun.i && NAMING_LABELS.contains(&e.label.as_str()));
    if named_before {
        return None;
    }
    let compatible: Vec<_> = source
        .ents
        .iter()
        .filter(|e| labels.contains(&e.label.as_str()))
        .collect();
    let first = *compatible.first()?;
    let root = claim.tokens.iter().find(|t| t.head == t.i)?;
    let verb = lower(root);
    let verb_at = source
        .tokens
        .iter()
        .find(|t| lower(t) == verb)
        .map(|t| t.idx);
    let antecedent = verb_at
        .and_then(|at| compatible.iter().rev().find(|e| e.start_char < at).copied())
        .unwrap_or(first);
    Some(PronounFlag {
        claim: n,
        token_i: pronoun.i,
        pronoun: pronoun.text.clone(),
        antecedent: antecedent.text.clone(),
        antecedent_label: antecedent.label.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::verify::test_doc::{doc, doc_with_ents};

    fn source() -> Doc {
        // Marie Curie met Acme Corp and Paris welcomed her .
        doc_with_ents(
            &[
                ("Marie", "compound", 1),
                ("Curie", "nsubj", 2),
                ("met", "ROOT", 2),
                ("Acme", "compound", 4),
                ("Corp", "dobj", 2),
                ("and", "cc", 2),
                ("Paris", "nsubj", 7),
                ("welcomed", "conj", 2),
                ("her", "dobj", 7),
            ],
            &[("PERSON", 0, 2), ("ORG", 3, 5), ("GPE", 6, 7)],
        )
    }

    #[test]
    fn pronoun_kinds_pick_compatible_antecedents() {
        let s = source();
        let she = doc(&[("She", "nsubj", 1), ("met", "ROOT", 1), ("Acme", "dobj", 1)]);
        let f = flag(&s, &she, 0).unwrap();
        assert_eq!(
            (f.pronoun.as_str(), f.antecedent.as_str()),
            ("She", "Marie Curie")
        );
        // "welcomed" comes after Paris: the last compatible entity before it.
        let it = doc(&[
            ("It", "nsubj", 1),
            ("welcomed", "ROOT", 1),
            ("her", "dobj", 1),
        ]);
        let f = flag(&s, &it, 3).unwrap();
        assert_eq!(
            (f.claim, f.antecedent.as_str(), f.antecedent_label.as_str()),
            (3, "Paris", "GPE")
        );
        // A root word not in S: the first compatible entity.
        let they = doc(&[("They", "nsubj", 1), ("left", "ROOT", 1)]);
        assert_eq!(flag(&s, &they, 0).unwrap().antecedent, "Marie Curie");
    }

    #[test]
    fn possessive_of_the_subject_is_flagged() {
        let s = source();
        let c = doc(&[("Her", "poss", 1), ("work", "nsubj", 2), ("met", "ROOT", 2)]);
        let f = flag(&s, &c, 0).unwrap();
        assert_eq!((f.token_i, f.pronoun.as_str()), (0, "Her"));
    }

    #[test]
    fn no_flag_without_pronoun_entity_or_antecedent() {
        let s = source();
        let named = doc(&[("Curie", "nsubj", 1), ("met", "ROOT", 1)]);
        assert_eq!(flag(&s, &named, 0), None);
        // An object pronoun is not a subject.
        let obj = doc(&[
            ("Paris", "nsubj", 1),
            ("welcomed", "ROOT", 1),
            ("her", "dobj", 1),
        ]);
        assert_eq!(flag(&s, &obj, 0), None);
        // A named entity before the pronoun resolves it.
        let resolved = doc_with_ents(
            &[
                ("In", "prep", 3),
                ("Paris", "pobj", 0),
                ("she", "nsubj", 3),
                ("met", "ROOT", 3),
            ],
            &[("GPE", 1, 2)],
        );
        assert_eq!(flag(&s, &resolved, 0), None);
        // No compatible entity in S: "he" needs a PERSON.
        let no_person = doc_with_ents(
            &[("Acme", "nsubj", 1), ("grew", "ROOT", 1)],
            &[("ORG", 0, 1)],
        );
        let he = doc(&[("He", "nsubj", 1), ("grew", "ROOT", 1)]);
        assert_eq!(flag(&no_person, &he, 0), None);
    }
}
