//! A local GGUF model (the real SmolLM2-135M-Instruct of `scripts/setup`) in the
//! embedded engine: a sweep in all four modes generates once per example, stores the
//! completions and leaves no error; a second run generates nothing; and
//! `credence decompose` gives byte-identical completions in two processes.

mod common;

use common::{sql, stderr};
use std::path::{Path, PathBuf};
use std::process::Command;

fn smollm2() -> Option<PathBuf> {
    let dir = std::env::var_os("CREDENCE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../models"));
    let file = dir.join("SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    if file.is_file() {
        return Some(file);
    }
    common::skip::skip(&format!("{} not found (run scripts/setup)", file.display()))
}

fn write_sweep(dir: &Path, model: &Path) -> PathBuf {
    let texts = [
        "The bridge collapsed and the road was blocked.",
        "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
        "The council approved the budget, but the opposition voted against it.",
    ];
    let mut data = String::new();
    for (i, t) in texts.iter().enumerate() {
        let ex = serde_json::json!({"id": format!("e{i}"), "text": t, "references": [t]});
        data.push_str(&ex.to_string());
        data.push('\n');
    }
    std::fs::write(dir.join("d.jsonl"), data).unwrap();
    let sweep = dir.join("local.toml");
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"local\"\nmodes = [\"base\", \"repair\", \"self_repair\", \"all\"]\n\
             shard_size = 3\n\n[[models]]\nname = \"smollm2\"\nbackend = \"gguf\"\n\
             path = \"{}\"\nmax_new_tokens = 200\n\n[[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n",
            model.display()
        ),
    )
    .unwrap();
    sweep
}

#[test]
fn a_local_gguf_model_runs_an_embedded_sweep_in_all_four_modes() {
    let Some(model) = smollm2() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sweep = write_sweep(dir.path(), &model);
    let db = dir.path().join("local.db");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_credence"))
            .env("RUST_LOG", "warn")
            .args([
                "run",
                sweep.to_str().unwrap(),
                "--db",
                db.to_str().unwrap(),
                "--quiet",
            ])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("ERROR"), "{}", stderr(&out));
    assert_eq!(sql(&db, "select count(*) from predictions"), "12");
    // One base generation per example, shared by the four modes; plus at most one
    // self-repair call per example in each of self_repair and all.
    let generations: i64 = sql(&db, "select count(*) from generation_cache")
        .parse()
        .unwrap();
    assert!((3..=9).contains(&generations), "{generations} generations");
    assert_eq!(
        sql(
            &db,
            "select count(*) from generation_cache where completion = ''"
        ),
        "0"
    );
    let before = sql(
        &db,
        "select group_concat(completion, '|') from generation_cache",
    );
    let out = run();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        sql(
            &db,
            "select group_concat(completion, '|') from generation_cache"
        ),
        before,
        "a second run changed the stored generations"
    );
}

#[test]
fn decompose_gives_the_same_completion_in_two_processes() {
    let Some(model) = smollm2() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sweep = write_sweep(dir.path(), &model);
    let decompose = || {
        let out = Command::new(env!("CARGO_BIN_EXE_credence"))
            .env("RUST_LOG", "warn")
            .args(["decompose", "Albert Einstein published the theory of special relativity in 1905 and received the Nobel Prize in Physics in 1921."])
            .args(["--sweep", sweep.to_str().unwrap(), "--model", "smollm2", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stderr.is_empty(), "{}", stderr(&out));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        json["completion"].as_str().unwrap().to_string()
    };
    let first = decompose();
    assert!(!first.trim().is_empty());
    assert_eq!(first, decompose(), "two processes, two completions");
}
