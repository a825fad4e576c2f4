//! The NLI judge of downstream fact-checking (PAPER.md "AFC"): the versioned prompt
//! (`worker/prompts/nli-v1.txt`) that asks a model whether evidence supports a claim,
//! and the parse of its answer into a label and a score. The compound verdict of a
//! decomposed claim is `credence_core::afc`'s.
//!
//! The prompt is a system message (the instructions) and a user message holding the
//! evidence (its sentences joined with spaces, in order) and the claim; the model answers
//! `LABEL SCORE` on one line, greedy. The parse takes the first label word of the answer
//! (reasoning and fences removed as for decompositions); the score is the first number
//! after it, used when it lies in [-1, 1]. A label without a usable
//! score takes +1 / 0 / -1; an answer with no label is NEUTRAL with score 0 and counts as
//! unparsable.
//!
//! [`NliJudge`] asks a generator through the generation cache and its lease
//! ([`GenerateOnce`]), so each (claim, evidence) pair is judged once per sweep, whoever
//! asks, and a rerun sends nothing.
//!
//! Changing the prompt file or a parsing rule changes results: bump [`VERSION`] (it is
//! part of the generation cache key and is stored with every judgement).

use super::once::OnceError;
use super::{ChatMessage, ChatRequest, GenerateOnce, Generator};
use credence_core::afc::{Judgement, NliLabel};
use credence_infra::cache::GenerationCache;
use std::sync::Arc;

/// The prompt's instructions.
const NLI_V1: &str = include_str!("../../prompts/nli-v1.txt");

/// The versioned prompt id.
pub const VERSION: &str = "nli-v1";

/// The chat messages that ask the judge about `claim` against `evidence` (sentences,
/// joined with spaces in order; each trimmed).
///
/// ```
/// use credence_worker::llm::{nli, Role};
/// let chat = nli::messages(" Ada wrote code. ", &["Ada Lovelace".into(), " wrote the first program. ".into()]);
/// assert_eq!(chat[0].role, Role::System);
/// assert_eq!(chat[1].content, "EVIDENCE: Ada Lovelace wrote the first program.\nCLAIM: Ada wrote code.");
/// ```
#[must_use]
pub fn messages(claim: &str, evidence: &[String]) -> Vec<ChatMessage> {
    let evidence = evidence
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    vec![
        ChatMessage::system(NLI_V1.trim_end()),
        ChatMessage::user(format!("EVIDENCE: {evidence}\nCLAIM: {}", claim.trim())),
    ]
}

/// An NLI judge: a generator behind the generation cache, the [`VERSION`] prompt and its
/// parse.
pub struct NliJudge {
    once: GenerateOnce,
    max_new_tokens: u32,
    fingerprint: String,
}

/// What the judge said of one (claim, evidence) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The parsed label and score.
    pub judgement: Judgement,
    /// True when the answer held no label (counted as NEUTRAL, 0).
    pub parse_failed: bool,
    /// The judge's raw answer.
    pub completion: String,
    /// Whether the answer came from the cache (no model call here).
    pub cached: bool,
}

impl NliJudge {
    /// A judge on `generator`, answering in at most `max_new_tokens`.
    pub fn new(generator: Arc<dyn Generator>, max_new_tokens: u32) -> Self {
        let fingerprint = Self::fingerprint_of(generator.fingerprint());
        NliJudge {
            once: GenerateOnce::new(generator),
            max_new_tokens,
            fingerprint,
        }
    }

    /// The model's fingerprint joined with the prompt's version: a new prompt judges
    /// again, as new weights do.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The fingerprint of a judge on a generator with this fingerprint (what planning
    /// puts into an AFC job without loading the judge).
    #[must_use]
    pub fn fingerprint_of(generator_fingerprint: &str) -> String {
        format!("{generator_fingerprint}+{VERSION}")
    }

    /// How many judgements a caller should keep in flight: as many as the generator's
    /// endpoint takes.
    pub fn max_in_flight(&self) -> usize {
        self.once.generator().max_in_flight()
    }

    /// The request that asks about `claim` against `evidence`.
    pub fn request(&self, claim: &str, evidence: &[String]) -> ChatRequest {
        ChatRequest {
            messages: messages(claim, evidence),
            max_new_tokens: self.max_new_tokens,
        }
    }

    /// The judgement of `claim` against `evidence`: from the cache, or asked here (once,
    /// whoever else asks at the same time).
    pub async fn judge(
        &self,
        cache: &dyn GenerationCache,
        claim: &str,
        evidence: &[String],
    ) -> Result<Judged, OnceError> {
        let generated = self
            .once
            .generate(cache, VERSION, &self.request(claim, evidence))
            .await?;
        let parsed = parse(&generated.text);
        Ok(Judged {
            judgement: parsed.judgement,
            parse_failed: parsed.parse_failed,
            completion: generated.text,
            cached: generated.cached,
        })
    }
}

/// A parsed answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParsedJudgement {
    /// The label and score (NEUTRAL, 0 when unparsable).
    pub judgement: Judgement,
    /// True when the answer held no label.
    pub parse_failed: bool,
}

