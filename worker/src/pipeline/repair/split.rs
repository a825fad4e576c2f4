//! Sub-step 1 of rule repair: split a non-atomic claim at its topmost compound boundary
//! into self-standing clauses (PAPER.md "Decided here", rule repair 1), on the claim's
//! own parse.
//!
//! - `conservative_split`: at a `cc_subj` boundary the conjunct clause leaves with its
//!   own subject; at an `advcl` with its own subject and a causal or concessive marker
//!   (because, so, since, as, although, though, while, whereas) the adverbial clause
//!   leaves without its marker; at a `relcl_subj` whose subject is a relative pronoun the
//!   relative clause leaves with the pronoun replaced by the head noun phrase. A clause
//!   inside a frame (e.g. the complement of "He said") takes the frame with it.
//! - The boundaries nearest the claim's root are tried left to right, then the next
//!   depth down, until one splits.
//! - `split_reporting_because`: "X said (that) A because B" gives "X said (that) A." and
//!   "X said (that) B.": the reporting frame (a verb of Appendix B with its subject, and
//!   the complementiser) is copied into the `because` part. The frame is the nearest one
//!   that governs the clause, with everything around it.
//! - `split_used_to_and`: "X used to A and B" gives "X used to A." and "X used to B.".
//!
//! Every token of the claim ends up in one of the parts except the boundary's own
//! connective (the coordinator or the subordinating marker and the comma before it);
//! words copied across (a frame, a head noun phrase, "X used to") are the only additions.
//! A split is taken only when every part keeps a subject and a verb; otherwise the claim
//! is left as it is (conditional and temporal clauses, `if` / `when` / `before` ..., are
//! never split: their parts would assert what the claim does not).

use crate::pipeline::verify::{AtomicityRule, Boundary, REPORTING_VERBS};
use credence_nlp::Doc;
use serde::{Deserialize, Serialize};

/// Which splitter made a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitRule {
    /// A clause boundary where both sides keep a subject and a verb.
    ConservativeSplit,
    /// A reporting verb's complement split at `because`, the frame kept in both parts.
    ReportingBecause,
    /// "X used to A and B".
    UsedToAnd,
}

/// Switches of the splitters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitOptions {
    /// Split at `because` (PAPER.md: `split_because`, default true).
    pub split_because: bool,
}

impl Default for SplitOptions {
    fn default() -> Self {
        SplitOptions {
            split_because: true,
        }
    }
}

/// A claim split in two (or more) self-standing claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The splitter that fired.
    pub rule: SplitRule,
    /// The new claims, in the order of the original text.
    pub parts: Vec<String>,
}

/// Subordinating markers whose clause may leave as a claim of its own.
const SPLIT_MARKERS: [&str; 8] = [
    "because", "so", "since", "as", "although", "though", "while", "whereas",
];

/// Relative pronouns that can stand for the head noun phrase as a subject.
const RELATIVE_PRONOUNS: [&str; 3] = ["which", "who", "that"];

/// Splits a claim at its topmost boundary, or at a "used to ... and ..." coordination;
/// `None` when no splitter applies safely. The boundaries nearest the root are tried
/// left to right; when no split applies at any of them, the next depth down is tried
/// (PAPER.md "Decided here", added 2026-11-26: "When the storm hit, the bridge collapsed
/// and the road was blocked." refuses the temporal `advcl` and splits at the `conj`).
pub fn split_claim(doc: &Doc, boundaries: &[Boundary], options: SplitOptions) -> Option<Split> {
    let mut ordered: Vec<&Boundary> = boundaries.iter().collect();
    ordered.sort_by_key(|b| (depth(doc, b.token_i), b.token_i));
    ordered
        .into_iter()
        .find_map(|b| match b.rule {
            AtomicityRule::CcSubj => split_conjunct(doc, b.token_i),
            AtomicityRule::Advcl => split_adverbial(doc, b.token_i, options),
            AtomicityRule::RelclSubj => split_relative(doc, b.token_i),
        })
        .or_else(|| split_used_to_and(doc))
}

/// Hops from token `i` to the root.
fn depth(doc: &Doc, i: usize) -> usize {
    ancestors(doc, i).count() - 1
}

/// The tokens of the subtree of `i` (contiguous: the parse is projective).
fn subtree(doc: &Doc, i: usize) -> std::ops::Range<usize> {
    let (lo, hi) = doc.subtree_span(i);
    lo..hi
}

