//! ClaimDecompBench-1000 built from the real AG News test file in `../shared/data` with
//! the real rule oracle (the conjunction oracle): count, balance, filters, determinism,
//! hand-checked examples, the sha256 in the dataset card, and a malformed CSV line.
//! Under `CI=true` a missing corpus fails the test; elsewhere it is skipped.

use crate::common::skip;

use credence_core::builders::{self, claimdecomp, Benchmark, BuildOptions};
use credence_core::entities::tier1_epr;
use credence_worker::decompose::ConjunctionOracle;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

fn ag_news() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/ag_news_csv");
    if dir.is_dir() {
        return Some(dir);
    }
    skip::skip(&format!("corpus {} not found", dir.display()))
}

fn build(source: &Path) -> Result<builders::Build, builders::BenchmarkError> {
    builders::build(
        Benchmark::ClaimDecomp1000,
        source,
        &BuildOptions::default(),
        &ConjunctionOracle::new(),
    )
}

#[test]
fn claimdecomp_bench_1000() {
    let Some(dir) = ag_news() else {
        return;
    };
    let built = build(&dir).unwrap();
    let examples = &built.examples;
    assert_eq!(examples.len(), 1000);
    let mut per_category: BTreeMap<&str, usize> = BTreeMap::new();
    for e in examples {
        *per_category
            .entry(e.meta["category"].as_str().unwrap())
            .or_default() += 1;
    }
    assert_eq!(per_category.len(), 4);
    assert!(
        per_category.values().all(|&n| (240..=260).contains(&n)),
        "{per_category:?}"
    );
    let oracle = ConjunctionOracle::new();
    for e in examples {
        let words = e
            .text
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_alphanumeric));
        assert!(words.count() >= claimdecomp::MIN_WORDS, "{}", e.id);
        assert!(e.references.len() >= 2, "{}", e.id);
        assert_eq!(e.references, oracle.split(&e.text), "{}", e.id);
        assert!(
            tier1_epr(&e.text, &e.references) >= claimdecomp::MIN_EPR_ORACLE,
            "{}",
            e.id
        );
        for residue in ["#36;", "#39;", "quot;", "\\", "&lt;", "(AP)", "(Reuters)"] {
            assert!(
                !e.text.contains(residue),
                "{}: {residue:?} in {:?}",
                e.id,
                e.text
            );
        }
        assert!(e.text.contains(", and "), "{}", e.id);
    }
    let texts: HashSet<&str> = examples.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts.len(), 1000, "repeated text");

    let bytes = builders::to_jsonl(examples);
    assert_eq!(bytes, builders::to_jsonl(&build(&dir).unwrap().examples));
    let card = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../datasets/claimdecomp-bench-1000.md"),
    )
    .unwrap();
    let at = card.find("sha256: `").expect("card records the sha256");
    assert_eq!(
        hex::encode(Sha256::digest(&bytes)),
        card[at + 9..at + 9 + 64],
        "output differs from datasets/claimdecomp-bench-1000.md (rebuild and update the card)"
    );
    // Checked by hand against test.csv lines 240 and 603.
    let e = examples.iter().find(|e| e.id == "agnews-test-240").unwrap();
    assert_eq!(
        e.text,
        "After Wait, Google Set for Market Debut, and shares of Google Inc. will make their Nasdaq stock market debut on Thursday after the year's most anticipated initial public offering priced far below initial estimates, raising $1.67 billion."
    );
    assert_eq!(
        e.references,
        [
            "After Wait, Google Set for Market Debut.",
            "Shares of Google Inc. will make their Nasdaq stock market debut on Thursday after the year's most anticipated initial public offering priced far below initial estimates, raising $1.67 billion."
        ]
    );
    assert_eq!(e.meta["category"], "Business");
    let e = examples.iter().find(|e| e.id == "agnews-test-603").unwrap();
    assert_eq!(
        e.text,
        "Global server sales on the rise, and sales of server systems rose 7.7 percent globally in the second quarter to $11.55 billion as demand for Information Technology remained strong after a three year downturn, market research firm Gartner said in a statement."
    );
    assert_eq!(e.meta["category"], "Sci/Tech");
}

#[test]
fn malformed_csv_line_is_named() {
    let Some(dir) = ag_news() else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("test.csv")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2999] = "\"2\",\"Title with \"stray\" quote\",\"x\"";
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("test.csv");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let e = build(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("{}:3000: column 2:", path.display())),
        "{e}"
    );
}
