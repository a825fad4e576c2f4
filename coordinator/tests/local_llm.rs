//! A local GGUF model (the real SmolLM2-135M-Instruct of `scripts/setup`) in the
//! embedded engine: a sweep in all four modes generates once per example, stores the
//! completions and leaves no error; a second run generates nothing; and
//! `credence decompose` gives byte-identical completions in two processes.

mod common;

use common::crafted::write_crafted_gguf;
use common::{my_turn, sql, stderr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// stderr is empty, or (when the generation stopped at its limit, as `--json` says) the
/// one note saying so, naming the limit.
fn assert_limit_note(out: &std::process::Output, json: &serde_json::Value, limit: u32) {
    let err = stderr(out);
    match json["hit_limit"].as_bool() {
        Some(true) => {
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with(&format!(
                    "note: the generation stopped at max_new_tokens = {limit};"
                )),
                "{err}"
            );
        }
        Some(false) => assert!(err.is_empty(), "{err}"),
        None => panic!("--json without hit_limit: {json}"),
    }
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

/// `credence run SWEEP --db DB --quiet` with `RUST_LOG` at `log`.
fn quiet_run(sweep: &Path, db: &Path, log: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_credence"))
        .env("RUST_LOG", log)
        .arg("run")
        .arg(sweep)
        .arg("--db")
        .arg(db)
        .arg("--quiet")
        .output()
        .unwrap()
}

#[test]
fn a_local_gguf_model_runs_an_embedded_sweep_in_all_four_modes() {
    let _turn = my_turn();
    let Some(model) = smollm2() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sweep = write_sweep(dir.path(), &model);
    let db = dir.path().join("local.db");
    let run = || quiet_run(&sweep, &db, "warn");
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
    let _turn = my_turn();
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
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_limit_note(&out, &json, 200);
        json["completion"].as_str().unwrap().to_string()
    };
    let first = decompose();
    assert!(!first.trim().is_empty());
    assert_eq!(first, decompose(), "two processes, two completions");
}

/// The embedded engine loads every model before it touches the store: a model file that
/// fails its load's checks stops the run at once with one line naming the file and the
/// field, and no results database is created. (The distributed worker's answer, a job
/// dead-lettered once while the worker goes on: `distributed::faults`.)
#[test]
fn a_crafted_model_file_stops_an_embedded_run_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.gguf");
    write_crafted_gguf(&bad);
    std::fs::write(
        dir.path().join("d.jsonl"),
        "{\"id\":\"e0\",\"text\":\"Rain fell.\",\"references\":[\"Rain fell.\"]}\n",
    )
    .unwrap();
    let sweep = dir.path().join("s.toml");
    std::fs::write(
        &sweep,
        "[sweep]\nname = \"crafted\"\nmodes = [\"base\"]\n\n\
         [[models]]\nname = \"split\"\nbackend = \"sentence-split\"\n\n\
         [[models]]\nname = \"bad\"\nbackend = \"gguf\"\npath = \"bad.gguf\"\n\n\
         [[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n",
    )
    .unwrap();
    let db = dir.path().join("s.db");
    let out = quiet_run(&sweep, &db, "off");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: loading model bad: {}: GGUF metadata has no tokenizer.ggml.tokens",
            bad.display()
        )
    );
    assert!(!db.exists(), "the store was touched");
}

/// The small preset decodes at most its own 256 tokens, not the paper's 4096 (SmolLM2
/// repeats itself to any limit: about 3 minutes here at 4096), and says when it stopped
/// there.
#[test]
fn decompose_with_a_small_preset_stops_at_its_own_limit() {
    let _turn = my_turn();
    if smollm2().is_none() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_credence"))
        .env("RUST_LOG", "warn")
        .args([
            "decompose",
            "The council approved the budget, but the opposition voted against it.",
        ])
        .args(["--model", "smollm2-135m-instruct", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_limit_note(&out, &json, 256);
    let out = Command::new(env!("CARGO_BIN_EXE_credence"))
        .args(["decompose", "x", "--model", "smollm2-135m-instruct"])
        .args(["--max-new-tokens", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--max-new-tokens"),
        "{}",
        stderr(&out)
    );
}
