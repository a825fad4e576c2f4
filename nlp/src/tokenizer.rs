//! spaCy's rule-based tokenizer driven by the model's `tokenizer` file, SPEC §3:
//! whitespace chunking, special cases, the prefix/suffix/infix/URL affix loop and the
//! final special-case matcher pass, with code-point offsets.

use super::affix::AffixRegex;
use super::lexeme::py_is_space;
use super::msgpack::Value;
use super::NlpError;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::{Mutex, MutexGuard};

/// spaCy attribute ids used as keys inside the exceptions table.
const ORTH: i128 = 65;
const NORM: i128 = 67;

/// One token as the tokenizer produces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawToken {
    pub text: String,
    /// NORM set by a special case (`n't` → `not`), overriding the lexeme's NORM.
    pub norm_override: Option<String>,
    /// One trailing ASCII space was absorbed by this token.
    pub spacy: bool,
    /// Offset of the token in the text, in Unicode code points.
    pub idx: usize,
}

impl RawToken {
    fn new(text: &str, norm: Option<&str>) -> Self {
        RawToken {
            text: text.to_string(),
            norm_override: norm.map(str::to_string),
            spacy: false,
            idx: 0,
        }
    }
}

/// A special-case piece: its text and optional NORM.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    orth: String,
    norm: Option<String>,
}

/// The tokenizer of one pipeline: compiled affix regexes and the special cases.
#[derive(Debug)]
pub struct Tokenizer {
    prefix: Option<AffixRegex>,
    suffix: Option<AffixRegex>,
    infix: Option<AffixRegex>,
    url: Option<AffixRegex>,
    exceptions: HashMap<String, Vec<Piece>>,
    /// Token texts (joined with NUL) of exceptions that the affix rules would split,
    /// mapped to the exception key (the "special matcher" patterns, Step D).
    special_patterns: HashMap<String, String>,
    special_first: HashSet<String>,
    max_pattern_len: usize,
    /// Tokens of chunks already seen, shared by all threads (spaCy keeps the same
    /// cache): the rules make the same decision for the same chunk in any doc.
    chunk_cache: Mutex<HashMap<String, Vec<RawToken>>>,
}

/// Rewrites a Python `re` pattern into the fancy-regex dialect: `\uXXXX`/`\UXXXXXXXX`
/// become `\x{..}`, escaped punctuation becomes a hex escape (always a literal, also
/// inside classes where Rust gives `&&`, `--`, `~~` a meaning), `(?u)` is dropped.
pub fn python_regex_to_rust(src: &str) -> String {
    let src = src.replace("(?u)", "");
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len() + 64);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' || i + 1 >= chars.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let next = chars[i + 1];
        let hex_len = match next {
            'u' => 4,
            'U' => 8,
            _ => 0,
        };
        if hex_len > 0 && i + 2 + hex_len <= chars.len() {
            let hex: String = chars[i + 2..i + 2 + hex_len].iter().collect();
            if hex.chars().all(|h| h.is_ascii_hexdigit()) {
                let cp = u32::from_str_radix(&hex, 16).unwrap_or(0);
                out.push_str(&format!("\\x{{{cp:X}}}"));
                i += 2 + hex_len;
                continue;
            }
        }
        if next.is_ascii_punctuation() || next == ' ' {
            out.push_str(&format!("\\x{{{:X}}}", u32::from(next)));
        } else {
            out.push('\\');
            out.push(next);
        }
        i += 2;
    }
    out
}

/// Bytes of a chunk the affix searches look at first (far longer than any bounded
/// prefix or suffix rule).
const AFFIX_WINDOW: usize = 64;

/// The largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Entries after which the chunk cache starts over, bounding its memory.
const CHUNK_CACHE_LIMIT: usize = 100_000;

fn compile(data: &Value<'_>, key: &str) -> Result<Option<AffixRegex>, NlpError> {
    match data.get(key) {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::Str(src)) => AffixRegex::new(&python_regex_to_rust(src))
            .map(Some)
            .map_err(|e| NlpError::Format {
                file: "tokenizer".into(),
                field: key.to_string(),
                message: format!("regex does not compile: {e}"),
            }),
        Some(other) => Err(NlpError::Format {
            file: "tokenizer".into(),
            field: key.to_string(),
            message: format!("expected a string, found {}", other.kind()),
        }),
    }
}

