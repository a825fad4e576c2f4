//! `credence verify` end to end with the real binary and parser: the report as a table
//! and as JSON for a source and its claims, the `--claims` JSONL form (standard output
//! and `--out`), and file:line errors for bad input lines.

#[path = "../../core/tests/support/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::Command;

fn models() -> Option<PathBuf> {
    let base = std::env::var_os("CREDENCE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models")));
    if base.join("en_core_web_sm/tokenizer").is_file() {
        return Some(base);
    }
    skip::skip(&format!(
        "model folder {}/en_core_web_sm is missing",
        base.display()
    ))
}

/// Runs `credence verify ARGS` in `dir` with the models folder; (success, stdout, stderr).
fn verify(models: &Path, dir: &Path, args: &[&str]) -> (bool, String, String) {
    credence(models, dir, "verify", args)
}

/// Runs `credence repair ARGS` in `dir` with the models folder; (success, stdout, stderr).
fn repair(models: &Path, dir: &Path, args: &[&str]) -> (bool, String, String) {
    credence(models, dir, "repair", args)
}

fn credence(models: &Path, dir: &Path, command: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_credence"))
        .arg(command)
        .args(args)
        .env("CREDENCE_MODELS_DIR", models)
        .current_dir(dir)
        .output()
        .expect("running credence");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const S: &str = "Albert Einstein published the theory of special relativity in 1905 and \
                 received the Nobel Prize in Physics in 1921.";
const C1: &str = "Albert Einstein published the theory of special relativity in 1905.";
const C2: &str = "He received the Nobel Prize in Physics in 1921.";

#[test]
fn source_and_claims_as_json_and_table() {
    let Some(models) = models() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = verify(
        &models,
        dir.path(),
        &[
            "--source",
            S,
            "--claim",
            C1,
            "--claim",
            C2,
            "--no-encoder",
            "--json",
        ],
    );
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
    assert_eq!(v["n_viol"], 0);
    assert_eq!(v["entities"]["epr"], 1.0);
    assert_eq!(v["repetition"], serde_json::Value::Null);
    assert_eq!(v["verify_ok"], serde_json::Value::Null);
    assert_eq!(v["self_containment"][0]["antecedent"], "Albert Einstein");
    assert_eq!(v["self_containment"][0]["claim"], 1);

    let (ok, stdout, stderr) = verify(
        &models,
        dir.path(),
        &[
            "--source",
            "The bridge collapsed and the road was blocked.",
            "--claim",
            "The bridge collapsed and the road was blocked.",
            "--no-encoder",
        ],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("cc_subj at 7 (blocked)"), "{stdout}");
    assert!(stdout.contains("AVR 1.000"), "{stdout}");
}

#[test]
fn with_the_encoder_verify_ok_is_decided() {
    let Some(models) = models() else { return };
    if !models.join("all-MiniLM-L6-v2").is_dir() {
        eprintln!("skipped: no all-MiniLM-L6-v2 under {}", models.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (ok, stdout, stderr) = verify(
        &models,
        dir.path(),
        &[
            "--source", S, "--claim", C1, "--claim", C2, "--claim", C2, "--json",
        ],
    );
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    // c2 twice: one duplicate pair (1, 2) at cosine 1.
    assert_eq!(v["repetition"]["dup_count"], 1);
    assert_eq!(v["repetition"]["pairs"][0]["i"], 1);
    assert_eq!(v["repetition"]["pairs"][0]["j"], 2);
    assert_eq!(v["verify_ok"], false);
}

#[test]
fn claims_file_one_record_per_line() {
    let Some(models) = models() else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("claims.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"id": "a", "text": "The bridge collapsed and the road was blocked."}"#,
            "\n\n",
            r#"{"id": 2, "text": "Paris and Berlin are capitals."}"#,
            "\n",
            r#"{"id": 3, "text": "She smiled, saying she was tired."}"#,
            "\n",
        ),
    )
    .unwrap();
    let want = [
        r#"{"id":"a","atomic":false,"n_viol":1,"boundaries":[{"rule":"cc_subj","token_i":7}]}"#,
        r#"{"id":2,"atomic":true,"n_viol":0,"boundaries":[]}"#,
        r#"{"id":3,"atomic":false,"n_viol":1,"boundaries":[{"rule":"advcl","token_i":3}]}"#,
    ];
    let (ok, stdout, stderr) = verify(&models, dir.path(), &["--claims", "claims.jsonl"]);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.lines().collect::<Vec<_>>(), want);

    let (ok, stdout, stderr) = verify(
        &models,
        dir.path(),
        &[
            "--claims",
            "claims.jsonl",
            "--out",
            "out.jsonl",
            "--advcl-requires-subject",
        ],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.is_empty());
    let written = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let lines: Vec<&str> = written.lines().collect();
    assert_eq!(lines[..2], want[..2]);
    assert_eq!(
        lines[2],
        r#"{"id":3,"atomic":true,"n_viol":0,"boundaries":[]}"#
    );
}

#[test]
fn bad_lines_and_arguments_are_errors() {
    let Some(models) = models() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.jsonl"),
        "{\"id\": 1, \"text\": \"Fine.\"}\n{\"id\": 2, \"txt\": \"typo\"}\n",
    )
    .unwrap();
    let (ok, _, stderr) = verify(&models, dir.path(), &["--claims", "bad.jsonl"]);
    assert!(!ok);
    assert!(stderr.contains("bad.jsonl:2:"), "{stderr}");
    assert!(stderr.contains("text"), "{stderr}");
    // Neither form, or a claim without a source.
    let (ok, _, stderr) = verify(&models, dir.path(), &[]);
    assert!(!ok, "{stderr}");
    let (ok, _, stderr) = verify(&models, dir.path(), &["--claim", "x"]);
    assert!(!ok, "{stderr}");
    let (ok, _, stderr) = verify(&models, dir.path(), &["--claims", "missing.jsonl"]);
    assert!(!ok);
    assert!(stderr.contains("missing.jsonl"), "{stderr}");
}

