//! The conjunction-oracle baseline (and the rule oracle that builds reference splits for
//! ClaimDecompBench): split each sentence at `;`, and / but / because / so into clauses,
//! copying the subject when the second clause has none, and the reporting frame
//! ("Officials said that ...") when the second clause lacks one.
//!
//! It works on words, not a parse: a split at and / but / so is taken only when the left
//! side holds a verb and the right side is a clause (a subject then a verb) or a bare verb
//! phrase (whose subject is copied), so noun-phrase coordination ("Paris and Berlin") is
//! never split. Verbs are recognised from a lexicon of auxiliaries and common verbs, and
//! the `-ed` past form of lower-case words.

use super::{as_claim, DecomposeContext, DecomposeError, Decomposer, Decomposition};
use async_trait::async_trait;
use credence_core::sentences::split_sentences;

const AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "be", "been", "am", "has", "have", "had", "do", "does", "did",
    "will", "would", "can", "could", "may", "might", "must", "shall", "should", "won't", "can't",
    "didn't", "doesn't", "isn't", "wasn't", "aren't", "weren't", "hasn't", "haven't",
];

/// Common verbs whose forms the `-ed` rule misses (irregular pasts, present tenses).
const VERBS: &[&str] = &[
    "said",
    "says",
    "say",
    "rose",
    "rise",
    "rises",
    "fell",
    "falls",
    "fall",
    "won",
    "wins",
    "win",
    "lost",
    "loses",
    "lose",
    "made",
    "makes",
    "make",
    "took",
    "takes",
    "take",
    "gave",
    "gives",
    "give",
    "went",
    "goes",
    "go",
    "came",
    "comes",
    "come",
    "saw",
    "sees",
    "see",
    "found",
    "finds",
    "find",
    "told",
    "tells",
    "tell",
    "became",
    "becomes",
    "become",
    "began",
    "begins",
    "begin",
    "left",
    "leaves",
    "led",
    "leads",
    "lead",
    "held",
    "holds",
    "hold",
    "kept",
    "keeps",
    "keep",
    "met",
    "meets",
    "paid",
    "pays",
    "pay",
    "sold",
    "sells",
    "sell",
    "sent",
    "sends",
    "send",
    "spent",
    "spends",
    "built",
    "builds",
    "build",
    "bought",
    "buys",
    "buy",
    "brought",
    "brings",
    "thought",
    "thinks",
    "think",
    "ran",
    "runs",
    "run",
    "grew",
    "grows",
    "grow",
    "knew",
    "knows",
    "know",
    "wrote",
    "writes",
    "write",
    "drove",
    "drives",
    "chose",
    "chooses",
    "broke",
    "breaks",
    "spoke",
    "speaks",
    "got",
    "gets",
    "get",
    "hit",
    "hits",
    "cut",
    "cuts",
    "put",
    "puts",
    "set",
    "sets",
    "let",
    "lets",
    "shut",
    "quit",
    "struck",
    "strikes",
    "fought",
    "fights",
    "sought",
    "seeks",
    "taught",
    "teaches",
    "caught",
    "catches",
    "felt",
    "feels",
    "meant",
    "means",
    "stood",
    "stands",
    "understood",
    "understands",
    "ate",
    "eats",
    "drank",
    "drinks",
    "flew",
    "flies",
    "slept",
    "sleeps",
    "swam",
    "threw",
    "throws",
    "wore",
    "wears",
    "shows",
    "show",
    "plans",
    "plan",
    "wants",
    "want",
    "needs",
    "need",
    "expects",
    "expect",
    "reports",
    "remains",
    "remain",
    "includes",
    "include",
    "announces",
    "launches",
    "faces",
    "seems",
    "seem",
    "appears",
    "appear",
    "continues",
    "continue",
    "denies",
    "deny",
    "warns",
    "warn",
    "urges",
    "calls",
    "opens",
    "closes",
    "plays",
    "lives",
    "works",
    "work",
    "owns",
    "uses",
    "claims",
    "argues",
    "believes",
    "believe",
    "hopes",
    "hope",
    "agrees",
    "agree",
    "allows",
    "helps",
    "help",
    "tries",
    "try",
    "offers",
    "looks",
    "moves",
    "returns",
    "vows",
    "sank",
    "sinks",
    "shrank",
    "rang",
    "sang",
    "sings",
    "fled",
    "flees",
    "hid",
    "hides",
    "bit",
    "dug",
    "fed",
    "feeds",
    "froze",
    "forgot",
    "forgave",
    "rode",
    "rides",
    "rebuilt",
    "overtook",
    "withdrew",
    "withdraws",
    "undertook",
    "arose",
    "dealt",
    "deals",
    "lent",
    "lends",
    "bent",
    "spread",
    "spreads",
    "sped",
    "stuck",
    "stole",
    "steals",
    "swore",
    "tore",
    "woke",
    "wound",
    "bled",
];

