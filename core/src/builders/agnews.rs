//! The AG News corpus (Zhang et al. 2015) as ClaimDecompBench reads it: the CSV reader
//! (`"class","title","description"`, RFC 4180 quoting, one record per line) and the
//! clean-up of the corpus's escape residue (HTML entities that lost their `&`, such as
//! ` #36;` and ` quot;`, ticker tags `&lt;TXN.N&gt;`, backslashes standing for line
//! breaks, `\$`), source tags on titles ("(AP)") and datelines on descriptions
//! ("NEW YORK (Reuters) - ").

use super::{line_error, read_source, BenchmarkError};
use regex::Regex;
use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

/// The four classes, by class index 1..=4 (the corpus's `classes.txt`).
pub const CATEGORIES: [&str; 4] = ["World", "Sports", "Business", "Sci/Tech"];

/// One record of the CSV, as written in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// 1-based line in the file.
    pub line: usize,
    /// Class index 1..=4.
    pub class: usize,
    /// The headline.
    pub title: String,
    /// The lead paragraph.
    pub description: String,
}

impl Record {
    /// The class name ([`CATEGORIES`]).
    pub fn category(&self) -> &'static str {
        CATEGORIES[self.class - 1]
    }
}

/// Reads every record; a malformed line is an error naming it.
pub fn read(path: &Path) -> Result<Vec<Record>, BenchmarkError> {
    let text = read_source(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let fields = parse_csv_line(line).map_err(|m| line_error(path, line_no, m))?;
        let [class, title, description]: [String; 3] = fields.try_into().map_err(|f: Vec<_>| {
            line_error(
                path,
                line_no,
                format!(
                    "expected 3 columns (class index, title, description), found {}",
                    f.len()
                ),
            )
        })?;
        let class = class
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|c| (1..=4).contains(c))
            .ok_or_else(|| {
                line_error(
                    path,
                    line_no,
                    format!("column 1 (class index) {class:?} is not 1, 2, 3 or 4"),
                )
            })?;
        out.push(Record {
            line: line_no,
            class,
            title,
            description,
        });
    }
    Ok(out)
}

/// Splits one CSV line into fields: each field is quoted (internal quotes doubled) or
/// holds no quote at all.
pub(crate) fn parse_csv_line(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.char_indices().peekable();
    loop {
        let column = fields.len() + 1;
        let mut field = String::new();
        if chars.peek().is_some_and(|&(_, c)| c == '"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("column {column}: quoted field is not closed")),
                    Some((_, '"')) if chars.peek().is_some_and(|&(_, c)| c == '"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some((_, '"')) => break,
                    Some((_, c)) => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some((_, ',')) => fields.push(field),
                Some((at, c)) => {
                    return Err(format!(
                    "column {column}: {c:?} after the closing quote at byte {}; expected a comma",
                    at + 1
                ))
                }
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some((_, ',')) => break,
                    Some((at, '"')) => {
                        return Err(format!(
                            "column {column}: stray quote at byte {} in an unquoted field",
                            at + 1
                        ))
                    }
                    Some((_, c)) => field.push(c),
                }
            }
            fields.push(field);
        }
    }
}

static ENTITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\s?&?(?:#(?P<code>\d{2,4})|(?P<name>quot|amp|apos|nbsp));")
        .expect("entity pattern compiles")
});
static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s*(?:&lt;|<).*?(?:&gt;|>)").expect("tag pattern compiles"));
static TITLE_SOURCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\s*\((?:[^()\s]+\s?){1,4}\)\s*$").expect("title source pattern compiles")
});
static DATELINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?P<head>.{1,60}?)\s+--?\s+").expect("dateline pattern compiles")
});