/// Match length in bytes of a search (`end - start`), 0 without a match. A regex that
/// exceeds fancy-regex's backtrack limit counts as no match (logged).
fn search_len(re: &Option<AffixRegex>, s: &str) -> usize {
    let Some(re) = re else { return 0 };
    match re.find(s) {
        Ok(Some(m)) => m.end() - m.start(),
        Ok(None) => 0,
        Err(e) => {
            tracing::warn!(error = %e, len = s.len(), "tokenizer regex gave up; treated as no match");
            0
        }
    }
}

impl Tokenizer {
    /// Builds the tokenizer from the decoded `tokenizer` file.
    pub fn from_msgpack(data: &Value<'_>) -> Result<Self, NlpError> {
        let bad = |field: &str, message: String| NlpError::Format {
            file: "tokenizer".into(),
            field: field.to_string(),
            message,
        };
        let mut exceptions = HashMap::default();
        let table = data
            .get("exceptions")
            .and_then(Value::as_map)
            .ok_or_else(|| bad("exceptions", "missing or not a map".into()))?;
        for (key, pieces) in table {
            let key = key
                .as_str()
                .ok_or_else(|| bad("exceptions", format!("key {key} is not a string")))?;
            let field = format!("exceptions[{key:?}]");
            let mut out = Vec::new();
            for p in pieces
                .as_array()
                .ok_or_else(|| bad(&field, "not an array".into()))?
            {
                let attr = |id: i128| {
                    p.as_map().and_then(|m| {
                        m.iter()
                            .find(|(k, _)| k.as_int() == Some(id))
                            .and_then(|(_, v)| v.as_str())
                    })
                };
                let orth = attr(ORTH).ok_or_else(|| bad(&field, "a piece has no ORTH".into()))?;
                out.push(Piece {
                    orth: orth.to_string(),
                    norm: attr(NORM).map(str::to_string),
                });
            }
            let joined: String = out.iter().map(|p| p.orth.as_str()).collect();
            if joined != key {
                return Err(bad(&field, format!("pieces spell {joined:?}")));
            }
            exceptions.insert(key.to_string(), out);
        }
        let mut tok = Tokenizer {
            prefix: compile(data, "prefix_search")?,
            suffix: compile(data, "suffix_search")?,
            infix: compile(data, "infix_finditer")?,
            url: compile(data, "url_match")?,
            exceptions,
            special_patterns: HashMap::default(),
            special_first: HashSet::default(),
            max_pattern_len: 0,
            chunk_cache: Mutex::new(HashMap::default()),
        };
        tok.build_special_patterns();
        Ok(tok)
    }

    /// Step D set-up (`faster_heuristics`): exceptions that contain an affix, an infix
    /// or a space join the final pass, as the token texts the rules alone would give.
    fn build_special_patterns(&mut self) {
        let mut keys: Vec<&String> = self.exceptions.keys().collect();
        keys.sort();
        let mut patterns = HashMap::default();
        let mut first = HashSet::default();
        let mut max_len = 0;
        for key in keys {
            let joins = self.prefix_len(key) > 0
                || !self.infixes(key).is_empty()
                || self.suffix_len(key) > 0
                || key.contains(' ');
            if !joins {
                continue;
            }
            let toks = self.tokenize_affixes(key, false);
            let texts: Vec<&str> = toks.iter().map(|t| t.text.as_str()).collect();
            if let Some(&head) = texts.first() {
                first.insert(head.to_string());
            }
            max_len = max_len.max(texts.len());
            patterns
                .entry(texts.join("\0"))
                .or_insert_with(|| key.clone());
        }
        self.special_patterns = patterns;
        self.special_first = first;
        self.max_pattern_len = max_len;
    }

    /// Prefix length. Every prefix rule is anchored at the start and all but `^\.\.+`
    /// are short, so the search runs on a head window; a match reaching the window's
    /// end may be longer (or its lookahead wrong) and is redone on the whole string.
    fn prefix_len(&self, s: &str) -> usize {
        let end = floor_char_boundary(s, AFFIX_WINDOW);
        if end == s.len() {
            return search_len(&self.prefix, s);
        }
        match search_len(&self.prefix, &s[..end]) {
            n if n == end => search_len(&self.prefix, s),
            n => n,
        }
    }

