//! Where integration tests find model weights and the shared data sets. Under `CI=true` a
//! missing file fails the test; elsewhere the test is skipped with a printed reason.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `$CREDENCE_MODELS_DIR` (scripts/test sets it), else the workspace's `models/`.
pub fn models_dir() -> PathBuf {
    std::env::var_os("CREDENCE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("models"))
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The shared data sets, `../shared/data` beside the workspace.
pub fn shared_data() -> PathBuf {
    workspace().join("../shared/data")
}

/// `path` if it exists; otherwise panics under CI and returns `None` (skip) elsewhere.
pub fn require(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let msg = format!("{what} not found at {} (run scripts/setup)", path.display());
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("skipping: {msg}");
    None
}
