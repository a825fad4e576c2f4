//! Keeping an API key out of error messages. A server may quote the request's
//! `Authorization` header in an error body (some proxies do): whole, cut short by its own
//! truncation, or masked as `sk-ab…wxyz`. A message built from such a body ends up in the
//! store (`results.error`, `jobs.error`) and in dead-letter headers, so every run of at
//! least [`MIN_FRAGMENT`] characters of the key is replaced, and the replacing happens
//! before a body is cut to an excerpt: a cut cannot leave the first half of a key.

/// The shortest piece of the key that is hidden. Shorter runs match ordinary text too
/// often (`sk-`, `the`) and say next to nothing about a key.
pub const MIN_FRAGMENT: usize = 4;

/// What stands in for a hidden piece of the key.
pub const MARK: &str = "<api key>";

/// Characters of a body kept in an error message.
pub const EXCERPT_CHARS: usize = 200;

/// Hides one API key (or nothing) in messages.
#[derive(Clone, Default)]
pub struct Redactor {
    key: Option<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redactor")
    }
}

impl Redactor {
    /// A redactor for `key` (none or empty: messages pass unchanged).
    pub fn new(key: Option<&str>) -> Self {
        Redactor {
            key: key.filter(|k| !k.is_empty()).map(str::to_string),
        }
    }

    /// `message` with every piece of the key of at least [`MIN_FRAGMENT`] characters
    /// replaced by [`MARK`].
    ///
    /// ```
    /// use credence_worker::llm::redact::Redactor;
    /// let r = Redactor::new(Some("sk-Zq8vW3xK7pL2"));
    /// assert_eq!(r.redact("bad key Bearer sk-Zq8v"), "bad key Bearer <api key>");
    /// assert_eq!(r.redact("masked: sk-Z****xK7pL2"), "masked: <api key>****<api key>");
    /// ```
    pub fn redact(&self, message: &str) -> String {
        let chars: Vec<char> = message.chars().collect();
        self.redact_chars(&chars, usize::MAX).0
    }

    /// The start of a body, on one line, for an error message: whitespace runs become
    /// one space, the key is hidden, then the text is cut to [`EXCERPT_CHARS`]
    /// characters (a `…` says it was cut).
    ///
    /// ```
    /// use credence_worker::llm::redact::Redactor;
    /// let r = Redactor::new(Some("sk-Zq8vW3xK7pL2"));
    /// let body = format!("{} Bearer sk-Zq8vW3xK7pL2 more", "x".repeat(190));
    /// let shown = r.excerpt(&body);
    /// assert!(shown.ends_with("Bearer <api key>…"), "{shown}");
    /// ```
    pub fn excerpt(&self, body: &str) -> String {
        // Each character shown consumes at most one key's length of the body, so this
        // much of the body decides the excerpt, however large the body is.
        let key_chars = self.key.as_ref().map_or(1, |k| k.chars().count());
        let window = (EXCERPT_CHARS + 1).saturating_mul(key_chars) + key_chars;
        let mut chars: Vec<char> = Vec::new();
        for word in body.split_whitespace() {
            if chars.len() >= window {
                break;
            }
            if !chars.is_empty() {
                chars.push(' ');
            }
            chars.extend(word.chars().take(window + 1 - chars.len()));
        }
        if chars.is_empty() {
            return "(empty body)".into();
        }
        let (mut shown, cut) = self.redact_chars(&chars, EXCERPT_CHARS);
        if cut {
            shown.push('…');
        }
        shown
    }

    /// Redacts `chars` until `limit` characters are written; says whether text was left.
    fn redact_chars(&self, chars: &[char], limit: usize) -> (String, bool) {
        let mut out = String::new();
        let mut written = 0;
        let mut i = 0;
        while i < chars.len() {
            if written >= limit {
                return (out, true);
            }
            match self.fragment_at(&chars[i..]) {
                Some(len) => {
                    out.push_str(MARK);
                    written += MARK.len();
                    i += len;
                }
                None => {
                    out.push(chars[i]);
                    written += 1;
                    i += 1;
                }
            }
        }
        (out, false)
    }

    /// The length of the longest piece of the key that `text` starts with, if it is
    /// long enough to hide. A substring's prefixes are substrings too, so growing the
    /// candidate one character at a time finds the longest.
    fn fragment_at(&self, text: &[char]) -> Option<usize> {
        let key = self.key.as_deref()?;
        let min = MIN_FRAGMENT.min(key.chars().count());
        if text.len() < min {
            return None;
        }
        let mut candidate: String = text[..min].iter().collect();
        if !key.contains(&candidate) {
            return None;
        }
        let mut len = min;
        while let Some(&c) = text.get(len) {
            candidate.push(c);
            if !key.contains(&candidate) {
                break;
            }
            len += 1;
        }
        Some(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-Zq8vW3xK7pL2mN9rT4yB6cD1fG5hJ0";

    /// Every run of `MIN_FRAGMENT` characters of the key that `text` holds.
    fn leaks(text: &str) -> Vec<String> {
        let key: Vec<char> = KEY.chars().collect();
        key.windows(MIN_FRAGMENT)
            .map(|w| w.iter().collect::<String>())
            .filter(|w| text.contains(w.as_str()))
            .collect()
    }

    #[test]
    fn a_key_quoted_across_the_cut_leaves_no_fragment() {
        let r = Redactor::new(Some(KEY));
        for pad in 150..EXCERPT_CHARS + 10 {
            let body = format!(
                r#"{{"error":"{} invalid Authorization: Bearer {KEY} rest"}}"#,
                "e".repeat(pad)
            );
            let shown = r.excerpt(&body);
            assert!(leaks(&shown).is_empty(), "pad {pad}: {shown}");
            // The unredacted excerpt of main leaked a prefix at some of these pads.
            assert!(shown.chars().count() <= EXCERPT_CHARS + MARK.len() + 1);
        }
    }

    #[test]
    fn cut_masked_and_repeated_keys_are_hidden() {
        let r = Redactor::new(Some(KEY));
        // A proxy that cut the header itself.
        let cut = format!("Bearer {}", &KEY[..12]);
        assert_eq!(r.redact(&cut), "Bearer <api key>");
        // OpenAI's masked form keeps a head and a tail of the key.
        let masked = format!("{}***{}", &KEY[..6], &KEY[KEY.len() - 4..]);
        assert!(
            leaks(&r.redact(&masked)).is_empty(),
            "{}",
            r.redact(&masked)
        );
        // Many copies: the excerpt still shows 200 characters, none of them the key.
        let many = format!("{KEY} ").repeat(500);
        let shown = r.excerpt(&many);
        assert!(leaks(&shown).is_empty());
        assert!(shown.starts_with("<api key> <api key>") && shown.ends_with('…'));
        // Short runs of the key's letters in ordinary text stay.
        assert_eq!(r.redact("sk- q8v"), "sk- q8v");
    }

    #[test]
    fn without_a_key_an_excerpt_is_the_first_line_of_the_body() {
        let r = Redactor::new(None);
        assert_eq!(r.excerpt("  a\n\n b  "), "a b");
        assert_eq!(r.excerpt(" \n "), "(empty body)");
        let long = "é".repeat(500);
        let shown = r.excerpt(&long);
        assert_eq!(shown.chars().count(), EXCERPT_CHARS + 1);
        assert!(shown.ends_with('…'));
        assert_eq!(r.redact(KEY), KEY);
        assert_eq!(Redactor::new(Some("")).redact("x"), "x");
    }
}
