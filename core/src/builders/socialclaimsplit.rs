//! SocialClaimSplit-100 / -1000, reconstructed in the paper's shape: each example is a
//! social-media post of several compound sentences whose atomic claims are the
//! references. The paper's set is not public; its Social-100 holds multi-sentence posts
//! with about 10.8 gold claims each, "because" in 72% and "but" in 62% of the examples
//! (PAPER.md "Datasets"). Here the claims are public human-written atomic claims (FEVER,
//! SciFact, COVID-Fact, LIAR-PLUS, read by [`claims`]), used verbatim and each once;
//! the builder adds only connectives, the casing of a joined clause's first word,
//! punctuation, relative pronouns over a shared subject, and a social surface
//! ([`surface`]).
//!
//! The build, every random choice from ChaCha20 streams of the seed ([`sampling`]):
//! 1. Each corpus's claims pass [`claims::is_atomic`]; a text seen before (ignoring case
//!    and spacing, corpora in [`Corpus::ALL`] order) is dropped.
//! 2. Per corpus, the claims are grouped by their group (page, abstract, flair or topic)
//!    and label (a FEVER page's SUPPORTS, REFUTES and NOT ENOUGH INFO claims apart, so
//!    that a sentence does not contradict itself); stream 0 shuffles the claims of each
//!    group, then the groups.
//! 3. Stream 1 lays the claims out in that order (`posts_of`): a post has 4, 5 or 6
//!    sentences ([`SENTENCES_PER_POST`]), a sentence 2 or 3 claims
//!    ([`CLAIMS_PER_SENTENCE`]); a sentence of two claims ends early where their group
//!    does. A claim that is a [`near_duplicate`] of one already in the post waits for the
//!    next post, which it opens. A corpus's last, short post is dropped.
//! 4. Stream 2 shuffles the posts of all corpora; posts 0..100 are SocialClaimSplit-100
//!    and 100..1100 SocialClaimSplit-1000, so no claim is in both.
//! 5. The paper's marker profile is a quota: in each slice exactly round(72%) of the
//!    posts get a "because" join and round(62%) a "but" join (streams 3 / 4 choose which
//!    posts of the -100 / -1000; 5 / 6 for "but"; a post with too few joins would miss
//!    its marker, none here does). The other joins are and / so, or because / but where
//!    the post has them ([`FREE_MARKERS`]).
//! 6. Post k is rendered from its own stream 16 + k ([`render`]).

pub mod claims;
pub mod surface;

use super::profile::{PAPER_SOCIAL_BECAUSE, PAPER_SOCIAL_BUT};
use super::sampling::{self, below, chance, weighted};
use super::{Benchmark, BenchmarkError, Build, BuildOptions, Slice};
use crate::domain::Example;
pub use claims::{is_atomic, Claim, Corpus, Subject, CONNECTIVES};
use rand_chacha::ChaCha20Rng;
use serde_json::json;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;

/// The join markers of the paper's construction.
pub const MARKERS: [&str; 4] = ["and", "but", "because", "so"];

/// Claims per sentence, with weights, before a group runs out.
pub const CLAIMS_PER_SENTENCE: [(usize, u64); 2] = [(2, 85), (3, 15)];

/// Sentences per post, with weights.
pub const SENTENCES_PER_POST: [(usize, u64); 3] = [(4, 40), (5, 40), (6, 20)];

/// Weights of the markers of joins the quota does not fix; because and but only in
/// posts chosen for them.
pub const FREE_MARKERS: [(&str, u64); 4] = [("and", 50), ("so", 20), ("because", 15), ("but", 15)];

/// Chance that an "and" between two claims with the same subject becomes a relative
/// clause ("Kelly Preston, who starred in ..., was born in ...").
pub const RELATIVE_CHANCE: f64 = 0.5;

const SHUFFLE_STREAM: u64 = 0;
const LAYOUT_STREAM: u64 = 1;
const ORDER_STREAM: u64 = 2;
const POST_STREAMS: u64 = 16;

