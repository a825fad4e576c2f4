//! The two decomposition prompts and their completion parsers. This module owns the
//! prompt texts (`worker/prompts/*.txt`, versioned by [`version`]), how a sentence becomes
//! chat messages ([`messages`]) and how a completion becomes a claim list ([`parse`]).
//!
//! - `credence-v1`: the paper's Appendix A system prompt (PAPER.md, "Decomposer prompt")
//!   as the system message and the sentence as the user message; the answer is one claim
//!   per line.
//! - `factscore-v1`: the FActScore 8-demonstration prompt (`shared/prompts/factscore.txt`)
//!   as one user message, no system message; the answer is a "- " bullet list.
//!
//! Both parsers first reduce the completion to its answer: Windows line endings become
//! `\n`, reasoning (`<think>…</think>`) is removed and Markdown code-fence lines go.
//! A parse that yields no claim is a failure ([`Parsed::parse_failed`]); the paper scores
//! it as an empty claim list and reports the failure rate.
//!
//! Changing a prompt file or a parsing rule changes results: bump the version (it is part
//! of the generation cache key and is stored with every result).

use super::{ChatMessage, PromptKind};

/// Appendix A's system prompt, byte for byte as PAPER.md prints it (plus a final newline).
const CREDENCE_V1: &str = include_str!("../../prompts/credence-v1.txt");
/// The FActScore prompt; `<TARGET>` on its last line takes the sentence.
const FACTSCORE_V1: &str = include_str!("../../prompts/factscore-v1.txt");
/// The slot in [`FACTSCORE_V1`] that the sentence replaces.
const TARGET_SLOT: &str = "<TARGET>";
/// How every FActScore question starts; a model that keeps imitating the demonstrations
/// writes it again after its answer.
const FACTSCORE_QUESTION: &str = "Please breakdown the following sentence";

/// Versioned prompt id stored with results and part of the generation cache key.
///
/// ```
/// use credence_worker::llm::{prompt, PromptKind};
/// assert_eq!(prompt::version(PromptKind::Factscore), "factscore-v1");
/// ```
#[must_use]
pub fn version(kind: PromptKind) -> &'static str {
    match kind {
        PromptKind::Credence => "credence-v1",
        PromptKind::Factscore => "factscore-v1",
    }
}

/// The chat messages that ask a model to decompose `sentence`.
///
/// CREDENCE: a system message (the Appendix A prompt) and a user message (the sentence,
/// trimmed). FActScore: one user message, the prompt with the trimmed sentence in its
/// `<TARGET>` slot, as the paper's baseline sends it (no system prompt).
///
/// ```
/// use credence_worker::llm::{prompt, PromptKind, Role};
/// let chat = prompt::messages(PromptKind::Credence, " Ada wrote code and Alan built machines. ");
/// assert_eq!(chat.len(), 2);
/// assert_eq!(chat[0].role, Role::System);
/// assert_eq!(chat[1].content, "Ada wrote code and Alan built machines.");
/// ```
#[must_use]
pub fn messages(kind: PromptKind, sentence: &str) -> Vec<ChatMessage> {
    let sentence = sentence.trim();
    match kind {
        PromptKind::Credence => vec![
            ChatMessage::system(CREDENCE_V1.trim_end()),
            ChatMessage::user(sentence),
        ],
        PromptKind::Factscore => {
            let prompt = FACTSCORE_V1.replace(TARGET_SLOT, sentence);
            vec![ChatMessage::user(prompt.trim_end())]
        }
    }
}

/// Claims parsed from a completion.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Parsed {
    /// The claims in the order the model wrote them; empty when the parse failed.
    pub claims: Vec<String>,
    /// True when the completion held no claim (empty, only reasoning or chatter, or for
    /// FActScore no "- " bullet); such a decomposition is scored as an empty list.
    pub parse_failed: bool,
}