#[test]
fn repair_replaces_the_pronoun_and_reports_before_and_after() {
    let Some(models) = models() else { return };
    let dir = tempfile::tempdir().unwrap();
    let args = ["--source", S, "--claim", C1, "--claim", C2];
    let (ok, stdout, stderr) = repair(&models, dir.path(), &[&args[..], &["--json"]].concat());
    assert!(ok, "{stderr}");
    assert_eq!(stderr, "");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert_eq!(
        v["repaired"],
        serde_json::json!([
            C1,
            "Albert Einstein received the Nobel Prize in Physics in 1921."
        ])
    );
    assert_eq!(v["actions"][0]["step"], "pronoun", "{v}");
    assert_eq!(v["actions"][0]["claim"], 1, "{v}");
    assert_eq!(v["actions"].as_array().map(Vec::len), Some(1), "{v}");
    // The unresolved pronoun is flagged before and gone after; every entity kept.
    assert_ne!(
        v["before"]["self_containment"],
        serde_json::json!([]),
        "{v}"
    );
    assert_eq!(v["after"]["self_containment"], serde_json::json!([]), "{v}");
    assert_eq!(v["after"]["avr"], 0.0);
    assert_eq!(v["after"]["entities"]["epr"], 1.0);
    assert_eq!(v["pipeline_version"], "rule-1");

    let (ok, text, _) = repair(&models, dir.path(), &args);
    assert!(ok);
    assert!(text.contains("\"step\":\"pronoun\""), "{text}");
    assert!(
        text.contains("2. Albert Einstein received the Nobel Prize in Physics in 1921."),
        "{text}"
    );
}

#[test]
fn repair_splits_a_compound_claim_and_leaves_an_atomic_one_alone() {
    let Some(models) = models() else { return };
    let dir = tempfile::tempdir().unwrap();
    let s = "The bridge collapsed and the road was blocked.";
    let (ok, stdout, stderr) = repair(
        &models,
        dir.path(),
        &["--source", s, "--claim", s, "--json"],
    );
    assert!(ok, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    assert_eq!(
        v["repaired"],
        serde_json::json!(["The bridge collapsed.", "The road was blocked."])
    );
    assert_eq!(v["actions"][0]["step"], "split", "{v}");
    assert_eq!(v["after"]["n_viol"], 0);

    let s = "Paris and Berlin are capitals.";
    let (ok, text, stderr) = repair(&models, dir.path(), &["--source", s, "--claim", s]);
    assert!(ok, "{stderr}");
    assert!(text.contains("the rule tier changed nothing"), "{text}");

    // A claim is required.
    let (ok, _, stderr) = repair(&models, dir.path(), &["--source", s]);
    assert!(!ok);
    assert!(stderr.contains("--claim"), "{stderr}");
}
