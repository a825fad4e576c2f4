//! ClaimDecompBench-1000 from AG News `test.csv`: a headline and the first sentence of
//! its lead joined into one compound sentence at the coordinator ", and", with the rule
//! oracle's split as references.
//!
//! The pipeline, in order (each step is a line of the build's funnel):
//! 1. clean the escape residue ([`agnews`]) and drop rows with residue or URLs left;
//! 2. keep a headline that is a statement (no `?`, `!` or trailing `:`) and a lead whose
//!    first sentence ends in a full stop (AG leads are often cut off with "...") with its
//!    brackets and quotes paired (a split inside "(503.6 million pounds)" is not a
//!    sentence); join them (the lead's first word is lower-cased when the corpus writes
//!    it lower-case mid-sentence);
//! 3. drop OCR junk (more than 10% single-letter tokens); keep at least 10 words;
//! 4. keep texts the oracle splits into at least 2 claims at the join (its first claim is
//!    the headline: a headline without a verb the oracle recognises is not split there);
//! 5. keep tier-1 `EPR_oracle` of at least 0.80; drop repeated texts;
//! 6. per class, shuffle with the seed and take 250, so each category has exactly 250.
//!
//! Only "and" joins: a headline and its lead report the same event, and "but", "so" or
//! "because" would assert a contrast or a cause that the source does not state.

use super::agnews::{self, CaseCounts, CATEGORIES};
use super::sampling;
use super::{word_count, Benchmark, BenchmarkError, Build, BuildOptions, ReferenceSplitter};
use crate::domain::Example;
use crate::entities::tier1_epr;
use crate::sentences::split_sentences;
use regex::Regex;
use std::collections::HashSet;
use std::path::Path;
use std::sync::LazyLock;

/// Minimum words of the compound sentence.
pub const MIN_WORDS: usize = 10;
/// Minimum tier-1 entity preservation of the oracle split.
pub const MIN_EPR_ORACLE: f64 = 0.80;
/// Maximum share of single-letter tokens.
pub const MAX_SINGLE_CHAR_RATIO: f64 = 0.10;
/// Examples per category.
pub const PER_CATEGORY: usize = 250;

static RESIDUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"&[a-zA-Z]+;|#\d+;|\bquot;|https?:|www\.|[<>\\]").expect("residue pattern compiles")
});

/// The compound sentence of a headline and a lead sentence.
pub fn compose(title: &str, lead: &str) -> String {
    format!("{title}, and {lead}")
}

struct Candidate {
    line: usize,
    class: usize,
    text: String,
    references: Vec<String>,
    epr: f64,
}

