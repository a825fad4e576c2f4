//! What a dataset card records about a benchmark file: counts, references and words per
//! example, categories, and the *marker profile*, the share of examples whose text
//! contains each discourse marker (the paper's auditability check compares these between
//! SocialClaimSplit-100 and WikiSplitBench-1000: because 72% vs 1.2%, but 62% vs 6.9%).
//!
//! A marker is counted once per example, as a whole word between spaces with surrounding
//! punctuation ignored, case-insensitively ("So" and "so," count; "also" and
//! "cat-and-mouse" do not); `;` is counted as a character.

use crate::domain::Example;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

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
    /// Words per text.
    pub words: Spread,
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
    DatasetStats {
        examples: n,
        distinct_texts,
        references: spread(examples.iter().map(|e| e.references.len())),
        words: spread(examples.iter().map(|e| super::word_count(&e.text))),
        categories,
        markers,
    }
}

/// The statistics as the text `credence dataset stats` prints and the cards quote.
pub fn render(stats: &DatasetStats) -> String {
    let mut out = String::new();
    let s = stats;
    // Writing into a String cannot fail.
    let _ = writeln!(
        out,
        "examples      {} ({} distinct texts)",
        s.examples, s.distinct_texts
    );
    let _ = writeln!(
        out,
        "references    {:.2} per example (min {}, max {})",
        s.references.mean, s.references.min, s.references.max
    );
    let _ = writeln!(
        out,
        "words         {:.1} per text (min {}, max {})",
        s.words.mean, s.words.min, s.words.max
    );
    if !s.categories.is_empty() {
        let cats: Vec<String> = s
            .categories
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        let _ = writeln!(out, "categories    {}", cats.join(", "));
    }
    let _ = writeln!(
        out,
        "marker profile (share of examples whose text contains it)"
    );
    for m in &s.markers {
        let _ = writeln!(
            out,
            "  {:<9} {:>6.1}%  ({})",
            m.marker,
            m.share * 100.0,
            m.examples
        );
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
        let text = render(&s);
        assert!(
            text.contains("examples      4 (3 distinct texts)"),
            "{text}"
        );
        assert!(text.contains("  but         50.0%  (2)"), "{text}");
        assert!(text.contains("categories    Sports 1, World 2"), "{text}");
    }
}
