//! The tokenizer's affix regexes. spaCy's prefix, suffix, infix and URL patterns use
//! lookarounds, so they run on fancy-regex's backtracking VM, which tries every
//! alternative at every position. Most chunks (plain words) match none of them. Each
//! pattern therefore carries a lookaround-free over-approximation that the `regex`
//! crate runs as a DFA: when it finds no match in a text, the pattern has none either,
//! and the VM is skipped; when it finds one, the VM starts where the prefilter's match
//! starts, not at the text's start. Results are the same with or without it.

use fancy_regex::{Assertion, Expr, LookAround};

/// One affix pattern: the fancy regex and, when the pattern allows one, its prefilter.
#[derive(Debug)]
pub(crate) struct AffixRegex {
    re: fancy_regex::Regex,
    /// Matches a superset of `re`'s matches: every text in which `re` matches somewhere
    /// (its lookarounds looking only inside the text) has a match of `maybe`.
    maybe: Option<regex::Regex>,
}

impl AffixRegex {
    /// Compiles `pattern` (fancy-regex syntax) and its prefilter.
    pub(crate) fn new(pattern: &str) -> Result<Self, fancy_regex::Error> {
        let re = fancy_regex::Regex::new(pattern)?;
        let maybe = over_approximation(pattern).and_then(|p| regex::Regex::new(&p).ok());
        if maybe.is_none() {
            tracing::debug!(
                pattern,
                "affix pattern has no prefilter; the VM runs on every text"
            );
        }
        Ok(AffixRegex { re, maybe })
    }

    /// Where in `text` the pattern's first match can start at the earliest (the start
    /// of the prefilter's leftmost match: each match of the pattern starts at or after
    /// one of the prefilter's), or `None` when it cannot match anywhere.
    fn earliest_start(&self, text: &str) -> Option<usize> {
        match &self.maybe {
            Some(m) => m.find(text).map(|m| m.start()),
            None => Some(0),
        }
    }

    /// `fancy_regex::Regex::find`.
    pub(crate) fn find<'t>(
        &self,
        text: &'t str,
    ) -> fancy_regex::Result<Option<fancy_regex::Match<'t>>> {
        self.find_from_pos(text, 0)
    }

    /// `fancy_regex::Regex::find_from_pos`: lookbehinds see `text` before `pos`, which
    /// the prefilter also sees.
    pub(crate) fn find_from_pos<'t>(
        &self,
        text: &'t str,
        pos: usize,
    ) -> fancy_regex::Result<Option<fancy_regex::Match<'t>>> {
        match self.earliest_start(text) {
            Some(start) => self.re.find_from_pos(text, pos.max(start)),
            None => Ok(None),
        }
    }

    /// Start and end of every non-overlapping match, in order; stops at the first
    /// error (returned beside the matches found before it).
    pub(crate) fn find_all(&self, text: &str) -> (Vec<(usize, usize)>, Option<fancy_regex::Error>) {
        let mut out = Vec::new();
        if self.earliest_start(text).is_none() {
            return (out, None);
        }
        for m in self.re.find_iter(text) {
            match m {
                Ok(m) => out.push((m.start(), m.end())),
                Err(e) => return (out, Some(e)),
            }
        }
        (out, None)
    }
}

/// A lookaround-free pattern in the `regex` crate's syntax whose matches cover every
/// match of `pattern`, or `None` when the pattern has a construct this does not
/// relax (subroutines, conditionals).
///
/// A positive lookbehind that opens a top-level branch is matched as text (`(?<=[0-9])km$`
/// becomes `[0-9]km$`), and so is a positive lookahead that closes one: the text it
/// looks at lies inside the searched text, so the relaxed branch matches there. Every
/// other lookaround, word boundary and `\K`/`\G` becomes empty (always true), a
/// backreference becomes "any text" and an atomic group a plain one: each step only
/// allows more matches.
pub(crate) fn over_approximation(pattern: &str) -> Option<String> {
    let tree = Expr::parse_tree(pattern).ok()?;
    let relaxed = match &tree.expr {
        Expr::Alt(branches) => Expr::Alt(branches.iter().map(relax_branch).collect::<Option<_>>()?),
        e => relax_branch(e)?,
    };
    let mut out = String::new();
    relaxed.to_str(&mut out, 0);
    Some(out)
}

