//! The words a post adds around its claims: how a claim becomes a clause (its full stop
//! dropped, a common sentence-starter lower-cased), and the social-media surface
//! (opener, @mention, hashtags, emoji). None of these words is a join marker or a
//! relative pronoun, so every marker in a post is one of its joins.

use super::claims::{Corpus, CONNECTIVES};
use crate::builders::sampling::{chance, pick};
use rand_chacha::ChaCha20Rng;

/// Sentence-initial words that are lower-cased when the claim continues a sentence and
/// the next word is lower-case ("The film stars ..." -> "... and the film stars ..."),
/// so that names ("The Beach is ...") keep their capital.
const COMMON_STARTERS: &[&str] = &[
    "The", "A", "An", "There", "It", "This", "These", "Those", "In", "On", "At", "One", "Some",
    "Many", "Most", "Only", "No", "Not", "All", "Every", "Each", "Two", "Three", "He", "She",
    "They", "We", "To", "For", "By", "From", "With", "Our", "More", "Nearly", "Over", "About",
    "Half", "People", "Women", "Men", "Children", "Patients", "Under", "During",
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
    "thread: ",
    "ok hear me out: ",
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
    "@labnotes",
    "@policy_wonk",
];

const FEVER_TAGS: &[&str] = &[
    "#facts",
    "#TIL",
    "#trivia",
    "#didyouknow",
    "#history",
    "#mindblown",
    "#wiki",
    "#nerdalert",
    "#TheMoreYouKnow",
];
const SCIFACT_TAGS: &[&str] = &["#science", "#research", "#biology", "#medicine", "#SciComm"];
const COVIDFACT_TAGS: &[&str] = &["#COVID19", "#coronavirus", "#pandemic", "#SARSCoV2"];
const LIAR_TAGS: &[&str] = &["#politics", "#factcheck", "#election", "#policy"];

const EMOJI: &[&str] = &[
    "😂", "🤔", "🔥", "👀", "🙌", "😮", "💯", "🤯", "👍", "😅", "✨", "🙃",
];

/// A claim as a clause inside a sentence: without its final full stop (kept when the
/// last word is an abbreviation such as "U.S."; `."` becomes `"`), and, when it
/// continues a sentence, its first word lower-cased if it is a common starter.
pub fn clause(claim: &str, continues: bool) -> String {
    let last_word = claim.split_whitespace().last().unwrap_or_default();
    let abbreviation =
        last_word.matches('.').count() > 1 && !last_word.chars().any(|c| c.is_ascii_digit());
    let text = if let Some(t) = claim.strip_suffix(".\"") {
        format!("{t}\"")
    } else if claim.ends_with('.') && !abbreviation {
        claim[..claim.len() - 1].to_string()
    } else {
        claim.to_string()
    };
    if continues {
        lower_starter(&text)
    } else {
        text
    }
}

/// "The film stars ..." -> "the film stars ...", "In 1994, X ..." -> "in 1994, X ...";
/// "The Beach is ..." unchanged.
pub fn lower_starter(text: &str) -> String {
    match text.split_once(' ') {
        Some((w, rest))
            if COMMON_STARTERS.contains(&w)
                && rest.chars().next().is_some_and(|c| !c.is_uppercase()) =>
        {
            format!("{} {rest}", w.to_lowercase())
        }
        _ => text.to_string(),
    }
}

/// A hashtag from a name: "Soul Food" -> "#SoulFood", "health-care" -> "#HealthCare".
/// None when the name is empty, over 24 characters, or a connective.
pub fn hashtag(name: &str) -> Option<String> {
    let tag: String = name
        .split([' ', '_', '-'])
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

/// Adds the social-media surface to a post's body, drawing from `rng` in a fixed order:
/// casual opener (0.35; a common starter after it is lower-cased), @mention (0.25, then
/// at the start or the end, 1/2), hashtags (0.5: the first group's name when it makes
/// one, else one of the corpus's tags, then a second corpus tag with 1/2), emoji (0.4).
/// Returns the text and the names of the features applied.
pub fn decorate(
    rng: &mut ChaCha20Rng,
    corpus: Corpus,
    group: &str,
    body: &str,
) -> (String, Vec<String>) {
    let mut text = body.to_string();
    let mut features = Vec::new();
    if chance(rng, 0.35) {
        text = format!("{}{}", pick(rng, OPENERS), lower_starter(&text));
        features.push("opener".to_string());
    }
    if chance(rng, 0.25) {
        let handle = pick(rng, HANDLES);
        text = if chance(rng, 0.5) {
            format!("{handle} {text}")
        } else {
            format!("{text} {handle}")
        };
        features.push("mention".to_string());
    }
    if chance(rng, 0.5) {
        let tags = match corpus {
            Corpus::Fever => FEVER_TAGS,
            Corpus::SciFact => SCIFACT_TAGS,
            Corpus::CovidFact => COVIDFACT_TAGS,
            Corpus::LiarPlus => LIAR_TAGS,
        };
        // SciFact's groups are abstract ids and COVID-Fact's forum flairs: not tags.
        let named = matches!(corpus, Corpus::Fever | Corpus::LiarPlus)
            .then(|| hashtag(group))
            .flatten();
        let tag = named.unwrap_or_else(|| pick(rng, tags).to_string());
        text = format!("{text} {tag}");
        if chance(rng, 0.5) {
            let second = pick(rng, tags);
            if *second != tag {
                text = format!("{text} {second}");
            }
        }
        features.push("hashtag".to_string());
    }
    if chance(rng, 0.4) {
        text = format!("{text} {}", pick(rng, EMOJI));
        features.push("emoji".to_string());
    }
    (text, features)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::profile::contains_marker;

    #[test]
    fn clauses_drop_the_full_stop_but_not_an_abbreviation() {
        assert_eq!(
            clause("The film stars Vivica A. Fox.", true),
            "the film stars Vivica A. Fox"
        );
        assert_eq!(
            clause("The Beach is a novel.", true),
            "The Beach is a novel"
        );
        assert_eq!(
            clause("Ford moved jobs to the U.S.", false),
            "Ford moved jobs to the U.S."
        );
        assert_eq!(clause("A tax of 3.8%.", false), "A tax of 3.8%");
        assert_eq!(
            clause("In 1994, Gray Matter was founded.", true),
            "in 1994, Gray Matter was founded"
        );
        assert_eq!(
            clause("Its nickname is not \"Dog.\"", false),
            "Its nickname is not \"Dog\""
        );
        assert_eq!(
            clause("Sars-cov-2 predicts mortality", true),
            "Sars-cov-2 predicts mortality"
        );
    }

    #[test]
    fn hashtags_from_names_and_topics() {
        assert_eq!(hashtag("Soul Food").as_deref(), Some("#SoulFood"));
        assert_eq!(hashtag("health-care").as_deref(), Some("#HealthCare"));
        assert_eq!(hashtag("So").as_deref(), None);
        assert_eq!(hashtag("").as_deref(), None);
        assert_eq!(
            hashtag("A Very Long Page Title Indeed Here").as_deref(),
            None
        );
    }

    #[test]
    fn surface_words_are_never_markers() {
        let words = OPENERS
            .iter()
            .chain(HANDLES)
            .chain(FEVER_TAGS)
            .chain(SCIFACT_TAGS)
            .chain(COVIDFACT_TAGS)
            .chain(LIAR_TAGS)
            .chain(EMOJI);
        for w in words {
            for m in CONNECTIVES {
                assert!(!contains_marker(w, m), "{w:?} holds {m}");
            }
        }
    }
}