/// A post before rendering: its sentences' claims, all from one corpus.
#[derive(Debug, Clone)]
pub struct Post {
    /// The corpus of every claim.
    pub corpus: Corpus,
    /// The claims of each sentence, in order (at least one sentence, each of at least one
    /// claim); those of one sentence share a group but where a lone claim met the next.
    pub sentences: Vec<Vec<Claim>>,
}

/// Builds SocialClaimSplit-100 or -1000 from the data folder holding the corpora.
pub fn build(data: &Path, options: &BuildOptions, slice: Slice) -> Result<Build, BenchmarkError> {
    let mut built = Build {
        examples: Vec::new(),
        funnel: Vec::new(),
    };
    let posts = lay_out(data, options.seed, &mut built)?;
    let benchmark = match slice {
        Slice::First100 => Benchmark::SocialClaimSplit100,
        Slice::Next1000 => Benchmark::SocialClaimSplit1000,
    };
    let range = slice.checked(benchmark, data, posts.len())?;
    let (because_stream, but_stream) = match slice {
        Slice::First100 => (3, 5),
        Slice::Next1000 => (4, 6),
    };
    let n = range.len();
    let because = quota(options.seed, because_stream, n, PAPER_SOCIAL_BECAUSE);
    let but = quota(options.seed, but_stream, n, PAPER_SOCIAL_BUT);
    let start = range.start;
    built.examples = posts[range]
        .iter()
        .enumerate()
        .map(|(i, post)| {
            let k = start + i;
            let mut rng = sampling::stream(options.seed, POST_STREAMS + k as u64);
            render(&mut rng, post, k, because[i], but[i])
        })
        .collect();
    built.step(
        format!(
            "posts {:?}; because in {} and but in {} of them by quota",
            slice.range(),
            because.iter().filter(|&&b| b).count(),
            but.iter().filter(|&&b| b).count()
        ),
        built.examples.len(),
    );
    Ok(built)
}

/// Steps 1-4 of the module docs: every post of the corpora, in seed order.
fn lay_out(data: &Path, seed: u64, built: &mut Build) -> Result<Vec<Post>, BenchmarkError> {
    if !data.join(Corpus::Fever.files()[0]).is_file() {
        return Err(BenchmarkError::Invalid {
            path: data.to_path_buf(),
            message: "not the corpora folder: SocialClaimSplit reads fever/, scifact/, \
                      covidfact/ and liar-plus/ under it"
                .to_string(),
        });
    }
    let mut per_corpus: Vec<Vec<Claim>> = Vec::new();
    for corpus in Corpus::ALL {
        let name = corpus.name();
        let all = claims::read(data, corpus)?;
        built.step(
            format!("{name}: claims in {}", corpus.files().join(", ")),
            all.len(),
        );
        let mut kept: Vec<Claim> = all.into_iter().filter(claims::usable).collect();
        if corpus == Corpus::CovidFact {
            built.step(
                "covidfact: SUPPORTED (REFUTED claims are machine-made counter-claims)",
                kept.len(),
            );
        }
        kept.retain(|c| is_atomic(&c.text));
        built.step(
            format!(
                "{name}: atomic: one sentence, {}-{} words, no connective word",
                claims::WORDS.start(),
                claims::WORDS.end()
            ),
            kept.len(),
        );
        per_corpus.push(kept);
    }
    let mut seen = HashSet::new();
    for claims in &mut per_corpus {
        claims.retain(|c| {
            let words: Vec<&str> = c.text.split_whitespace().collect();
            seen.insert(words.join(" ").to_lowercase())
        });
    }
    built.step(
        "distinct claims over the four corpora (case and spacing ignored)",
        per_corpus.iter().map(Vec::len).sum(),
    );

    let mut shuffle_rng = sampling::stream(seed, SHUFFLE_STREAM);
    let mut layout_rng = sampling::stream(seed, LAYOUT_STREAM);
    let mut posts = Vec::new();
    for (corpus, claims) in Corpus::ALL.into_iter().zip(per_corpus) {
        let total = claims.len();
        let mut groups: BTreeMap<(String, String), Vec<Claim>> = BTreeMap::new();
        for c in claims {
            groups
                .entry((c.group.clone(), c.label.clone()))
                .or_default()
                .push(c);
        }
        let mut groups: Vec<Vec<Claim>> = groups.into_values().collect();
        for g in &mut groups {
            sampling::shuffle(&mut shuffle_rng, g);
        }
        sampling::shuffle(&mut shuffle_rng, &mut groups);
        let queue: VecDeque<Claim> = groups.into_iter().flatten().collect();
        let (corpus_posts, deferred, left) = posts_of(queue, &mut layout_rng);
        let used: usize = corpus_posts.iter().flatten().map(Vec::len).sum();
        built.step(
            format!(
                "{}: posts of 4-6 sentences ({used} claims; {deferred} moved on to a later post \
                 as a near-duplicate; {left} left over at the end)",
                corpus.name(),
            ),
            corpus_posts.len(),
        );
        debug_assert_eq!(used + left, total);
        posts.extend(
            corpus_posts
                .into_iter()
                .map(|sentences| Post { corpus, sentences }),
        );
    }
    sampling::shuffle(&mut sampling::stream(seed, ORDER_STREAM), &mut posts);
    built.step(
        format!("posts over the four corpora, in seed-{seed} order"),
        posts.len(),
    );
    Ok(posts)
}

