//! The public atomic claims SocialClaimSplit's posts are made of: the four corpora under
//! the data folder, read line by line, the atomicity filter every claim must pass, and
//! the group a claim belongs to (a post takes its claims group by group, so that its
//! sentences stay on one page, abstract, topic or forum flair where the group allows).
//!
//! - FEVER 1.0 `fever/paper_dev.jsonl`, all three labels; group: the evidence page's
//!   name, or for a NOT ENOUGH INFO claim (no page) the longest page name it starts with.
//! - SciFact `scifact/claims_{train,dev,test}.jsonl`; group: the first cited abstract.
//! - COVID-Fact `covidfact/COVIDFACT_dataset.jsonl`, SUPPORTED only (its REFUTED claims
//!   are machine-made counter-claims); group: the Reddit flair.
//! - LIAR-PLUS `liar-plus/dataset/jsonl/{val2,test2}.jsonl`; group: the first topic.
//!
//! A FEVER claim that starts with its page's name, on a page known to name a person or a
//! thing, carries a [`Subject`], so that a sentence may fold it into a relative clause.

use crate::builders::{json_error, read_source, word_count, BenchmarkError};
use crate::lexicon::REPORTING_VERBS;
use crate::sentences::split_sentences;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Words that make a claim compound or subordinate; an atomic claim has none, except
/// `that` right after a reporting verb ("X said that Y" keeps its frame). So every join
/// marker and relative pronoun of a post is one the builder put there.
pub const CONNECTIVES: &[&str] = &[
    "and", "but", "because", "so", "or", "nor", "yet", "which", "who", "whom", "whose", "that",
    "while", "whereas", "although", "though", "when", "since", "after", "before", "if", "unless",
    "until",
];

/// Fewest and most words of an atomic claim.
pub const WORDS: std::ops::RangeInclusive<usize> = 4..=25;

/// One of the public corpora the claims come from, in the order they are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Corpus {
    /// FEVER 1.0 `paper_dev.jsonl` (Wikipedia claims written by annotators).
    Fever,
    /// SciFact claims (biomedical claims written from citing sentences).
    SciFact,
    /// COVID-Fact (claims from r/COVID19 post titles).
    CovidFact,
    /// LIAR-PLUS (PolitiFact statements).
    LiarPlus,
}

impl Corpus {
    /// Every corpus, in reading order.
    pub const ALL: [Corpus; 4] = [
        Corpus::Fever,
        Corpus::SciFact,
        Corpus::CovidFact,
        Corpus::LiarPlus,
    ];

    /// The corpus's folder name under the data folder, also used in ids and meta.
    pub fn name(self) -> &'static str {
        match self {
            Corpus::Fever => "fever",
            Corpus::SciFact => "scifact",
            Corpus::CovidFact => "covidfact",
            Corpus::LiarPlus => "liar-plus",
        }
    }

    /// Its files under the data folder, in the order read.
    pub fn files(self) -> &'static [&'static str] {
        match self {
            Corpus::Fever => &["fever/paper_dev.jsonl"],
            Corpus::SciFact => &[
                "scifact/claims_train.jsonl",
                "scifact/claims_dev.jsonl",
                "scifact/claims_test.jsonl",
            ],
            Corpus::CovidFact => &["covidfact/COVIDFACT_dataset.jsonl"],
            Corpus::LiarPlus => &[
                "liar-plus/dataset/jsonl/val2.jsonl",
                "liar-plus/dataset/jsonl/test2.jsonl",
            ],
        }
    }
}

/// A claim's subject when it can head a relative clause: the claim is
/// `"{name} {predicate}"` and the name takes `pronoun` ("who" for a person, "which" for
/// a thing).
#[derive(Debug, Clone, PartialEq)]
pub struct Subject {
    /// The name the claim starts with (its FEVER page's name).
    pub name: String,
    /// "who" or "which".
    pub pronoun: &'static str,
}

/// A claim as the builder uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// Where it comes from.
    pub corpus: Corpus,
    /// The corpus's id for it (COVID-Fact, which has none: the 1-based line number).
    pub id: String,
    /// The corpus's label (FEVER SUPPORTS / REFUTES / NOT ENOUGH INFO; SciFact SUPPORT /
    /// REFUTE of its first rationale, or NOT ENOUGH INFO; COVID-Fact SUPPORTED; LIAR's six
    /// ratings).
    pub label: String,
    /// The claim, verbatim but for surrounding white space.
    pub text: String,
    /// The page, abstract, flair or topic it is about (empty when unknown).
    pub group: String,
    /// Its subject, when a relative clause may be made of it.
    pub subject: Option<Subject>,
}

