//! What a dataset card records about a benchmark file: counts, references, sentences,
//! words and entities per example, categories, and the *marker profile*, the share of
//! examples whose text contains each discourse marker (the paper's auditability check
//! compares these between SocialClaimSplit-100 and WikiSplitBench-1000: because 72% vs
//! 1.2%, but 62% vs 6.9%); and, beside them, what the paper reports about the same
//! benchmark ([`paper_figures`]).
//!
//! A marker is counted once per example, as a whole word between spaces with surrounding
//! punctuation ignored, case-insensitively ("So" and "so," count; "also" and
//! "cat-and-mouse" do not); `;` is counted as a character. Shares are per example, the
//! paper's unit ("because appears in 72% of the examples").

use super::Benchmark;
use crate::domain::Example;
use crate::entities;
use crate::lexicon::REPORTING_VERBS;
use crate::sentences::split_sentences;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

/// Mean gold claims per SocialClaimSplit-100 example in the paper (T 1423).
pub const PAPER_SOCIAL_REFERENCES: f64 = 10.8;
/// Share of SocialClaimSplit-100 examples containing "because" in the paper (T 920).
pub const PAPER_SOCIAL_BECAUSE: f64 = 0.72;
/// Share of SocialClaimSplit-100 examples containing "but" in the paper (T 920).
pub const PAPER_SOCIAL_BUT: f64 = 0.62;

/// The markers of the profile, in report order.
pub const MARKERS: [&str; 11] = [
    "and", "but", "because", "so", "or", "yet", "while", "although", "which", "who", ";",
];

/// How many examples contain one marker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MarkerShare {
    /// The marker word (or `;`).
    pub marker: String,
    /// Examples whose text contains it.
    pub examples: usize,
    /// `examples / total`.
    pub share: f64,
}

/// Minimum, mean and maximum of a per-example count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest value.
    pub min: usize,
    /// Mean.
    pub mean: f64,
    /// Largest value.
    pub max: usize,
}

/// The statistics of a dataset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatasetStats {
    /// Number of examples.
    pub examples: usize,
    /// Number of distinct texts (equal to `examples` when no text repeats).
    pub distinct_texts: usize,
    /// References per example.
    pub references: Spread,
    /// Sentences per text ([`split_sentences`]).
    pub sentences: Spread,
    /// Words per text.
    pub words: Spread,
    /// Tier-1 entities per text (dates, times, numbers, percentages, money;
    /// [`entities::extract`]).
    pub tier1_entities: Spread,
    /// Capitalised word runs per text, a rough stand-in for names (see [`name_runs`]).
    pub name_runs: Spread,
    /// Share of texts holding one of the 27 reporting verbs of Appendix B.
    pub reporting_verb_share: f64,
    /// Examples per `meta.category`, by name (empty when no example has one).
    pub categories: BTreeMap<String, usize>,
    /// The marker profile, in [`MARKERS`] order.
    pub markers: Vec<MarkerShare>,
}

/// Whether `text` contains `marker` (see the module docs).
pub fn contains_marker(text: &str, marker: &str) -> bool {
    if marker == ";" {
        return text.contains(';');
    }
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''))
        .any(|w| w.eq_ignore_ascii_case(marker))
}

/// Runs of capitalised words in `text` (hashtags and @handles aside), a model-free
/// stand-in for named entities: "Kelly Preston starred in The Cat in the Hat" has 3
/// ("Kelly Preston", "The Cat", "Hat"). A one-word run that opens a sentence ("The film
/// ...") is not counted.
pub fn name_runs(text: &str) -> usize {
    let mut runs = 0;
    let mut run = 0;
    let mut run_opens_sentence = false;
    let mut sentence_start = true;
    let close = |run: usize, opens: bool| usize::from(run >= 2 || (run == 1 && !opens));
    for token in text.split_whitespace() {
        let capital = !token.starts_with(['#', '@'])
            && token
                .chars()
                .find(|c| c.is_alphanumeric())
                .is_some_and(char::is_uppercase);
        if capital {
            if run == 0 {
                run_opens_sentence = sentence_start;
            }
            run += 1;
        } else {
            runs += close(run, run_opens_sentence);
            run = 0;
        }
        // A sentence ends after "Fox." but not after the initial "A.".
        let alphanumerics = token.chars().filter(|c| c.is_alphanumeric()).count();
        sentence_start = token.ends_with(['.', '!', '?', ':']) && alphanumerics > 1;
        if sentence_start {
            runs += close(run, run_opens_sentence);
            run = 0;
        }
    }
    runs + close(run, run_opens_sentence)
}