/// Reporting verbs that open a frame carried over to the next clause ("X said that A and
/// B" gives "X said that A." and "X said that B."). The oracle's own list, which builds
/// ClaimDecompBench's references: not the 27 verb forms of the paper's Appendix B, which
/// the verifier's modality check and the rule tier's reporting frames use
/// (`pipeline/verify/modality.rs`). Aligning it would change ClaimDecompBench-1000's
/// references and sha256.
const REPORTING: &[&str] = &[
    "said",
    "says",
    "reported",
    "reports",
    "announced",
    "announces",
    "claimed",
    "claims",
    "stated",
    "states",
    "argued",
    "argues",
    "believes",
    "believed",
    "thinks",
    "thought",
    "suggested",
    "suggests",
    "alleged",
    "alleges",
    "insisted",
    "insists",
    "warned",
    "warns",
    "confirmed",
    "confirms",
    "denied",
    "denies",
    "told",
    "tells",
    "noted",
    "notes",
    "added",
    "adds",
    "explained",
    "explains",
    "revealed",
    "reveals",
    "estimated",
    "estimates",
    "predicted",
    "predicts",
    "expects",
    "expected",
];

/// Words that cannot start the subject of a clause.
const PREPOSITIONS: &[&str] = &[
    "of", "in", "on", "at", "to", "for", "with", "from", "by", "about", "as", "into", "than",
    "between", "after", "before", "during", "under", "over", "through", "without", "then", "also",
    "not", "more", "less",
];

/// `-ed` words that are not verbs often enough to matter.
const NOT_VERBS: &[&str] = &[
    "hundred", "red", "bed", "need", "seed", "speed", "feed", "shed", "united", "based", "related",
    "limited", "used",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    And,
    But,
    Because,
    So,
}

/// The conjunction-oracle decomposer.
#[derive(Debug, Default, Clone)]
pub struct ConjunctionOracle;

impl ConjunctionOracle {
    /// Fingerprint: the algorithm's name and version (no weights).
    pub const FINGERPRINT: &'static str = "conjunction-oracle/v1";

    /// A new oracle.
    pub fn new() -> Self {
        ConjunctionOracle
    }

    /// Splits a text into claims.
    pub fn split(&self, text: &str) -> Vec<String> {
        let mut claims = Vec::new();
        for sentence in split_sentences(text) {
            let body = sentence.trim_end_matches(['.', '!', '?']).trim();
            for clause in split_clauses(body) {
                if let Some(c) = as_claim(&clause) {
                    claims.push(c);
                }
            }
        }
        claims
    }
}

#[async_trait]
impl Decomposer for ConjunctionOracle {
    fn fingerprint(&self) -> &str {
        Self::FINGERPRINT
    }

    async fn decompose(
        &self,
        sentence: &str,
        _context: &DecomposeContext<'_>,
    ) -> Result<Decomposition, DecomposeError> {
        Ok(Decomposition {
            claims: self.split(sentence),
            ..Decomposition::default()
        })
    }
}

/// As ClaimDecompBench's rule oracle: the builder in `credence_core::builders` takes
/// the split through this trait, so `credence_core` needs no worker code.
impl credence_core::builders::ReferenceSplitter for ConjunctionOracle {
    fn name(&self) -> &str {
        Self::FINGERPRINT
    }

    fn split(&self, text: &str) -> Vec<String> {
        ConjunctionOracle::split(self, text)
    }
}

fn norm(word: &str) -> String {
    word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
        .to_lowercase()
}

/// Whether a normalised word is a pronoun fused with its verb ("she's", "I'm", "they'll"):
/// both subject and verb of a clause.
fn is_pronoun_contraction(w: &str) -> bool {
    let w = w.replace('\u{2019}', "'");
    let Some((pronoun, verb)) = w.split_once('\'') else {
        return false;
    };
    [
        "i", "you", "he", "she", "it", "we", "they", "that", "there", "who",
    ]
    .contains(&pronoun)
        && ["s", "m", "re", "ve", "ll", "d"].contains(&verb)
}

/// Whether `word` (at `index` in its clause) looks like a finite verb.
fn is_verb(word: &str, index: usize) -> bool {
    let w = norm(word);
    if AUXILIARIES.contains(&w.as_str())
        || VERBS.contains(&w.as_str())
        || is_pronoun_contraction(&w)
    {
        return true;
    }
    let lowercase_start = word.chars().next().is_some_and(|c| c.is_lowercase());
    (lowercase_start || index == 0)
        && w.len() > 4
        && w.ends_with("ed")
        && !NOT_VERBS.contains(&w.as_str())
}

