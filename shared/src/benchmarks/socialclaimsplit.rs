//! SocialClaimSplit-100 / -1000, reconstructed: the paper's set is not public, so two
//! short atomic FEVER claims about the same Wikipedia page are joined at and / but /
//! because / so and given a social-media surface; the references are the two claims.
//!
//! From FEVER's `paper_dev.jsonl` the builder keeps SUPPORTS and REFUTES claims that are
//! atomic: one sentence ending in a full stop, 4-14 words, no comma, semicolon or colon,
//! and none of the words in [`CONNECTIVES`] (so the join marker is the example's only
//! one). Repeated claims are dropped. The claims are shuffled with the seed (stream 0)
//! and paired in that order: a claim pairs with the earlier unpaired claim of its page.
//! Pair k (0-based) is joined at `MARKERS[k % 4]`, so every run of 4 pairs has each
//! marker once, and gets its surface from its own stream `k + 1` ([`surface`]). Pairs
//! 0..100 are SocialClaimSplit-100 and 100..1100 SocialClaimSplit-1000, disjoint.

use super::sampling::{self, chance, pick};
use super::{
    json_error, read_source, word_count, Benchmark, BenchmarkError, Build, BuildOptions, Slice,
};
use crate::domain::Example;
use crate::sentences::split_sentences;
use rand_chacha::ChaCha20Rng;
use serde::Deserialize;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Join markers, assigned in turn.
pub const MARKERS: [&str; 4] = ["and", "but", "because", "so"];

/// Words that make a claim compound or subordinate; an atomic claim has none.
pub const CONNECTIVES: &[&str] = &[
    "and", "but", "because", "so", "or", "nor", "yet", "which", "who", "whom", "whose", "that",
    "while", "whereas", "although", "though", "when", "since", "after", "before", "if", "unless",
    "until",
];

/// A FEVER claim as the builder uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// FEVER's claim id.
    pub id: u64,
    /// SUPPORTS, REFUTES or NOT ENOUGH INFO.
    pub label: String,
    /// The claim sentence.
    pub text: String,
    /// Title of the first evidence page (FEVER's escaped form), if any.
    pub page: Option<String>,
}

/// One FEVER evidence item: annotation id, evidence id, page title, sentence index.
type EvidenceItem = (Option<i64>, Option<i64>, Option<String>, Option<i64>);

#[derive(Deserialize)]
struct RawClaim {
    id: u64,
    label: String,
    claim: String,
    evidence: Vec<Vec<EvidenceItem>>,
}

/// Reads every line of a FEVER JSONL file; a malformed line is an error naming it.
pub fn read(path: &Path) -> Result<Vec<Claim>, BenchmarkError> {
    let text = read_source(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let raw: RawClaim = serde_json::from_str(line).map_err(|e| json_error(path, i + 1, &e))?;
        let page = raw
            .evidence
            .iter()
            .flatten()
            .find_map(|(_, _, page, _)| page.clone());
        out.push(Claim {
            id: raw.id,
            label: raw.label,
            text: raw.claim.trim().to_string(),
            page,
        });
    }
    Ok(out)
}

/// Whether a claim is short and atomic (see the module docs).
pub fn is_atomic(text: &str) -> bool {
    let words = word_count(text);
    (4..=14).contains(&words)
        && text.ends_with('.')
        && split_sentences(text).len() == 1
        && !text.contains([',', ';', ':'])
        && !text
            .split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
            .any(|w| CONNECTIVES.contains(&w.as_str()))
}

