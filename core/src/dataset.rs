//! The dataset format: JSONL, one example per line,
//! `{"id": "...", "text": "...", "references": ["..."], "meta": {...}}`.
//!
//! The loader reads the whole file before returning: an error names `file:line` and the
//! field, and nothing is half-loaded. Ids must be unique within the file.
//!
//! Both stores must be able to hold every example the loader accepts, so that SQLite and
//! PostgreSQL give the same answer: a string holding U+0000 (which PostgreSQL refuses in
//! `text` and `jsonb`) is refused here, in any field, `meta` included. Lone surrogates
//! (`\ud800`) cannot arrive: the JSON parser refuses them. A line is at most
//! [`MAX_LINE_BYTES`] and a string at most [`MAX_STRING_BYTES`], so one bad line cannot
//! take the loader's (or a prompt's) memory.

use crate::domain::Example;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// A dataset file that failed to load, with the place of the problem.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be opened or read.
    // Not a `source`: the message already ends with the I/O error, and a chained source
    // would print it twice under `{:#}`.
    #[error("{path}: {reason}")]
    Io {
        /// The dataset file.
        path: PathBuf,
        /// The underlying error.
        reason: std::io::Error,
    },
    /// A line is malformed.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The dataset file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The file holds no example.
    #[error("{path}: no examples (the file is empty)")]
    Empty {
        /// The dataset file.
        path: PathBuf,
    },
}

/// A dataset loaded in full, with the hash that identifies its content in job keys.
#[derive(Debug, Clone)]
pub struct LoadedDataset {
    /// The file it was read from.
    pub path: PathBuf,
    /// sha256 of the file's bytes, hex.
    pub hash: String,
    /// Examples in file order.
    pub examples: Vec<Example>,
}

/// Longest line, newline included: 1 MiB. The longest line of the datasets credence
/// ships with is 13 KB; a line of a mebibyte is a file that is not a dataset, and the
/// limit stops the loader from reading a file without newlines into memory whole.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Longest string in an example (id, text, each reference, each string in meta):
/// 256 KiB, far above a paragraph and below what a prompt to the smallest context
/// could hold in any case.
pub const MAX_STRING_BYTES: usize = 256 << 10;

/// The fields an example line may have.
const FIELDS: [&str; 4] = ["id", "text", "references", "meta"];

/// Loads a JSONL dataset file.
///
/// ```no_run
/// let ds = credence_core::dataset::load(std::path::Path::new("examples/sample.jsonl"))?;
/// println!("{} examples, sha256 {}", ds.examples.len(), ds.hash);
/// # Ok::<(), credence_core::dataset::DatasetError>(())
/// ```
pub fn load(path: &Path) -> Result<LoadedDataset, DatasetError> {
    load_lines(path, parse_line)
}

/// Loads an AFC dataset file (`credence dataset build afc-*`): one claim per line,
/// `{"id", "text", "label": "SUPPORT"|"REFUTE", "evidence": ["..."], "meta"}`, with the
/// same limits and `file:line` errors as [`load`]. Each claim becomes an [`Example`]
/// without references whose `meta.afc` holds its gold label and evidence
/// ([`crate::domain::AfcGold`]), so that the store keeps it with every other example.
pub fn load_afc(path: &Path) -> Result<LoadedDataset, DatasetError> {
    load_lines(path, parse_afc_line)
}

