//! Parity of `metrics::difflib::ratio` with CPython's `difflib.SequenceMatcher(None, a, b)
//! .ratio()` on the pairs in `tests/fixtures/difflib_ratio.jsonl` (made by
//! `tests/fixtures/make_difflib_fixture.py`).

use credence_core::matching::difflib::ratio;
use serde::Deserialize;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/difflib_ratio.jsonl"
);

/// The fixture holds 3,133 pairs; fewer than this means it was truncated or regenerated
/// without most of its families.
const MIN_PAIRS: usize = 2_000;

const TOLERANCE: f64 = 1e-12;

#[derive(Deserialize)]
struct Pair {
    a: String,
    b: String,
    ratio: f64,
    kind: String,
}

#[test]
fn ratio_matches_cpython_on_every_fixture_pair() {
    let text =
        std::fs::read_to_string(FIXTURE).unwrap_or_else(|e| panic!("reading {FIXTURE}: {e}"));
    let mut count = 0usize;
    let mut max_diff = 0.0f64;
    let mut failures = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let pair: Pair =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{FIXTURE}:{}: {e}", index + 1));
        let got = ratio(&pair.a, &pair.b);
        let diff = (got - pair.ratio).abs();
        max_diff = max_diff.max(diff);
        if diff > TOLERANCE {
            failures.push(format!(
                "line {} ({}): got {got}, CPython {} for a={:?} b={:?}",
                index + 1,
                pair.kind,
                pair.ratio,
                pair.a,
                pair.b
            ));
        }
        count += 1;
    }
    assert!(
        count >= MIN_PAIRS,
        "{FIXTURE} has {count} pairs, expected at least {MIN_PAIRS}"
    );
    assert!(
        failures.is_empty(),
        "{} of {count} pairs differ from CPython by more than {TOLERANCE:e} \
         (max abs diff {max_diff:e}); first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(5)].join("\n")
    );
    // Visible with --nocapture: the figure reported to the lead.
    eprintln!("difflib parity: {count} pairs, max abs diff {max_diff:e}");
}