/// Builds SocialClaimSplit-100 or -1000.
pub fn build(path: &Path, options: &BuildOptions, slice: Slice) -> Result<Build, BenchmarkError> {
    let claims = read(path)?;
    let mut built = Build {
        examples: Vec::new(),
        funnel: Vec::new(),
    };
    built.step("claims in paper_dev.jsonl", claims.len());
    let claims: Vec<Claim> = claims
        .into_iter()
        .filter(|c| (c.label == "SUPPORTS" || c.label == "REFUTES") && c.page.is_some())
        .collect();
    built.step("SUPPORTS or REFUTES, with an evidence page", claims.len());
    let claims: Vec<Claim> = claims.into_iter().filter(|c| is_atomic(&c.text)).collect();
    built.step(
        "atomic: one sentence, 4-14 words, no , ; : and no connective word",
        claims.len(),
    );
    let mut seen = HashSet::new();
    let mut claims: Vec<Claim> = claims
        .into_iter()
        .filter(|c| seen.insert(c.text.clone()))
        .collect();
    built.step("first occurrence of each claim", claims.len());

    sampling::shuffle(&mut sampling::stream(options.seed, 0), &mut claims);
    let mut waiting: HashMap<String, Claim> = HashMap::new();
    let mut pairs: Vec<(Claim, Claim)> = Vec::new();
    for c in claims {
        let page = c.page.clone().unwrap_or_default();
        match waiting.remove(&page) {
            Some(first) => pairs.push((first, c)),
            None => {
                waiting.insert(page, c);
            }
        }
    }
    built.step(
        format!(
            "paired with a claim of the same page, in seed-{} order",
            options.seed
        ),
        pairs.len(),
    );
    let benchmark = match slice {
        Slice::First100 => Benchmark::SocialClaimSplit100,
        Slice::Next1000 => Benchmark::SocialClaimSplit1000,
    };
    let range = slice.checked(benchmark, path, pairs.len())?;
    let start = range.start;
    built.examples = pairs
        .drain(range)
        .enumerate()
        .map(|(offset, (a, b))| {
            let k = start + offset;
            let marker = MARKERS[k % MARKERS.len()];
            let mut rng = sampling::stream(options.seed, k as u64 + 1);
            let page = a.page.clone().unwrap_or_default();
            let (text, features) = surface(&mut rng, &a.text, &b.text, marker, &page);
            let mut meta = serde_json::Map::new();
            meta.insert("source".into(), "fever/paper_dev.jsonl".into());
            meta.insert("pair".into(), k.into());
            meta.insert("fever_ids".into(), vec![a.id, b.id].into());
            meta.insert("labels".into(), vec![a.label, b.label].into());
            meta.insert("page".into(), page.into());
            meta.insert("marker".into(), marker.into());
            meta.insert("surface".into(), features.into());
            Example {
                id: format!("social-{}-{}", a.id, b.id),
                text,
                references: vec![a.text, b.text],
                meta,
            }
        })
        .collect();
    built.step(
        format!(
            "pairs {:?}; markers and / but / because / so in turn",
            slice.range()
        ),
        built.examples.len(),
    );
    Ok(built)
}

/// Sentence-initial words that are lower-cased after the join marker when the next word
/// is lower-case.
const COMMON_STARTERS: &[&str] = &[
    "The", "A", "An", "There", "It", "This", "These", "Those", "In", "On", "At", "One", "Some",
    "Many", "Most", "Only", "No", "Not", "All", "Every", "Each", "Two", "Three", "He", "She",
    "They", "We", "To", "For", "By", "From", "With",
];
const OPENERS: &[&str] = &[
    "tbh ",
    "ngl ",
    "lol ",
    "honestly ",
    "fun fact: ",
    "wait, ",
    "PSA: ",
    "TIL ",
    "hot take: ",
    "reminder: ",
    "Okay, ",
    "just learned ",
    "can't believe ",
    "apparently ",
];
const HANDLES: &[&str] = &[
    "@factfan",
    "@wiki_nerd",
    "@newsjunkie42",
    "@trivia_daily",
    "@moviebuff",
    "@popculture_hq",
    "@history_buff",
    "@claimcheck",
    "@jen_reads",
    "@mike_t",
    "@the_real_sam",
    "@dailyfacts",
];
const HASHTAGS: &[&str] = &[
    "#facts",
    "#TIL",
    "#trivia",
    "#didyouknow",
    "#history",
    "#mindblown",
    "#wiki",
    "#nerdalert",
    "#TheMoreYouKnow",
    "#random",
];
const EMOJI: &[&str] = &[
    "😂", "🤔", "🔥", "👀", "🙌", "😮", "💯", "🤯", "👍", "😅", "✨", "🙃",
];