fn load_lines(
    path: &Path,
    parse: fn(&str) -> Result<Example, String>,
) -> Result<LoadedDataset, DatasetError> {
    let io_err = |reason| DatasetError::Io {
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(io_err)?;
    let mut hasher = Sha256::new();
    let mut reader = BufReader::new(HashingReader {
        inner: file,
        hasher: &mut hasher,
    });
    let mut examples = Vec::new();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    loop {
        buf.clear();
        // One byte past the limit tells a line at the limit from one over it.
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(io_err)?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let line_err = |message: String| DatasetError::Line {
            path: path.to_path_buf(),
            line: line_no,
            message,
        };
        if buf.len() > MAX_LINE_BYTES {
            return Err(line_err(format!(
                "line longer than {MAX_LINE_BYTES} bytes (1 MiB); split the example or shorten it"
            )));
        }
        let text = std::str::from_utf8(&buf)
            .map_err(|e| line_err(format!("not valid UTF-8 at byte {}", e.valid_up_to() + 1)))?;
        if text.trim().is_empty() {
            return Err(line_err(
                "empty line; expected one JSON object per line".into(),
            ));
        }
        let example = parse(text).map_err(line_err)?;
        if let Some(first) = first_line_of.get(&example.id) {
            return Err(line_err(format!(
                "duplicate id {:?} (first used on line {first})",
                example.id
            )));
        }
        first_line_of.insert(example.id.clone(), line_no);
        examples.push(example);
    }
    drop(reader);
    if examples.is_empty() {
        return Err(DatasetError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(LoadedDataset {
        path: path.to_path_buf(),
        hash: hex::encode(hasher.finalize()),
        examples,
    })
}

/// The fields an AFC claim line may have.
const AFC_FIELDS: [&str; 5] = ["id", "text", "label", "evidence", "meta"];

fn parse_afc_line(line: &str) -> Result<Example, String> {
    use crate::domain::{AfcGold, Verdict, AFC_META_KEY};
    let mut obj = json_object(line)?;
    if let Some(unknown) = obj.keys().find(|k| !AFC_FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {unknown:?}; an AFC claim has id, text, label, evidence, meta (put extra data in meta)"
        ));
    }
    let label = obj.remove("label");
    let evidence = obj.remove("evidence");
    let mut example = parse_example(obj, false)?;
    let id = example.id.clone();
    let label = match label {
        None => return Err(format!("missing field \"label\" (id {id:?})")),
        Some(serde_json::Value::String(s)) => match s.as_str() {
            "SUPPORT" => Verdict::Support,
            "REFUTE" => Verdict::Refute,
            other => {
                return Err(format!(
                    "field \"label\" is {other:?}; expected \"SUPPORT\" or \"REFUTE\" (id {id:?})"
                ))
            }
        },
        Some(other) => {
            return Err(format!(
                "field \"label\" must be a string, got {} (id {id:?})",
                kind(&other)
            ))
        }
    };
    let evidence = string_list(evidence, "evidence", &id)?;
    if example.meta.contains_key(AFC_META_KEY) {
        return Err(format!(
            "field \"meta.{AFC_META_KEY}\" is reserved for the label and evidence (id {id:?})"
        ));
    }
    let gold = serde_json::to_value(AfcGold { label, evidence })
        .map_err(|e| format!("{e} (id {id:?})"))?;
    example.meta.insert(AFC_META_KEY.to_string(), gold);
    Ok(example)
}

/// A non-empty array of non-empty strings (`references`, `evidence`), each checked.
fn string_list(
    raw: Option<serde_json::Value>,
    field: &str,
    id: &str,
) -> Result<Vec<String>, String> {
    match raw {
        None => Err(format!("missing field \"{field}\" (id {id:?})")),
        Some(serde_json::Value::Array(items)) => {
            if items.is_empty() {
                return Err(format!("field \"{field}\" is empty (id {id:?})"));
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                match item {
                    serde_json::Value::String(s) if !s.trim().is_empty() => {
                        check_string(&format!("{field}[{i}]"), &s, Some(id))?;
                        out.push(s);
                    }
                    serde_json::Value::String(_) => {
                        return Err(format!("field \"{field}[{i}]\" is empty (id {id:?})"))
                    }
                    other => {
                        return Err(format!(
                            "field \"{field}[{i}]\" must be a string, got {} (id {id:?})",
                            kind(&other)
                        ))
                    }
                }
            }
            Ok(out)
        }
        Some(other) => Err(format!(
            "field \"{field}\" must be an array of strings, got {} (id {id:?})",
            kind(&other)
        )),
    }
}

fn parse_line(line: &str) -> Result<Example, String> {
    let obj = json_object(line)?;
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {unknown:?}; expected id, text, references, meta (put extra data in meta)"
        ));
    }
    parse_example(obj, true)
}

/// A line's JSON object.
fn json_object(line: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
        // serde_json reports "line 1 column N" of this one line: keep the column.
        format!(
            "invalid JSON at column {}: {}",
            e.column(),
            strip_position(&e.to_string())
        )
    })?;
    let serde_json::Value::Object(obj) = value else {
        return Err(format!("expected a JSON object, got {}", kind(&value)));
    };
    Ok(obj)
}

