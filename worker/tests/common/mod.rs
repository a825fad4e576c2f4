//! Where integration tests find model weights and the shared data sets. Under `CI=true` a
//! missing file fails the test; elsewhere the test is skipped with a printed reason.

// Not every test module uses all of it.
#![allow(dead_code)]

use credence_worker::embed::Backend;
use std::path::{Path, PathBuf};

/// The encoder backends this machine runs: candle everywhere, native where the CPU has
/// AVX2 and FMA (every CI machine here).
pub fn encoder_backends() -> Vec<Backend> {
    #[cfg(target_arch = "x86_64")]
    let native_runs =
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let native_runs = false;
    if native_runs {
        vec![Backend::Native, Backend::Candle]
    } else {
        vec![Backend::Candle]
    }
}

/// The skip rule every crate's tests share (`core/tests/support/skip.rs`).
pub use crate::servers::skip;

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

pub use skip::shared_data;

/// `path` if it exists; otherwise panics under CI and returns `None` (skip) elsewhere.
pub fn require(path: PathBuf, what: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    skip::skip(&format!(
        "{what} not found at {} (run scripts/setup)",
        path.display()
    ))
}

/// The en_core_web_sm pipeline folder (see [`require`]).
pub fn model_dir() -> Option<PathBuf> {
    require(
        models_dir().join("en_core_web_sm"),
        "the en_core_web_sm model folder",
    )
}

/// The golden file of real spaCy outputs (see [`require`]).
pub fn golden_file() -> Option<PathBuf> {
    require(
        shared_data().join("spacy-golden/en_core_web_sm-golden.jsonl"),
        "the spaCy golden file",
    )
}