/// Step 3 of the module docs on one corpus's claims, in group order: the sentences of
/// each post; how many times a claim was moved on to a later post because it was a
/// [`near_duplicate`] of a claim already in the post (it opens the next one); and how
/// many claims were left when the queue ran out inside a post.
fn posts_of(
    mut queue: VecDeque<Claim>,
    rng: &mut ChaCha20Rng,
) -> (Vec<Vec<Vec<Claim>>>, usize, usize) {
    let mut posts = Vec::new();
    let mut moved = 0;
    loop {
        let wanted = weighted(rng, &SENTENCES_PER_POST);
        let mut sentences: Vec<Vec<Claim>> = Vec::new();
        let mut deferred: Vec<Claim> = Vec::new();
        while sentences.len() < wanted {
            let size = weighted(rng, &CLAIMS_PER_SENTENCE);
            let mut sentence: Vec<Claim> = Vec::new();
            while sentence.len() < size {
                let Some(next) = queue.front() else { break };
                // A sentence of two claims ends where their group (page and label,
                // abstract, ...) does; a lone claim joins the next group's first.
                if sentence.len() >= 2
                    && sentence
                        .last()
                        .is_some_and(|c| (&c.group, &c.label) != (&next.group, &next.label))
                {
                    break;
                }
                let Some(c) = queue.pop_front() else { break };
                let in_post = sentences.iter().flatten().chain(&sentence);
                if in_post.clone().any(|p| near_duplicate(&p.text, &c.text)) {
                    deferred.push(c);
                } else {
                    sentence.push(c);
                }
            }
            if sentence.is_empty() {
                break;
            }
            sentences.push(sentence);
        }
        moved += deferred.len();
        for c in deferred.into_iter().rev() {
            queue.push_front(c);
        }
        if sentences.len() < wanted {
            let left = queue.len() + sentences.iter().map(Vec::len).sum::<usize>();
            return (posts, moved, left);
        }
        posts.push(sentences);
    }
}