/// Whether a claim is atomic and can stand as a reference: one sentence of
/// [`WORDS`] words, not ending in `? ! , ; :`, no `;`, no doubled quote (a CSV
/// escape left in the text), not PolitiFact's subject-less "Says ..." form, and none of
/// the [`CONNECTIVES`] (except `that` after a reporting verb).
pub fn is_atomic(text: &str) -> bool {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                .to_lowercase()
        })
        .collect();
    let first = words.first().map(String::as_str).unwrap_or_default();
    let says = first.starts_with("say") || first == "said";
    WORDS.contains(&word_count(text))
        && !text.ends_with(['?', '!', ',', ';', ':'])
        && !text.contains(';')
        && !text.contains("\"\"")
        && split_sentences(text).len() == 1
        && !says
        && words.iter().enumerate().all(|(i, w)| {
            !CONNECTIVES.contains(&w.as_str())
                || (w == "that" && i > 0 && REPORTING_VERBS.contains(&words[i - 1].as_str()))
        })
}

/// Every claim of the corpus, in file order, before any filter; a malformed line is an
/// error naming its file and line.
pub fn read(data: &Path, corpus: Corpus) -> Result<Vec<Claim>, BenchmarkError> {
    let mut out = Vec::new();
    for file in corpus.files() {
        let path = data.join(file);
        let text = read_source(&path)?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let claim = match corpus {
                Corpus::Fever => fever(line),
                Corpus::SciFact => scifact(line),
                Corpus::CovidFact => covidfact(line, i + 1),
                Corpus::LiarPlus => liar(line),
            };
            out.push(claim.map_err(|e| json_error(&path, i + 1, &e))?);
        }
    }
    if corpus == Corpus::Fever {
        name_fever_groups(&mut out);
    }
    Ok(out)
}

/// Whether the builder uses a claim of its corpus at all (COVID-Fact: SUPPORTED only).
pub fn usable(claim: &Claim) -> bool {
    claim.corpus != Corpus::CovidFact || claim.label == "SUPPORTED"
}

/// One FEVER evidence item: annotation id, evidence id, page title, sentence index.
type EvidenceItem = (Option<i64>, Option<i64>, Option<String>, Option<i64>);

fn fever(line: &str) -> Result<Claim, serde_json::Error> {
    #[derive(Deserialize)]
    struct Raw {
        id: u64,
        label: String,
        claim: String,
        evidence: Vec<Vec<EvidenceItem>>,
    }
    let raw: Raw = serde_json::from_str(line)?;
    let page = raw
        .evidence
        .iter()
        .flatten()
        .find_map(|(_, _, page, _)| page.clone());
    Ok(Claim {
        corpus: Corpus::Fever,
        id: raw.id.to_string(),
        label: raw.label,
        text: raw.claim.trim().to_string(),
        // The raw title for now; `name_fever_groups` turns it into the page's name.
        group: page.unwrap_or_default(),
        subject: None,
    })
}

fn scifact(line: &str) -> Result<Claim, serde_json::Error> {
    #[derive(Deserialize)]
    struct Raw {
        id: u64,
        claim: String,
        #[serde(default)]
        evidence: BTreeMap<String, Vec<Rationale>>,
        #[serde(default)]
        cited_doc_ids: Vec<u64>,
    }
    #[derive(Deserialize)]
    struct Rationale {
        label: String,
    }
    let raw: Raw = serde_json::from_str(line)?;
    let label = raw
        .evidence
        .values()
        .flatten()
        .map(|r| r.label.clone())
        .next()
        .unwrap_or_else(|| "NOT ENOUGH INFO".to_string());
    Ok(Claim {
        corpus: Corpus::SciFact,
        id: raw.id.to_string(),
        label,
        text: raw.claim.trim().to_string(),
        group: raw
            .cited_doc_ids
            .first()
            .map(u64::to_string)
            .unwrap_or_default(),
        subject: None,
    })
}

fn covidfact(line: &str, line_number: usize) -> Result<Claim, serde_json::Error> {
    #[derive(Deserialize)]
    struct Raw {
        claim: String,
        label: String,
        #[serde(default)]
        flair: String,
    }
    let raw: Raw = serde_json::from_str(line)?;
    Ok(Claim {
        corpus: Corpus::CovidFact,
        id: line_number.to_string(),
        label: raw.label,
        text: raw.claim.trim().to_string(),
        group: raw.flair,
        subject: None,
    })
}

