//! Entity preservation (desideratum D3): which entities of the source S some claim keeps,
//! and the EPR over them (PAPER.md "Decided here").
//!
//! E(S) is the union of two tiers, each entity counted once:
//! - tier 1, the regex entities of [`credence_core::entities`] (dates, times, numbers,
//!   percentages, money), one per distinct normalised value; preserved when some claim
//!   holds a tier-1 entity with the same value, whatever kind either was detected as
//!   ("2,000" keeps "2000", "5 per cent" keeps "5%");
//! - tier 2, the source's spaCy NER entities with a label in `ner_labels` (default
//!   PERSON, ORG, GPE, LOC), one per distinct case-folded text; preserved when that text
//!   occurs case-insensitively at word boundaries in some claim's text. Claims are not
//!   re-tagged: NER on a short claim is unstable.
//!
//! Report order: tier 1 first, then tier 2, each in order of first appearance in S.

use credence_core::entities;
use credence_nlp::Doc;
use serde::{Deserialize, Serialize};

/// One distinct entity of the source and where it survives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceEntity {
    /// 1 (regex) or 2 (NER).
    pub tier: u8,
    /// Tier 1: `date`, `time`, `number`, `percent` or `money` (as first detected in S);
    /// tier 2: the NER label.
    pub label: String,
    /// The text of its first occurrence in S.
    pub text: String,
    /// Where that occurrence is in S: `[start, end)` in code points. The repairer
    /// locates the entity by it, never by searching S for its text again ("5%" is not
    /// inside "15%").
    pub span: [usize; 2],
    /// Whether some claim holds it.
    pub preserved: bool,
    /// Indices of the claims that hold it, ascending.
    pub held_by: Vec<usize>,
}

/// Entity preservation of a claim list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityReport {
    /// Tier 1 then tier 2, each in order of first appearance in S.
    pub entities: Vec<SourceEntity>,
    /// Preserved / |E(S)| over both tiers; 1 when E(S) is empty.
    pub epr: f64,
    /// The same over tier 1 alone.
    pub epr_tier1: f64,
    /// The same over tier 2 alone.
    pub epr_tier2: f64,
    /// `epr >= min_epr`.
    pub passes: bool,
}

impl EntityReport {
    /// The source entities no claim holds.
    pub fn missing(&self) -> impl Iterator<Item = &SourceEntity> {
        self.entities.iter().filter(|e| !e.preserved)
    }
}

/// The entity report of `claims` against `source`.
pub(super) fn check(
    source: &Doc,
    claims: &[Doc],
    ner_labels: &[String],
    min_epr: f64,
) -> EntityReport {
    let mut found = tier1(source, claims);
    let n1 = found.len();
    found.extend(tier2(source, claims, ner_labels));
    let epr = preserved_share(&found);
    EntityReport {
        epr_tier1: preserved_share(&found[..n1]),
        epr_tier2: preserved_share(&found[n1..]),
        passes: epr >= min_epr,
        epr,
        entities: found,
    }
}

/// Preserved / total, 1 for none.
fn preserved_share(entities: &[SourceEntity]) -> f64 {
    if entities.is_empty() {
        return 1.0;
    }
    entities.iter().filter(|e| e.preserved).count() as f64 / entities.len() as f64
}

fn tier1(source: &Doc, claims: &[Doc]) -> Vec<SourceEntity> {
    let claim_keys: Vec<Vec<String>> = claims
        .iter()
        .map(|c| {
            entities::extract(&c.text)
                .iter()
                .map(entities::Entity::key)
                .collect()
        })
        .collect();
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for e in entities::extract(&source.text) {
        let key = e.key();
        if seen.contains(&key) {
            continue;
        }
        let held_by: Vec<usize> = (0..claims.len())
            .filter(|&i| claim_keys[i].contains(&key))
            .collect();
        seen.push(key);
        let chars = |byte: usize| source.text[..byte].chars().count();
        out.push(SourceEntity {
            tier: 1,
            label: e.kind.as_str().to_string(),
            span: [chars(e.span.start), chars(e.span.end)],
            text: e.text,
            preserved: !held_by.is_empty(),
            held_by,
        });
    }
    out
}

fn tier2(source: &Doc, claims: &[Doc], ner_labels: &[String]) -> Vec<SourceEntity> {
    let claim_texts: Vec<String> = claims.iter().map(|c| c.text.to_lowercase()).collect();
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for e in &source.ents {
        if !ner_labels.contains(&e.label) {
            continue;
        }
        let folded = e.text.to_lowercase();
        if folded.is_empty() || seen.contains(&folded) {
            continue;
        }
        let held_by: Vec<usize> = (0..claims.len())
            .filter(|&i| contains_word(&claim_texts[i], &folded))
            .collect();
        seen.push(folded);
        out.push(SourceEntity {
            tier: 2,
            label: e.label.clone(),
            text: e.text.clone(),
            span: [e.start_char, e.end_char],
            preserved: !held_by.is_empty(),
            held_by,
        });
    }
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `needle` occurs in `haystack` at word boundaries: the characters on either
/// side of the occurrence are not word characters, or the needle's own edge is not one
/// ("U.S." in "the U.S. said"). Both are already case-folded.
pub(crate) fn contains_word(haystack: &str, needle: &str) -> bool {
    let (Some(first), Some(last)) = (needle.chars().next(), needle.chars().last()) else {
        return false;
    };
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + needle.len()..].chars().next();
        let open = !is_word_char(first) || before.is_none_or(|c| !is_word_char(c));
        let close = !is_word_char(last) || after.is_none_or(|c| !is_word_char(c));
        open && close
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_boundaries() {
        assert!(contains_word("albert einstein won", "albert einstein"));
        assert!(contains_word("in paris.", "paris"));
        assert!(!contains_word("parisian food", "paris"));
        assert!(!contains_word("comparis", "paris"));
        assert!(contains_word("the u.s. said", "u.s."));
        assert!(contains_word("not paris-x but paris", "paris"));
        assert!(!contains_word("", "paris"));
        assert!(!contains_word("paris", ""));
    }

    #[test]
    fn share_is_one_when_nothing_to_keep() {
        assert_eq!(preserved_share(&[]), 1.0);
    }
}
