//! WikiSplitBench-100 / -1000 from WikiSplit's `test.tsv` (Botha et al. 2018): a compound
//! Wikipedia sentence and the two sentences an editor split it into.
//!
//! Each row is `unsplit \t split1 <::::> split2 [\t score]`, tokenised on punctuation.
//! The builder undoes the tokenisation ([`detokenize`]), keeps rows whose split sentences
//! each have at least 5 word tokens, drops repeated sentences, shuffles the survivors with
//! the seed and takes the first 100 (WikiSplitBench-100) or the next 1,000
//! (WikiSplitBench-1000): the two are disjoint by construction. An optional third column
//! holds an entailment score (the paper's WikiSplit++ filter, which this corpus lacks);
//! when present, rows below `min_entailment` are dropped.

use super::sampling;
use super::{
    line_error, read_source, word_count, Benchmark, BenchmarkError, Build, BuildOptions, Slice,
};
use crate::domain::Example;
use std::collections::HashSet;
use std::path::Path;

/// Minimum word tokens of each split sentence.
pub const MIN_SPLIT_WORDS: usize = 5;

/// One parsed row of the TSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// 1-based line in the file.
    pub line: usize,
    /// The unsplit sentence, detokenised.
    pub unsplit: String,
    /// The split sentences, detokenised.
    pub splits: Vec<String>,
    /// Word tokens (after detokenising) of the shortest split sentence.
    pub min_split_words: usize,
    /// The optional entailment score.
    pub score: Option<f64>,
}

/// Reads and parses every row; a malformed row is an error naming its line.
pub fn read(path: &Path) -> Result<Vec<Row>, BenchmarkError> {
    let text = read_source(path)?;
    let mut rows = Vec::new();
    let mut columns: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let cols: Vec<&str> = line.split('\t').collect();
        if !(2..=3).contains(&cols.len()) {
            return Err(line_error(
                path,
                line_no,
                format!(
                    "expected 2 tab-separated columns (unsplit, split) and an optional score, found {}",
                    cols.len()
                ),
            ));
        }
        match columns {
            None => columns = Some(cols.len()),
            Some(n) if n != cols.len() => {
                return Err(line_error(
                    path,
                    line_no,
                    format!(
                        "{} columns where line 1 has {n}: the score column must be on every row or none",
                        cols.len()
                    ),
                ))
            }
            Some(_) => {}
        }
        if cols[0].trim().is_empty() {
            return Err(line_error(
                path,
                line_no,
                "column 1 (unsplit sentence) is empty",
            ));
        }
        let parts: Vec<&str> = cols[1].split("<::::>").map(str::trim).collect();
        if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
            return Err(line_error(
                path,
                line_no,
                "column 2 must hold two or more non-empty sentences separated by \" <::::> \"",
            ));
        }
        let score = match cols.get(2) {
            None => None,
            Some(s) => Some(
                s.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| {
                        line_error(
                            path,
                            line_no,
                            format!("column 3 (score) {s:?} is not a number"),
                        )
                    })?,
            ),
        };
        let splits: Vec<String> = parts.iter().map(|p| detokenize(p)).collect();
        rows.push(Row {
            line: line_no,
            unsplit: detokenize(cols[0]),
            min_split_words: splits.iter().map(|p| word_count(p)).min().unwrap_or(0),
            splits,
            score,
        });
    }
    Ok(rows)
}