fn relax_branch(e: &Expr) -> Option<Expr> {
    let Expr::Concat(items) = e else {
        return relax(e);
    };
    let last = items.len().saturating_sub(1);
    let relaxed = items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Expr::LookAround(inner, LookAround::LookBehind) if i == 0 => relax(inner),
            Expr::LookAround(inner, LookAround::LookAhead) if i == last => relax(inner),
            other => relax(other),
        })
        .collect::<Option<_>>()?;
    Some(Expr::Concat(relaxed))
}

fn relax(e: &Expr) -> Option<Expr> {
    Some(match e {
        Expr::Empty | Expr::Any { .. } | Expr::Literal { .. } | Expr::Delegate { .. } => e.clone(),
        Expr::Assertion(
            Assertion::StartText
            | Assertion::EndText
            | Assertion::StartLine { .. }
            | Assertion::EndLine { .. },
        ) => e.clone(),
        Expr::Assertion(_)
        | Expr::LookAround(..)
        | Expr::KeepOut
        | Expr::ContinueFromPreviousMatchEnd => Expr::Empty,
        Expr::Backref { .. } | Expr::BackrefWithRelativeRecursionLevel { .. } => Expr::Repeat {
            child: Box::new(Expr::Any { newline: true }),
            lo: 0,
            hi: usize::MAX,
            greedy: true,
        },
        Expr::Concat(items) => Expr::Concat(items.iter().map(relax).collect::<Option<_>>()?),
        Expr::Alt(items) => Expr::Alt(items.iter().map(relax).collect::<Option<_>>()?),
        Expr::Group(inner) => Expr::Group(Box::new(relax(inner)?)),
        Expr::AtomicGroup(inner) => relax(inner)?,
        Expr::Repeat {
            child,
            lo,
            hi,
            greedy,
        } => Expr::Repeat {
            child: Box::new(relax(child)?),
            lo: *lo,
            hi: *hi,
            greedy: *greedy,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_lookarounds_are_matched_as_text_and_inner_ones_dropped() {
        assert_eq!(
            over_approximation(r"(?<=[0-9])km$|^\$|a(?=b)c(?=[A-Z])").as_deref(),
            Some(r"[0-9]km$|^\$|ac[A-Z]")
        );
        assert_eq!(over_approximation(r"(?<!x)y\b").as_deref(), Some("y"));
    }

    /// Every match of the pattern lies where the prefilter matches, on all short texts
    /// over an alphabet that exercises the lookarounds; and the prefilter rejects texts.
    #[test]
    fn the_prefilter_never_rejects_a_text_the_pattern_matches() {
        let patterns = [
            r"(?<=[0-9])(?:km|m)$|(?<=[a-z])\.$|'s$",
            r"(?<=[0-9])[+\-*^](?=[0-9-])|(?<=[a-zA-Z]),(?=[a-zA-Z])|\.\.+",
            r"^(?:\$|'|(?<!x)\()",
            r"(?<=a)(?<!b)c(?=d)(?!e)",
        ];
        let alphabet = [
            'a', 'b', 'c', 'd', 'e', 'x', '0', '9', '.', ',', '-', '$', '\'', 's', 'k', 'm', '(',
        ];
        let mut rejected = 0;
        for pattern in patterns {
            let affix = AffixRegex::new(pattern).expect("compiles");
            assert!(affix.maybe.is_some(), "{pattern} has a prefilter");
            let texts = (1..=3u32).flat_map(|len| {
                (0..alphabet.len().pow(len)).map(move |n| {
                    (0..len)
                        .scan(n, |k, _| {
                            let c = alphabet[*k % alphabet.len()];
                            *k /= alphabet.len();
                            Some(c)
                        })
                        .collect::<String>()
                })
            });
            for s in texts {
                let exact = affix.re.find(&s).expect("no backtrack limit");
                let earliest = affix.earliest_start(&s);
                if let Some(m) = &exact {
                    assert!(
                        earliest.is_some_and(|e| e <= m.start()),
                        "{pattern} matches {s:?} at {}, its prefilter from {earliest:?}",
                        m.start()
                    );
                }
                rejected += usize::from(earliest.is_none());
                let found = affix.find(&s).expect("runs");
                assert_eq!(found.map(|m| m.range()), exact.map(|m| m.range()));
            }
        }
        assert!(rejected > 0);
    }
}