    /// Suffix length (leftmost match start wins). Every suffix rule ends in `$` and all
    /// but `\.\.+$` are short, so the search starts in a tail window (lookbehinds still
    /// see the text before it); a match starting at the window's start may extend
    /// further left and is redone on the whole string. Keeps long chunks linear.
    fn suffix_len(&self, s: &str) -> usize {
        let Some(re) = &self.suffix else { return 0 };
        let start = floor_char_boundary(s, s.len().saturating_sub(AFFIX_WINDOW));
        if start == 0 {
            return search_len(&self.suffix, s);
        }
        match re.find_from_pos(s, start) {
            Ok(Some(m)) if m.start() > start => m.end() - m.start(),
            Ok(None) => 0,
            _ => search_len(&self.suffix, s),
        }
    }

    fn infixes(&self, s: &str) -> Vec<(usize, usize)> {
        let Some(re) = &self.infix else {
            return Vec::new();
        };
        let (found, error) = re.find_all(s);
        if let Some(e) = error {
            tracing::warn!(error = %e, "infix regex gave up; remaining infixes ignored");
        }
        found
    }

    fn url_match(&self, s: &str) -> bool {
        match &self.url {
            Some(re) => matches!(re.find(s), Ok(Some(m)) if m.start() == 0),
            None => false,
        }
    }

    /// Tokenizes `text` (any Unicode; never fails).
    pub fn tokenize(&self, text: &str) -> Vec<RawToken> {
        let toks = self.tokenize_affixes(text, true);
        let mut toks = self.apply_special_cases(toks);
        let mut idx = 0;
        for t in &mut toks {
            t.idx = idx;
            idx += t.text.chars().count() + usize::from(t.spacy);
        }
        toks
    }

    /// Steps A-C: whitespace chunks, then special cases (unless building the Step D
    /// patterns) and affixes per chunk.
    fn tokenize_affixes(&self, text: &str, with_special: bool) -> Vec<RawToken> {
        let mut out: Vec<RawToken> = Vec::new();
        let Some(first) = text.chars().next() else {
            return out;
        };
        let mut in_ws = py_is_space(first);
        let mut start = 0;
        for (i, c) in text.char_indices() {
            if py_is_space(c) == in_ws {
                continue;
            }
            if start < i {
                self.cached_chunk(&mut out, &text[start..i], with_special);
            }
            if c == ' ' {
                if let Some(last) = out.last_mut() {
                    last.spacy = true;
                }
                start = i + 1;
            } else {
                start = i;
            }
            in_ws = !in_ws;
        }
        if start < text.len() {
            self.cached_chunk(&mut out, &text[start..], with_special);
            if let Some(last) = out.last_mut() {
                last.spacy = false;
            }
        }
        out
    }

    fn push_special(&self, out: &mut Vec<RawToken>, key: &str) -> bool {
        match self.exceptions.get(key) {
            Some(pieces) => {
                out.extend(
                    pieces
                        .iter()
                        .map(|p| RawToken::new(&p.orth, p.norm.as_deref())),
                );
                true
            }
            None => false,
        }
    }

    fn is_special(&self, with_special: bool, s: &str) -> bool {
        with_special && self.exceptions.contains_key(s)
    }

    fn cache(&self) -> MutexGuard<'_, HashMap<String, Vec<RawToken>>> {
        // A panic while holding the lock cannot leave a half-written entry behind.
        self.chunk_cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cached_chunk(&self, out: &mut Vec<RawToken>, chunk: &str, with_special: bool) {
        if !with_special {
            self.tokenize_chunk(out, chunk, false);
            return;
        }
        if let Some(toks) = self.cache().get(chunk) {
            out.extend_from_slice(toks);
            return;
        }
        let from = out.len();
        self.tokenize_chunk(out, chunk, true);
        let mut cache = self.cache();
        if cache.len() >= CHUNK_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(chunk.to_string(), out[from..].to_vec());
    }

    fn tokenize_chunk(&self, out: &mut Vec<RawToken>, chunk: &str, with_special: bool) {
        if with_special && self.push_special(out, chunk) {
            return;
        }
        let mut prefixes = Vec::new();
        let mut suffixes = Vec::new();
        let core = self.split_affixes(chunk, &mut prefixes, &mut suffixes, with_special);
        out.extend(prefixes.iter().map(|p| RawToken::new(p, None)));
        let special = !core.is_empty() && with_special && self.push_special(out, core);
        if !core.is_empty() && !special {
            if self.url_match(core) {
                out.push(RawToken::new(core, None));
            } else {
                self.split_infixes(out, core);
            }
        }
        out.extend(suffixes.iter().rev().map(|s| RawToken::new(s, None)));
    }

