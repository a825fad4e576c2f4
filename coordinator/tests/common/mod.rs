//! Helpers shared by the embedded-engine CLI tests: SQL against a results file, a
//! finished command's output as text, and turns for the tests that run a model.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

pub mod crafted;
#[path = "../../../core/tests/support/skip.rs"]
pub mod skip;
pub mod synthetic;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

/// The turn of a test that runs `credence` on a model: the tests of a binary that hold it
/// run one after another. Each such process has its own thread pools, and the LLM
/// engine's spins on a barrier between its threads (issue 32): side by side on a 2-core
/// CI machine two of them slow each other down far past the sum of their times
/// (embedded_run: 742 s in parallel against about 600 s in turn; local_llm: 28 to 57 s
/// against 16 s).
static TAKE_TURNS: Mutex<()> = Mutex::new(());

/// Waits for this binary's turn (see [`TAKE_TURNS`]); the turn ends when the guard drops.
pub fn my_turn() -> MutexGuard<'static, ()> {
    TAKE_TURNS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

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

/// The rows of a rendered `credence view` list page, as `model/example id`, in order.
pub fn listed_rows(html: &str) -> Vec<String> {
    html.split("<tr data-id=\"")
        .skip(1)
        .map(|s| {
            let id = &s[..s.find('"').unwrap()];
            let model = s.split("data-model=\"").nth(1).unwrap();
            format!("{}/{id}", &model[..model.find('"').unwrap()])
        })
        .collect()
}