fn liar(line: &str) -> Result<Claim, serde_json::Error> {
    #[derive(Deserialize)]
    struct Raw {
        json_file_id: String,
        label: String,
        claim: String,
        #[serde(default)]
        topics: Vec<String>,
    }
    let raw: Raw = serde_json::from_str(line)?;
    Ok(Claim {
        corpus: Corpus::LiarPlus,
        id: raw.json_file_id.trim_end_matches(".json").to_string(),
        label: raw.label,
        text: raw.claim.trim().to_string(),
        group: raw.topics.into_iter().next().unwrap_or_default(),
        subject: None,
    })
}

/// A FEVER page title as a name: "Soul_Food_-LRB-film-RRB-" -> ("Soul Food", "film").
pub fn page_name(title: &str) -> (String, String) {
    let unescape = |s: &str| {
        s.replace("-COLON-", ":")
            .replace("-LRB-", "(")
            .replace("-RRB-", ")")
            .replace("-LSB-", "[")
            .replace("-RSB-", "]")
            .replace('_', " ")
    };
    match title.split_once("_-LRB-") {
        Some((name, rest)) => (
            unescape(name),
            unescape(rest.trim_end_matches("-RRB-")).to_lowercase(),
        ),
        None => (unescape(title), String::new()),
    }
}

/// Nouns that say a page names a person ("X is an American actress", "(singer)"),
/// separated by spaces.
const PERSON_NOUNS: &str = "\
    actor actress singer songwriter rapper musician drummer guitarist pianist vocalist \
    director producer writer author novelist poet journalist politician footballer \
    athlete boxer wrestler comedian comedienne model dancer composer painter businessman \
    businesswoman entrepreneur screenwriter filmmaker philosopher scientist physicist \
    lawyer judge king queen prince princess emperor person man woman presenter chef \
    activist astronaut inventor photographer coach player personality dj host";

/// Nouns that say a page names a thing ("X is a 1997 film", "(album)"), separated by
/// spaces.
const THING_NOUNS: &str = "\
    film movie album song single series show sitcom novel book band company city town \
    country state village river mountain game franchise season episode magazine \
    newspaper team club university school building airport island region province county \
    district language religion organization organisation network channel brand disease \
    species genus holiday war battle festival award website software car ship hotel \
    museum park stadium bridge lake sea planet comic manga anime opera play musical";

/// Whether `word` is one of the space-separated `words`.
fn is_one_of(words: &str, word: &str) -> bool {
    words.split_whitespace().any(|w| w == word)
}

/// What a "{name} is / was a ..." claim says the name is: person, thing or neither.
fn kind_from_claim(name: &str, text: &str) -> (bool, bool) {
    let Some(rest) = text.strip_prefix(name).and_then(|r| r.strip_prefix(' ')) else {
        return (false, false);
    };
    let words: Vec<String> = rest
        .split_whitespace()
        .take(8)
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .collect();
    let Some((verb, rest)) = words.split_first() else {
        return (false, false);
    };
    if verb == "was" && rest.first().is_some_and(|w| w == "born") {
        return (true, false);
    }
    if !matches!(verb.as_str(), "is" | "was")
        || !rest.first().is_some_and(|w| w == "a" || w == "an")
    {
        return (false, false);
    }
    // The head noun is within the next few words ("an American stand-up comedian").
    let noun_phrase = &rest[1..rest.len().min(6)];
    let has = |nouns: &str| noun_phrase.iter().any(|w| is_one_of(nouns, w));
    (has(PERSON_NOUNS), has(THING_NOUNS))
}