/// Parses the judge's completion.
///
/// ```
/// use credence_worker::llm::nli;
/// use credence_core::afc::NliLabel;
/// let p = nli::parse("<think>the evidence says so</think>\nSUPPORT 0.85");
/// assert_eq!((p.judgement.label, p.judgement.score, p.parse_failed), (NliLabel::Support, 0.85, false));
/// let p = nli::parse("Label: contradict");
/// assert_eq!((p.judgement.label, p.judgement.score), (NliLabel::Contradict, -1.0));
/// assert!(nli::parse("I cannot tell.").parse_failed);
/// ```
#[must_use]
pub fn parse(completion: &str) -> ParsedJudgement {
    let answer = super::prompt::answer_text(completion);
    match first_label(&answer) {
        Some((label, rest)) => ParsedJudgement {
            judgement: match first_number(rest) {
                Some(score) if (-1.0..=1.0).contains(&score) => Judgement::new(label, score),
                _ => Judgement::from_label(label),
            },
            parse_failed: false,
        },
        None => ParsedJudgement {
            judgement: Judgement::unparsable(),
            parse_failed: true,
        },
    }
}

/// The first label word of `text` (case-insensitive, a whole word; SUPPORTS, SUPPORTED,
/// CONTRADICTS, CONTRADICTED and CONTRADICTION count) and the text after it.
fn first_label(text: &str) -> Option<(NliLabel, &str)> {
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (start, c.is_alphabetic()) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                if let Some(label) = label_of(&text[s..i]) {
                    return Some((label, &text[i..]));
                }
                start = None;
            }
            _ => {}
        }
    }
    None
}

fn label_of(word: &str) -> Option<NliLabel> {
    match word.to_ascii_uppercase().as_str() {
        "SUPPORT" | "SUPPORTS" | "SUPPORTED" => Some(NliLabel::Support),
        "NEUTRAL" => Some(NliLabel::Neutral),
        "CONTRADICT" | "CONTRADICTS" | "CONTRADICTED" | "CONTRADICTION" => {
            Some(NliLabel::Contradict)
        }
        _ => None,
    }
}

/// The first decimal number in `text` (an optional sign, digits, an optional fraction).
fn first_number(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let digit_at = |k: usize| bytes.get(k).is_some_and(u8::is_ascii_digit);
        let starts = digit_at(i) || (bytes[i] == b'.' && digit_at(i + 1));
        if starts {
            let from = if i > 0 && matches!(bytes[i - 1], b'-' | b'+') {
                i - 1
            } else {
                i
            };
            let mut end = i;
            while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
                end += 1;
            }
            // "0.5." at the end of a sentence: the last dot is punctuation.
            let number = text[from..end].trim_end_matches('.');
            return number.parse().ok();
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> (NliLabel, f64, bool) {
        let p = parse(s);
        (p.judgement.label, p.judgement.score, p.parse_failed)
    }

    #[test]
    fn version_names_the_prompt_file() {
        let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("prompts")
            .join(format!("{VERSION}.txt"));
        assert_eq!(std::fs::read_to_string(file).unwrap(), NLI_V1);
    }

    #[test]
    fn answers_in_the_asked_form_and_near_it() {
        use NliLabel::*;
        assert_eq!(parsed("SUPPORT 1"), (Support, 1.0, false));
        assert_eq!(parsed("CONTRADICT -0.6"), (Contradict, -0.6, false));
        assert_eq!(parsed("neutral 0.0"), (Neutral, 0.0, false));
        assert_eq!(parsed("**Supported**, score: .7."), (Support, 0.7, false));
        assert_eq!(
            parsed("```\nCONTRADICTION (-1)\n```"),
            (Contradict, -1.0, false)
        );
        assert_eq!(parsed("Label: SUPPORT\nScore: 0.9"), (Support, 0.9, false));
    }

    #[test]
    fn a_score_out_of_range_or_missing_takes_the_labels_default() {
        use NliLabel::*;
        assert_eq!(parsed("SUPPORT 7"), (Support, 1.0, false));
        assert_eq!(parsed("CONTRADICT 90%"), (Contradict, -1.0, false));
        assert_eq!(parsed("NEUTRAL"), (Neutral, 0.0, false));
    }

    #[test]
    fn no_label_is_neutral_and_counted() {
        assert_eq!(parsed(""), (NliLabel::Neutral, 0.0, true));
        assert_eq!(parsed("Unsupportable 0.9"), (NliLabel::Neutral, 0.0, true));
        assert_eq!(parsed("<think>SUPPORT 1"), (NliLabel::Neutral, 0.0, true));
    }

    #[test]
    fn the_user_turn_holds_the_evidence_then_the_claim() {
        let chat = messages("A claim.", &["One.".into(), "  ".into(), "Two.".into()]);
        assert_eq!(chat.len(), 2);
        assert_eq!(chat[0].content, NLI_V1.trim_end());
        assert_eq!(chat[1].content, "EVIDENCE: One. Two.\nCLAIM: A claim.");
    }
}
