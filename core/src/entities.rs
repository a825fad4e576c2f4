//! Tier-1 entities: the regex extractor for dates, times, numbers, percentages and money
//! (PAPER.md "Verifier", Eq. EPR Tier 1), and the entity preservation rate computed on
//! them. The verifier adds tier 2 (spaCy NER) on top; ClaimDecompBench's
//! `EPR_oracle >= 0.80` filter uses tier 1 alone, as the paper says.
//!
//! Entities are found left to right without overlap. Where several patterns start at the
//! same place the more specific wins: money, then percentage, then date, then time, then
//! number ("$4.3 billion" is one money entity, not a number; "March 2025" one date).
//! Two entities are the same when their normalised values agree, whatever kind each was
//! detected as (PAPER.md "Decided here"), so a year-like "2000" (a date) matches "2,000"
//! (a number). The value is the text lower-cased, with these rewrites, then without
//! spaces, commas or dots that are not decimal points:
//! - "percent" and "per cent" become "%" ("5 percent" = "5 per cent" = "5%"; "percentage
//!   points" stay apart from "%");
//! - month abbreviations become the month ("Aug." = "August", "Sept" = "September");
//! - ordinal suffixes go ("March 3rd" = "March 3");
//! - a clock hour loses its leading zero ("09:18" = "9:18"), and "a.m." = "am";
//! - "US$" is "$" (other dollars, "A$", "C$", … stay apart);
//! - after a digit, "bn" = "billion", "mln" and "m" = "million", "k" = "thousand"
//!   ("$4.3bn" = "$4.3 billion").
//!
//! A number's scale word belongs to it ("3.2 million" is one number, as "$3.2 million"
//! is one amount of money), so a claim must keep the scale to preserve it.
//!
//! So "$1,200" matches "$1200" and "6:45 a.m." matches "6:45 AM", while "5%" and "5"
//! or "A$5" and "$5" stay different.
//!
//! ```
//! use credence_core::entities::{extract, tier1_epr, EntityKind};
//! let found = extract("Profit rose 12% to $4.3 billion on March 3, 2025 at 6:45 a.m.");
//! let kinds: Vec<EntityKind> = found.iter().map(|e| e.kind).collect();
//! assert_eq!(kinds, [EntityKind::Percent, EntityKind::Money, EntityKind::Date, EntityKind::Time]);
//! let claims = ["Profit rose 12%.".to_string(), "It reached $4.3 billion.".to_string()];
//! assert_eq!(tier1_epr("Profit rose 12% to $4.3 billion.", &claims), 1.0);
//! ```

use regex::Regex;
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::LazyLock;

/// What a tier-1 entity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityKind {
    /// An amount of money: `$4.3 billion`, `€20`, `US$46.75`, `49 cents`.
    Money,
    /// A percentage: `12%`, `3.5 percent`, `2 percentage points`.
    Percent,
    /// A date: `March 3, 2025`, `3 March`, `Aug. 17`, `2025-03-03`, `3/4/2025`, a weekday,
    /// a year (1600-2099), a decade (`1980s`).
    Date,
    /// A clock time: `6:45`, `6:45 a.m.`, `7pm`.
    Time,
    /// Any other number written in digits: `1,200`, `2.5`, `76`.
    Number,
}

impl EntityKind {
    /// The kind's name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Money => "money",
            EntityKind::Percent => "percent",
            EntityKind::Date => "date",
            EntityKind::Time => "time",
            EntityKind::Number => "number",
        }
    }
}

/// One entity found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    /// What it is.
    pub kind: EntityKind,
    /// The text as written.
    pub text: String,
    /// Byte range in the searched text.
    pub span: Range<usize>,
}

impl Entity {
    /// The normalised value two entities are compared by, whatever their kinds (see the
    /// module docs).
    ///
    /// ```
    /// use credence_core::entities::extract;
    /// let year = &extract("in 2000")[0];
    /// let count = &extract("2,000 jobs")[0];
    /// assert_ne!(year.kind, count.kind);
    /// assert_eq!(year.key(), count.key());
    /// ```
    pub fn key(&self) -> String {
        normalise(&self.text)
    }
}

/// A month name, or its abbreviation with an optional full stop ("Aug.", "Sept").
const MONTH: &str = r"(?:(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\b\.?)";
const WEEKDAY: &str = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)";
const NUM: &str = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?";
const SCALE: &str = r"(?:\s?(?:thousand|million|billion|trillion|bn|mln|m|k)\b)?";

