//! The repairer's rule tier (PAPER.md "Repairer" and "Decided here", rule repair): one
//! pass by default, four sub-steps in order, each recorded as a [`RepairAction`]:
//! 1. split each non-atomic claim at its topmost boundary ([`split`]);
//! 2. replace a flagged pronoun subject by its antecedent ("He" -> "Albert Einstein",
//!    "his" -> "Albert Einstein's");
//! 3. inject each missing entity of S into c* = argmax_i cos(claim_i, e), e = the
//!    embedding of the smallest clause subtree of S (a `conj`, `advcl` or `relcl`
//!    subtree, else S) that covers the entity: with its governing preposition when it is
//!    a prepositional object ("in 1921"), else as ", entity", before the final
//!    punctuation;
//! 4. deduplicate: of a pair at cos >= tau_dup drop the claim holding fewer entities of S
//!    (ties: the lower cosine to S, then the later claim), unless it holds an entity no
//!    other claim holds, so that EPR never falls (Theorem T1).
//!
//! The parser and the encoder come in through [`RepairTools`], so the tier needs no
//! store and is tested on the real models.

pub mod llm;
pub mod split;

use crate::pipeline::verify::{Verifier, VerifierReport};
use async_trait::async_trait;
use credence_core::matching::semantic::CosineMatrix;
use credence_core::Claim;
use credence_nlp::Doc;
use serde::{Deserialize, Serialize};
use split::{split_claim, tidy, SplitOptions, SplitRule};
use std::collections::HashMap;

/// Why a repair could not be completed.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// Embedding failed.
    #[error("embedding for repair: {0}")]
    Embed(String),
    /// Parsing failed.
    #[error("parsing for repair: {0}")]
    Parse(String),
}

/// What the rule tier needs beyond the claims: the parser and the encoder.
#[async_trait]
pub trait RepairTools: Send + Sync {
    /// The parses of `texts`, in order.
    async fn parse(&self, texts: &[String]) -> Result<Vec<Doc>, RepairError>;
    /// Unit-normalised embeddings of `texts`, in order; `None` when the sweep has no
    /// encoder (then injection and deduplication, which need cosines, are skipped).
    async fn embed(&self, texts: &[String]) -> Result<Option<Vec<Vec<f32>>>, RepairError>;
}

/// One change the rule tier made, with claim indices into the list it applied to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum RepairAction {
    /// A claim split into `parts` claims.
    Split {
        /// The pass (1-based).
        pass: u32,
        /// The claim split.
        claim: usize,
        /// Which splitter.
        rule: SplitRule,
        /// How many claims it became.
        parts: usize,
    },
    /// A pronoun subject replaced by its antecedent.
    Pronoun {
        /// The pass.
        pass: u32,
        /// The claim changed.
        claim: usize,
        /// The pronoun as written.
        pronoun: String,
        /// What replaced it.
        antecedent: String,
    },
    /// A missing entity appended to the claim closest to its source clause.
    Inject {
        /// The pass.
        pass: u32,
        /// The claim changed.
        claim: usize,
        /// The entity's text.
        entity: String,
        /// The text appended before the final punctuation.
        appended: String,
    },
    /// The pass made a T1 quantity worse (n_viol, duplicates or EPR), so its steps were
    /// undone and the claims it was given kept.
    RolledBack {
        /// The pass.
        pass: u32,
        /// What got worse, e.g. `n_viol 1 -> 2`.
        reason: String,
    },
    /// A duplicate dropped.
    Dedup {
        /// The pass.
        pass: u32,
        /// The claim dropped.
        dropped: usize,
        /// The claim it duplicated.
        kept: usize,
        /// Their cosine.
        cos: f64,
    },
}

/// Settings of the rule tier.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleRepairConfig {
    /// Passes (PAPER.md: `max_iterations`, deployed with 1).
    pub max_iterations: u32,
    /// Split at `because` (`split_because`).
    pub split: SplitOptions,
}

impl Default for RuleRepairConfig {
    fn default() -> Self {
        RuleRepairConfig {
            max_iterations: 1,
            split: SplitOptions::default(),
        }
    }
}

/// The claims after the rule tier and what it did.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairOutcome {
    /// The repaired claims.
    pub claims: Vec<Claim>,
    /// The steps taken, in order.
    pub actions: Vec<RepairAction>,
    /// Passes run (a pass that changes nothing ends the loop).
    pub passes: u32,
    /// The parse of every text the tier saw (its input claims, their parts, the
    /// repaired claims), so whoever scores the repaired claims parses nothing again.
    pub parsed: HashMap<String, Doc>,
}

/// The rule tier.
pub struct RuleRepair {
    config: RuleRepairConfig,
}

/// Parses of the texts seen so far in one repair, so each is parsed once.
struct Parses<'a> {
    tools: &'a dyn RepairTools,
    docs: HashMap<String, Doc>,
}