/// Builds WikiSplitBench-100 or -1000.
pub fn build(path: &Path, options: &BuildOptions, slice: Slice) -> Result<Build, BenchmarkError> {
    let rows = read(path)?;
    let mut built = Build {
        examples: Vec::new(),
        funnel: Vec::new(),
    };
    built.step(format!("rows of {}", file_name(path)), rows.len());
    let rows: Vec<Row> = rows
        .into_iter()
        .filter(|r| r.score.is_none_or(|s| s >= options.min_entailment))
        .collect();
    built.step(
        format!(
            "entailment score >= {} (rows without a score column are all kept)",
            options.min_entailment
        ),
        rows.len(),
    );
    let rows: Vec<Row> = rows
        .into_iter()
        .filter(|r| r.splits.len() == 2 && r.min_split_words >= MIN_SPLIT_WORDS)
        .collect();
    built.step(
        format!("exactly 2 split sentences, each with >= {MIN_SPLIT_WORDS} word tokens"),
        rows.len(),
    );
    let mut seen = HashSet::new();
    let mut rows: Vec<Row> = rows
        .into_iter()
        .filter(|r| seen.insert(r.unsplit.clone()))
        .collect();
    built.step("first occurrence of each unsplit sentence", rows.len());

    sampling::shuffle(&mut sampling::stream(options.seed, 0), &mut rows);
    let benchmark = match slice {
        Slice::First100 => Benchmark::WikiSplit100,
        Slice::Next1000 => Benchmark::WikiSplit1000,
    };
    let range = slice.checked(benchmark, path, rows.len())?;
    let mut picked: Vec<Row> = rows[range].to_vec();
    picked.sort_by_key(|r| r.line);
    built.step(
        format!(
            "shuffled with seed {}; positions {:?}",
            options.seed,
            slice.range()
        ),
        picked.len(),
    );
    built.examples = picked
        .into_iter()
        .map(|r| {
            let mut meta = serde_json::Map::new();
            meta.insert("source".into(), "wikisplit/test.tsv".into());
            meta.insert("line".into(), r.line.into());
            if let Some(s) = r.score {
                meta.insert("entailment".into(), s.into());
            }
            Example {
                id: format!("wikisplit-test-{}", r.line),
                text: r.unsplit,
                references: r.splits,
                meta,
            }
        })
        .collect();
    Ok(built)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Tokens that attach to the word before them.
const NO_SPACE_BEFORE: &[&str] = &[
    ",", ".", ";", ":", "?", "!", "%", ")", "]", "}", "'s", "'S", "n't", "'re", "'ve", "'ll", "'d",
    "'m", "...",
];

/// Tokens that attach to the word after them.
const NO_SPACE_AFTER: &[&str] = &["(", "[", "{", "$", "£", "€", "¥", "#"];

/// Undoes WikiSplit's tokenisation: punctuation and clitics attach to the word before
/// (`word ,` -> `word,`, `band 's` -> `band's`), brackets and currency signs to the word
/// after, `` `` `` / `''` / `"` become straight double quotes that alternate open / close
/// (a run of them counts as one), `' s` is `'s`, a lone `'` is a possessive after a word ending in s
/// ("players '") unless a single quote is open, else an opening or closing quote, a ` - `
/// between two words is a hyphen (`two - track` -> `two-track`: WikiSplit writes dashes as
/// ` -- `), and a word prefix such as `mid-` joins the next word.
pub fn detokenize(tokenised: &str) -> String {
    let mut tokens: Vec<&str> = Vec::new();
    for t in tokenised.split_whitespace() {
        let is_dq = |x: &str| matches!(x, "''" | "``" | "\"");
        if is_dq(t) && tokens.last().is_some_and(|p| is_dq(p)) {
            continue;
        }
        // `'' Labrador '' ' s` is a split possessive.
        if t == "s" && tokens.last() == Some(&"'") {
            tokens.pop();
            tokens.push("'s");
            continue;
        }
        tokens.push(t);
    }
    let mut out = String::with_capacity(tokenised.len());
    // Whether the next token attaches to what is already written.
    let mut glue_next = true;
    let mut double_open = false;
    let mut single_open = false;
    for (i, &tok) in tokens.iter().enumerate() {
        let next_is_word = tokens
            .get(i + 1)
            .is_some_and(|n| n.chars().next().is_some_and(char::is_alphanumeric));
        let (text, attach_before, attach_after) = match tok {
            "``" | "''" | "\"" => {
                let opening = tok == "``" || !double_open;
                double_open = opening;
                ("\"", !opening, opening)
            }
            "'" => {
                let prev_ends_s = i
                    .checked_sub(1)
                    .and_then(|j| tokens.get(j))
                    .is_some_and(|p| p.ends_with(['s', 'S']));
                if single_open {
                    single_open = false;
                    ("'", true, false)
                } else if prev_ends_s {
                    ("'", true, false)
                } else {
                    single_open = true;
                    ("'", false, true)
                }
            }
            "-" if next_is_word
                && i.checked_sub(1)
                    .and_then(|j| tokens.get(j))
                    .is_some_and(|p| p.chars().last().is_some_and(char::is_alphanumeric)) =>
            {
                ("-", true, true)
            }
            t if NO_SPACE_BEFORE.contains(&t) => (t, true, false),
            t if NO_SPACE_AFTER.contains(&t) => (t, false, true),
            t if t.len() > 1
                && t.ends_with('-')
                && t[..t.len() - 1].chars().all(char::is_alphabetic)
                && next_is_word =>
            {
                (t, false, true)
            }
            t => (t, false, false),
        };
        if !(glue_next || attach_before) {
            out.push(' ');
        }
        out.push_str(text);
        glue_next = attach_after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detokenizes_wikisplit_spacing() {
        let cases = [
            (
                "' Eden Black ' was grown from seed in the late 1980s by Stephen Morley , under his conditions it produces pitchers .",
                "'Eden Black' was grown from seed in the late 1980s by Stephen Morley, under his conditions it produces pitchers.",
            ),
            (
                "It tells the story of the making of '' Bandolier '' in the band 's own words , including an interview .",
                "It tells the story of the making of \"Bandolier\" in the band's own words, including an interview.",
            ),
            (
                "'' '' New York Mining Disaster 1941 '' '' was released ( in 1967 ) for $ 5 ; it did n't chart , but '' Labrador '' ' s did .",
                "\"New York Mining Disaster 1941\" was released (in 1967) for $5; it didn't chart, but \"Labrador\"'s did.",
            ),
            (
                "The players ' union grew 5 % in the mid- 1990s -- a two - track record : `` wow '' !",
                "The players' union grew 5% in the mid-1990s -- a two-track record: \"wow\"!",
            ),
        ];
        for (tokenised, want) in cases {
            assert_eq!(detokenize(tokenised), want);
        }
    }

    fn write(content: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("test.tsv");
        std::fs::write(&path, content).unwrap();
        (dir, path)
    }

    #[test]
    fn malformed_rows_name_the_line() {
        let good = "A b c d e , f g h i j .\tA b c d e . <::::> F g h i j .\n";
        let cases = [
            ("no tab here\n", ":2: expected 2 tab-separated columns"),
            (
                "x\ty\n",
                ":2: column 2 must hold two or more non-empty sentences",
            ),
            ("x\ta <::::> b\t0.9\n", ":2: 3 columns where line 1 has 2"),
            ("\ta <::::> b\n", ":2: column 1 (unsplit sentence) is empty"),
        ];
        for (bad, want) in cases {
            let (_dir, path) = write(&format!("{good}{bad}"));
            let e = read(&path).unwrap_err().to_string();
            assert!(e.contains(&format!("test.tsv{want}")), "{e}");
        }
        let (_dir, path) = write("x\ta <::::> b\tnope\n");
        let e = read(&path).unwrap_err().to_string();
        assert!(
            e.ends_with("test.tsv:1: column 3 (score) \"nope\" is not a number"),
            "{e}"
        );
    }

    #[test]
    fn score_column_filters_rows() {
        let mut content = String::new();
        for i in 0..1200 {
            let score = if i % 2 == 0 { 0.95 } else { 0.5 };
            content.push_str(&format!(
                "Row {i} has five words , and more words here .\tRow {i} has five words here . <::::> And more words here too .\t{score}\n"
            ));
        }
        let (_dir, path) = write(&content);
        let opts = BuildOptions::default();
        let e = build(&path, &opts, Slice::Next1000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("only 600 candidates"), "{e}");
        let built = build(&path, &opts, Slice::First100).unwrap();
        assert_eq!(built.examples.len(), 100);
        assert!(built
            .examples
            .iter()
            .all(|e| e.meta["entailment"].as_f64() == Some(0.95)));
        assert_eq!(built.funnel[1].remaining, 600);
    }
}