fn spread(values: impl Iterator<Item = usize> + Clone) -> Spread {
    let n = values.clone().count();
    Spread {
        min: values.clone().min().unwrap_or(0),
        mean: if n == 0 {
            0.0
        } else {
            values.clone().sum::<usize>() as f64 / n as f64
        },
        max: values.max().unwrap_or(0),
    }
}

/// Computes the statistics of examples.
pub fn profile(examples: &[Example]) -> DatasetStats {
    let n = examples.len();
    let distinct_texts = examples
        .iter()
        .map(|e| e.text.as_str())
        .collect::<HashSet<_>>()
        .len();
    let mut categories = BTreeMap::new();
    for e in examples {
        if let Some(c) = e.meta.get("category").and_then(|c| c.as_str()) {
            *categories.entry(c.to_string()).or_insert(0) += 1;
        }
    }
    let markers = MARKERS
        .iter()
        .map(|&m| {
            let count = examples
                .iter()
                .filter(|e| contains_marker(&e.text, m))
                .count();
            MarkerShare {
                marker: m.to_string(),
                examples: count,
                share: if n == 0 { 0.0 } else { count as f64 / n as f64 },
            }
        })
        .collect();
    let reporting = examples
        .iter()
        .filter(|e| REPORTING_VERBS.iter().any(|v| contains_marker(&e.text, v)))
        .count();
    DatasetStats {
        examples: n,
        distinct_texts,
        references: spread(examples.iter().map(|e| e.references.len())),
        sentences: spread(examples.iter().map(|e| split_sentences(&e.text).len())),
        words: spread(examples.iter().map(|e| super::word_count(&e.text))),
        tier1_entities: spread(examples.iter().map(|e| entities::extract(&e.text).len())),
        name_runs: spread(examples.iter().map(|e| name_runs(&e.text))),
        reporting_verb_share: if n == 0 {
            0.0
        } else {
            reporting as f64 / n as f64
        },
        categories,
        markers,
    }
}

/// One figure the paper reports, with where (T = line of `paper/credence.tex`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// The value (a share as a fraction, a count or a mean).
    pub value: f64,
    /// Where the paper says it, e.g. "Social-100, T 920".
    pub cite: &'static str,
}