/// Whether two claims are too alike to stand in one post: their sets of lower-cased
/// words overlap by half or more (Jaccard >= 0.5), as FEVER's mutations of one claim
/// ("X was invented by Y" / "X was created by Y") and SciFact's negations ("A requires
/// B" / "A does not require B") do. The verifier counts such pairs as repetitions, so a
/// post that held both would fail it with a perfect decomposition.
pub fn near_duplicate(a: &str, b: &str) -> bool {
    let words = |t: &str| -> HashSet<String> {
        t.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let (a, b) = (words(a), words(b));
    let union = a.union(&b).count();
    union > 0 && 2 * a.intersection(&b).count() >= union
}

/// `n` flags of which exactly round(`share` x n) are set, in the order of a shuffle
/// by stream `stream`.
pub fn quota(seed: u64, stream: u64, n: usize, share: f64) -> Vec<bool> {
    let set = (share * n as f64).round() as usize;
    let mut flags: Vec<bool> = (0..n).map(|i| i < set).collect();
    sampling::shuffle(&mut sampling::stream(seed, stream), &mut flags);
    flags
}

/// Renders post `k` into an example, drawing from `rng` in this order: the join markers
/// (a because join at a uniform position when `because`, then a but join at a uniform
/// free position when `but`, then each other join from [`FREE_MARKERS`]), per sentence
/// the relative clauses (an "and" join between two claims that share a [`Subject`]
/// becomes one with [`RELATIVE_CHANCE`]), the commas (before and 0.25, before but / so
/// 0.5) and the end marks (`.` 0.85, `!` 0.15; the last sentence `.` 0.5, `!` 0.15, none
/// 0.35), then the surface ([`surface::decorate`]).
pub fn render(rng: &mut ChaCha20Rng, post: &Post, k: usize, because: bool, but: bool) -> Example {
    let slots: usize = post
        .sentences
        .iter()
        .map(|s| s.len().saturating_sub(1))
        .sum();
    let mut markers: Vec<Option<&'static str>> = vec![None; slots];
    for (wanted, marker) in [(because, "because"), (but, "but")] {
        let free: Vec<usize> = (0..slots).filter(|&i| markers[i].is_none()).collect();
        if wanted && !free.is_empty() {
            markers[free[below(rng, free.len() as u64) as usize]] = Some(marker);
        }
    }
    let allowed: Vec<(&str, u64)> = FREE_MARKERS
        .into_iter()
        .filter(|&(m, _)| (m != "because" || because) && (m != "but" || but))
        .collect();
    let mut joins: Vec<&'static str> = markers
        .into_iter()
        .map(|m| m.unwrap_or_else(|| weighted(rng, &allowed)))
        .collect();

    let last = post.sentences.len() - 1;
    let mut sentences = Vec::new();
    let mut sentence_meta = Vec::new();
    let mut slot = 0;
    for (s, claims) in post.sentences.iter().enumerate() {
        let sentence_joins = &mut joins[slot..slot + claims.len() - 1];
        slot += claims.len() - 1;
        let shared = match (
            &claims[0].subject,
            claims.get(1).and_then(|c| c.subject.as_ref()),
        ) {
            (Some(a), Some(b)) if a == b => Some(a),
            _ => None,
        };
        let mut text = String::new();
        let mut start = 1;
        let mut relative_subject = None;
        if let Some(subject) = shared.filter(|_| sentence_joins[0] == "and") {
            if chance(rng, RELATIVE_CHANCE) {
                sentence_joins[0] = subject.pronoun;
                relative_subject = Some(subject.name.clone());
                let predicate = |c: &Claim| c.text[subject.name.len() + 1..].to_string();
                text = format!(
                    "{}, {} {}, {}",
                    subject.name,
                    subject.pronoun,
                    surface::clause(&predicate(&claims[0]), false),
                    surface::clause(&predicate(&claims[1]), false)
                );
                start = 2;
            }
        }
        if start == 1 {
            text = surface::clause(&claims[0].text, false);
        }
        for i in start..claims.len() {
            let marker = sentence_joins[i - 1];
            let comma = match marker {
                "and" => chance(rng, 0.25),
                "but" | "so" => chance(rng, 0.5),
                _ => false,
            };
            // A claim opening with its page's name keeps its case ("In the End was ...").
            let c = &claims[i];
            let names_page = !c.group.is_empty() && c.text.starts_with(c.group.as_str());
            text = format!(
                "{text}{} {marker} {}",
                if comma { "," } else { "" },
                surface::clause(&c.text, !names_page)
            );
        }
        let end = below(rng, 100);
        let mark = if s < last {
            if end < 85 {
                "."
            } else {
                "!"
            }
        } else if end < 50 {
            "."
        } else if end < 65 {
            "!"
        } else {
            ""
        };
        // "... the U.S." ends the sentence with its own full stop.
        let mark = if mark == "." && text.ends_with('.') {
            ""
        } else {
            mark
        };
        sentences.push(format!("{text}{mark}"));
        let mut meta = json!({"claims": claims.len(), "joins": sentence_joins.to_vec()});
        if let Some(name) = relative_subject {
            meta["subject"] = name.into();
        }
        sentence_meta.push(meta);
    }

    let claims: Vec<&Claim> = post.sentences.iter().flatten().collect();
    let (text, features) = surface::decorate(
        rng,
        post.corpus,
        &post.sentences[0][0].group,
        &sentences.join(" "),
    );
    let used: Vec<&str> = MARKERS
        .into_iter()
        .chain(["who", "which"])
        .filter(|m| joins.contains(m))
        .collect();
    let mut meta = serde_json::Map::new();
    meta.insert("corpus".into(), post.corpus.name().into());
    meta.insert("post".into(), k.into());
    meta.insert(
        "claims".into(),
        claims
            .iter()
            .map(|c| json!({"id": c.id, "label": c.label, "group": c.group}))
            .collect(),
    );
    meta.insert("sentences".into(), sentence_meta.into());
    meta.insert("joins".into(), used.into());
    meta.insert("surface".into(), features.into());
    Example {
        id: format!("social-{}-{}", post.corpus.name(), claims[0].id),
        text,
        references: claims.iter().map(|c| c.text.clone()).collect(),
        meta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::profile::contains_marker;

    fn claim(id: &str, text: &str, subject: Option<(&str, &'static str)>) -> Claim {
        Claim {
            corpus: Corpus::Fever,
            id: id.into(),
            label: "SUPPORTS".into(),
            text: text.into(),
            group: "Kelly Preston".into(),
            subject: subject.map(|(name, pronoun)| Subject {
                name: name.into(),
                pronoun,
            }),
        }
    }

    fn post() -> Post {
        let kp = Some(("Kelly Preston", "who"));
        Post {
            corpus: Corpus::Fever,
            sentences: vec![
                vec![
                    claim("1", "Kelly Preston starred in Twins.", kp),
                    claim("2", "Kelly Preston was born in 1962.", kp),
                ],
                vec![
                    claim("3", "The film stars Vivica A. Fox.", None),
                    claim("4", "Fox 2000 Pictures released the film Soul Food.", None),
                    claim("5", "Soul Food grossed $43 million.", None),
                ],
                vec![claim("6", "The Beach is a novel.", None)],
            ],
        }
    }

    #[test]
    fn quota_sets_the_rounded_share() {
        let q = quota(42, 3, 100, 0.72);
        assert_eq!(q.iter().filter(|&&b| b).count(), 72);
        assert_eq!(q, quota(42, 3, 100, 0.72));
        assert_eq!(quota(42, 4, 1000, 0.62).iter().filter(|&&b| b).count(), 620);
    }

    #[test]
    fn render_keeps_every_claim_and_follows_the_flags() {
        for k in 0..300 {
            let (because, but) = (k % 2 == 0, k % 3 == 0);
            let mut rng = sampling::stream(42, POST_STREAMS + k as u64);
            let e = render(&mut rng, &post(), k, because, but);
            let lower = e.text.to_lowercase();
            assert_eq!(e.references.len(), 6);
            assert_eq!(e.id, "social-fever-1");
            assert!(lower.contains("starred in twins"), "{}", e.text);
            assert!(lower.contains("fox 2000 pictures released the film soul food"));
            assert!(lower.contains("the film stars vivica a. fox"), "{}", e.text);
            assert!(lower.contains("soul food grossed $43 million"));
            assert!(e.text.contains("The Beach is a novel"));
            assert_eq!(contains_marker(&e.text, "because"), because, "{}", e.text);
            assert_eq!(contains_marker(&e.text, "but"), but, "{}", e.text);
            let joins = e.meta["sentences"][0]["joins"][0].as_str().unwrap();
            if joins == "who" {
                assert!(
                    e.text
                        .contains("Kelly Preston, who starred in Twins, was born in 1962"),
                    "{}",
                    e.text
                );
            }
        }
    }
}
