//! Shared set-up for the NLP tests: where the model folder and the shared data are, and
//! the CI rule (under `CI=true` a missing model or data file fails the test).

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

use std::path::PathBuf;

/// Whether the tests run under CI (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// `$CREDENCE_MODELS_DIR/en_core_web_sm` (default `<repo>/models/en_core_web_sm`) if it
/// exists. Outside CI a missing folder returns `None` with a printed reason; under CI
/// it panics.
pub fn model_dir() -> Option<PathBuf> {
    let base = std::env::var_os("CREDENCE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../models")));
    let dir = base.join("en_core_web_sm");
    if dir.join("tokenizer").is_file() {
        return Some(dir);
    }
    let reason = format!(
        "model folder {} is missing (run scripts/setup or set CREDENCE_MODELS_DIR)",
        dir.display()
    );
    assert!(!in_ci(), "{reason}");
    eprintln!("skipped: {reason}");
    None
}

/// The golden file of real spaCy outputs in the shared data folder
/// (`$CREDENCE_SHARED_DATA`, default `<repo>/../shared/data`).
pub fn golden_file() -> Option<PathBuf> {
    let base = std::env::var_os("CREDENCE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data"))
        });
    let path = base.join("spacy-golden/en_core_web_sm-golden.jsonl");
    if path.is_file() {
        return Some(path);
    }
    let reason = format!(
        "golden file {} is missing (set CREDENCE_SHARED_DATA)",
        path.display()
    );
    assert!(!in_ci(), "{reason}");
    eprintln!("skipped: {reason}");
    None
}
