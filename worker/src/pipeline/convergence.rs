//! The passes of the convergence audit (PAPER.md "Convergence"): the rule tier applied
//! once, then once more to its own output, up to k times, over a model x dataset's base
//! claims, with the verifier's figures after each pass. The arithmetic over the
//! trajectories (T1-T4, "P2 better") is `credence_core::audit`.

use super::modes::ModeError;
use super::repair::{RepairAction, RuleRepair, RuleRepairConfig};
use super::scoring::{Scorer, ScoringInput};
use credence_core::audit::PassPoint;
use credence_core::{Claim, Example};
use credence_infra::cache::EmbeddingCache;
use credence_nlp::Doc;
use std::collections::HashMap;

/// Each example's figures after 0 (its `base` claims), 1, ..., `passes` rule passes:
/// `result[e][k]`. Every pass is one pass of the tier (`max_iterations` = 1) on the
/// previous pass's claims, with the sweep's split options; an example whose pass changed
/// nothing is at a fixed point and is not repaired again (the tier is deterministic).
/// `progress` is called after each pass with its number. `docs` holds the parses known
/// so far; every text parsed here joins them (each text is parsed once over the passes,
/// and over the calls that share `docs`).
pub async fn trajectories(
    scorer: &Scorer,
    cache: &dyn EmbeddingCache,
    docs: &mut HashMap<String, Doc>,
    examples: &[Example],
    base: &[Vec<Claim>],
    passes: u32,
    mut progress: impl FnMut(u32),
) -> Result<Vec<Vec<PassPoint>>, ModeError> {
    let tier = RuleRepair::new(RuleRepairConfig {
        max_iterations: 1,
        ..scorer.rule_repair.config().clone()
    });
    let tools = scorer.tools(cache);
    let mut claims: Vec<Vec<Claim>> = base.to_vec();
    let mut scored = score(scorer, cache, examples, &claims, docs).await?;
    let mut out: Vec<Vec<PassPoint>> = scored
        .iter()
        .map(|s| vec![point(s, false, false)])
        .collect();
    let mut fixed = vec![false; examples.len()];
    for pass in 1..=passes {
        let mut changed = vec![false; examples.len()];
        let mut rolled_back = vec![false; examples.len()];
        for i in 0..examples.len() {
            if fixed[i] {
                continue;
            }
            let source = scorer
                .docs_of(docs, std::slice::from_ref(&examples[i].text))
                .remove(0);
            let claim_docs = scorer.docs_of(docs, &claims[i]);
            let outcome = tier
                .repair(
                    &scorer.verifier,
                    &source,
                    &claims[i],
                    &claim_docs,
                    &scored[i].report,
                    &tools,
                )
                .await
                .map_err(|e| ModeError::Rule(e.to_string()))?;
            docs.extend(outcome.parsed);
            rolled_back[i] = outcome
                .actions
                .iter()
                .any(|a| matches!(a, RepairAction::RolledBack { .. }));
            changed[i] = outcome.claims != claims[i];
            fixed[i] = !changed[i];
            claims[i] = outcome.claims;
        }
        let which: Vec<usize> = (0..examples.len()).filter(|&i| changed[i]).collect();
        let subset: Vec<Example> = which.iter().map(|&i| examples[i].clone()).collect();
        let subset_claims: Vec<Vec<Claim>> = which.iter().map(|&i| claims[i].clone()).collect();
        for (&i, s) in which
            .iter()
            .zip(score(scorer, cache, &subset, &subset_claims, docs).await?)
        {
            scored[i] = s;
        }
        for (i, t) in out.iter_mut().enumerate() {
            t.push(point(&scored[i], changed[i], rolled_back[i]));
        }
        progress(pass);
    }
    Ok(out)
}

async fn score(
    scorer: &Scorer,
    cache: &dyn EmbeddingCache,
    examples: &[Example],
    claims: &[Vec<Claim>],
    docs: &mut HashMap<String, Doc>,
) -> Result<Vec<super::scoring::Scored>, ModeError> {
    if examples.is_empty() {
        return Ok(Vec::new());
    }
    let inputs = ScoringInput::of_examples(examples, claims);
    let shard = scorer
        .score_with(cache, &inputs, std::mem::take(docs))
        .await?;
    *docs = shard.docs;
    Ok(shard.examples)
}

fn point(s: &super::scoring::Scored, changed: bool, rolled_back: bool) -> PassPoint {
    PassPoint {
        n_claims: s.report.atomicity.len(),
        avr: s.report.avr,
        n_viol: s.report.n_viol,
        epr: s.report.entities.epr,
        rr: s.report.repetition.as_ref().map(|r| r.rr),
        dup_pairs: s.report.repetition.as_ref().map(|r| r.pairs.len() as u32),
        semantic_f1: s.metrics.semantic_f1,
        changed,
        rolled_back,
    }
}