impl Parses<'_> {
    async fn of(&mut self, texts: &[Claim]) -> Result<Vec<Doc>, RepairError> {
        let new: Vec<String> = texts
            .iter()
            .filter(|t| !self.docs.contains_key(*t))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !new.is_empty() {
            let docs = self.tools.parse(&new).await?;
            self.docs.extend(new.into_iter().zip(docs));
        }
        Ok(texts.iter().map(|t| self.docs[t].clone()).collect())
    }
}

impl RuleRepair {
    /// The tier with these settings.
    pub fn new(config: RuleRepairConfig) -> Self {
        RuleRepair { config }
    }

    /// The tier's settings.
    pub fn config(&self) -> &RuleRepairConfig {
        &self.config
    }

    /// Repairs `claims` of `source`; `claim_docs` are their parses and `report` the
    /// verifier's report on them (with repetition, so the sweep must have an encoder for
    /// deduplication; without it that step is skipped).
    pub async fn repair(
        &self,
        verifier: &Verifier,
        source: &Doc,
        claims: &[Claim],
        claim_docs: &[Doc],
        report: &VerifierReport,
        tools: &dyn RepairTools,
    ) -> Result<RepairOutcome, RepairError> {
        let mut parses = Parses {
            tools,
            docs: claims
                .iter()
                .cloned()
                .zip(claim_docs.iter().cloned())
                .collect(),
        };
        let mut claims = claims.to_vec();
        let mut actions = Vec::new();
        let mut report = report.clone();
        let mut passes = 0;
        for pass in 1..=self.config.max_iterations.max(1) {
            passes = pass;
            let before = claims.clone();
            let actions_before = actions.len();
            let docs = parses.of(&claims).await?;
            // 1. Split.
            let mut split_claims = Vec::with_capacity(claims.len());
            for (i, (claim, doc)) in claims.iter().zip(&docs).enumerate() {
                let boundaries = &report.atomicity[i].boundaries;
                match (!boundaries.is_empty())
                    .then(|| split_claim(doc, boundaries, self.config.split))
                    .flatten()
                {
                    Some(s) => {
                        actions.push(RepairAction::Split {
                            pass,
                            claim: i,
                            rule: s.rule,
                            parts: s.parts.len(),
                        });
                        split_claims.extend(s.parts);
                    }
                    None => split_claims.push(claim.clone()),
                }
            }
            claims = split_claims;
            // 2. Pronouns.
            let docs = parses.of(&claims).await?;
            let current = verifier.verify(source, &docs, None);
            for flag in &current.self_containment {
                let doc = &docs[flag.claim];
                if let Some(new) = replace_token(doc, flag.token_i, &flag.antecedent) {
                    actions.push(RepairAction::Pronoun {
                        pass,
                        claim: flag.claim,
                        pronoun: flag.pronoun.clone(),
                        antecedent: flag.antecedent.clone(),
                    });
                    claims[flag.claim] = new;
                }
            }
            // 3. Missing entities.
            let docs = parses.of(&claims).await?;
            let current = verifier.verify(source, &docs, None);
            let missing: Vec<_> = current.entities.missing().cloned().collect();
            if !missing.is_empty() && !claims.is_empty() {
                // Each entity is located in S by the span the extractor found, never by
                // searching its text again ("5%" is not inside "15%").
                let clauses: Vec<String> = missing
                    .iter()
                    .map(|e| entity_clause(source, e.span[0]))
                    .collect();
                let mut texts = clauses.clone();
                texts.extend(claims.iter().cloned());
                // Without an encoder there is no c*: the step is skipped.
                if let Some(vectors) = tools.embed(&texts).await? {
                    let (clause_v, claim_v) = vectors.split_at(clauses.len());
                    let cos = CosineMatrix::new(clause_v, claim_v);
                    for (k, entity) in missing.iter().enumerate() {
                        let best = (0..claims.len())
                            .max_by(|&a, &b| {
                                cos.get(k, a)
                                    .total_cmp(&cos.get(k, b))
                                    .then_with(|| b.cmp(&a))
                            })
                            .unwrap_or(0);
                        let appended = injection(source, &entity.text, entity.span);
                        claims[best] = append_before_final_punct(&claims[best], &appended);
                        actions.push(RepairAction::Inject {
                            pass,
                            claim: best,
                            entity: entity.text.clone(),
                            appended,
                        });
                    }
                }
            }
            // 4. Duplicates (they need cosines: skipped without an encoder).
            let docs = parses.of(&claims).await?;
            let mut texts = claims.clone();
            texts.push(source.text.clone());
            if let Some(vectors) = tools.embed(&texts).await? {
                claims = deduplicate(
                    verifier,
                    source,
                    claims,
                    &docs,
                    &vectors,
                    pass,
                    &mut actions,
                );
            }
            if claims == before {
                break;
            }
            let docs = parses.of(&claims).await?;
            let vectors = tools.embed(&claims).await?;
            let cos = vectors.as_ref().map(|v| CosineMatrix::new(v, v));
            let repaired = verifier.verify(source, &docs, cos.as_ref());
            // Theorem T1 by construction, with or without an encoder: a pass that leaves
            // more boundary nodes, a higher RR or a lower EPR than it was given (a
            // pronoun replaced by the wrong antecedent, a split whose parts repeat each
            // other) is undone.
            if let Some(reason) = worsened(&report, &repaired) {
                actions.truncate(actions_before);
                actions.push(RepairAction::RolledBack { pass, reason });
                claims = before;
                break;
            }
            report = repaired;
        }
        Ok(RepairOutcome {
            claims,
            actions,
            passes,
            parsed: parses.docs,
        })
    }
}