/// An example from its object's `id`, `text`, `meta` and, when `with_references`,
/// `references` (the caller has refused unknown fields).
fn parse_example(
    mut obj: serde_json::Map<String, serde_json::Value>,
    with_references: bool,
) -> Result<Example, String> {
    let raw_id = obj.remove("id");
    let raw_text = obj.remove("text");
    let raw_refs = obj.remove("references");
    let raw_meta = obj.remove("meta");
    let id = match raw_id {
        None => return Err("missing field \"id\"".into()),
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => {
            return Err("field \"id\" is empty".into())
        }
        Some(serde_json::Value::String(s)) => s,
        Some(other) => {
            return Err(format!(
                "field \"id\" must be a string, got {}",
                kind(&other)
            ))
        }
    };
    let text = match raw_text {
        None => return Err(format!("missing field \"text\" (id {id:?})")),
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => {
            return Err(format!("field \"text\" is empty (id {id:?})"))
        }
        Some(serde_json::Value::String(s)) => s,
        Some(other) => {
            return Err(format!(
                "field \"text\" must be a string, got {} (id {id:?})",
                kind(&other)
            ))
        }
    };
    let references = if with_references {
        string_list(raw_refs, "references", &id)?
    } else {
        Vec::new()
    };
    let meta = match raw_meta {
        None | Some(serde_json::Value::Null) => serde_json::Map::new(),
        Some(serde_json::Value::Object(m)) => m,
        Some(other) => {
            return Err(format!(
                "field \"meta\" must be an object, got {} (id {id:?})",
                kind(&other)
            ))
        }
    };
    check_string("id", &id, None)?;
    check_string("text", &text, Some(&id))?;
    for (key, value) in &meta {
        check_json(&format!("meta.{}", key.escape_debug()), key, value, &id)?;
    }
    Ok(Example {
        id,
        text,
        references,
        meta,
    })
}

/// Refuses a string no store can hold the same way (U+0000) or one over the size limit.
fn check_string(field: &str, s: &str, id: Option<&str>) -> Result<(), String> {
    let of = id.map(|id| format!(" (id {id:?})")).unwrap_or_default();
    if let Some(at) = s.find('\0') {
        let ch = s[..at].chars().count() + 1;
        return Err(format!(
            "field \"{field}\" holds a NUL character (U+0000) at character {ch}{of}; \
             PostgreSQL cannot store it, so no engine accepts it"
        ));
    }
    if s.len() > MAX_STRING_BYTES {
        return Err(format!(
            "field \"{field}\" is {} bytes, over the limit of {MAX_STRING_BYTES} (256 KiB){of}",
            s.len()
        ));
    }
    Ok(())
}

/// [`check_string`] on a meta key and every string inside its value.
fn check_json(field: &str, key: &str, value: &serde_json::Value, id: &str) -> Result<(), String> {
    check_string(field, key, Some(id))?;
    match value {
        serde_json::Value::String(s) => check_string(field, s, Some(id)),
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check_json(&format!("{field}[{i}]"), "", v, id)),
        serde_json::Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| check_json(&format!("{field}.{}", k.escape_debug()), k, v, id)),
        _ => Ok(()),
    }
}

