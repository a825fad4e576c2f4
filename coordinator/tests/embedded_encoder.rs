//! `credence run` with an `[encoder]`: Semantic-F1 and RR are stored for every example,
//! through the embedding cache (a second run over the same texts encodes nothing), and
//! `credence embed` writes one vector line per input line. Uses the real all-MiniLM-L6-v2.

mod common;

use common::{sql, stderr};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn models_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("CREDENCE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("models"));
    if dir.join("all-MiniLM-L6-v2/model.safetensors").is_file() {
        return Some(dir);
    }
    common::skip::skip(&format!(
        "all-MiniLM-L6-v2 not found in {} (run scripts/setup)",
        dir.display()
    ))
}

fn credence(models: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_credence"));
    c.env("RUST_LOG", "warn").env("CREDENCE_MODELS_DIR", models);
    c
}

fn write_sweep(dir: &Path, name: &str) -> PathBuf {
    let sample = workspace().join("examples/sample.jsonl");
    let sweep = dir.join(format!("{name}.toml"));
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"{name}\"\nmodes = [\"base\", \"repair\"]\nshard_size = 8\n\n\
             [encoder]\npreset = \"all-MiniLM-L6-v2\"\nbatch_size = 32\n\n\
             [[models]]\nname = \"split\"\nbackend = \"sentence-split\"\n\n\
             [[models]]\nname = \"oracle\"\nbackend = \"conjunction-oracle\"\n\n\
             [[datasets]]\nid = \"sample\"\npath = \"{}\"\n\n\
             [[datasets]]\nid = \"dup\"\npath = \"dup.jsonl\"\n",
            sample.display()
        ),
    )
    .unwrap();
    // A sentence said twice: split into two identical claims, one of which is a duplicate.
    std::fs::write(
        dir.join("dup.jsonl"),
        "{\"id\": \"d1\", \"text\": \"The bridge collapsed on Monday. The bridge collapsed on Monday.\", \"references\": [\"The bridge collapsed on Monday.\"]}\n",
    )
    .unwrap();
    sweep
}

#[test]
fn semantic_f1_and_rr_are_stored_and_texts_encoded_once() {
    let Some(models) = models_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let first = credence(&models)
        .arg("run")
        .arg(write_sweep(dir.path(), "enc1"))
        .arg("--db")
        .arg(&db)
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(
        sql(
            &db,
            "select count(*) from example_metrics where semantic_f1 is null or rr is null"
        ),
        "0"
    );
    let bounds = sql(
        &db,
        "select min(semantic_f1) > 0.3, max(semantic_f1) <= 1.0000001, min(rr) >= 0, max(rr) < 1 from example_metrics",
    );
    assert_eq!(bounds, "1|1|1|1", "{bounds}");
    // Modes share claims and models share references: the cache reports hits, and the
    // table holds each distinct text once.
    let err = stderr(&first);
    let counts = err
        .lines()
        .find(|l| l.starts_with("embedding cache: "))
        .unwrap_or_else(|| panic!("no cache line in: {err}"))
        .to_string();
    let misses: usize = counts
        .split(", ")
        .nth(1)
        .and_then(|s| s.strip_suffix(" misses"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{counts}"));
    let cached: usize = sql(&db, "select count(*) from embedding_cache")
        .parse()
        .unwrap();
    assert_eq!(misses, cached, "{counts}");
    assert!(!counts.starts_with("embedding cache: 0 hits"), "{counts}");
    // The oracle's claims that equal a reference score 1 against it.
    let identical = sql(
        &db,
        "select count(*) from results where model = 'oracle' and mode = 'base' \
         and claims = \"references\" and abs(semantic_f1 - 1) > 1e-6",
    );
    assert_eq!(identical, "0");
    let n_identical = sql(
        &db,
        "select count(*) from results where model = 'oracle' and mode = 'base' and claims = \"references\"",
    );
    assert_ne!(
        n_identical, "0",
        "the sample has examples the oracle splits exactly"
    );
    // RR = dup_count / |C| = 1/2 for the sentence said twice; Semantic-F1 is 1.
    assert_eq!(
        sql(
            &db,
            "select n_claims, rr, round(semantic_f1, 6) from example_metrics \
             where run_id = 'enc1' and model = 'split' and mode = 'base' and example_id = 'd1'"
        ),
        "2|0.5|1.0"
    );

    // Another run over the same texts: everything comes from the cache.
    let second = credence(&models)
        .arg("run")
        .arg(write_sweep(dir.path(), "enc2"))
        .arg("--db")
        .arg(&db)
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(stderr(&second).contains(" 0 misses"), "{}", stderr(&second));
    assert_eq!(
        sql(
            &db,
            "select count(*) from example_metrics a join example_metrics b \
             on a.example_id = b.example_id and a.model = b.model and a.mode = b.mode \
             where a.run_id = 'enc1' and b.run_id = 'enc2' and a.semantic_f1 = b.semantic_f1 and a.rr = b.rr"
        ),
        sql(&db, "select count(*) from example_metrics where run_id = 'enc1'")
    );
}

#[test]
fn embed_command_writes_one_unit_vector_per_line() {
    let Some(models) = models_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        "{\"id\": \"a\", \"text\": \"The bridge collapsed.\"}\n{\"id\": 7, \"text\": \"\"}\n",
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let run = credence(&models)
        .args(["embed", "--encoder", "all-MiniLM-L6-v2"])
        .arg(&input)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", stderr(&run));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["id"], "a");
    assert_eq!(lines[1]["id"], 7);
    for l in &lines {
        let v: Vec<f64> = serde_json::from_value(l["embedding"].clone()).unwrap();
        assert_eq!(v.len(), 384);
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }

    std::fs::write(&input, "{\"id\": 1, \"text\": \"ok\"}\n{\"id\": 2}\n").unwrap();
    let bad = credence(&models)
        .args(["embed", "--encoder", "all-MiniLM-L6-v2"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("in.jsonl:2: missing field `text`"),
        "{}",
        stderr(&bad)
    );
}
