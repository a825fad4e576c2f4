//! Helpers shared by the embedded-engine CLI tests: SQL against a results file, and a
//! finished command's output as text.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

pub mod crafted;
#[path = "../../../core/tests/support/skip.rs"]
pub mod skip;

use std::path::Path;
use std::process::{Command, Output};

/// Runs `query` against the SQLite file `db` with the `sqlite3` shell; trimmed output.
pub fn sql(db: &Path, query: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg(query)
        .output()
        .expect("sqlite3 is installed by scripts/setup");
    assert!(
        out.status.success(),
        "sqlite3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A finished command's standard output.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// A finished command's standard error.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}