/// Turns FEVER's raw page titles into page names, gives each NOT ENOUGH INFO claim the
/// longest page name it starts with, and sets the [`Subject`] of claims that start with
/// their page's name when SUPPORTS claims or the title's disambiguator say whether the
/// name is a person ("who") or a thing ("which"), and not both.
fn name_fever_groups(claims: &mut [Claim]) {
    // name -> (person evidence, thing evidence)
    let mut kinds: HashMap<String, (bool, bool)> = HashMap::new();
    for c in claims.iter_mut() {
        if c.group.is_empty() {
            continue;
        }
        let (name, disambiguator) = page_name(&c.group);
        let entry = kinds.entry(name.clone()).or_default();
        if !disambiguator.is_empty() {
            let words: Vec<&str> = disambiguator.split_whitespace().collect();
            entry.0 |= words.iter().any(|w| is_one_of(PERSON_NOUNS, w));
            entry.1 |= words.iter().any(|w| is_one_of(THING_NOUNS, w));
        }
        if c.label == "SUPPORTS" {
            let (person, thing) = kind_from_claim(&name, &c.text);
            entry.0 |= person;
            entry.1 |= thing;
        }
        c.group = name;
    }
    let mut names: Vec<&String> = kinds.keys().collect();
    // Longest first, so that "Soul Food (film)"-like longer names win over their prefixes.
    names.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    let starts_with_name = |text: &str, name: &str| {
        text.strip_prefix(name)
            .is_some_and(|r| r.starts_with(' ') || r.starts_with('\''))
    };
    let mut nei_groups = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        if c.group.is_empty() {
            if let Some(name) = names.iter().find(|n| starts_with_name(&c.text, n)) {
                nei_groups.push((i, (*name).clone()));
            }
        }
    }
    for (i, name) in nei_groups {
        claims[i].group = name;
    }
    for c in claims.iter_mut() {
        let pronoun = match kinds.get(&c.group) {
            Some((true, false)) => "who",
            Some((false, true)) => "which",
            _ => continue,
        };
        // "Kelly Preston starred ..." (a verb follows), not "Kelly Preston's husband ...".
        let follows_lower = c
            .text
            .strip_prefix(c.group.as_str())
            .and_then(|r| r.strip_prefix(' '))
            .and_then(|r| r.chars().next())
            .is_some_and(char::is_lowercase);
        if follows_lower {
            c.subject = Some(Subject {
                name: c.group.clone(),
                pronoun,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_claims_are_single_clauses() {
        assert!(is_atomic("Fox 2000 Pictures released the film Soul Food."));
        assert!(is_atomic("J. K. Rowling wrote a book."));
        assert!(is_atomic("Harold Macmillan was born on February 20, 1894."));
        assert!(is_atomic(
            "Sars-cov-2 viral load predicts covid-19 mortality"
        ));
        assert!(is_atomic(
            "Two months ago, Donald Trump said that ISIS was not our fight."
        ));
        assert!(!is_atomic("Damon Albarn sings and plays piano."));
        assert!(!is_atomic(
            "Ann Richards was a politician who lived in Texas."
        ));
        assert!(!is_atomic(
            "Party Down is a show that Lizzy Caplan starred in."
        ));
        assert!(!is_atomic("Tilda Swinton acts."));
        assert!(!is_atomic("Says the unemployment rate doubled."));
        assert!(!is_atomic("Is the unemployment rate rising in Ohio?"));
        assert!(!is_atomic("It rose. Then it fell by 5 percent."));
    }

    #[test]
    fn page_titles_become_names() {
        assert_eq!(
            page_name("Soul_Food_-LRB-film-RRB-"),
            ("Soul Food".to_string(), "film".to_string())
        );
        assert_eq!(
            page_name("Star_Trek-COLON-_Discovery"),
            ("Star Trek: Discovery".to_string(), String::new())
        );
    }

    fn fever_claim(id: &str, label: &str, text: &str, page: &str) -> Claim {
        Claim {
            corpus: Corpus::Fever,
            id: id.into(),
            label: label.into(),
            text: text.into(),
            group: page.into(),
            subject: None,
        }
    }

    #[test]
    fn fever_groups_and_subjects() {
        let mut claims = vec![
            fever_claim(
                "1",
                "SUPPORTS",
                "Kelly Preston is an American actress.",
                "Kelly_Preston",
            ),
            fever_claim(
                "2",
                "REFUTES",
                "Kelly Preston starred in nothing.",
                "Kelly_Preston",
            ),
            fever_claim("3", "NOT ENOUGH INFO", "Kelly Preston sings opera.", ""),
            fever_claim(
                "4",
                "SUPPORTS",
                "Soul Food stars Vivica A. Fox.",
                "Soul_Food_-LRB-film-RRB-",
            ),
            fever_claim(
                "5",
                "SUPPORTS",
                "Murda Beatz's real name is Shane.",
                "Murda_Beatz",
            ),
            fever_claim("6", "NOT ENOUGH INFO", "Nobody knows this page.", ""),
        ];
        name_fever_groups(&mut claims);
        let groups: Vec<&str> = claims.iter().map(|c| c.group.as_str()).collect();
        assert_eq!(
            groups,
            [
                "Kelly Preston",
                "Kelly Preston",
                "Kelly Preston",
                "Soul Food",
                "Murda Beatz",
                ""
            ]
        );
        let pronouns: Vec<Option<&str>> = claims
            .iter()
            .map(|c| c.subject.as_ref().map(|s| s.pronoun))
            .collect();
        assert_eq!(
            pronouns,
            [
                Some("who"),
                Some("who"),
                Some("who"),
                Some("which"),
                None,
                None
            ]
        );
    }
}
