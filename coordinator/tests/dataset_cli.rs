//! `credence dataset build` and `credence dataset stats` as a user runs them, on the real
//! WikiSplit test file in `../shared/data`: two builds give the same bytes, the printed
//! sha256 is the file's, and stats prints the counts and the marker profile. Under
//! `CI=true` a missing corpus fails the test; elsewhere it is skipped.

#[path = "../../shared/tests/support/skip.rs"]
mod skip;

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn wiki_split() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/wiki-split");
    if dir.is_dir() {
        return Some(dir);
    }
    skip::skip(&format!("corpus {} not found", dir.display()))
}

fn credence(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_credence"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("credence runs")
}

#[test]
fn build_twice_same_bytes_then_stats() {
    let Some(source) = wiki_split() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let source = source.to_str().unwrap();
    let mut files = Vec::new();
    for name in ["a.jsonl", "b.jsonl"] {
        let out = tmp.path().join(name);
        let run = credence(&[
            "dataset",
            "build",
            "wikisplit-bench-100",
            "--source",
            source,
            "--out",
            out.to_str().unwrap(),
            "--seed",
            "42",
        ]);
        let stdout = String::from_utf8_lossy(&run.stdout);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stdout}{stderr}");
        let bytes = std::fs::read(&out).unwrap();
        let sha = hex::encode(Sha256::digest(&bytes));
        assert!(stdout.contains(&format!("sha256 {sha}")), "{stdout}");
        assert!(stdout.contains("100 examples written"), "{stdout}");
        assert!(stderr.contains("rows of test.tsv"), "{stderr}");
        files.push(bytes);
    }
    assert_eq!(files[0], files[1]);

    let a = tmp.path().join("a.jsonl");
    let run = credence(&["dataset", "stats", a.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert!(
        stdout.contains("examples      100 (100 distinct texts)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("references    2.00 per example (min 2, max 2)"),
        "{stdout}"
    );
    for marker in ["and", "but", "because", "so"] {
        assert!(
            stdout.contains(&format!("\n  {marker:<9} ")),
            "{marker}: {stdout}"
        );
    }
    let run = credence(&["dataset", "stats", "--json", a.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(json["examples"], 100);
    assert_eq!(json["sha256"], hex::encode(Sha256::digest(&files[0])));
}

#[test]
fn unknown_benchmark_and_missing_source_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.jsonl");
    let run = credence(&[
        "dataset",
        "build",
        "wiki",
        "--source",
        ".",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("unknown benchmark \"wiki\"; expected one of wikisplit-bench-100"),
        "{stderr}"
    );
    let missing = tmp.path().join("nope.tsv");
    let run = credence(&[
        "dataset",
        "build",
        "wikisplit-bench-100",
        "--source",
        missing.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("nope.tsv"), "{stderr}");
    assert!(!out.exists());
}
