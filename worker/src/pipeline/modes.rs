//! The paper's modes over a shard (PAPER.md "Modes" and "Decided here"), all from the one
//! shared base decomposition and its verifier report:
//! - `base`: the decomposer's claims;
//! - `repair`: the rule tier on the base claims;
//! - `self_repair`: the LLM tier on the base claims, called only when the base fails a
//!   verifier check or has an unresolved pronoun;
//! - `all`: the gate (a base that passes and has no flag is kept unchanged), else the
//!   rule tier; if its claims pass, stop (early exit); else the LLM tier on them.
//!
//! A baseline has no LLM tier (the rule baselines have no model; the FActScore-prompt
//! model's prompt is not CREDENCE's): `self_repair` then keeps the base
//! (`pipeline_version = 'none'`) and `all` is the gate and the rule tier. What
//! each example went through is recorded as a [`ModeTrace`] (the `repair` column).

use super::repair::llm::{self as self_repair, SelfRepairError, SelfRepairOutcome};
use super::repair::RepairAction;
use super::scoring::{Scored, ScoredShard, Scorer, ScoringError, ScoringInput, StageSeconds};
use super::verify::VerifierReport;
use crate::decompose::LlmHandle;
use credence_core::domain::Stage;
use credence_core::domain::{Example, Mode};
use credence_core::Claim;
use credence_infra::cache::{EmbeddingCache, GenerationCache, NoCache};
use credence_infra::observe::{JobObserver, NoObserver};
use futures::stream::{FuturesOrdered, StreamExt};
use serde::Serialize;
use std::time::Instant;

/// What one example went through in its mode (stored as JSON in `repair`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModeTrace {
    /// `all`: whether the gate kept the base (it passed every check, with no flag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Gate>,
    /// The rule tier's steps, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Vec<RepairAction>>,
    /// `all`: the rule tier's claims passed, so the LLM tier was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_exit: Option<bool>,
    /// What the LLM tier did, when it was called.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm: Option<SelfRepairOutcome>,
}

/// The gate's decision in `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    /// The base passed with no flag and was kept unchanged.
    Kept,
    /// The base failed a check or had a flag: the tiers ran.
    Opened,
}

/// A shard's claims in one mode, scored.
#[derive(Debug)]
pub struct ModeOutcome {
    /// Final claims per example.
    pub claims: Vec<Vec<Claim>>,
    /// What each example went through (`None` in `base`, and in `self_repair` without an
    /// LLM).
    pub traces: Vec<Option<ModeTrace>>,
    /// LLM calls the mode's tiers made per example (the base call not included).
    pub tier_calls: Vec<u32>,
    /// The final claims' scores.
    pub scored: ScoredShard,
    /// What produced the claims.
    pub pipeline_version: String,
}