/// Whether a word looks like a past participle (`-ed`, `-en`, or an irregular form).
fn is_participle(word: &str) -> bool {
    let w = norm(word);
    (w.len() > 4 && (w.ends_with("ed") || w.ends_with("en")))
        || [
            "born", "made", "built", "held", "sold", "paid", "sent", "found", "lost", "won", "led",
            "kept", "left", "hit", "cut", "put", "set", "shut", "struck",
        ]
        .contains(&w.as_str())
}

fn first_verb(words: &[&str]) -> Option<usize> {
    words.iter().enumerate().position(|(i, w)| is_verb(w, i))
}

/// Whether the words form a clause with its own subject: a contraction like "she's", or
/// a first word that is neither a verb nor a preposition followed within five words by a
/// verb ("youth unemployment stayed", "the road was", "critics said").
fn is_clause(words: &[&str]) -> bool {
    let Some(first) = words.first() else {
        return false;
    };
    let f = norm(first);
    if is_pronoun_contraction(&f) {
        return true;
    }
    if is_verb(first, 1) || PREPOSITIONS.contains(&f.as_str()) {
        return false;
    }
    first_verb(words).is_some_and(|v| (1..=5).contains(&v))
}

/// Splits one sentence body (no final punctuation) into clauses.
fn split_clauses(body: &str) -> Vec<String> {
    let words: Vec<&str> = body.split_whitespace().collect();
    let mut clauses: Vec<Vec<String>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let lw = norm(w);
        let marker = if depth == 0 {
            match lw.as_str() {
                "and" => Some(Marker::And),
                "but" => Some(Marker::But),
                "because" if words.get(i + 1).is_none_or(|n| norm(n) != "of") => {
                    Some(Marker::Because)
                }
                "so" if words.get(i + 1).is_none_or(|n| {
                    !["that", "far", "much", "many", "called", "long"].contains(&norm(n).as_str())
                }) =>
                {
                    Some(Marker::So)
                }
                _ => None,
            }
        } else {
            None
        };
        if let Some(m) = marker {
            let right: Vec<&str> = words[i + 1..]
                .iter()
                .copied()
                .take_while(|x| !x.ends_with(';'))
                .collect();
            if accept_split(m, &current, &right) {
                push_clause(&mut clauses, &current);
                current.clear();
                i += 1;
                continue;
            }
        }
        depth += w.matches(['(', '[', '\u{201c}']).count() as i32
            - w.matches([')', ']', '\u{201d}']).count() as i32;
        if w.ends_with(';') && depth <= 0 {
            current.push(w.trim_end_matches(';'));
            push_clause(&mut clauses, &current);
            current.clear();
        } else {
            current.push(w);
        }
        i += 1;
    }
    push_clause(&mut clauses, &current);
    complete_clauses(clauses)
}

fn push_clause(clauses: &mut Vec<Vec<String>>, words: &[&str]) {
    let trimmed: Vec<String> = words
        .iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches([',', ' '])
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if !trimmed.is_empty() {
        clauses.push(trimmed);
    }
}

/// Whether to split at a marker between `left` and `right` (the words up to the next
/// semicolon).
fn accept_split(m: Marker, left: &[&str], right: &[&str]) -> bool {
    if left.len() < 2 || right.is_empty() {
        return false;
    }
    let left_has_verb = first_verb(left).is_some();
    let right_clause = is_clause(right);
    let right_bare_verb = is_verb(right[0], 1) && !is_pronoun_contraction(&norm(right[0]));
    let after_comma = left.last().is_some_and(|w| w.ends_with(','));
    // Without a comma, the words since the last comma must hold a verb: "..., when Edmund
    // Hillary and Tenzing Norgay reached" coordinates two names, not two clauses.
    let segment = left
        .iter()
        .rposition(|w| w.ends_with(','))
        .map_or(0, |i| i + 1);
    let segment_has_verb = after_comma || first_verb(&left[segment..]).is_some();
    match m {
        Marker::Because => left_has_verb && right.len() >= 2,
        Marker::So => {
            left_has_verb
                && (right_clause
                    || (after_comma && right.len() >= 2 && first_verb(right).is_some()))
        }
        Marker::And | Marker::But => {
            left_has_verb && segment_has_verb && (right_clause || right_bare_verb)
        }
    }
}

