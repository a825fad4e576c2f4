//! The sentence-splitter baseline: one claim per sentence, no model. The paper's baseline
//! uses spaCy's senter; this is a rule splitter (terminal punctuation followed by space
//! and a capital, digit or quote, with abbreviations and initials kept whole).

use super::{as_claim, DecomposeError, Decomposer, Decomposition};
use async_trait::async_trait;

/// Words after whose full stop a sentence does not end.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "gen", "gov", "sen", "rep",
    "rev", "col", "lt", "sgt", "capt", "cmdr", "inc", "ltd", "co", "corp", "bros", "no", "vs",
    "etc", "e.g", "i.e", "approx", "dept", "est", "fig", "jan", "feb", "mar", "apr", "jun", "jul",
    "aug", "sep", "sept", "oct", "nov", "dec", "u.s", "u.k", "u.n", "a.m", "p.m",
];

/// Splits text into sentences (byte ranges trimmed of surrounding space).
pub fn split_sentences(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        if matches!(c, '.' | '!' | '?') {
            // Take the whole run of terminators and closing quotes/brackets.
            let mut j = i + 1;
            while j < chars.len()
                && matches!(
                    chars[j].1,
                    '.' | '!' | '?' | '"' | '\'' | ')' | ']' | '\u{201d}' | '\u{2019}'
                )
            {
                j += 1;
            }
            let end = chars.get(j).map_or(text.len(), |&(p, _)| p);
            let followed_by_space = j < chars.len() && chars[j].1.is_whitespace();
            let mut k = j;
            while k < chars.len() && chars[k].1.is_whitespace() {
                k += 1;
            }
            let next_starts = k < chars.len()
                && (chars[k].1.is_uppercase()
                    || chars[k].1.is_ascii_digit()
                    || matches!(chars[k].1, '"' | '\'' | '\u{201c}' | '(' | '@' | '#'));
            if followed_by_space && next_starts && !(c == '.' && is_abbreviation(&text[start..pos]))
            {
                let s = text[start..end].trim();
                if !s.is_empty() {
                    out.push(s);
                }
                start = chars[k].0;
                i = k;
                continue;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    let rest = text[start..].trim();
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Whether the text before a full stop ends with an abbreviation or an initial.
fn is_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || c == '(' || c == '"')
        .next()
        .unwrap_or("");
    let lower = word.to_lowercase();
    let single_initial = word.chars().count() == 1 && word.chars().all(char::is_uppercase);
    single_initial || ABBREVIATIONS.contains(&lower.as_str())
}

/// The sentence-splitter decomposer.
#[derive(Debug, Default, Clone)]
pub struct SentenceSplit;

impl SentenceSplit {
    /// Fingerprint: the algorithm's name and version (no weights).
    pub const FINGERPRINT: &'static str = "sentence-split/v1";

    /// A new splitter.
    pub fn new() -> Self {
        SentenceSplit
    }
}

#[async_trait]
impl Decomposer for SentenceSplit {
    fn fingerprint(&self) -> &str {
        Self::FINGERPRINT
    }

    async fn decompose(&self, sentence: &str) -> Result<Decomposition, DecomposeError> {
        Ok(Decomposition {
            claims: split_sentences(sentence)
                .into_iter()
                .filter_map(as_claim)
                .collect(),
            llm_calls: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_sentence_ends_only() {
        let t = "Dr. Smith met J. K. Rowling in the U.S. on Monday. They talked for 2.5 hours! \"Was it fun?\" Yes.";
        assert_eq!(
            split_sentences(t),
            [
                "Dr. Smith met J. K. Rowling in the U.S. on Monday.",
                "They talked for 2.5 hours!",
                "\"Was it fun?\"",
                "Yes."
            ]
        );
        assert_eq!(
            split_sentences("no terminal punctuation"),
            ["no terminal punctuation"]
        );
        assert!(split_sentences("  ").is_empty());
        assert_eq!(
            split_sentences("It fell 3.5%. Shares rose."),
            ["It fell 3.5%.", "Shares rose."]
        );
    }
}