/// Sub-step 4 on `claims` (with their parses and, after them, S's embedding in
/// `vectors`): of a pair at cos >= tau_dup drop the claim holding fewer entities of S
/// (ties: the lower cosine to S, then the later claim), unless it alone holds one.
fn deduplicate(
    verifier: &Verifier,
    source: &Doc,
    claims: Vec<Claim>,
    docs: &[Doc],
    vectors: &[Vec<f32>],
    pass: u32,
    actions: &mut Vec<RepairAction>,
) -> Vec<Claim> {
    let (claim_v, source_v) = vectors.split_at(claims.len());
    let cos = CosineMatrix::new(claim_v, claim_v);
    let to_source = CosineMatrix::new(claim_v, source_v);
    let current = verifier.verify(source, docs, Some(&cos));
    let tau = verifier.config().tau_dup;
    let coverage = |i: usize| {
        current
            .entities
            .entities
            .iter()
            .filter(|e| e.held_by.contains(&i))
            .count()
    };
    let mut dropped = vec![false; claims.len()];
    for i in 0..claims.len() {
        for j in (i + 1)..claims.len() {
            if dropped[i] || dropped[j] || cos.get(i, j) < tau {
                continue;
            }
            let (ci, cj) = (coverage(i), coverage(j));
            let loser = if ci != cj {
                if ci < cj {
                    i
                } else {
                    j
                }
            } else if to_source.get(i, 0) < to_source.get(j, 0) {
                i
            } else {
                j
            };
            let sole_holder = current.entities.entities.iter().any(|e| {
                e.held_by.contains(&loser) && e.held_by.iter().all(|&h| h == loser || dropped[h])
            });
            if sole_holder {
                continue;
            }
            dropped[loser] = true;
            actions.push(RepairAction::Dedup {
                pass,
                dropped: loser,
                kept: if loser == i { j } else { i },
                cos: cos.get(i, j),
            });
        }
    }
    claims
        .into_iter()
        .zip(&dropped)
        .filter(|(_, d)| !**d)
        .map(|(c, _)| c)
        .collect()
}

/// Why a pass made the claims worse on a quantity of Theorem T1 (n_viol, RR, EPR), if
/// it did. Without an encoder there is no RR: n_viol and EPR alone.
fn worsened(before: &VerifierReport, after: &VerifierReport) -> Option<String> {
    if after.n_viol > before.n_viol {
        return Some(format!("n_viol {} -> {}", before.n_viol, after.n_viol));
    }
    if let (Some(b), Some(a)) = (&before.repetition, &after.repetition) {
        if a.rr > b.rr + 1e-12 {
            return Some(format!("RR {:.3} -> {:.3}", b.rr, a.rr));
        }
    }
    if after.entities.epr < before.entities.epr - 1e-12 {
        return Some(format!(
            "EPR {:.3} -> {:.3}",
            before.entities.epr, after.entities.epr
        ));
    }
    None
}

/// The claim with token `i` replaced by `antecedent` (a possessive determiner by the
/// antecedent's possessive form).
fn replace_token(doc: &Doc, i: usize, antecedent: &str) -> Option<String> {
    let t = doc.tokens.get(i)?;
    let chars: Vec<char> = doc.text.chars().collect();
    let (start, end) = (t.idx, t.idx + t.text.chars().count());
    if end > chars.len() {
        return None;
    }
    let replacement = if matches!(t.lower.as_str(), "his" | "her" | "its" | "their") {
        format!("{antecedent}'s")
    } else {
        antecedent.to_string()
    };
    let before: String = chars[..start].iter().collect();
    let after: String = chars[end..].iter().collect();
    tidy(&format!("{before}{replacement}{after}"))
}

/// The token of S holding the character (code point) `start`.
fn entity_token(source: &Doc, start: usize) -> Option<usize> {
    source
        .tokens
        .iter()
        .find(|t| t.idx <= start && start < t.idx + t.text.chars().count().max(1))
        .map(|t| t.i)
}