/// `i` and the tokens above it, up to the root, nearest first.
fn ancestors(doc: &Doc, i: usize) -> impl Iterator<Item = usize> + '_ {
    std::iter::successors(Some(i), |&t| {
        let h = doc.tokens[t].head;
        (h != t).then_some(h)
    })
    .take(doc.tokens.len())
}

/// Whether `j` lies on the path from `i` up to the root (or is `i`).
fn is_ancestor_or_self(doc: &Doc, j: usize, i: usize) -> bool {
    ancestors(doc, i).any(|t| t == j)
}

fn has_subject(doc: &Doc, verb: usize) -> bool {
    doc.children(verb)
        .any(|c| matches!(c.dep.as_str(), "nsubj" | "nsubjpass" | "expl" | "csubj"))
}

/// The connective tokens just before `start` that join a clause to its head `head`:
/// coordinators, markers and punctuation attached to `head`.
fn connectives_before(doc: &Doc, head: usize, start: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = start;
    while j > 0 {
        let t = &doc.tokens[j - 1];
        if t.head == head && matches!(t.dep.as_str(), "cc" | "punct" | "preconj") {
            out.push(j - 1);
            j -= 1;
        } else {
            break;
        }
    }
    out
}

/// The tokens outside the subtree of `i`: the frame a clause inside it is said in.
fn frame_of(doc: &Doc, i: usize) -> Vec<usize> {
    let inside = subtree(doc, i);
    (0..doc.tokens.len())
        .filter(|j| !inside.contains(j))
        .collect()
}

/// `cc_subj` at conjunct `t`: the conjunct clause (with the frame around its head's
/// clause) and the rest without the connective.
fn split_conjunct(doc: &Doc, t: usize) -> Option<Split> {
    let head = doc.tokens[t].head;
    let right = subtree(doc, t);
    let dropped = connectives_before(doc, head, right.start);
    let left: Vec<usize> = (0..doc.tokens.len())
        .filter(|j| !right.contains(j) && !dropped.contains(j))
        .collect();
    let mut second: Vec<usize> = frame_of(doc, head);
    second.extend(right);
    second.sort_unstable();
    parts(doc, SplitRule::ConservativeSplit, &[left, second])
}

/// `advcl` at `a`: the adverbial clause without its marker leaves; a `because` clause of
/// a reporting verb's complement takes the reporting frame with it.
fn split_adverbial(doc: &Doc, a: usize, options: SplitOptions) -> Option<Split> {
    let head = doc.tokens[a].head;
    if !has_subject(doc, a) || !has_subject(doc, head) {
        return None;
    }
    let markers: Vec<usize> = doc
        .children(a)
        .filter(|c| c.dep == "mark" || (c.dep == "advmod" && c.lower == "so" && c.i < a))
        .map(|c| c.i)
        .collect();
    let marker_words: Vec<&str> = markers
        .iter()
        .map(|&m| doc.tokens[m].lower.as_str())
        .collect();
    let first = marker_words.first()?;
    if !SPLIT_MARKERS.contains(first) || (*first == "because" && !options.split_because) {
        return None;
    }
    let clause = subtree(doc, a);
    let dropped = connectives_before(doc, head, clause.start);
    // Punctuation after a fronted clause ("Because it rained, the game ...").
    let trailing: Vec<usize> = (clause.end..doc.tokens.len())
        .take_while(|&j| doc.tokens[j].head == head && doc.tokens[j].dep == "punct")
        .take(1)
        .collect();
    let left: Vec<usize> = (0..doc.tokens.len())
        .filter(|j| !clause.contains(j) && !dropped.contains(j) && !trailing.contains(j))
        .collect();
    // The reporting frame: the nearest reporting verb on the path from the clause's head
    // up to the root ("Officials said the company announced it closed because sales
    // fell." copies "the company announced", inside "Officials said").
    let reporter = ancestors(doc, head)
        .find(|&r| r != a && REPORTING_VERBS.contains(&doc.tokens[r].lower.as_str()));
    let (rule, mut second) = match reporter {
        Some(r) if *first == "because" => {
            // The complement of the reporting verb that holds the clause, if any.
            let complement = doc
                .children(r)
                .find(|c| c.dep == "ccomp" && is_ancestor_or_self(doc, c.i, a))
                .map(|c| c.i);
            let frame: Vec<usize> = match complement {
                Some(c) => {
                    let mut f = frame_of(doc, c);
                    f.extend(doc.children(c).filter(|m| m.dep == "mark").map(|m| m.i));
                    f
                }
                // The clause hangs on the reporting verb itself: the frame is the verb
                // with its subject and what precedes it, without its complement.
                None => {
                    let complements: Vec<std::ops::Range<usize>> = doc
                        .children(r)
                        .filter(|c| c.dep == "ccomp")
                        .map(|c| subtree(doc, c.i))
                        .collect();
                    (0..doc.tokens.len())
                        .filter(|j| {
                            !clause.contains(j)
                                && !complements.iter().any(|s| s.contains(j))
                                && !dropped.contains(j)
                                && !trailing.contains(j)
                        })
                        .collect()
                }
            };
            (SplitRule::ReportingBecause, frame)
        }
        _ => (SplitRule::ConservativeSplit, frame_of(doc, head)),
    };
    second.retain(|j| !clause.contains(j));
    second.extend(clause.filter(|j| !markers.contains(j)));
    second.sort_unstable();
    second.dedup();
    parts(doc, rule, &[left, second])
}