/// Why a mode could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum ModeError {
    /// Scoring (parse, embed, verify) failed.
    #[error(transparent)]
    Score(#[from] ScoringError),
    /// The rule tier failed.
    #[error("rule repair: {0}")]
    Rule(String),
    /// The LLM tier could not run (an unusable answer is not this: it keeps the claims).
    #[error("self-repair: {0}")]
    SelfRepair(#[from] SelfRepairError),
}

impl ModeError {
    /// Whether the store was unreachable (retry the job in place).
    pub fn is_transient(&self) -> bool {
        match self {
            ModeError::SelfRepair(SelfRepairError::Cache(e)) => e.is_transient(),
            ModeError::Score(e) => e.is_transient(),
            ModeError::Rule(_) | ModeError::SelfRepair(_) => false,
        }
    }
}

/// One source sentence and its base claims through `mode`, with nothing cached or
/// observed: what the one-sentence commands (`credence decompose --mode`, `credence
/// repair`) run, the flow of a job after its decomposition (score the base claims, then
/// the mode's tiers). Returns the verifier's report on the base claims and the mode's
/// outcome.
pub async fn one_sentence(
    scorer: &Scorer,
    llm: Option<LlmHandle<'_>>,
    mode: Mode,
    source: &str,
    base: Vec<Claim>,
) -> Result<(VerifierReport, ModeOutcome), ModeError> {
    let example = Example {
        id: "sentence".into(),
        text: source.to_string(),
        references: Vec::new(),
        meta: Default::default(),
    };
    let base = [base];
    let inputs = [ScoringInput {
        source,
        claims: &base[0],
        references: &example.references,
    }];
    let scored = scorer.score(&NoCache, &inputs).await?;
    let before = scored.examples[0].report.clone();
    let runner = ModeRunner {
        scorer,
        embeddings: &NoCache,
        generations: &NoCache,
        llm,
        observer: &NoObserver,
        model: "",
    };
    let outcome = runner
        .run(mode, std::slice::from_ref(&example), &base, scored)
        .await?;
    Ok((before, outcome))
}

/// `pipeline_version` of each mode's output.
pub mod versions {
    /// `base`: the decomposer's claims.
    pub const BASE: &str = "base";
    /// `repair`: the rule tier, one pass by default.
    pub const RULE: &str = "rule-1";
    /// A mode whose tier cannot run for this decomposer (`self_repair` on a baseline).
    pub const NONE: &str = "none";
}

/// Whether a report flags an unresolved pronoun.
pub fn flagged(report: &VerifierReport) -> bool {
    !report.self_containment.is_empty()
}

/// What a mode needs besides the claims.
pub struct ModeRunner<'a> {
    /// Parser, verifier, encoder and rule tier.
    pub scorer: &'a Scorer,
    /// The embedding cache.
    pub embeddings: &'a dyn EmbeddingCache,
    /// The generation cache (the LLM tier's calls).
    pub generations: &'a dyn GenerationCache,
    /// The decomposer's model, if it has one.
    pub llm: Option<LlmHandle<'a>>,
    /// Where the LLM tier's requests and generation-cache lookups are reported.
    pub observer: &'a dyn JobObserver,
    /// The model's name in the sweep (the observer's label).
    pub model: &'a str,
}