/// One alternation, most specific kind first: at a given start the regex crate takes the
/// first branch that matches, which is the precedence the module docs state.
static TIER1: LazyLock<Regex> = LazyLock::new(|| {
    let money = format!(
        r"(?P<money>(?:(?:US|A|C|NZ|HK|S)?\$|€|£|¥)\s?(?:{NUM}){SCALE}|\b(?:{NUM})\s?(?:thousand\s|million\s|billion\s|trillion\s)?(?:dollars|euros|pounds|yen|yuan|cents)\b)"
    );
    let percent =
        format!(r"(?P<percent>\b(?:{NUM})\s?(?:%|percent\b|per\scent\b|percentage\spoints?\b))");
    let date = format!(
        r"(?P<date>\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}/(?:\d{{4}}|\d{{2}})\b|\b{MONTH}\s\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s(?:1[6-9]|20)\d{{2}}\b)?|\b\d{{1,2}}(?:st|nd|rd|th)?\s(?:of\s)?{MONTH}(?:,?\s(?:1[6-9]|20)\d{{2}}\b)?|\b{MONTH}\s(?:1[6-9]|20)\d{{2}}\b|\b{WEEKDAY}\b|\b(?:1[6-9]|20)\d{{2}}s?\b)"
    );
    let time = r"(?P<time>\b\d{1,2}:\d{2}(?:\s?(?i:[ap]\.?m)\b\.?)?|\b\d{1,2}\s?(?i:[ap]\.m\.)|\b\d{1,2}\s?(?i:[ap]m)\b)";
    let number = format!(
        r"(?P<number>\b(?:{NUM})(?:\s(?:thousand|million|billion|trillion)|\s?(?:bn|mln))?\b)"
    );
    let pattern = format!("{money}|{percent}|{date}|{time}|{number}");
    // The pattern is a constant of this module; a failure is a bug caught by every test.
    Regex::new(&pattern).expect("tier-1 entity pattern compiles")
});

/// Finds the tier-1 entities of a text, left to right, without overlap.
pub fn extract(text: &str) -> Vec<Entity> {
    TIER1
        .captures_iter(text)
        .filter_map(|caps| {
            let (kind, m) = [
                (EntityKind::Money, "money"),
                (EntityKind::Percent, "percent"),
                (EntityKind::Date, "date"),
                (EntityKind::Time, "time"),
                (EntityKind::Number, "number"),
            ]
            .into_iter()
            .find_map(|(kind, name)| caps.name(name).map(|m| (kind, m)))?;
            let raw = m.as_str();
            // A money or time match may end in a full stop that closes the sentence.
            let trimmed = raw.trim_end();
            Some(Entity {
                kind,
                text: trimmed.to_string(),
                span: m.start()..m.start() + trimmed.len(),
            })
        })
        .collect()
}

/// The distinct entity values of a text (see [`Entity::key`]).
pub fn entity_keys(text: &str) -> BTreeSet<String> {
    extract(text).iter().map(Entity::key).collect()
}

/// Tier-1 entity preservation rate: the share of the source's distinct entities that
/// appear in at least one claim; 1 when the source has none (PAPER.md, EPR).
pub fn tier1_epr(source: &str, claims: &[String]) -> f64 {
    let wanted = entity_keys(source);
    if wanted.is_empty() {
        return 1.0;
    }
    let found: BTreeSet<String> = claims.iter().flat_map(|c| entity_keys(c)).collect();
    let kept = wanted.iter().filter(|k| found.contains(*k)).count();
    kept as f64 / wanted.len() as f64
}

/// Word-level rewrites applied to the lower-cased text before separators go, in order.
static REWRITES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        (r"\bpercentage\s+points?\b", "percentagepoints"),
        (r"\s*\b(?:per\s+cent|percent)\b", "%"),
        (r"\bjan\b\.?", "january"),
        (r"\bfeb\b\.?", "february"),
        (r"\bmar\b\.?", "march"),
        (r"\bapr\b\.?", "april"),
        (r"\bjun\b\.?", "june"),
        (r"\bjul\b\.?", "july"),
        (r"\baug\b\.?", "august"),
        (r"\bsept?\b\.?", "september"),
        (r"\boct\b\.?", "october"),
        (r"\bnov\b\.?", "november"),
        (r"\bdec\b\.?", "december"),
        (r"(\d)(?:st|nd|rd|th)\b", "$1"),
        (r"\b0(\d):", "$1:"),
        (r"\bus\$", "$$"),
        (r"(\d)\s?bn\b", "${1}billion"),
        (r"(\d)\s?(?:mln|m)\b", "${1}million"),
        (r"(\d)\s?k\b", "${1}thousand"),
    ]
    .into_iter()
    // Constant patterns of this module; a failure is a bug caught by every test.
    .map(|(p, to)| (Regex::new(p).expect("entity rewrite compiles"), to))
    .collect()
});