/// `relcl_subj` at `r`: the relative clause leaves with its relative-pronoun subject
/// replaced by the head noun phrase.
fn split_relative(doc: &Doc, r: usize) -> Option<Split> {
    let noun = doc.tokens[r].head;
    let pronoun = doc
        .children(r)
        .find(|c| matches!(c.dep.as_str(), "nsubj" | "nsubjpass"))
        .filter(|c| RELATIVE_PRONOUNS.contains(&c.lower.as_str()))?
        .i;
    let clause = subtree(doc, r);
    // The commas that enclose a non-restrictive relative clause.
    let mut dropped: Vec<usize> = Vec::new();
    if clause.start > 0 && doc.tokens[clause.start - 1].dep == "punct" {
        dropped.push(clause.start - 1);
    }
    if clause.end < doc.tokens.len()
        && doc.tokens[clause.end].text == ","
        && doc.tokens[clause.end].dep == "punct"
    {
        dropped.push(clause.end);
    }
    let noun_phrase: Vec<usize> = subtree(doc, noun)
        .filter(|j| !clause.contains(j) && !dropped.contains(j) && doc.tokens[*j].dep != "punct")
        .collect();
    // Only a contiguous noun phrase before the clause stands in for the pronoun.
    if noun_phrase.is_empty()
        || noun_phrase.last().is_some_and(|&l| l >= clause.start)
        || noun_phrase.windows(2).any(|w| w[1] != w[0] + 1)
    {
        return None;
    }
    let left: Vec<usize> = (0..doc.tokens.len())
        .filter(|j| !clause.contains(j) && !dropped.contains(j))
        .collect();
    let mut text = String::new();
    for j in clause {
        if j == pronoun {
            text.push_str(&render_tokens(doc, &noun_phrase));
            text.push(' ');
        } else {
            push_token(doc, j, &mut text);
        }
    }
    let first = render(doc, &left)?;
    let second = tidy(&text)?;
    if !clause_ok(doc, &left) {
        return None;
    }
    Some(Split {
        rule: SplitRule::ConservativeSplit,
        parts: vec![first, second],
    })
}

/// "X used to A and B" (a `conj` verb under the `xcomp` of "used to" without a subject of
/// its own): "X used to A." and "X used to B.".
fn split_used_to_and(doc: &Doc) -> Option<Split> {
    let used = doc
        .tokens
        .iter()
        .find(|t| t.lower == "used" && doc.children(t.i).any(|c| c.dep == "xcomp"))?
        .i;
    let xcomp = doc.children(used).find(|c| c.dep == "xcomp")?.i;
    let to = doc
        .children(xcomp)
        .find(|c| c.dep == "aux" && c.lower == "to")?
        .i;
    if to != used + 1 {
        return None;
    }
    let conj = doc
        .children(xcomp)
        .find(|c| c.dep == "conj" && !has_subject(doc, c.i))?
        .i;
    let right = subtree(doc, conj);
    let dropped = connectives_before(doc, xcomp, right.start);
    let left: Vec<usize> = (0..doc.tokens.len())
        .filter(|j| !right.contains(j) && !dropped.contains(j))
        .collect();
    // The frame up to and including "to", then the second verb phrase, then what
    // follows the coordination (final punctuation).
    let mut second: Vec<usize> = (0..=to).collect();
    second.extend(right.clone());
    second.extend(right.end..doc.tokens.len());
    second.retain(|j| !dropped.contains(j));
    parts(doc, SplitRule::UsedToAnd, &[left, second])
}