/// Gives clauses that start with a bare verb the first clause's subject, and clauses
/// without a reporting verb the first clause's reporting frame.
fn complete_clauses(clauses: Vec<Vec<String>>) -> Vec<String> {
    let Some(first) = clauses.first() else {
        return Vec::new();
    };
    let first_refs: Vec<&str> = first.iter().map(String::as_str).collect();
    // The subject, with its auxiliary when a perfect "has/have/had" governs a participle
    // ("The firm has cut jobs and closed plants") or the first clause is just "subject AUX
    // participle" ("The room was cleaned and painted" -> "The room was painted"); otherwise
    // the participles are not coordinated ("Curie was born in Warsaw and died in France"
    // -> "Curie died in France").
    let subject: Option<Vec<String>> = first_verb(&first_refs).filter(|&v| v > 0).map(|v| {
        let verb = norm(first_refs[v]);
        let perfect = ["has", "have", "had"].contains(&verb.as_str());
        let aux = AUXILIARIES.contains(&verb.as_str())
            && first_refs.get(v + 1).is_some_and(|w| is_participle(w))
            && (perfect || v + 2 == first_refs.len());
        first[..v + usize::from(aux)].to_vec()
    });
    let frame: Option<Vec<String>> = first_refs
        .iter()
        .position(|w| REPORTING.contains(&norm(w).as_str()))
        .filter(|&r| r > 0 && r + 2 < first.len())
        .map(|r| {
            let mut end = r + 1;
            if first.get(end).is_some_and(|w| norm(w) == "that") {
                end += 1;
            }
            first[..end].to_vec()
        });
    let mut out = Vec::with_capacity(clauses.len());
    for (k, clause) in clauses.iter().enumerate() {
        let refs: Vec<&str> = clause.iter().map(String::as_str).collect();
        let mut words: Vec<String> = clause.clone();
        if k > 0 {
            let starts_with_verb = is_verb(refs[0], 1);
            let has_reporting = refs.iter().any(|w| REPORTING.contains(&norm(w).as_str()));
            if starts_with_verb {
                if let Some(s) = &subject {
                    // A copied auxiliary only goes before a participle.
                    let s = if s.len() > 1
                        && AUXILIARIES.contains(&norm(&s[s.len() - 1]).as_str())
                        && !is_participle(refs[0])
                    {
                        &s[..s.len() - 1]
                    } else {
                        &s[..]
                    };
                    words = s.iter().cloned().chain(words).collect();
                }
            } else if let (Some(f), false) = (&frame, has_reporting) {
                words = f.iter().cloned().chain(words).collect();
            }
        }
        out.push(words.join(" "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(t: &str) -> Vec<String> {
        ConjunctionOracle::new().split(t)
    }

    #[test]
    fn splits_clauses_and_copies_subjects() {
        assert_eq!(
            split("The bridge collapsed and the road was blocked."),
            ["The bridge collapsed.", "The road was blocked."]
        );
        assert_eq!(
            split("Einstein published the paper in 1905 and received the Nobel Prize in 1921."),
            [
                "Einstein published the paper in 1905.",
                "Einstein received the Nobel Prize in 1921."
            ]
        );
        assert_eq!(
            split("Prices rose so the bank raised rates."),
            ["Prices rose.", "The bank raised rates."]
        );
        assert_eq!(
            split("The match was cancelled because heavy rain flooded the pitch."),
            ["The match was cancelled.", "Heavy rain flooded the pitch."]
        );
        assert_eq!(
            split("Sales fell 5%; profits rose to $2 million."),
            ["Sales fell 5%.", "Profits rose to $2 million."]
        );
        assert_eq!(
            split("He tried hard but failed."),
            ["He tried hard.", "He failed."]
        );
        assert_eq!(
            split("The room was cleaned and painted."),
            ["The room was cleaned.", "The room was painted."]
        );
        assert_eq!(
            split("The firm has cut jobs and closed two plants."),
            ["The firm has cut jobs.", "The firm has closed two plants."]
        );
    }

    #[test]
    fn keeps_noun_phrase_coordination_whole() {
        assert_eq!(
            split("Paris and Berlin are capitals."),
            ["Paris and Berlin are capitals."]
        );
        assert_eq!(
            split("The index rose between March and June."),
            ["The index rose between March and June."]
        );
        assert_eq!(
            split("The game was delayed because of rain."),
            ["The game was delayed because of rain."]
        );
    }

    #[test]
    fn carries_the_reporting_frame() {
        assert_eq!(
            split("Officials said that the bridge collapsed and the road was closed."),
            [
                "Officials said that the bridge collapsed.",
                "Officials said that the road was closed."
            ]
        );
    }
}