/// What the paper reports about one benchmark, printed beside the rebuild's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PaperFigures {
    /// Mean gold claims (references) per example.
    pub references: Option<Figure>,
    /// Share of examples containing a marker, by marker.
    pub markers: Vec<(&'static str, Figure)>,
    /// Examples per category, by category.
    pub categories: Vec<(&'static str, Figure)>,
    /// Other figures, in words.
    pub notes: Vec<&'static str>,
}

/// The paper's figures for a benchmark (its Social-100 figures for both SocialClaimSplit
/// variants: the paper gives none of the -1000's), or None when it reports none.
pub fn paper_figures(benchmark: Benchmark) -> Option<PaperFigures> {
    let fig = |value, cite| Figure { value, cite };
    match benchmark {
        Benchmark::SocialClaimSplit100 | Benchmark::SocialClaimSplit1000 => Some(PaperFigures {
            references: Some(fig(PAPER_SOCIAL_REFERENCES, "Social-100, T 1423")),
            markers: vec![
                ("because", fig(PAPER_SOCIAL_BECAUSE, "Social-100, T 920")),
                ("but", fig(PAPER_SOCIAL_BUT, "Social-100, T 920")),
            ],
            categories: Vec::new(),
            notes: vec![
                "Social-100 inputs are multi-sentence posts, e.g. \"[...] the vaccine that was \
                 tested on 3,200 volunteers reduced symptoms by 35% in Phase II trials. Samsung \
                 warned [...] Tesla announced [...]\" (T 1599-1602)",
                "claims per example predicted on Social-100: 9.9 CREDENCE-base, 10.9 \
                 FActScore-prompt (Qwen3-8B, T 1423)",
                "zero exact sentence overlap with WikiSplitBench-1000 (T 920-921)",
            ],
        }),
        Benchmark::WikiSplit100 => Some(PaperFigures {
            references: Some(fig(2.0, "two simpler sentences, T 901-902")),
            markers: Vec::new(),
            categories: Vec::new(),
            notes: Vec::new(),
        }),
        Benchmark::WikiSplit1000 => Some(PaperFigures {
            references: Some(fig(2.0, "two simpler sentences, T 901-902")),
            markers: vec![
                ("because", fig(0.012, "Wiki-1000, T 920")),
                ("but", fig(0.069, "Wiki-1000, T 920")),
            ],
            categories: Vec::new(),
            notes: vec![
                "46.2% of examples have a second reference opening with he / she / it / they \
                 (T 1183-1187)",
            ],
        }),
        Benchmark::ClaimDecomp1000 => Some(PaperFigures {
            references: None,
            markers: Vec::new(),
            categories: vec![
                ("World", fig(254.0, "T 938")),
                ("Sports", fig(248.0, "T 938")),
                ("Business", fig(249.0, "T 938")),
                ("Sci/Tech", fig(249.0, "T 938")),
            ],
            notes: Vec::new(),
        }),
        Benchmark::PropSegmentDev => None,
    }
}

/// The statistics as the text `credence dataset stats` prints and the cards quote, with
/// the paper's figures beside them when given.
pub fn render(stats: &DatasetStats, paper: Option<&PaperFigures>) -> String {
    let mut out = String::new();
    let s = stats;
    let beside = |line: String, figure: Option<String>| match figure {
        Some(f) => format!("{line:<52} paper {f}\n"),
        None => format!("{line}\n"),
    };
    let percent = |f: &Figure| format!("{:.1}% ({})", f.value * 100.0, f.cite);
    // Writing into a String cannot fail.
    let _ = writeln!(
        out,
        "examples      {} ({} distinct texts)",
        s.examples, s.distinct_texts
    );
    out += &beside(
        format!(
            "references    {:.2} per example (min {}, max {})",
            s.references.mean, s.references.min, s.references.max
        ),
        paper
            .and_then(|p| p.references.as_ref())
            .map(|f| format!("{:.1} ({})", f.value, f.cite)),
    );
    let _ = writeln!(
        out,
        "sentences     {:.2} per text (min {}, max {})",
        s.sentences.mean, s.sentences.min, s.sentences.max
    );
    let _ = writeln!(
        out,
        "words         {:.1} per text (min {}, max {})",
        s.words.mean, s.words.min, s.words.max
    );
    let _ = writeln!(
        out,
        "entities      {:.2} tier-1 per text (dates, times, numbers, percentages, money; max {})",
        s.tier1_entities.mean, s.tier1_entities.max
    );
    let _ = writeln!(
        out,
        "names         {:.2} capitalised word runs per text (max {})",
        s.name_runs.mean, s.name_runs.max
    );
    let _ = writeln!(
        out,
        "reporting     {:.1}% of texts hold a reporting verb of Appendix B",
        s.reporting_verb_share * 100.0
    );
    if !s.categories.is_empty() {
        let cats: Vec<String> = s
            .categories
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        let paper_cats: Vec<String> = paper
            .map(|p| p.categories.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|(c, f)| format!("{c} {}", f.value))
            .collect();
        out += &beside(
            format!("categories    {}", cats.join(", ")),
            paper
                .and_then(|p| p.categories.first())
                .map(|(_, f)| format!("{} ({})", paper_cats.join(", "), f.cite)),
        );
    }
    let _ = writeln!(
        out,
        "marker profile (share of examples whose text contains it)"
    );
    for m in &s.markers {
        let figure = paper
            .and_then(|p| p.markers.iter().find(|(name, _)| *name == m.marker))
            .map(|(_, f)| percent(f));
        out += &beside(
            format!(
                "  {:<9} {:>6.1}%  ({})",
                m.marker,
                m.share * 100.0,
                m.examples
            ),
            figure,
        );
    }
    for note in paper.map(|p| p.notes.as_slice()).unwrap_or_default() {
        let _ = writeln!(out, "paper: {note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(id: &str, text: &str, refs: usize, category: Option<&str>) -> Example {
        let mut meta = serde_json::Map::new();
        if let Some(c) = category {
            meta.insert("category".into(), c.into());
        }
        Example {
            id: id.into(),
            text: text.into(),
            references: vec!["r".into(); refs],
            meta,
        }
    }

    #[test]
    fn markers_are_whole_words_in_any_case() {
        assert!(contains_marker("So, it rained.", "so"));
        assert!(contains_marker("It rained, so we left", "so"));
        assert!(!contains_marker("It also rained.", "so"));
        assert!(!contains_marker("Andrew sang.", "and"));
        assert!(!contains_marker("a cat-and-mouse drama", "and"));
        assert!(contains_marker("(and then)", "and"));
        assert!(contains_marker("a; b", ";"));
        assert!(!contains_marker("who's there", "who"));
    }

    #[test]
    fn profiles_counts_and_shares() {
        let examples = [
            ex("1", "A rose and B fell because of rain.", 2, Some("World")),
            ex("2", "A rose but B fell.", 2, Some("Sports")),
            ex("3", "A rose but B fell.", 3, Some("World")),
            ex("4", "Just one claim here.", 1, None),
        ];
        let s = profile(&examples);
        assert_eq!(s.examples, 4);
        assert_eq!(s.distinct_texts, 3);
        assert_eq!(
            s.references,
            Spread {
                min: 1,
                mean: 2.0,
                max: 3
            }
        );
        assert_eq!(s.words.min, 4);
        assert_eq!(s.categories.get("World"), Some(&2));
        let share = |m: &str| s.markers.iter().find(|x| x.marker == m).unwrap().share;
        assert_eq!(share("and"), 0.25);
        assert_eq!(share("but"), 0.5);
        assert_eq!(share("because"), 0.25);
        assert_eq!(share("so"), 0.0);
        let text = render(&s, None);
        assert!(
            text.contains("examples      4 (3 distinct texts)"),
            "{text}"
        );
        assert!(text.contains("  but         50.0%  (2)"), "{text}");
        assert!(text.contains("categories    Sports 1, World 2"), "{text}");
        assert!(text.contains("sentences     1.00 per text"), "{text}");
        assert!(!text.contains("paper"), "{text}");
    }

    #[test]
    fn names_are_capitalised_runs() {
        assert_eq!(name_runs("Kelly Preston starred in The Cat in the Hat."), 3);
        assert_eq!(
            name_runs("The film stars Vivica A. Fox. The End Game is on. It is #TIL @Sam"),
            2
        );
        assert_eq!(name_runs("no names here"), 0);
    }

    #[test]
    fn tier1_entities_and_reporting_verbs_are_counted() {
        let examples = [
            ex("1", "Tesla announced a 35% cut on March 3, 2025.", 2, None),
            ex("2", "Nothing to see.", 1, None),
        ];
        let s = profile(&examples);
        assert_eq!(s.tier1_entities.max, 2);
        assert_eq!(s.reporting_verb_share, 0.5);
    }

    #[test]
    fn paper_figures_print_beside_the_profile() {
        let examples = [ex("1", "A rose because B fell. C won but D lost.", 4, None)];
        let s = profile(&examples);
        let paper = paper_figures(Benchmark::SocialClaimSplit100).unwrap();
        let text = render(&s, Some(&paper));
        let line = |start: &str| {
            text.lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no {start:?} in {text}"))
                .to_string()
        };
        assert!(
            line("references").ends_with("paper 10.8 (Social-100, T 1423)"),
            "{text}"
        );
        assert!(
            line("  because").ends_with("paper 72.0% (Social-100, T 920)"),
            "{text}"
        );
        assert!(line("  but").contains("100.0%  (1)"), "{text}");
        assert!(line("  but").ends_with("paper 62.0% (Social-100, T 920)"));
        assert!(!line("  and").contains("paper"));
        assert!(text.contains("paper: Social-100 inputs are multi-sentence posts"));
        assert!(paper_figures(Benchmark::PropSegmentDev).is_none());
    }
}