/// Renders token lists as claims when each keeps a subject and a verb.
fn parts(doc: &Doc, rule: SplitRule, lists: &[Vec<usize>]) -> Option<Split> {
    let mut ordered: Vec<&Vec<usize>> = lists.iter().collect();
    ordered.sort_by_key(|l| l.first().copied());
    let mut out = Vec::new();
    for list in ordered {
        if rule != SplitRule::UsedToAnd && !clause_ok(doc, list) {
            return None;
        }
        out.push(render(doc, list)?);
    }
    // A split that gives back the claim unchanged would loop.
    if out.iter().any(|p| p == doc.text.trim()) || out.len() < 2 {
        return None;
    }
    Some(Split { rule, parts: out })
}

/// A part is a clause when it holds a verb and a subject.
fn clause_ok(doc: &Doc, list: &[usize]) -> bool {
    let verb = list
        .iter()
        .any(|&j| matches!(doc.tokens[j].pos.as_str(), "VERB" | "AUX"));
    let subject = list.iter().any(|&j| {
        matches!(
            doc.tokens[j].dep.as_str(),
            "nsubj" | "nsubjpass" | "expl" | "csubj"
        )
    });
    verb && subject
}

fn push_token(doc: &Doc, j: usize, out: &mut String) {
    let t = &doc.tokens[j];
    out.push_str(&t.text);
    if t.ws {
        out.push(' ');
    }
}

fn render_tokens(doc: &Doc, list: &[usize]) -> String {
    let mut s = String::new();
    for &j in list {
        push_token(doc, j, &mut s);
    }
    s.trim().to_string()
}

fn render(doc: &Doc, list: &[usize]) -> Option<String> {
    let mut s = String::new();
    for (k, &j) in list.iter().enumerate() {
        push_token(doc, j, &mut s);
        // Tokens that were not adjacent in the claim need a space between them.
        if let Some(&next) = list.get(k + 1) {
            if next != j + 1 && !s.ends_with(' ') && !is_closing(&doc.tokens[next].text) {
                s.push(' ');
            }
        }
    }
    tidy(&s)
}

fn is_closing(text: &str) -> bool {
    matches!(text, "." | "," | ";" | ":" | "!" | "?" | "'s" | "n't" | ")")
}

/// Trims leftover connectives and punctuation at either end, capitalises the first
/// letter (unless the first word is a name written with a lower-case first letter, such
/// as "iPhone" or "mRNA") and ends the claim with a full stop (keeping `!` or `?`).
pub(crate) fn tidy(text: &str) -> Option<String> {
    let mut words: Vec<&str> = text.split_whitespace().collect();
    const LEADING: [&str; 10] = [
        ",", ";", ":", "and", "but", "or", "so", "because", "-", "--",
    ];
    while words
        .first()
        .is_some_and(|w| LEADING.contains(&w.to_lowercase().as_str()))
    {
        words.remove(0);
    }
    while words
        .last()
        .is_some_and(|w| matches!(*w, "," | ";" | ":" | "and" | "but" | "or" | "-" | "--"))
    {
        words.pop();
    }
    let mut s = words.join(" ");
    for p in [" ,", " .", " ;", " :", " !", " ?", " 's", " n't"] {
        s = s.replace(p, &p[1..]);
    }
    let s = s.trim_end_matches([',', ';', ':', ' ']).to_string();
    if !s.chars().any(char::is_alphanumeric) {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 1);
    let first_word = s.split_whitespace().next().unwrap_or_default();
    if first_word.chars().skip(1).any(char::is_uppercase) {
        out.push_str(&s);
    } else {
        let mut chars = s.chars();
        if let Some(c) = chars.next() {
            out.extend(c.to_uppercase());
        }
        out.push_str(chars.as_str());
    }
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::tidy;

    #[test]
    fn tidy_capitalises_trims_and_ends_with_a_stop() {
        assert_eq!(
            tidy("and the road was blocked ,").as_deref(),
            Some("The road was blocked.")
        );
        assert_eq!(
            tidy("why did it fall ?").as_deref(),
            Some("Why did it fall?")
        );
        assert_eq!(tidy(" , .").as_deref(), None);
    }

    #[test]
    fn tidy_keeps_a_name_that_starts_in_lower_case() {
        assert_eq!(
            tidy("iPhone changed the industry").as_deref(),
            Some("iPhone changed the industry.")
        );
        assert_eq!(
            tidy("mRNA vaccines were approved").as_deref(),
            Some("mRNA vaccines were approved.")
        );
        assert_eq!(tidy("ebay grew").as_deref(), Some("Ebay grew."));
    }
}
