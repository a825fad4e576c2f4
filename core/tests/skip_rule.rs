//! The rule for tests that need something outside the checkout is spelled once
//! (`tests/support/skip.rs`, included by every crate's tests), and `scripts/test` runs
//! under it: a local run of the README's test command fails on a missing model or corpus
//! instead of passing with the golden tests skipped.

#[path = "support/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_skip_helper_reads_ci() {
    let mut files = Vec::new();
    for krate in ["core", "infra", "worker", "coordinator"] {
        rust_files(&workspace().join(krate).join("tests"), &mut files);
        rust_files(&workspace().join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 10, "{files:?}");
    let own = workspace().join("core/tests/support/skip.rs");
    let readers: Vec<_> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains(concat!("var(", "\"CI\")"))
                && f.canonicalize().unwrap() != own.canonicalize().unwrap()
        })
        .collect();
    assert!(
        readers.is_empty(),
        "these files read CI themselves instead of using core/tests/support/skip.rs: {readers:?}"
    );
}

#[test]
fn scripts_test_runs_under_ci() {
    let script = std::fs::read_to_string(workspace().join("scripts/test")).unwrap();
    assert!(
        script.contains("export CI=\"${CI:-true}\""),
        "scripts/test does not export CI=true"
    );
}

#[test]
fn ci_is_any_value_but_empty_0_or_false() {
    for (value, ci) in [
        (None, false),
        (Some(""), false),
        (Some("0"), false),
        (Some("false"), false),
        (Some("true"), true),
        (Some("1"), true),
        (Some("yes"), true),
    ] {
        assert_eq!(skip::ci_value(value), ci, "CI={value:?}");
    }
}