fn strip_position(msg: &str) -> &str {
    msg.rfind(" at line ").map_or(msg, |at| &msg[..at])
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Writes examples as JSONL, one per line, fields in the canonical order.
pub fn write_jsonl<W: Write>(out: &mut W, examples: &[Example]) -> std::io::Result<()> {
    for ex in examples {
        serde_json::to_writer(&mut *out, ex)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

struct HashingReader<'a, R> {
    inner: R,
    hasher: &'a mut Sha256,
}

impl<R: Read> Read for HashingReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(content: &str) -> Result<LoadedDataset, DatasetError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jsonl");
        std::fs::write(&path, content).unwrap();
        load(&path)
    }

    fn err_of(content: &str) -> String {
        let e = load_str(content).unwrap_err().to_string();
        // Strip the temporary directory so messages can be compared.
        e.split_once("d.jsonl")
            .map(|x| x.1.to_string())
            .unwrap_or(e)
    }

    const GOOD: &str = r#"{"id": "a", "text": "A and B.", "references": ["A.", "B."]}"#;

    fn load_afc_str(content: &str) -> Result<LoadedDataset, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jsonl");
        std::fs::write(&path, content).unwrap();
        load_afc(&path).map_err(|e| {
            let e = e.to_string();
            e.split_once("d.jsonl")
                .map_or(e.clone(), |x| x.1.to_string())
        })
    }

    #[test]
    fn afc_claims_carry_their_label_and_evidence_in_meta() {
        use crate::domain::{AfcGold, Verdict};
        let line = r#"{"id": "c1", "text": "Masks work.", "label": "SUPPORT", "evidence": ["One.", "Two."], "meta": {"source": "x"}}"#;
        let ds = load_afc_str(&format!(
            "{line}
"
        ))
        .unwrap();
        let ex = &ds.examples[0];
        assert!(ex.references.is_empty());
        assert_eq!(ex.meta["source"], "x");
        let gold = AfcGold::of(ex).unwrap();
        assert_eq!(gold.label, Verdict::Support);
        assert_eq!(gold.evidence, ["One.", "Two."]);
        // A decomposition dataset's example has no gold verdict.
        let plain = load_str(&format!("{GOOD}\n")).unwrap();
        assert!(AfcGold::of(&plain.examples[0])
            .unwrap_err()
            .contains("not loaded from an AFC dataset"));
        for (bad, want) in [
            (line.replace("SUPPORT", "NEI"), ":1: field \"label\" is \"NEI\"; expected \"SUPPORT\" or \"REFUTE\" (id \"c1\")"),
            (line.replace(r#""evidence": ["One.", "Two."], "#, ""), ":1: missing field \"evidence\" (id \"c1\")"),
            (line.replace(r#"["One.", "Two."]"#, "[]"), ":1: field \"evidence\" is empty (id \"c1\")"),
            (line.replace(r#""source": "x""#, r#""afc": 1"#), ":1: field \"meta.afc\" is reserved"),
            (line.replace(r#""label""#, r#""references""#), ":1: unknown field \"references\"; an AFC claim has id, text, label, evidence, meta"),
        ] {
            let e = load_afc_str(&format!("{bad}\n")).unwrap_err();
            assert!(e.starts_with(want), "{e}\nwanted: {want}");
        }
    }

    #[test]
    fn loads_valid_file_and_hashes_it() {
        let content = format!("{GOOD}\n{}\n", GOOD.replace("\"a\"", "\"b\""));
        let ds = load_str(&content).unwrap();
        assert_eq!(ds.examples.len(), 2);
        assert_eq!(ds.examples[1].id, "b");
        assert_eq!(ds.hash, hex::encode(Sha256::digest(content.as_bytes())));
    }

    #[test]
    fn malformed_lines_name_the_place() {
        let cases: &[(&str, &str)] = &[
            ("{\"id\": \"a\"", ":1: invalid JSON at column 10: EOF while parsing an object"),
            ("[1,2]", ":1: expected a JSON object, got an array"),
            (r#"{"text": "x", "references": ["y"]}"#, ":1: missing field \"id\""),
            (r#"{"id": 7, "text": "x", "references": ["y"]}"#, ":1: field \"id\" must be a string, got a number"),
            (r#"{"id": " ", "text": "x", "references": ["y"]}"#, ":1: field \"id\" is empty"),
            (r#"{"id": "a", "references": ["y"]}"#, ":1: missing field \"text\" (id \"a\")"),
            (r#"{"id": "a", "text": "", "references": ["y"]}"#, ":1: field \"text\" is empty (id \"a\")"),
            (r#"{"id": "a", "text": "x"}"#, ":1: missing field \"references\" (id \"a\")"),
            (r#"{"id": "a", "text": "x", "references": "y"}"#, ":1: field \"references\" must be an array of strings, got a string (id \"a\")"),
            (r#"{"id": "a", "text": "x", "references": []}"#, ":1: field \"references\" is empty (id \"a\")"),
            (r#"{"id": "a", "text": "x", "references": ["y", 3]}"#, ":1: field \"references[1]\" must be a string, got a number (id \"a\")"),
            (r#"{"id": "a", "text": "x", "references": ["y"], "meta": [1]}"#, ":1: field \"meta\" must be an object, got an array (id \"a\")"),
            (r#"{"id": "a", "text": "x", "references": ["y"], "label": 1}"#, ":1: unknown field \"label\"; expected id, text, references, meta (put extra data in meta)"),
            ("\n", ":1: empty line; expected one JSON object per line"),
            ("", ": no examples (the file is empty)"),
        ];
        for (content, want) in cases {
            assert_eq!(&err_of(content), want, "input: {content}");
        }
    }

    #[test]
    fn duplicate_ids_and_later_lines_are_reported() {
        let content = format!("{GOOD}\n{GOOD}\n");
        assert_eq!(
            err_of(&content),
            ":2: duplicate id \"a\" (first used on line 1)"
        );
        let content = format!("{GOOD}\n\u{0}{{\n");
        assert!(err_of(&content).starts_with(":2: invalid JSON"));
        let mut bytes = format!("{GOOD}\n").into_bytes();
        bytes.extend_from_slice(b"{\"id\": \"\xff\"}\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.ends_with("d.jsonl:2: not valid UTF-8 at byte 9"), "{e}");
    }

    #[test]
    fn nul_in_any_field_is_refused_with_the_field() {
        let nul = "field \"{}\" holds a NUL character (U+0000) at character {}{}; PostgreSQL cannot store it, so no engine accepts it";
        let msg = |field: &str, at: usize, of: &str| {
            nul.replacen("{}", field, 1)
                .replacen("{}", &at.to_string(), 1)
                .replacen("{}", of, 1)
        };
        let cases: &[(&str, String)] = &[
            (
                r#"{"id": "a", "text": "x\u0000y", "references": ["y"]}"#,
                msg("text", 2, " (id \"a\")"),
            ),
            (
                r#"{"id": "a", "text": "x", "references": ["y", "\u0000"]}"#,
                msg("references[1]", 1, " (id \"a\")"),
            ),
            (
                r#"{"id": "a\u0000", "text": "x", "references": ["y"]}"#,
                msg("id", 2, ""),
            ),
            (
                r#"{"id": "a", "text": "x", "references": ["y"], "meta": {"k": [1, {"n": "\u0000"}]}}"#,
                msg("meta.k[1].n", 1, " (id \"a\")"),
            ),
            (
                r#"{"id": "a", "text": "x", "references": ["y"], "meta": {"k\u0000": 1}}"#,
                msg("meta.k\\0", 2, " (id \"a\")"),
            ),
        ];
        for (line, want) in cases {
            // On the second line, so the line number is checked too.
            let content = format!("{GOOD}\n{}\n", line.replace("\"a", "\"b"));
            let want = format!(":2: {}", want.replace("\"a\"", "\"b\""));
            assert_eq!(err_of(&content), want, "input: {line}");
        }
    }

    #[test]
    fn lone_surrogates_cannot_arrive_but_pairs_do() {
        for lone in [r"x\ud800", r"x\udc00y", r"\ud800\u0041"] {
            let e = err_of(&format!(
                r#"{{"id": "a", "text": "{lone}", "references": ["y"]}}"#
            ));
            assert!(e.starts_with(":1: invalid JSON at column"), "{lone}: {e}");
            assert!(e.contains("escape"), "{lone}: {e}");
        }
        let ds = load_str(r#"{"id": "a", "text": "x\ud83d\ude00", "references": ["y"]}"#).unwrap();
        assert_eq!(ds.examples[0].text, "x\u{1F600}");
    }

    /// A line of exactly `len` bytes (newline included) whose references share the
    /// padding, each under the string limit.
    fn line_of(len: usize) -> String {
        let head = r#"{"id": "a", "text": "x", "references": ["#;
        let refs = 5;
        // Quotes and commas around the references, `]}` and the newline.
        let fixed = head.len() + refs * 2 + (refs - 1) + 2 + 1;
        let pad = len - fixed;
        let parts: Vec<String> = (0..refs)
            .map(|i| {
                let n = pad / refs + usize::from(i < pad % refs);
                format!("\"{}\"", "r".repeat(n))
            })
            .collect();
        let line = format!("{head}{}]}}\n", parts.join(","));
        assert_eq!(line.len(), len);
        line
    }

    #[test]
    fn a_line_over_one_mib_is_refused_and_one_at_the_limit_loads() {
        let ds = load_str(&line_of(MAX_LINE_BYTES)).unwrap();
        assert_eq!(ds.examples[0].references.len(), 5);
        let content = format!("{GOOD}\n{}", line_of(MAX_LINE_BYTES + 1));
        assert_eq!(
            err_of(&content),
            ":2: line longer than 1048576 bytes (1 MiB); split the example or shorten it"
        );
        // A file with no newline at all stops at the limit too.
        let e = err_of(&"x".repeat(3 * MAX_LINE_BYTES));
        assert!(e.starts_with(":1: line longer than"), "{e}");
    }

    #[test]
    fn a_string_over_the_limit_is_refused() {
        let at_limit = "t".repeat(MAX_STRING_BYTES);
        let ok = format!(r#"{{"id": "a", "text": "{at_limit}", "references": ["y"]}}"#);
        assert!(load_str(&ok).is_ok());
        let over = format!(r#"{{"id": "a", "text": "x", "references": ["y", "{at_limit}r"]}}"#);
        assert_eq!(
            err_of(&over),
            ":1: field \"references[1]\" is 262145 bytes, over the limit of 262144 (256 KiB) (id \"a\")"
        );
    }

    #[test]
    fn write_then_load_round_trips() {
        let ds = load_str(&format!("{GOOD}\n")).unwrap();
        let mut out = Vec::new();
        write_jsonl(&mut out, &ds.examples).unwrap();
        let again = load_str(std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(again.examples, ds.examples);
    }
}