fn normalise(text: &str) -> String {
    let mut lower = text.to_lowercase();
    for (pattern, to) in REWRITES.iter() {
        if let std::borrow::Cow::Owned(s) = pattern.replace_all(&lower, *to) {
            lower = s;
        }
    }
    let chars: Vec<char> = lower.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let decimal_point = c == '.'
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_whitespace() || c == ',' || (c == '.' && !decimal_point) {
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(&'static str, String)> {
        extract(text)
            .into_iter()
            .map(|e| (e.kind.as_str(), e.text))
            .collect()
    }

    fn pairs(items: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
        items.iter().map(|(k, t)| (*k, t.to_string())).collect()
    }

    #[test]
    fn finds_each_kind() {
        assert_eq!(
            found("Northwind said on Tuesday that profit rose 12% to $4.3 billion."),
            pairs(&[
                ("date", "Tuesday"),
                ("percent", "12%"),
                ("money", "$4.3 billion")
            ])
        );
        assert_eq!(
            found("It closed at 6:45 a.m. on March 3, 2025 and reopened at 7pm."),
            pairs(&[
                ("time", "6:45 a.m."),
                ("date", "March 3, 2025"),
                ("time", "7pm")
            ])
        );
        assert_eq!(
            found("About 1,200 jobs, 3.5 percent of staff, go by 2/3/2026; 76 stay."),
            pairs(&[
                ("number", "1,200"),
                ("percent", "3.5 percent"),
                ("date", "2/3/2026"),
                ("number", "76")
            ])
        );
        assert_eq!(
            found("BEIJING, Aug. 17: oil hit US$46.75 a barrel, up 49 cents since the 1990s."),
            pairs(&[
                ("date", "Aug. 17"),
                ("money", "US$46.75"),
                ("money", "49 cents"),
                ("date", "1990s")
            ])
        );
        assert_eq!(
            found("Born 11 November 1964 in Illinois; released in December 2011."),
            pairs(&[("date", "11 November 1964"), ("date", "December 2011")])
        );
        assert_eq!(
            found("Sales reached 3.2 million units and 4bn views, up from 7 millionaires."),
            pairs(&[
                ("number", "3.2 million"),
                ("number", "4bn"),
                ("number", "7")
            ])
        );
        assert_eq!(
            found("€20 and £5m and 10 million dollars"),
            pairs(&[
                ("money", "€20"),
                ("money", "£5m"),
                ("money", "10 million dollars")
            ])
        );
    }

    #[test]
    fn ignores_words_that_only_look_like_entities() {
        assert!(found("You may go now, said the man in March.").is_empty());
        assert!(found("The B-52s and U2 played Windows XP2 for the Mayors.").is_empty());
    }

    #[test]
    fn keys_ignore_spacing_separators_and_case() {
        let a = extract("$1,200 at 6:45 a.m.");
        let b = extract("$1200 at 6:45 AM");
        let ka: Vec<_> = a.iter().map(Entity::key).collect();
        let kb: Vec<_> = b.iter().map(Entity::key).collect();
        assert_eq!(ka, kb);
        assert_eq!(ka[0], "$1200");
        assert_eq!(extract("2.5")[0].key(), "2.5");
    }

    fn key(text: &str) -> String {
        let found = extract(text);
        assert_eq!(found.len(), 1, "{text:?}: {found:?}");
        found[0].key()
    }

    #[test]
    fn equivalent_values_share_a_key_whatever_the_kind() {
        for (a, b) in [
            ("2,000", "2000"),
            ("1,600", "in 1600"),
            ("5 percent", "5%"),
            ("5 per cent", "5%"),
            ("5 %", "5%"),
            ("Aug. 17", "August 17"),
            ("Jan 3", "January 3"),
            ("Sept. 9", "September 9"),
            ("Sep 9", "September 9"),
            ("Feb. 2, 2020", "February 2 2020"),
            ("March 3rd", "March 3"),
            ("09:18", "9:18"),
            ("09:18 UTC", "9:18"),
            ("6:45 a.m.", "6:45 AM"),
            ("7 p.m.", "7pm"),
            ("US$46.75", "$46.75"),
            ("$4.3bn", "$4.3 billion"),
            ("$2m", "$2 million"),
            ("£5mln", "£5 million"),
            ("$20k", "$20 thousand"),
            ("3.2 million", "3.2mln"),
            ("4 billion", "4bn"),
        ] {
            assert_eq!(key(a), key(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn different_values_keep_different_keys() {
        for (a, b) in [
            ("5%", "5"),
            ("5%", "5 percentage points"),
            ("$5", "5"),
            ("A$5", "$5"),
            ("2000", "2001"),
            ("2.5", "25"),
            ("9:18", "19:18"),
            ("$4.3 billion", "$4.3 million"),
            ("3.2 million", "3.2"),
            ("Aug. 17", "Aug. 18"),
            ("1990s", "1990"),
        ] {
            assert_ne!(key(a), key(b), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn epr_matches_across_kinds() {
        assert_eq!(
            tier1_epr("It hired 2,000 people.", &["It hired 2000 people.".into()]),
            1.0
        );
        assert_eq!(
            tier1_epr("Rates rose 5 percent.", &["Rates rose 5%.".into()]),
            1.0
        );
        assert_eq!(
            tier1_epr("Rates rose 5 percent.", &["Rates rose 5.".into()]),
            0.0
        );
    }

    #[test]
    fn epr_counts_distinct_source_entities_kept() {
        let s = "Sales fell 5% in 2024 and profit rose to $2 million.";
        let all = [
            "Sales fell 5% in 2024.".into(),
            "Profit rose to $2 million.".into(),
        ];
        assert_eq!(tier1_epr(s, &all), 1.0);
        let lost = ["Sales fell 5%.".into(), "Profit rose.".into()];
        assert!((tier1_epr(s, &lost) - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(tier1_epr("No numbers here.", &[]), 1.0);
        assert_eq!(tier1_epr("It cost $5.", &[]), 0.0);
    }
}