/// Undoes the corpus's escape residue and normalises spacing.
pub fn clean(text: &str) -> String {
    let text = ENTITY.replace_all(text, |caps: &regex::Captures<'_>| {
        let c = match (caps.name("code"), caps.name("name")) {
            (Some(code), _) => match code.as_str().parse::<u32>().unwrap_or(0) {
                145 | 146 => Some('\''),
                147 | 148 => Some('"'),
                150 => Some('\u{2013}'),
                151 => Some('\u{2014}'),
                160 => Some(' '),
                n => char::from_u32(n).filter(|c| !c.is_control()),
            },
            (None, Some(name)) => match name.as_str() {
                "quot" => Some('"'),
                "amp" => Some('&'),
                "apos" => Some('\''),
                _ => Some(' '),
            },
            (None, None) => None,
        };
        c.map(String::from).unwrap_or_default()
    });
    // The em dash stood between words: keep a space on its right as on its left.
    let text = text.replace(" \u{2014}", " \u{2014} ");
    let text = TAG.replace_all(&text, "");
    let text = text.replace("\\$", "$").replace('\\', " ");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A cleaned headline without its trailing source tag ("(AP)", "(Update1)") or full stop.
pub fn clean_title(title: &str) -> String {
    let t = clean(title);
    let t = TITLE_SOURCE.replace(t.trim_end_matches('.'), "");
    t.trim().trim_end_matches('.').trim().to_string()
}

/// A cleaned lead paragraph without its datelines ("SPACE.com - TORONTO, Canada -- ").
pub fn clean_description(description: &str) -> String {
    let mut d = clean(description);
    for _ in 0..2 {
        let Some(caps) = DATELINE.captures(&d) else {
            break;
        };
        let head = &caps["head"];
        let words: Vec<&str> = head.split_whitespace().collect();
        let dateline_word = |w: &&str| {
            w.chars()
                .next()
                .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit() || c == '(')
                || w.contains(".com")
        };
        if words.len() > 8 || !words.iter().all(dateline_word) {
            break;
        }
        d = d[caps[0].len()..].to_string();
    }
    d
}

/// Share of word tokens that are a single letter other than "a", "A" and "I": high in
/// text mangled by OCR or by lost characters ("Turner   Newall", "T N").
pub fn single_char_ratio(text: &str) -> f64 {
    let words: Vec<&str> = text
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    if words.is_empty() {
        return 0.0;
    }
    let single = words
        .iter()
        .filter(|w| {
            let mut cs = w.chars();
            matches!((cs.next(), cs.next()), (Some(c), None) if c.is_alphabetic() && !matches!(c, 'a' | 'A' | 'I'))
        })
        .count();
    single as f64 / words.len() as f64
}

/// How often each word is written lower-case and capitalised inside sentences of the
/// corpus: decides whether a lead's first word is a common word to lower-case after a
/// coordinator ("A company ..." -> "and a company ...") or a name to keep ("Apple").
#[derive(Debug, Default)]
pub struct CaseCounts {
    counts: HashMap<String, (u32, u32)>,
}

