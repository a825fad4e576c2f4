//! `credence nlp parse` end to end: the real binary on a JSONL file, the golden record
//! layout on standard output and in `--out`, and clear errors for bad input lines
//! (an unpaired surrogate escaped in JSON cannot become a Rust string).

#[path = "../../core/tests/support/skip.rs"]
mod skip;

use std::path::PathBuf;
use std::process::Command;

fn model_dir() -> Option<PathBuf> {
    let base = std::env::var_os("CREDENCE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models")));
    let dir = base.join("en_core_web_sm");
    if dir.join("tokenizer").is_file() {
        return Some(dir);
    }
    skip::skip(&format!("model folder {} is missing", dir.display()))
}

fn parse(
    model: &PathBuf,
    input: &str,
    extra: &[&str],
) -> (bool, String, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("input.jsonl");
    std::fs::write(&path, input).expect("write input");
    let out = Command::new(env!("CARGO_BIN_EXE_credence"))
        .args(["nlp", "parse", "--model"])
        .arg(model)
        .arg(&path)
        .args(extra)
        .current_dir(dir.path())
        .output()
        .expect("running credence");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    )
}

#[test]
fn parse_writes_one_golden_layout_record_per_line() {
    let Some(model) = model_dir() else { return };
    let input = concat!(
        r#"{"id": "a1", "text": "Apple is looking at buying U.K. startup for $1 billion."}"#,
        "\n",
        r#"{"id": 7, "text": ""}"#,
        "\n",
        r#"{"id": 8, "text": "Tabs\tand\nnewlines \u0007 and emoji 👍🏽 e\u0301"}"#,
        "\n"
    );
    let (ok, stdout, stderr, dir) = parse(&model, input, &["--threads", "2"]);
    assert!(ok, "{stderr}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("each output line is JSON"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["id"], "a1");
    assert_eq!(lines[1]["id"], 7);
    assert_eq!(lines[1]["tokens"].as_array().map(Vec::len), Some(0));
    let first = &lines[0];
    let apple = &first["tokens"][0];
    for field in [
        "text",
        "idx",
        "ws",
        "tag",
        "pos",
        "dep",
        "head",
        "sent_start",
        "ent_iob",
        "ent_type",
        "ids",
    ] {
        assert!(!apple[field].is_null(), "token field {field} is present");
    }
    let ents: Vec<(&str, &str)> = first["ents"]
        .as_array()
        .expect("ents")
        .iter()
        .map(|e| {
            (
                e["text"].as_str().unwrap_or(""),
                e["label"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(ents.contains(&("Apple", "ORG")), "{ents:?}");
    assert_eq!(first["sents"], serde_json::json!([[0, 12]]));
    // --out writes the same bytes to a file.
    let out_path = dir.path().join("out.jsonl");
    let (ok, to_stdout, stderr, _dir) = parse(
        &model,
        input,
        &[
            "--threads",
            "1",
            "--out",
            out_path.to_str().expect("utf-8 path"),
        ],
    );
    assert!(ok, "{stderr}");
    assert!(to_stdout.is_empty());
    assert_eq!(
        std::fs::read_to_string(&out_path).expect("out file"),
        stdout
    );
}

#[test]
fn bad_input_lines_are_clear_errors() {
    let Some(model) = model_dir() else { return };
    let surrogate = concat!(
        r#"{"id": 1, "text": "fine"}"#,
        "\n",
        r#"{"id": 2, "text": "lone \ud800 half"}"#,
        "\n"
    );
    let (ok, _, stderr, _dir) = parse(&model, surrogate, &[]);
    assert!(!ok, "an unpaired surrogate is rejected");
    assert!(
        stderr.contains("input.jsonl:2") && stderr.contains("surrogate"),
        "{stderr}"
    );
    let (ok, _, stderr, _dir) = parse(&model, "{\"id\": 1}\n", &[]);
    assert!(
        !ok && stderr.contains("input.jsonl:1") && stderr.contains("text"),
        "{stderr}"
    );
}
