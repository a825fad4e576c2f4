//! What the example page reads beyond the example's own rows: each mode's stored JSON
//! decoded, the claims' words as the parser cuts them, the texts' vectors from the
//! embedding cache, and the raw completions from the generation cache, found by
//! rebuilding the prompts the worker sent (`llm::prompt` for the base decomposition,
//! `repair::llm` for the self-repair call, with the verifier's findings on the claims it
//! was given).

use super::Viewer;
use credence_core::domain::Mode;
use credence_core::sweep::ModelBackend;
use credence_infra::store::browse::{ModeOutput, StoredExample};
use credence_worker::llm::once::GenerateOnce;
use credence_worker::llm::{prompt, ChatRequest};
use credence_worker::pipeline::repair::llm::{self as self_repair, SelfRepairOutcome};
use credence_worker::pipeline::repair::RepairAction;
use credence_worker::pipeline::verify::VerifierReport;
use serde::Deserialize;
use std::collections::HashMap;

/// What the `repair` column holds (`ModeTrace`, as the worker writes it).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Trace {
    pub gate: Option<String>,
    pub rule: Option<Vec<RepairAction>>,
    pub early_exit: Option<bool>,
    pub llm: Option<SelfRepairOutcome>,
}

/// One mode's output, decoded.
pub(super) struct Decoded<'a> {
    pub out: &'a ModeOutput,
    pub claims: Vec<String>,
    pub base: Vec<String>,
    pub report: Option<VerifierReport>,
    pub trace: Trace,
}

pub(super) fn decode(out: &ModeOutput) -> Result<Decoded<'_>, String> {
    let what = |field: &str, e: serde_json::Error| {
        format!("mode {}: the stored {field} cannot be read: {e}", out.mode)
    };
    Ok(Decoded {
        out,
        claims: serde_json::from_str(&out.claims_json).map_err(|e| what("claims", e))?,
        base: serde_json::from_str(&out.base_claims_json).map_err(|e| what("base claims", e))?,
        report: match &out.verifier_json {
            None => None,
            Some(j) => Some(serde_json::from_str(j).map_err(|e| what("verifier report", e))?),
        },
        trace: match &out.repair_json {
            None => Trace::default(),
            Some(j) => serde_json::from_str(j).map_err(|e| what("repair steps", e))?,
        },
    })
}

/// A text's words as the parser cuts them: (start, end) in code points.
pub(super) type Tokens = Vec<(usize, usize)>;

/// Everything the page shows that is not in the example's own rows.
pub(super) struct Extras {
    /// Each claim's tokens, when the parser is loaded.
    pub tokens: HashMap<String, Tokens>,
    /// The base decomposition's completion, when the model is an LLM and it is cached.
    pub base_completion: Option<String>,
    /// The self-repair answer per mode, when the tier was called.
    pub repair_answers: HashMap<Mode, Result<String, String>>,
    /// Each text's vector.
    pub vectors: HashMap<String, Vec<f32>>,
    /// Why a part could not be shown.
    pub notes: Vec<String>,
}

/// Candidate generator fingerprints of a job's model fingerprint (`GENERATOR+PROMPT`):
/// every prefix before a `+`.
fn generator_fingerprints(job_fingerprint: &str) -> Vec<String> {
    job_fingerprint
        .match_indices('+')
        .map(|(i, _)| job_fingerprint[..i].to_string())
        .collect()
}