impl Parsed {
    fn from_claims(claims: Vec<String>) -> Self {
        Parsed {
            parse_failed: claims.is_empty(),
            claims,
        }
    }
}

/// Claims parsed from a completion of the prompt `kind`.
///
/// ```
/// use credence_worker::llm::{prompt, PromptKind};
/// let parsed = prompt::parse(PromptKind::Credence, "Here are the claims:\n1. Ada wrote code.\n2. Alan built machines.");
/// assert_eq!(parsed.claims, ["Ada wrote code.", "Alan built machines."]);
/// assert!(!parsed.parse_failed);
///
/// let parsed = prompt::parse(PromptKind::Factscore, "- Ada wrote code.\n- Alan built machines");
/// assert_eq!(parsed.claims, ["Ada wrote code.", "Alan built machines."]);
/// ```
#[must_use]
pub fn parse(kind: PromptKind, completion: &str) -> Parsed {
    let answer = answer_text(completion);
    Parsed::from_claims(match kind {
        PromptKind::Credence => credence_claims(&answer),
        PromptKind::Factscore => factscore_facts(&answer),
    })
}

/// The part of a completion that answers: `\n` line endings, no reasoning, no fence lines.
pub(crate) fn answer_text(completion: &str) -> String {
    let text = completion.replace("\r\n", "\n").replace('\r', "\n");
    let text = strip_reasoning(&text);
    // Fence lines are dropped wherever they are, not only as the first and last line:
    // models put a preamble before the fence and chatter after it, which the line rules
    // below handle, and a closing fence must not be glued to the last FActScore fact.
    text.lines()
        .filter(|line| !is_fence_line(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Removes reasoning: every closed `<think>…</think>` block; everything after an unclosed
/// `<think>` (the model ran out of tokens while thinking, so there is no answer); and
/// everything before a `</think>` that has no opening tag (chat templates that open the
/// block in the prompt, as DeepSeek-R1 distills do, leave only the closing tag).
fn strip_reasoning(text: &str) -> String {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    let mut text = text.to_string();
    loop {
        match (text.find(OPEN), text.find(CLOSE)) {
            (Some(open), Some(close)) if open < close => {
                text.replace_range(open..close + CLOSE.len(), "");
            }
            (Some(open), None) => {
                text.truncate(open);
                return text;
            }
            (_, Some(close)) => {
                text.replace_range(..close + CLOSE.len(), "");
            }
            (None, None) => return text,
        }
    }
}

/// A Markdown fence line: three or more backticks and an optional info word (```` ```text ````).
fn is_fence_line(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("```")
        && line
            .trim_start_matches('`')
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '+'))
}

// ---------------------------------------------------------------------------------------
// credence-v1: one claim per line.

/// Every non-empty line that is not preamble or chatter, with its list markup removed.
fn credence_claims(answer: &str) -> Vec<String> {
    answer
        .lines()
        .map(strip_markup)
        .filter(|claim| !claim.is_empty() && !is_chatter(claim))
        .map(str::to_string)
        .collect()
}

/// Removes list markup around a claim until none is left, since models combine them
/// (`- "**1. …**"`): bullets, numbering, surrounding bold, surrounding quotes. The claim
/// itself is not rewritten: its punctuation and casing stay.
fn strip_markup(line: &str) -> &str {
    let mut claim = line.trim();
    loop {
        let stripped = strip_bullet(claim)
            .or_else(|| strip_numbering(claim))
            .or_else(|| strip_bold(claim))
            .or_else(|| strip_quotes(claim));
        match stripped {
            Some(rest) => claim = rest.trim(),
            None => return claim,
        }
    }
}

/// `-`, `*`, `•` or `–` followed by whitespace (or nothing: an empty bullet). The space is
/// required so that `**bold**` and `-5 °C` are not bullets.
fn strip_bullet(s: &str) -> Option<&str> {
    let rest = s.strip_prefix(['-', '*', '•', '–'])?;
    after_marker(rest)
}

/// `1.`, `1)`, `(1)` or `Claim 1:` (also `Claim 1.`, `Claim #1:`), optionally in bold
/// (`**1.**`), followed by whitespace. The space is required so that `2.5 million` and
/// `1990s` are not numbering.
fn strip_numbering(s: &str) -> Option<&str> {
    let (bold, rest) = match s.strip_prefix("**") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let mut rest = numbering_marker(rest)?;
    if bold {
        rest = rest.strip_prefix("**")?;
    }
    after_marker(rest)
}

fn numbering_marker(s: &str) -> Option<&str> {
    if let Some(rest) = s.strip_prefix('(') {
        return skip_digits(rest)?.strip_prefix(')');
    }
    // `get` rather than indexing: the first five bytes may end inside a character.
    if let Some(word) = s.get(..5).filter(|word| word.eq_ignore_ascii_case("claim")) {
        let rest = s[word.len()..].trim_start();
        let rest = rest.strip_prefix('#').unwrap_or(rest);
        return skip_digits(rest)?.strip_prefix([':', '.', ')']);
    }
    skip_digits(s)?.strip_prefix(['.', ')'])
}

fn skip_digits(s: &str) -> Option<&str> {
    let rest = s.trim_start_matches(|c: char| c.is_ascii_digit());
    (rest.len() < s.len()).then_some(rest)
}

/// What follows a list marker, when the marker stands alone (whitespace or end of line).
fn after_marker(rest: &str) -> Option<&str> {
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some(rest)
}

/// `**claim**` → `claim`, when the bold wraps the whole line.
fn strip_bold(s: &str) -> Option<&str> {
    let inner = s.strip_prefix("**")?.strip_suffix("**")?;
    (!inner.is_empty() && !inner.contains("**")).then_some(inner)
}

/// `"claim"`, `“claim”`, `'claim'` or `‘claim’` → `claim`, when the quotes wrap the whole
/// line. A double-quoted line with another double quote inside (`"Help!" is a song by
/// "The Beatles"`) is a claim that starts and ends with a title, not a quoted claim, so
/// it stays; apostrophes inside single quotes (`'John's car is red.'`) do not count.
fn strip_quotes(s: &str) -> Option<&str> {
    const PAIRS: [(char, char, &[char]); 4] = [
        ('"', '"', &['"']),
        ('“', '”', &['“', '”']),
        ('\'', '\'', &[]),
        ('‘', '’', &['‘']),
    ];
    PAIRS.iter().find_map(|&(open, close, not_inside)| {
        let inner = s.strip_prefix(open)?.strip_suffix(close)?;
        (!inner.is_empty() && !inner.contains(not_inside)).then_some(inner)
    })
}

/// Lines a model writes around its claims that are not claims. A claim is a declarative
/// sentence about the input, so none of these can be one.
fn is_chatter(line: &str) -> bool {
    // Openers and closers the decomposer models write, compared in lower case.
    const CHATTER_STARTS: [&str; 24] = [
        "note:",
        "note that",
        "(note",
        "i hope",
        "hope this",
        "let me know",
        "feel free",
        "these claims",
        "these atomic claims",
        "these are the atomic claims",
        "these are the claims",
        "each claim",
        "all claims",
        "here are the",
        "here is the",
        "here's the",
        "sure!",
        "sure,",
        "sure.",
        "certainly!",
        "certainly,",
        "certainly.",
        "of course!",
        "of course,",
    ];
    let lower = line.to_lowercase();
    // A preamble ("Atomic claims:", "Here is the decomposition:") introduces the list.
    lower.ends_with(':')
        || CHATTER_STARTS.iter().any(|start| lower.starts_with(start))
        // Markdown headings ("### Claims") and rules ("---", "***") say nothing.
        || lower.starts_with("# ")
        || lower.starts_with("##")
        || !lower.chars().any(char::is_alphanumeric)
}

// ---------------------------------------------------------------------------------------
// factscore-v1: "- " bullets (shared/prompts/README.md).

/// The facts of a FActScore answer.
///
/// The README's rule, "split on `- `, drop the text before the first bullet, strip each
/// fact, add a period to the last fact when it lacks one", is read line by line, because
/// FActScore models write one fact per line and a literal split would also cut a fact
/// such as "a 3 - 2 win" in two:
/// - a bullet is a line that starts with `- ` (after indentation), or a lone `-`;
/// - a fact is the rest of its bullet line plus any following non-blank, non-bullet lines
///   (a fact wrapped over lines), joined with a space; a blank line ends it, so text
///   after the list ("I hope this helps!") is not glued to the last fact;
/// - non-bullet text outside a fact (before the first bullet, or after a blank line) is
///   dropped;
/// - after the first bullet, a line starting "Please breakdown the following sentence"
///   ends the answer: the model went on imitating the demonstrations. Before the first
///   bullet such a line is an echo of the question and is dropped as preamble.
fn factscore_facts(answer: &str) -> Vec<String> {
    let mut facts: Vec<String> = Vec::new();
    // The fact being read; `None` outside a fact.
    let mut current: Option<String> = None;
    let mut seen_bullet = false;
    for line in answer.lines() {
        let trimmed = line.trim();
        if seen_bullet && trimmed.starts_with(FACTSCORE_QUESTION) {
            break;
        }
        if let Some(text) = bullet_text(trimmed) {
            facts.extend(current.take());
            current = Some(text.trim().to_string());
            seen_bullet = true;
        } else if trimmed.is_empty() {
            facts.extend(current.take());
        } else if let Some(fact) = current.as_mut() {
            if !fact.is_empty() {
                fact.push(' ');
            }
            fact.push_str(trimmed);
        }
    }
    facts.extend(current);
    facts.retain(|fact| !fact.is_empty());
    if let Some(last) = facts.last_mut() {
        if !ends_with_sentence_punctuation(last) {
            last.push('.');
        }
    }
    facts
}

/// The text of a bullet line (`line` already trimmed).
fn bullet_text(line: &str) -> Option<&str> {
    line.strip_prefix("- ").or((line == "-").then_some(""))
}

/// Whether a fact ends with `.`, `!` or `?`, looking through closing quotes and brackets
/// (`He said "no."` has its punctuation; `in 1992)` does not).
fn ends_with_sentence_punctuation(fact: &str) -> bool {
    fact.trim_end_matches(['"', '\'', '”', '’', ')', ']'])
        .ends_with(['.', '!', '?'])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Role;
    use serde::Deserialize;

    /// Appendix A's prompt, copied by hand from PAPER.md ("Decomposer prompt").
    const PAPER_SYSTEM_PROMPT: &str = "You are an expert claim decomposition assistant.
Rules (STRICT):
1) Each atomic claim must be a single, simple declarative sentence.
2) Preserve ALL entities: names, dates, times, numbers, percentages,
   money, locations, organizations.
