//! Sentence boundaries without a model: terminal punctuation followed by whitespace and a
//! capital, digit, quote or bracket, with abbreviations, initials and decimals kept whole.
//! The `sentence-split` baseline and the benchmark builders share it; the parse-based
//! sentence boundaries of the NLP pipeline live in the worker.

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
