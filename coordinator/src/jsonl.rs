//! JSONL inputs of the commands that read texts (`credence nlp parse`, `credence verify
//! --claims`): `{"id", "text"}` lines with errors that name the file and the line.

use anyhow::{bail, Context};
use std::path::Path;

/// One input line: an id (any JSON value, `null` when absent) and a text.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct TextLine {
    /// Echoed into the output line.
    #[serde(default)]
    pub id: serde_json::Value,
    /// The text to process.
    pub text: String,
}

/// Reads `{"id", "text"}` lines, skipping blank ones. A malformed line is an error that
/// names `file:line` and what is wrong (an unpaired UTF-16 surrogate escape gets its own
/// message: serde cannot turn it into a Rust string).
pub fn read_text_lines(path: &Path) -> anyhow::Result<Vec<TextLine>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let req: TextLine = match serde_json::from_str(line) {
            Ok(req) => req,
            Err(e) => match lone_surrogate(line) {
                Some(esc) => bail!(
                    "{}:{}: field text: unpaired UTF-16 surrogate {esc} is not Unicode text \
                     (pair it or replace it, e.g. with \\ufffd)",
                    path.display(),
                    n + 1
                ),
                None => {
                    return Err(e).with_context(|| {
                        format!(
                            "{}:{}: expected {{\"id\", \"text\"}}",
                            path.display(),
                            n + 1
                        )
                    })
                }
            },
        };
        out.push(req);
    }
    Ok(out)
}

/// The first `\uXXXX` escape in a JSON line that is an unpaired UTF-16 surrogate.
fn lone_surrogate(line: &str) -> Option<String> {
    let b = line.as_bytes();
    let unit = |i: usize| -> Option<u32> {
        if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
            return None;
        }
        u32::from_str_radix(line.get(i + 2..i + 6)?, 16).ok()
    };
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'\\') {
            i += 2;
            continue;
        }
        match unit(i) {
            Some(0xD800..=0xDBFF) if matches!(unit(i + 6), Some(0xDC00..=0xDFFF)) => i += 12,
            Some(u @ 0xD800..=0xDFFF) => return Some(format!("\\u{u:04x}")),
            _ => i += 1,
        }
    }
    None
}