3) Do NOT add any new information.
4) Split compound sentences: (A and B)->A, B ;
   (A because B)->A, B ; (A but B)->A, B ; (A so B)->A, B.
5) Keep the same modality/reporting verb.
   Never rewrite reported intentions as factual events.
6) Avoid duplicates.";

    const SENTENCE: &str = "Marie Curie won the Nobel Prize in 1903 and moved to Paris.";

    #[test]
    fn versions_name_the_prompt_files() {
        assert_eq!(version(PromptKind::Credence), "credence-v1");
        assert_eq!(version(PromptKind::Factscore), "factscore-v1");
    }

    #[test]
    fn credence_sends_the_paper_prompt_as_system_and_the_sentence_as_user() {
        let chat = messages(PromptKind::Credence, &format!("  {SENTENCE}\n"));
        assert_eq!(chat.len(), 2);
        assert_eq!(chat[0].role, Role::System);
        assert_eq!(chat[0].content, PAPER_SYSTEM_PROMPT);
        assert_eq!(chat[1].role, Role::User);
        assert_eq!(chat[1].content, SENTENCE);
        assert_eq!(CREDENCE_V1, format!("{PAPER_SYSTEM_PROMPT}\n"));
    }

    #[test]
    fn factscore_sends_one_user_message_ending_with_the_sentence() {
        assert_eq!(FACTSCORE_V1.matches(TARGET_SLOT).count(), 1);
        let chat = messages(PromptKind::Factscore, &format!(" {SENTENCE} "));
        assert_eq!(chat.len(), 1);
        assert_eq!(chat[0].role, Role::User);
        let prompt = &chat[0].content;
        let question = "Please breakdown the following sentence into independent facts:";
        // 8 demonstrations and the question.
        assert_eq!(prompt.matches(question).count(), 9);
        assert!(prompt.ends_with(&format!("{question} {SENTENCE}")));
        assert!(!prompt.contains(TARGET_SLOT));
        assert!(prompt.starts_with(question));
    }

    #[test]
    fn reasoning_is_removed() {
        assert_eq!(strip_reasoning("<think>\nhm\n</think>\nA."), "\nA.");
        assert_eq!(strip_reasoning("A.\n<think>unfinished"), "A.\n");
        assert_eq!(strip_reasoning("template opened it</think>A."), "A.");
        assert_eq!(strip_reasoning("<think>a</think>B.<think>c</think>"), "B.");
    }

    #[test]
    fn markup_is_stripped_but_claims_are_not_rewritten() {
        assert_eq!(
            strip_markup("- \"**1. Ada wrote code.**\""),
            "Ada wrote code."
        );
        assert_eq!(
            strip_markup("**Claim 2:** Ada wrote code."),
            "Ada wrote code."
        );
        assert_eq!(
            strip_markup("2.5 million people live there."),
            "2.5 million people live there."
        );
        assert_eq!(strip_markup("-5 °C was recorded."), "-5 °C was recorded.");
        assert_eq!(
            strip_markup("\"Help!\" is a song by \"The Beatles\""),
            "\"Help!\" is a song by \"The Beatles\""
        );
    }

    #[test]
    fn factscore_does_not_split_inside_a_fact() {
        assert_eq!(
            factscore_facts("- Arsenal won a well-known 3 - 2 win"),
            ["Arsenal won a well-known 3 - 2 win."]
        );
    }

    /// One recorded-style completion and what the rules make of it.
    #[derive(Debug, Deserialize)]
    struct Case {
        name: String,
        completion: String,
        claims: Vec<String>,
        parse_failed: bool,
    }

    fn check_fixtures(kind: PromptKind, json: &str) {
        let cases: Vec<Case> = serde_json::from_str(json).expect("fixture file is valid JSON");
        assert!(cases.len() >= 22, "{kind:?}: only {} cases", cases.len());
        let mut failures = Vec::new();
        for case in &cases {
            let got = parse(kind, &case.completion);
            let want = Parsed {
                claims: case.claims.clone(),
                parse_failed: case.parse_failed,
            };
            if got != want {
                failures.push(format!("{}:\n  want {want:?}\n  got  {got:?}", case.name));
            }
        }
        assert!(failures.is_empty(), "{kind:?}:\n{}", failures.join("\n"));
    }

    #[test]
    fn credence_fixtures_parse_as_recorded() {
        check_fixtures(
            PromptKind::Credence,
            include_str!("../../tests/fixtures/llm/credence_completions.json"),
        );
    }

    #[test]
    fn factscore_fixtures_parse_as_recorded() {
        check_fixtures(
            PromptKind::Factscore,
            include_str!("../../tests/fixtures/llm/factscore_completions.json"),
        );
    }
}