/// The text of the smallest `conj`, `advcl` or `relcl` subtree of S covering the entity
/// that starts at character `start`, else S itself.
fn entity_clause(source: &Doc, start: usize) -> String {
    let Some(mut t) = entity_token(source, start) else {
        return source.text.clone();
    };
    for _ in 0..=source.tokens.len() {
        let tok = &source.tokens[t];
        if matches!(tok.dep.as_str(), "conj" | "advcl" | "relcl") {
            let (lo, hi) = source.subtree_span(t);
            let mut s = String::new();
            for j in lo..hi {
                s.push_str(&source.tokens[j].text);
                if source.tokens[j].ws && j + 1 < hi {
                    s.push(' ');
                }
            }
            return s;
        }
        if tok.head == t {
            break;
        }
        t = tok.head;
    }
    source.text.clone()
}

/// What to append for an entity (`text` at characters `span` of S): its governing
/// preposition and the entity when it is a prepositional object in S ("in 1921"), else
/// ", " and the entity. The preposition is written in the claim's case: it lands inside
/// the claim, so S's sentence-initial "In" becomes "in".
fn injection(source: &Doc, entity: &str, span: [usize; 2]) -> String {
    if let Some(t) = entity_token(source, span[0]) {
        // The entity's head word is the token of its span that attaches outside it.
        let end_char = span[1];
        let mut head = t;
        for _ in 0..=source.tokens.len() {
            let h = source.tokens[head].head;
            if h == head
                || source.tokens[h].idx < source.tokens[t].idx
                || source.tokens[h].idx >= end_char
            {
                break;
            }
            head = h;
        }
        let tok = &source.tokens[head];
        let gov = &source.tokens[tok.head];
        if tok.dep == "pobj" && gov.dep == "prep" {
            return format!(" {} {entity}", gov.text.to_lowercase());
        }
    }
    format!(", {entity}")
}

fn append_before_final_punct(claim: &str, appended: &str) -> String {
    let trimmed = claim.trim_end();
    let body = trimmed.trim_end_matches(['.', '!', '?']);
    let end = &trimmed[body.len()..];
    let end = if end.is_empty() { "." } else { end };
    format!("{body}{appended}{end}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::verify::test_doc::doc;

    /// The verifier's report on `n` one-word claims (no boundary, no entity) whose
    /// duplicates are the claims sharing a group in `groups` (claim i in group
    /// `groups[i]`).
    fn report_with_duplicates(groups: &[usize]) -> VerifierReport {
        let source = doc(&[("Rain", "ROOT", 0)]);
        let claims: Vec<Doc> = groups.iter().map(|_| doc(&[("Rain", "ROOT", 0)])).collect();
        let dim = groups.iter().max().map_or(0, |g| g + 1);
        let vectors: Vec<Vec<f32>> = groups
            .iter()
            .map(|&g| (0..dim).map(|d| if d == g { 1.0 } else { 0.0 }).collect())
            .collect();
        let cos = CosineMatrix::new(&vectors, &vectors);
        Verifier::default().verify(&source, &claims, Some(&cos))
    }

    /// PAPER.md "Decided here" (added 2026-11-26): the rollback compares RR, the rate
    /// Theorem T1 is about, not dup_count.
    #[test]
    fn the_guard_compares_rr_not_the_duplicate_count() {
        // Two duplicates (RR 1/2) split into four claims in two duplicate pairs: the
        // count rises (1 -> 2) but RR stays 1/2, so the pass stands.
        let before = report_with_duplicates(&[0, 0]);
        let after = report_with_duplicates(&[0, 0, 1, 1]);
        assert_eq!(
            (
                before.repetition.as_ref().unwrap().dup_count,
                after.repetition.as_ref().unwrap().dup_count
            ),
            (1, 2)
        );
        assert_eq!(worsened(&before, &after), None);
        // One duplicate pair among four claims (RR 1/4) left as two duplicates (RR 1/2):
        // the count stays 1 but RR rises, so the pass is undone.
        let before = report_with_duplicates(&[0, 0, 1, 2]);
        let after = report_with_duplicates(&[0, 0]);
        assert_eq!(
            worsened(&before, &after).as_deref(),
            Some("RR 0.250 -> 0.500")
        );
    }

    #[test]
    fn appends_before_the_final_punctuation() {
        assert_eq!(
            append_before_final_punct("He received the prize.", " in 1921"),
            "He received the prize in 1921."
        );
        assert_eq!(
            append_before_final_punct("Did he win?", ", Paris"),
            "Did he win, Paris?"
        );
        assert_eq!(
            append_before_final_punct("It rose", " by 5%"),
            "It rose by 5%."
        );
    }
}