impl CaseCounts {
    /// Counts the words of `texts` that do not start a sentence.
    pub fn from_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut counts: HashMap<String, (u32, u32)> = HashMap::new();
        for text in texts {
            let mut prev: Option<&str> = None;
            for w in text.split_whitespace() {
                let sentence_start =
                    prev.is_none_or(|p| p.ends_with(['.', '!', '?', ':', '"', '-']));
                prev = Some(w);
                let word = w.trim_matches(|c: char| !c.is_alphanumeric());
                let Some(first) = word.chars().next() else {
                    continue;
                };
                if sentence_start || !first.is_alphabetic() {
                    continue;
                }
                let entry = counts.entry(word.to_lowercase()).or_default();
                if first.is_lowercase() {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                }
            }
        }
        CaseCounts { counts }
    }

    /// `sentence` with its first word lower-cased when that word is more often written
    /// lower-case than capitalised inside sentences (acronyms and "I" are kept).
    pub fn lowercase_first_word(&self, sentence: &str) -> String {
        let Some(first) = sentence.split_whitespace().next() else {
            return sentence.to_string();
        };
        let word = first.trim_matches(|c: char| !c.is_alphanumeric());
        let capitals = word.chars().filter(|c| c.is_uppercase()).count();
        let (lower, upper) = self
            .counts
            .get(&word.to_lowercase())
            .copied()
            .unwrap_or((0, 0));
        if word == "I" || capitals != 1 || lower <= upper || !sentence.starts_with(word) {
            return sentence.to_string();
        }
        let mut chars = sentence.chars();
        let mut out: String = chars
            .next()
            .into_iter()
            .flat_map(char::to_lowercase)
            .collect();
        out.push_str(chars.as_str());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_csv_and_names_bad_lines() {
        assert_eq!(
            parse_csv_line(r#""3","Say ""hi""","a, b""#).unwrap(),
            ["3", "Say \"hi\"", "a, b"]
        );
        assert_eq!(parse_csv_line("1,x,").unwrap(), ["1", "x", ""]);
        assert!(parse_csv_line(r#""3","open"#)
            .unwrap_err()
            .contains("column 2: quoted field is not closed"));
        assert!(parse_csv_line(r#""3"x,"y""#)
            .unwrap_err()
            .contains("column 1: 'x' after the closing quote"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("test.csv");
        std::fs::write(&path, "\"1\",\"t\",\"d\"\n\"7\",\"t\",\"d\"\n").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.ends_with("test.csv:2: column 1 (class index) \"7\" is not 1, 2, 3 or 4"),
            "{e}"
        );
        std::fs::write(&path, "\"1\",\"t\"\n").unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.ends_with(
                "test.csv:1: expected 3 columns (class index, title, description), found 2"
            ),
            "{e}"
        );
    }

    #[test]
    fn cleans_escape_residue() {
        let cases = [
            (
                r"A second\team of rocketeers competing for the  #36;10 million prize",
                "A second team of rocketeers competing for the $10 million prize",
            ),
            (
                "In  quot;helping themselves, quot; Ricky did nothing",
                "In \"helping themselves,\" Ricky did nothing",
            ),
            ("the firm #39;s RealPlayer", "the firm's RealPlayer"),
            (
                "Texas Instruments Inc. &lt;TXN.N&gt;, and Broadcom",
                "Texas Instruments Inc., and Broadcom",
            ),
            (r"a record \$US46.75 a barrel", "a record $US46.75 a barrel"),
            ("with them  #151; online", "with them \u{2014} online"),
        ];
        for (raw, want) in cases {
            assert_eq!(clean(raw), want);
        }
    }

    #[test]
    fn strips_source_tags_and_datelines() {
        assert_eq!(
            clean_title("Ky. Company Wins Grant to Study Peptides (AP)"),
            "Ky. Company Wins Grant to Study Peptides"
        );
        assert_eq!(
            clean_title("Thai Airways Profit Falls (Update3)."),
            "Thai Airways Profit Falls"
        );
        assert_eq!(
            clean_description("SPACE.com - TORONTO, Canada -- A second\\team of rocketeers"),
            "A second team of rocketeers"
        );
        assert_eq!(
            clean_description(" NEW YORK (Reuters) - Stocks rose on Friday."),
            "Stocks rose on Friday."
        );
        assert_eq!(
            clean_description("AL-FASHER, Sudan (AP) - Security has improved."),
            "Security has improved."
        );
        assert_eq!(
            clean_description("Sales grew - slowly - in the third quarter."),
            "Sales grew - slowly - in the third quarter."
        );
    }

    #[test]
    fn single_letter_ratio_and_case_counts() {
        assert!((single_char_ratio("Fears for T N pension after talks") - 2.0 / 7.0).abs() < 1e-12);
        assert_eq!(single_char_ratio("I saw a cat."), 0.0);
        let counts = CaseCounts::from_texts([
            "The unions said that unions and Apple talked. Unions met Apple.",
            "Workers at Apple joined unions.",
        ]);
        assert_eq!(counts.lowercase_first_word("Unions met."), "unions met.");
        assert_eq!(counts.lowercase_first_word("Apple met."), "Apple met.");
        assert_eq!(counts.lowercase_first_word("NASA met."), "NASA met.");
    }
}
