//! The repairer's LLM tier (PAPER.md "Repairer", tier 2, and "Decided here"): one call
//! at most, to the model that decomposed the sentence, with the same system prompt as
//! the decomposer and a user turn (`worker/prompts/self-repair-v1.txt`) holding S, the
//! current claims one per line and the verifier's findings: missing entities, non-atomic
//! claims with the rule that fired, duplicate pairs, unresolved pronouns with their
//! antecedent. The answer is parsed like a decomposition and replaces the claims unless
//! it is empty or unparseable; with `keep_if_not_worse` the caller also keeps the previous
//! claims when the answer fails more checks. The call goes through the generation cache
//! and its lease, so it too is made once per sweep.

use crate::decompose::LlmHandle;
use crate::llm::once::OnceError;
use crate::llm::{prompt, ChatMessage, ChatRequest, GenerateError, PromptKind};
use crate::pipeline::verify::VerifierReport;
use credence_core::Claim;
use credence_infra::cache::GenerationCache;
use credence_infra::observe::JobObserver;
use credence_infra::store::StoreError;
use credence_nlp::Doc;
use serde::{Deserialize, Serialize};

/// The prompt's version: stored with results and part of the job key.
pub const VERSION: &str = "self-repair-v1";

const TEMPLATE: &str = include_str!("../../../prompts/self-repair-v1.txt");

/// What the LLM tier did with one example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SelfRepairOutcome {
    /// The answer replaced the claims.
    Replaced,
    /// The answer held no claim: the claims were kept.
    KeptUnparseable,
    /// The answer failed more verifier checks than the claims (`keep_if_not_worse`): the
    /// claims were kept.
    KeptWorse,
    /// The model gave no usable answer after every retry: the claims were kept.
    KeptError {
        /// Why.
        error: String,
    },
}

/// The claims after the LLM tier and what it did.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfRepaired {
    /// The claims: the answer's, or the previous ones.
    pub claims: Vec<Claim>,
    /// What happened.
    pub outcome: SelfRepairOutcome,
    /// What the generation cost when it was made, if it came from the cache (0 when it
    /// was made by this call, whose own time then holds it): the tier's time in the
    /// timing table is the call's time plus this.
    pub cached_seconds: f64,
}

/// Why the tier could not run (the job fails; an unusable answer is not this).
#[derive(Debug, thiserror::Error)]
pub enum SelfRepairError {
    /// The endpoint is down or refuses the requests.
    #[error(transparent)]
    Generate(GenerateError),
    /// The generation cache failed.
    #[error("generation cache: {0}")]
    Cache(#[from] StoreError),
    /// The prompt template could not be rendered.
    #[error("rendering {VERSION}: {0}")]
    Template(String),
}

/// The verifier's findings on `claims`, one line each, as the prompt lists them.
/// `claim_docs` are the claims' parses (for the boundary words).
pub fn findings(report: &VerifierReport, claims: &[Claim], claim_docs: &[Doc]) -> Vec<String> {
    let mut out = Vec::new();
    for e in report.entities.entities.iter().filter(|e| !e.preserved) {
        out.push(format!(
            "The {} \"{}\" of the source sentence is missing from the claims.",
            entity_kind(&e.label),
            e.text
        ));
    }
    for (i, a) in report.atomicity.iter().enumerate() {
        for b in &a.boundaries {
            let word = claim_docs
                .get(i)
                .and_then(|d| d.tokens.get(b.token_i))
                .map(|t| t.text.as_str())
                .unwrap_or("?");
            out.push(format!(
                "Claim {} is not atomic ({} at \"{word}\"): \"{}\"",
                i + 1,
                rule_words(b.rule.as_str()),
                claims.get(i).map_or("", String::as_str)
            ));
        }
    }
    if let Some(rep) = &report.repetition {
        for p in &rep.pairs {
            out.push(format!(
                "Claims {} and {} repeat each other.",
                p.i + 1,
                p.j + 1
            ));
        }
    }
    for f in &report.self_containment {
        out.push(format!(
            "Claim {} uses \"{}\" for \"{}\", who is not named in that claim.",
            f.claim + 1,
            f.pronoun,
            f.antecedent
        ));
    }
    out
}

fn entity_kind(label: &str) -> String {
    match label {
        "PERSON" => "person".into(),
        "ORG" => "organisation".into(),
        "GPE" | "LOC" => "place".into(),
        "percent" => "percentage".into(),
        "money" => "amount of money".into(),
        "date" | "time" | "number" => label.into(),
        other => format!("entity ({other})"),
    }
}

fn rule_words(rule: &str) -> &'static str {
    match rule {
        "cc_subj" => "two clauses with their own subjects",
        "advcl" => "an adverbial clause",
        "relcl_subj" => "a relative clause with its own subject",
        _ => "a compound boundary",
    }
}

/// The chat that asks for the repair: the decomposer's system prompt, then S, the claims
/// and the findings.
pub fn messages(
    source: &str,
    claims: &[Claim],
    findings: &[String],
) -> Result<Vec<ChatMessage>, SelfRepairError> {
    let env = minijinja::Environment::new();
    let user = env
        .render_str(
            TEMPLATE,
            minijinja::context! { source => source.trim(), claims => claims, findings => findings },
        )
        .map_err(|e| SelfRepairError::Template(e.to_string()))?;
    let mut chat = prompt::messages(PromptKind::Credence, source);
    chat.retain(|m| m.role == crate::llm::Role::System);
    chat.push(ChatMessage::user(user.trim_end()));
    Ok(chat)
}

/// Runs the tier on one example: one call, the answer parsed, the claims replaced unless
/// the answer is empty or unparseable (or the model gave none).
pub async fn self_repair(
    llm: LlmHandle<'_>,
    cache: &dyn GenerationCache,
    observer: &dyn JobObserver,
    model: &str,
    source: &str,
    claims: &[Claim],
    findings: &[String],
) -> Result<SelfRepaired, SelfRepairError> {
    let request = ChatRequest {
        messages: messages(source, claims, findings)?,
        max_new_tokens: llm.max_new_tokens,
    };
    let kept = |outcome| SelfRepaired {
        claims: claims.to_vec(),
        outcome,
        cached_seconds: 0.0,
    };
    match llm.once.generate(cache, VERSION, &request).await {
        Ok(generated) => {
            generated.report(observer, model);
            let parsed = prompt::parse(PromptKind::Credence, &generated.text);
            let cached_seconds = if generated.cached {
                generated.seconds
            } else {
                0.0
            };
            if parsed.parse_failed {
                Ok(SelfRepaired {
                    cached_seconds,
                    ..kept(SelfRepairOutcome::KeptUnparseable)
                })
            } else {
                Ok(SelfRepaired {
                    claims: parsed.claims,
                    outcome: SelfRepairOutcome::Replaced,
                    cached_seconds,
                })
            }
        }
        Err(OnceError::Generate(e)) if e.is_example_error() => {
            Ok(kept(SelfRepairOutcome::KeptError {
                error: e.to_string(),
            }))
        }
        Err(OnceError::Generate(e)) => Err(SelfRepairError::Generate(e)),
        Err(OnceError::Cache(e)) => Err(SelfRepairError::Cache(e)),
    }
}

/// How many of the three verifier checks (atomicity, entities, repetition) a report
/// fails, plus its unresolved pronouns: what `keep_if_not_worse` compares.
pub fn failed_checks(report: &VerifierReport) -> usize {
    usize::from(!report.atomic())
        + usize::from(!report.entities.passes)
        + usize::from(report.repetition.as_ref().is_some_and(|r| r.dup_count > 0))
        + report.self_containment.len()
}