/// Builds ClaimDecompBench-1000.
pub fn build(
    path: &Path,
    options: &BuildOptions,
    oracle: &dyn ReferenceSplitter,
) -> Result<Build, BenchmarkError> {
    let records = agnews::read(path)?;
    let mut built = Build {
        examples: Vec::new(),
        funnel: Vec::new(),
    };
    built.step(
        format!(
            "rows of {}",
            path.file_name().unwrap_or_default().to_string_lossy()
        ),
        records.len(),
    );
    let cleaned: Vec<(usize, usize, String, String)> = records
        .iter()
        .map(|r| {
            (
                r.line,
                r.class,
                agnews::clean_title(&r.title),
                agnews::clean_description(&r.description),
            )
        })
        .collect();
    let cases = CaseCounts::from_texts(cleaned.iter().map(|c| c.3.as_str()));
    let cleaned: Vec<_> = cleaned
        .into_iter()
        .filter(|(_, _, t, d)| !RESIDUE.is_match(t) && !RESIDUE.is_match(d))
        .collect();
    built.step(
        "no escape residue or URL left after clean-up",
        cleaned.len(),
    );

    let joined: Vec<(usize, usize, String, String)> = cleaned
        .into_iter()
        .filter_map(|(line, class, title, description)| {
            let lead = split_sentences(&description).into_iter().next()?;
            let statement = title.split_whitespace().count() >= 2
                && !title.ends_with(['?', '!', ':'])
                && lead.ends_with('.')
                && !lead.ends_with("..")
                && lead.matches('(').count() == lead.matches(')').count()
                && lead.matches('"').count() % 2 == 0;
            statement.then(|| {
                let text = compose(&title, &cases.lowercase_first_word(lead));
                (line, class, title, text)
            })
        })
        .collect();
    built.step(
        "headline is a statement and the lead's first sentence is complete (full stop, brackets and quotes paired); joined with \", and\"",
        joined.len(),
    );
    let joined: Vec<_> = joined
        .into_iter()
        .filter(|(_, _, _, text)| agnews::single_char_ratio(text) <= MAX_SINGLE_CHAR_RATIO)
        .collect();
    built.step(
        format!("OCR junk removed: single-letter tokens <= {MAX_SINGLE_CHAR_RATIO}"),
        joined.len(),
    );
    let joined: Vec<_> = joined
        .into_iter()
        .filter(|(_, _, _, text)| word_count(text) >= MIN_WORDS)
        .collect();
    built.step(format!(">= {MIN_WORDS} words"), joined.len());
    let split: Vec<Candidate> = joined
        .into_iter()
        .filter_map(|(line, class, title, text)| {
            let references = oracle.split(&text);
            let splits_at_join = references.len() >= 2
                && references[0].trim_end_matches('.') == title.trim_end_matches('.');
            splits_at_join.then(|| Candidate {
                line,
                class,
                epr: tier1_epr(&text, &references),
                text,
                references,
            })
        })
        .collect();
    built.step(
        format!(
            "the rule oracle ({}) splits it into >= 2 claims, the first being the headline",
            oracle.name()
        ),
        split.len(),
    );
    let split: Vec<Candidate> = split
        .into_iter()
        .filter(|c| c.epr >= MIN_EPR_ORACLE)
        .collect();
    built.step(
        format!("tier-1 regex EPR_oracle >= {MIN_EPR_ORACLE}"),
        split.len(),
    );
    let mut seen = HashSet::new();
    let split: Vec<Candidate> = split
        .into_iter()
        .filter(|c| seen.insert(c.text.clone()))
        .collect();
    built.step("first occurrence of each text", split.len());

    let mut picked: Vec<Candidate> = Vec::with_capacity(PER_CATEGORY * CATEGORIES.len());
    let mut by_class: Vec<Vec<Candidate>> = (0..CATEGORIES.len()).map(|_| Vec::new()).collect();
    for c in split {
        by_class[c.class - 1].push(c);
    }
    for (k, mut candidates) in by_class.into_iter().enumerate() {
        built.step(format!("eligible in {}", CATEGORIES[k]), candidates.len());
        if candidates.len() < PER_CATEGORY {
            return Err(BenchmarkError::TooFew {
                benchmark: Benchmark::ClaimDecomp1000,
                path: path.to_path_buf(),
                wanted: PER_CATEGORY,
                eligible: candidates.len(),
            });
        }
        sampling::shuffle(
            &mut sampling::stream(options.seed, k as u64 + 1),
            &mut candidates,
        );
        picked.extend(candidates.into_iter().take(PER_CATEGORY));
    }
    picked.sort_by_key(|c| c.line);
    built.step(
        format!(
            "{PER_CATEGORY} per category, shuffled with seed {} (stream 1 + class)",
            options.seed
        ),
        picked.len(),
    );
    built.examples = picked
        .into_iter()
        .map(|c| {
            let mut meta = serde_json::Map::new();
            meta.insert("source".into(), "ag_news/test.csv".into());
            meta.insert("line".into(), c.line.into());
            meta.insert("category".into(), CATEGORIES[c.class - 1].into());
            meta.insert("coordinator".into(), "and".into());
            meta.insert("oracle".into(), oracle.name().into());
            meta.insert("epr_oracle".into(), round4(c.epr).into());
            Example {
                id: format!("agnews-test-{}", c.line),
                text: c.text,
                references: c.references,
                meta,
            }
        })
        .collect();
    Ok(built)
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residue_pattern_catches_leftovers_only() {
        for bad in [
            "a &lt;b",
            "x #39;s",
            "see http://x",
            "www.x.org",
            "a\\b",
            "x quot; y",
        ] {
            assert!(RESIDUE.is_match(bad), "{bad}");
        }
        for good in ["AT&T rose 5% on Friday.", "No. 1 seed", "R&D spending"] {
            assert!(!RESIDUE.is_match(good), "{good}");
        }
    }

    #[test]
    fn composes_headline_and_lead() {
        assert_eq!(
            compose("Company Wins Grant", "a company won a grant."),
            "Company Wins Grant, and a company won a grant."
        );
    }
}