pub(super) async fn extras(viewer: &Viewer, ex: &StoredExample, decoded: &[Decoded<'_>]) -> Extras {
    let mut notes = Vec::new();
    let claim_texts: Vec<&str> = {
        let mut seen = std::collections::BTreeSet::new();
        decoded
            .iter()
            .flat_map(|d| d.claims.iter().chain(d.base.iter()))
            .filter(|c| seen.insert(c.as_str()))
            .map(String::as_str)
            .collect()
    };
    let mut tokens = HashMap::new();
    match viewer.nlp.as_ref() {
        Ok(nlp) => {
            for (text, toks) in claim_texts.iter().zip(nlp.tokenize_batch(&claim_texts)) {
                tokens.insert(
                    text.to_string(),
                    toks.iter()
                        .map(|t| (t.idx, t.idx + t.text.chars().count()))
                        .collect(),
                );
            }
        }
        Err(e) => notes.push(format!(
            "Boundary words and the self-repair answer need the parser: {e}"
        )),
    }
    let references: Vec<String> = serde_json::from_str(&ex.references_json).unwrap_or_default();
    let mut vectors = HashMap::new();
    let mut texts: Vec<String> = claim_texts.iter().map(|t| t.to_string()).collect();
    texts.extend(references.iter().cloned());
    // The encoder that embedded the most of these texts is the run's.
    let mut best: Option<(usize, Vec<Option<Vec<f32>>>)> = None;
    for encoder in &viewer.encoders {
        match viewer.store.embeddings(encoder, &texts).await {
            Ok(found) => {
                let hits = found.iter().filter(|v| v.is_some()).count();
                if hits > 0 && best.as_ref().is_none_or(|(n, _)| hits > *n) {
                    best = Some((hits, found));
                }
            }
            Err(e) => notes.push(format!("The embedding cache could not be read: {e}")),
        }
    }
    if let Some((_, found)) = best {
        for (text, v) in texts.into_iter().zip(found) {
            if let Some(v) = v {
                vectors.insert(text, v);
            }
        }
    }
    let spec_model = viewer.spec.models.iter().find(|m| m.name == ex.model);
    let llm = spec_model.is_some_and(|m| {
        !matches!(
            m.backend,
            ModelBackend::SentenceSplit | ModelBackend::ConjunctionOracle
        )
    });
    let mut base_completion = None;
    let mut repair_answers = HashMap::new();
    if let (true, Some(model)) = (llm, spec_model) {
        let fingerprints = decoded
            .first()
            .map(|d| generator_fingerprints(&d.out.model_fingerprint))
            .unwrap_or_default();
        let request = ChatRequest {
            messages: prompt::messages(model.prompt, &ex.text),
            max_new_tokens: model.max_new_tokens,
        };
        let key = GenerateOnce::cache_prompt(prompt::version(model.prompt), &request);
        match viewer.store.cached_completions(&fingerprints, &key).await {
            Ok(found) => base_completion = found.into_iter().last(),
            Err(e) => notes.push(format!("The generation cache could not be read: {e}")),
        }
        for d in decoded.iter().filter(|d| d.trace.llm.is_some()) {
            let answer = self_repair_answer(viewer, ex, decoded, d, &fingerprints).await;
            repair_answers.insert(d.out.mode, answer);
        }
    }
    Extras {
        tokens,
        base_completion,
        repair_answers,
        vectors,
        notes,
    }
}

/// The self-repair answer of mode `d`: its prompt rebuilt as the worker built it (the
/// claims the tier was given, with the verifier's findings on them), looked up in the
/// generation cache.
async fn self_repair_answer(
    viewer: &Viewer,
    ex: &StoredExample,
    decoded: &[Decoded<'_>],
    d: &Decoded<'_>,
    fingerprints: &[String],
) -> Result<String, String> {
    let nlp = viewer.nlp.as_ref().map_err(|e| e.clone())?;
    // `self_repair` repairs the base claims; `all` the rule tier's, which are the
    // `repair` mode's.
    let given_mode = match d.out.mode {
        Mode::All => Mode::Repair,
        _ => Mode::Base,
    };
    let given = decoded
        .iter()
        .find(|g| g.out.mode == given_mode)
        .ok_or_else(|| {
            format!("the run has no {given_mode} mode, whose claims the tier was given")
        })?;
    let report = given
        .report
        .as_ref()
        .ok_or("the run has no verifier report on the claims the tier was given")?;
    let docs = nlp.analyze_batch(&given.claims);
    let findings = self_repair::findings(report, &given.claims, &docs);
    let messages =
        self_repair::messages(&ex.text, &given.claims, &findings).map_err(|e| e.to_string())?;
    let key = GenerateOnce::cache_prompt(
        self_repair::VERSION,
        &ChatRequest {
            messages,
            max_new_tokens: 0,
        },
    );
    let found = viewer
        .store
        .cached_completions(fingerprints, &key)
        .await
        .map_err(|e| e.to_string())?;
    found
        .into_iter()
        .last()
        .ok_or_else(|| "not in the generation cache under the rebuilt prompt".to_string())
}

pub(super) fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    (aa > 0.0 && bb > 0.0).then(|| ab / (aa.sqrt() * bb.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_fingerprints_are_the_prefixes_before_a_plus() {
        assert_eq!(
            generator_fingerprints("local:ab+c+credence-v1"),
            vec!["local:ab".to_string(), "local:ab+c".to_string()]
        );
    }
}