impl ModeRunner<'_> {
    /// Computes `mode` for a shard from its base claims and their scores.
    pub async fn run(
        &self,
        mode: Mode,
        examples: &[Example],
        base: &[Vec<Claim>],
        scored_base: ScoredShard,
    ) -> Result<ModeOutcome, ModeError> {
        let n = examples.len();
        let mut claims: Vec<Vec<Claim>> = base.to_vec();
        let mut traces: Vec<Option<ModeTrace>> = vec![None; n];
        let mut tier_calls = vec![0u32; n];
        let mut scored = scored_base;
        let pipeline_version = match mode {
            // `verify` is never a job (it is the timing table's line computed from
            // `base`'s); were it asked for, it is the base with its report.
            Mode::Base | Mode::Verify => versions::BASE.to_string(),
            Mode::Repair => {
                let all: Vec<usize> = (0..n).collect();
                let actions = self
                    .rule_tier(examples, &mut claims, &mut scored, &all)
                    .await?;
                for (i, a) in all.into_iter().zip(actions) {
                    traces[i] = Some(ModeTrace {
                        rule: Some(a),
                        ..ModeTrace::default()
                    });
                }
                self.rescore(examples, &claims, &mut scored, &(0..n).collect::<Vec<_>>())
                    .await?;
                versions::RULE.to_string()
            }
            Mode::SelfRepair => match self.llm {
                None => versions::NONE.to_string(),
                Some(llm) => {
                    let failing: Vec<usize> = (0..n)
                        .filter(|&i| {
                            let r = &scored.examples[i].report;
                            !r.passes() || flagged(r)
                        })
                        .collect();
                    for &i in &failing {
                        traces[i] = Some(ModeTrace::default());
                    }
                    self.llm_tier(
                        llm,
                        examples,
                        &mut claims,
                        &mut scored,
                        &failing,
                        &mut traces,
                        &mut tier_calls,
                    )
                    .await?;
                    self_repair::VERSION.to_string()
                }
            },
            Mode::All => {
                let mut opened = Vec::new();
                for (i, t) in traces.iter_mut().enumerate() {
                    let r = &scored.examples[i].report;
                    let keep = r.passes() && !flagged(r);
                    *t = Some(ModeTrace {
                        gate: Some(if keep { Gate::Kept } else { Gate::Opened }),
                        ..ModeTrace::default()
                    });
                    if !keep {
                        opened.push(i);
                    }
                }
                let actions = self
                    .rule_tier(examples, &mut claims, &mut scored, &opened)
                    .await?;
                for (&i, a) in opened.iter().zip(actions) {
                    if let Some(t) = traces[i].as_mut() {
                        t.rule = Some(a);
                    }
                }
                self.rescore(examples, &claims, &mut scored, &opened)
                    .await?;
                match self.llm {
                    None => format!("gate+{}", versions::RULE),
                    Some(llm) => {
                        let mut still_failing = Vec::new();
                        for &i in &opened {
                            let exit = scored.examples[i].report.passes();
                            if let Some(t) = traces[i].as_mut() {
                                t.early_exit = Some(exit);
                            }
                            if !exit {
                                still_failing.push(i);
                            }
                        }
                        self.llm_tier(
                            llm,
                            examples,
                            &mut claims,
                            &mut scored,
                            &still_failing,
                            &mut traces,
                            &mut tier_calls,
                        )
                        .await?;
                        format!("gate+{}+{}", versions::RULE, self_repair::VERSION)
                    }
                }
            }
        };
        Ok(ModeOutcome {
            claims,
            traces,
            tier_calls,
            scored,
            pipeline_version,
        })
    }

    /// The rule tier on the examples `which`, replacing their claims; the actions, in
    /// the order of `which`. The texts it parses join the shard's parses.
    async fn rule_tier(
        &self,
        examples: &[Example],
        claims: &mut [Vec<Claim>],
        scored: &mut ScoredShard,
        which: &[usize],
    ) -> Result<Vec<Vec<RepairAction>>, ModeError> {
        let tools = self.scorer.tools(self.embeddings);
        let mut actions = Vec::with_capacity(which.len());
        for &i in which {
            let clock = Instant::now();
            let source = self
                .scorer
                .docs_of(&mut scored.docs, std::slice::from_ref(&examples[i].text))
                .remove(0);
            let docs = self.scorer.docs_of(&mut scored.docs, &claims[i]);
            let out = self
                .scorer
                .rule_repair
                .repair(
                    &self.scorer.verifier,
                    &source,
                    &claims[i],
                    &docs,
                    &scored.examples[i].report,
                    &tools,
                )
                .await
                .map_err(|e| ModeError::Rule(e.to_string()))?;
            claims[i] = out.claims;
            actions.push(out.actions);
            scored.docs.extend(out.parsed);
            scored.times[i].add(Stage::Repair, clock.elapsed().as_secs_f64());
        }
        Ok(actions)
    }

    /// The LLM tier on the examples `which` (one call each, at most `max_llm_calls` in
    /// all per example: one), then their new claims scored; with `keep_if_not_worse`, an
    /// answer that fails more checks is rolled back.
    #[allow(clippy::too_many_arguments)]
    async fn llm_tier(
        &self,
        llm: LlmHandle<'_>,
        examples: &[Example],
        claims: &mut [Vec<Claim>],
        scored: &mut ScoredShard,
        which: &[usize],
        traces: &mut [Option<ModeTrace>],
        tier_calls: &mut [u32],
    ) -> Result<(), ModeError> {
        if self.scorer.max_llm_calls == 0 {
            return Ok(());
        }
        // What to roll back to, kept only when a worse answer may be rolled back.
        let before: Vec<(Vec<Claim>, Scored)> = if self.scorer.keep_if_not_worse {
            which
                .iter()
                .map(|&i| (claims[i].clone(), scored.examples[i].clone()))
                .collect()
        } else {
            Vec::new()
        };
        // The calls of the shard's failing examples go out together, as many at once as
        // the model keeps in flight (the decompositions' window): one at a time, a GPU
        // server would decode each alone. Answers are taken in example order. (A plain
        // loop rather than stream combinators: their closures trip the compiler's Send
        // inference.)
        let window = llm.once.generator().max_in_flight().max(1);
        let mut answers = Vec::with_capacity(which.len());
        let mut queued = which.iter();
        let mut in_flight = FuturesOrdered::new();
        loop {
            while in_flight.len() < window {
                let Some(&i) = queued.next() else { break };
                let clock = Instant::now();
                let docs = self.scorer.nlp.analyze_batch(&claims[i]);
                let findings = self_repair::findings(&scored.examples[i].report, &claims[i], &docs);
                let current = &claims[i];
                in_flight.push_back(async move {
                    let out = self_repair::self_repair(
                        llm,
                        self.generations,
                        self.observer,
                        self.model,
                        &examples[i].text,
                        current,
                        &findings,
                    )
                    .await;
                    (i, clock.elapsed().as_secs_f64(), out)
                });
            }
            match in_flight.next().await {
                Some(answer) => answers.push(answer),
                None => break,
            }
        }
        drop(in_flight);
        let mut replaced = Vec::new();
        for (i, seconds, out) in answers {
            let out = out?;
            scored.times[i].add(Stage::SelfRepair, seconds + out.cached_seconds);
            tier_calls[i] += 1;
            if out.outcome == SelfRepairOutcome::Replaced {
                replaced.push(i);
            }
            claims[i] = out.claims;
            if let Some(t) = traces[i].as_mut() {
                t.llm = Some(out.outcome);
            }
        }
        self.rescore(examples, claims, scored, &replaced).await?;
        if self.scorer.keep_if_not_worse {
            for (&i, (old_claims, old_scored)) in which.iter().zip(before) {
                if replaced.contains(&i)
                    && self_repair::failed_checks(&scored.examples[i].report)
                        > self_repair::failed_checks(&old_scored.report)
                {
                    claims[i] = old_claims;
                    scored.examples[i] = old_scored;
                    if let Some(t) = traces[i].as_mut() {
                        t.llm = Some(SelfRepairOutcome::KeptWorse);
                    }
                }
            }
        }
        Ok(())
    }

    /// Scores the examples `which` again with their current claims.
    async fn rescore(
        &self,
        examples: &[Example],
        claims: &[Vec<Claim>],
        scored: &mut ScoredShard,
        which: &[usize],
    ) -> Result<(), ModeError> {
        if which.is_empty() {
            return Ok(());
        }
        let inputs: Vec<ScoringInput<'_>> = which
            .iter()
            .map(|&i| ScoringInput {
                source: &examples[i].text,
                claims: &claims[i],
                references: &examples[i].references,
            })
            .collect();
        let docs = std::mem::take(&mut scored.docs);
        let again = self
            .scorer
            .score_with(self.embeddings, &inputs, docs)
            .await?;
        scored.docs = again.docs;
        for ((&i, s), t) in which.iter().zip(again.examples).zip(&again.times) {
            scored.examples[i] = s;
            scored.times[i].add_all(t);
        }
        add_seconds(&mut scored.seconds, again.seconds);
        Ok(())
    }
}

fn add_seconds(total: &mut StageSeconds, more: StageSeconds) {
    total.parse += more.parse;
    total.embed += more.embed;
    total.verify += more.verify;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::EmbedError;
    use credence_infra::store::StoreError;

    fn cache_error(source: sqlx::Error) -> EmbedError {
        EmbedError::Cache(StoreError::Query {
            what: "embedding cache lookup",
            source,
        })
    }

    /// The tiers re-score repaired claims through the embedding cache: a store outage
    /// there is retried in place like one in the base scoring, not a failed delivery.
    #[test]
    fn an_unreachable_cache_while_the_tiers_score_is_transient() {
        let down = ModeError::Score(ScoringError::Embed(cache_error(sqlx::Error::PoolTimedOut)));
        assert!(down.is_transient());
        let bad_row = ModeError::Score(ScoringError::Embed(cache_error(sqlx::Error::RowNotFound)));
        assert!(!bad_row.is_transient());
        assert!(!ModeError::Rule("no parse".into()).is_transient());
        assert!(!ModeError::Score(ScoringError::Parse("panicked".into())).is_transient());
    }
}
