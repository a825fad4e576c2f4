//! Lexical attributes of a token text (NORM, PREFIX, SUFFIX, SHAPE, LOWER, IS_SPACE) with
//! Python's character semantics, SPEC §4. These are the tok2vec input features.

use super::hashing::string_id;
use super::pychars_tables::{PY_ALPHA, PY_DIGIT};
use std::collections::HashMap;

const BASE_NORMS_JSON: &str = include_str!("data/base_norms.json");

/// Python's `str.isspace` for one character (wider than `char::is_whitespace`: it
/// includes the separators U+001C..U+001F).
pub fn py_is_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n'
            | '\x0b'
            | '\x0c'
            | '\r'
            | '\x1c'..='\x1f'
            | ' '
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

fn in_ranges(table: &[(u32, u32)], c: char) -> bool {
    let cp = u32::from(c);
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                std::cmp::Ordering::Less
            } else if lo > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// Python's `str.isalpha` for one character (general category L*).
pub fn py_is_alpha(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    in_ranges(PY_ALPHA, c)
}

/// Python's `str.isdigit` for one character (Numeric_Type Decimal or Digit, e.g. `²`).
pub fn py_is_digit(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    in_ranges(PY_DIGIT, c)
}

/// spaCy's `word_shape`: `Apple` → `Xxxxx`, `1,234.56` → `d,ddd.dd`; runs of one shape
/// character are cut at 4; texts of 100 code points or more are `LONG`.
pub fn word_shape(text: &str) -> String {
    if text.chars().count() >= 100 {
        return "LONG".to_string();
    }
    let mut shape = String::with_capacity(text.len());
    let mut last = None;
    let mut seq = 0;
    for c in text.chars() {
        let s = if py_is_alpha(c) {
            if c.is_uppercase() {
                'X'
            } else {
                'x'
            }
        } else if py_is_digit(c) {
            'd'
        } else {
            c
        };
        if Some(s) == last {
            seq += 1;
        } else {
            seq = 0;
            last = Some(s);
        }
        if seq < 4 {
            shape.push(s);
        }
    }
    shape
}

/// The attributes of one distinct token text, with the string ids tok2vec hashes.
#[derive(Debug, Clone, PartialEq)]
pub struct Lexeme {
    pub lower: String,
    pub norm: String,
    pub prefix: String,
    pub suffix: String,
    pub shape: String,
    pub is_space: bool,
    pub norm_id: u64,
    pub prefix_id: u64,
    pub suffix_id: u64,
    pub shape_id: u64,
}

/// The NORM tables: `vocab/lookups.bin`'s `lexeme_norm` (keyed by string id) and
/// spaCy's BASE_NORMS.
#[derive(Debug, Clone)]
pub struct NormTable {
    lexeme_norm: HashMap<u64, String>,
    base_norms: HashMap<String, String>,
}

impl NormTable {
    /// `lexeme_norm` as read from `vocab/lookups.bin`; BASE_NORMS is built in.
    pub fn new(lexeme_norm: HashMap<u64, String>) -> Self {
        // Compiled-in file, checked by a unit test.
        let base_norms: HashMap<String, String> =
            serde_json::from_str(BASE_NORMS_JSON).unwrap_or_default();
        NormTable {
            lexeme_norm,
            base_norms,
        }
    }

    /// All lexical attributes of `text` (its NORM before any special-case override).
    pub fn lexeme(&self, text: &str) -> Lexeme {
        let lower = text.to_lowercase();
        let norm = self
            .lexeme_norm
            .get(&string_id(text))
            .or_else(|| self.base_norms.get(text))
            .cloned()
            .unwrap_or_else(|| lower.clone());
        let prefix: String = text.chars().take(1).collect();
        let n = text.chars().count();
        let suffix: String = text.chars().skip(n.saturating_sub(3)).collect();
        let shape = word_shape(text);
        Lexeme {
            is_space: !text.is_empty() && text.chars().all(py_is_space),
            norm_id: string_id(&norm),
            prefix_id: string_id(&prefix),
            suffix_id: string_id(&suffix),
            shape_id: string_id(&shape),
            lower,
            norm,
            prefix,
            suffix,
            shape,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_python_char_classes() {
        assert_eq!(word_shape("Apple"), "Xxxxx");
        assert_eq!(word_shape("1,234.56"), "d,ddd.dd");
        assert_eq!(word_shape("https://x.com"), "xxxx://x.xxx");
        assert_eq!(word_shape("x²"), "xd");
        assert_eq!(word_shape("नमस्ते"), "xxx्xे");
        assert_eq!(word_shape(&"a".repeat(100)), "LONG");
    }

    #[test]
    fn base_norms_load_and_apply() {
        let t = NormTable::new(HashMap::new());
        assert_eq!(t.base_norms.len(), 45);
        assert_eq!(t.lexeme("’").norm, "'");
        assert_eq!(t.lexeme("Hello").norm, "hello");
        assert!(t.lexeme("\x1c").is_space);
    }
}