/// Joins two claims at `marker` and adds a social-media surface, drawing from `rng` in a
/// fixed order: comma before but / so (1/2), casual opener (0.35), @mention (0.25, then
/// before or after, 1/2), all lower-case (0.15), end mark (. 0.5, ! 0.15, none 0.35),
/// hashtags (0.5; the page's name first when it makes one, then a second with 1/2), emoji
/// (0.4). Returns the text and the names of the features applied.
pub fn surface(
    rng: &mut ChaCha20Rng,
    first: &str,
    second: &str,
    marker: &str,
    page: &str,
) -> (String, Vec<String>) {
    let a = first.trim_end_matches('.');
    let b = second.trim_end_matches('.');
    // "The film ..." -> "the film ...", but "The Beach is ..." keeps the title's article.
    let b = match b.split_once(' ') {
        Some((w, rest))
            if COMMON_STARTERS.contains(&w)
                && rest.chars().next().is_some_and(char::is_lowercase) =>
        {
            format!("{} {rest}", w.to_lowercase())
        }
        _ => b.to_string(),
    };
    let comma = matches!(marker, "but" | "so") && chance(rng, 0.5);
    let mut body = format!("{a}{} {marker} {b}", if comma { "," } else { "" });
    let mut features = Vec::new();
    if chance(rng, 0.35) {
        body = format!("{}{body}", pick(rng, OPENERS));
        features.push("opener".to_string());
    }
    if chance(rng, 0.25) {
        let handle = pick(rng, HANDLES);
        body = if chance(rng, 0.5) {
            format!("{handle} {body}")
        } else {
            format!("{body} {handle}")
        };
        features.push("mention".to_string());
    }
    if chance(rng, 0.15) {
        body = body.to_lowercase();
        features.push("lowercase".to_string());
    }
    let end = sampling::below(rng, 100);
    if end < 50 {
        body.push('.');
    } else if end < 65 {
        body.push('!');
    }
    if chance(rng, 0.5) {
        let tag = page_hashtag(page).unwrap_or_else(|| pick(rng, HASHTAGS).to_string());
        body = format!("{body} {tag}");
        if chance(rng, 0.5) {
            let second_tag = pick(rng, HASHTAGS);
            if *second_tag != tag {
                body = format!("{body} {second_tag}");
            }
        }
        features.push("hashtag".to_string());
    }
    if chance(rng, 0.4) {
        body = format!("{body} {}", pick(rng, EMOJI));
        features.push("emoji".to_string());
    }
    (body, features)
}

/// A hashtag from a FEVER page title: "Soul_Food_-LRB-film-RRB-" -> "#SoulFood". None
/// when the name is empty, over 24 characters, or one of the join markers.
pub fn page_hashtag(page: &str) -> Option<String> {
    let name = page.split("_-LRB-").next().unwrap_or(page);
    let tag: String = name
        .split('_')
        .flat_map(|w| {
            let mut cs = w.chars().filter(|c| c.is_alphanumeric());
            cs.next()
                .into_iter()
                .flat_map(char::to_uppercase)
                .chain(cs)
                .collect::<Vec<char>>()
        })
        .collect();
    let lower = tag.to_lowercase();
    (!tag.is_empty() && tag.chars().count() <= 24 && !CONNECTIVES.contains(&lower.as_str()))
        .then(|| format!("#{tag}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_claims_are_short_single_clauses() {
        assert!(is_atomic("Fox 2000 Pictures released the film Soul Food."));
        assert!(is_atomic("J. K. Rowling wrote a book."));
        assert!(!is_atomic("Edgar Wright is a person"));
        assert!(!is_atomic("Damon Albarn sings and plays piano."));
        assert!(!is_atomic("Sean Penn, an actor, was born in 1960."));
        assert!(!is_atomic(
            "Ann Richards was a politician who lived in Texas."
        ));
        assert!(!is_atomic("Tilda Swinton acts."));
    }

    #[test]
    fn hashtags_come_from_page_titles() {
        assert_eq!(
            page_hashtag("Soul_Food_-LRB-film-RRB-").as_deref(),
            Some("#SoulFood")
        );
        assert_eq!(page_hashtag("Murda_Beatz").as_deref(), Some("#MurdaBeatz"));
        assert_eq!(page_hashtag("So").as_deref(), None);
        assert_eq!(
            page_hashtag("A_Very_Long_Page_Title_Indeed_Here").as_deref(),
            None
        );
    }

    #[test]
    fn surface_keeps_both_claims_and_only_its_marker() {
        for k in 0..200u64 {
            let mut rng = sampling::stream(42, k + 1);
            let marker = MARKERS[k as usize % 4];
            let (text, _) = surface(
                &mut rng,
                "Fox 2000 Pictures released the film Soul Food.",
                "The film stars Vivica A. Fox.",
                marker,
                "Soul_Food_-LRB-film-RRB-",
            );
            let lower = text.to_lowercase();
            assert!(
                lower.contains("fox 2000 pictures released the film soul food"),
                "{text}"
            );
            assert!(lower.contains(" the film stars vivica a. fox"), "{text}");
            let words: Vec<String> = lower
                .split_whitespace()
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_string())
                .collect();
            for m in MARKERS {
                let n = words.iter().filter(|w| *w == m).count();
                assert_eq!(n, usize::from(m == marker), "{m} in {text}");
            }
        }
    }
}