    fn split_infixes(&self, out: &mut Vec<RawToken>, core: &str) {
        let matches = self.infixes(core);
        let mut pos = 0;
        for (s, e) in matches {
            if s == 0 {
                continue;
            }
            if s != pos {
                out.push(RawToken::new(&core[pos..s], None));
            }
            if s != e {
                out.push(RawToken::new(&core[s..e], None));
            }
            pos = e;
        }
        if pos < core.len() {
            out.push(RawToken::new(&core[pos..], None));
        }
    }

    /// Step C: strips prefixes and suffixes until nothing changes or a special case
    /// is reached; returns the remaining core.
    fn split_affixes<'s>(
        &self,
        mut s: &'s str,
        prefixes: &mut Vec<&'s str>,
        suffixes: &mut Vec<&'s str>,
        with_special: bool,
    ) -> &'s str {
        let mut last_len = 0;
        while !s.is_empty() && s.len() != last_len {
            if self.is_special(with_special, s) {
                break;
            }
            last_len = s.len();
            let pre = self.prefix_len(s);
            if pre > 0 {
                let rest = &s[pre..];
                if !rest.is_empty() && self.is_special(with_special, rest) {
                    prefixes.push(&s[..pre]);
                    s = rest;
                    break;
                }
            }
            let suf = self.suffix_len(&s[pre..]);
            if suf > 0 {
                let rest = &s[..s.len() - suf];
                if !rest.is_empty() && self.is_special(with_special, rest) {
                    suffixes.push(&s[s.len() - suf..]);
                    s = rest;
                    break;
                }
            }
            if pre > 0 && suf > 0 && pre + suf <= s.len() {
                prefixes.push(&s[..pre]);
                suffixes.push(&s[s.len() - suf..]);
                s = &s[pre..s.len() - suf];
            } else if pre > 0 {
                prefixes.push(&s[..pre]);
                s = &s[pre..];
            } else if suf > 0 {
                suffixes.push(&s[s.len() - suf..]);
                s = &s[..s.len() - suf];
            }
        }
        s
    }

    /// Step D: re-merges token runs that spell a special case the affix rules split
    /// (emoticons glued to words: `lol:)` → `lol` `:)`).
    fn apply_special_cases(&self, toks: Vec<RawToken>) -> Vec<RawToken> {
        let n = toks.len();
        let mut matches: Vec<(usize, usize)> = Vec::new();
        for i in 0..n {
            if !self.special_first.contains(&toks[i].text) {
                continue;
            }
            let mut key = String::new();
            for len in 1..=self.max_pattern_len.min(n - i) {
                if len > 1 {
                    key.push('\0');
                }
                key.push_str(&toks[i + len - 1].text);
                if self.special_patterns.contains_key(&key) {
                    matches.push((i, i + len));
                }
            }
        }
        if matches.is_empty() {
            return toks;
        }
        matches.sort_by_key(|&(s, e)| (std::cmp::Reverse(e - s), s));
        let mut seen = vec![false; n];
        let mut kept_end = vec![usize::MAX; n];
        for (s, e) in matches {
            if !seen[s] && !seen[e - 1] {
                kept_end[s] = e;
            }
            seen[s..e].iter_mut().for_each(|x| *x = true);
        }
        let mut out = Vec::with_capacity(n);
        let mut i = 0;
        while i < n {
            let e = kept_end[i];
            if e == usize::MAX {
                out.push(toks[i].clone());
                i += 1;
                continue;
            }
            let mut span = String::new();
            for t in &toks[i..e - 1] {
                span.push_str(&t.text);
                if t.spacy {
                    span.push(' ');
                }
            }
            span.push_str(&toks[e - 1].text);
            let start = out.len();
            if self.push_special(&mut out, &span) {
                if let Some(last) = out[start..].last_mut() {
                    last.spacy = toks[e - 1].spacy;
                }
            } else {
                out.extend_from_slice(&toks[i..e]);
            }
            i = e;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_escapes_become_rust_escapes() {
        assert_eq!(python_regex_to_rust(r"^\u00A6"), r"^\x{A6}");
        assert_eq!(python_regex_to_rust(r"\U0001F200"), r"\x{1F200}");
        assert_eq!(python_regex_to_rust(r"(?u)\'\d"), r"\x{27}\d");
        assert_eq!(python_regex_to_rust(r"[\&\&]"), r"[\x{26}\x{26}]");
        let re =
            fancy_regex::Regex::new(&python_regex_to_rust(r"(?<=[0-9])\%$")).expect("compiles");
        assert!(re.is_match("10%").expect("no backtrack limit"));
    }
}
