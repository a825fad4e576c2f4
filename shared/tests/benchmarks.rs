//! The benchmark builders on the real corpora in `../shared/data` (beside the workspace):
//! counts, disjointness, filters, determinism, hand-checked examples, the sha256 recorded
//! in each dataset card, and malformed source lines. ClaimDecompBench, which needs the
//! worker's rule oracle, is tested in `worker/tests/claimdecomp_bench.rs`.
//!
//! Under `CI=true` a missing corpus fails the test; elsewhere the test is skipped with a
//! printed reason.

#[path = "support/skip.rs"]
mod skip;

use credence_shared::benchmarks::{
    self, profile, socialclaimsplit, Benchmark, BuildOptions, ReferenceSplitter,
};
use credence_shared::sweep::ModelBackend;
use credence_shared::Example;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The shared corpus folder `name`, or None (skip) outside CI when it is missing.
fn corpus(name: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data")
        .join(name);
    if dir.is_dir() {
        return Some(dir);
    }
    skip::skip(&format!("corpus {} not found", dir.display()))
}

/// The builders here need no oracle; one that is called is a bug.
struct NoOracle;
impl ReferenceSplitter for NoOracle {
    fn name(&self) -> &str {
        "none"
    }
    fn split(&self, _: &str) -> Vec<String> {
        panic!("only ClaimDecompBench uses the oracle")
    }
}

fn build(b: Benchmark, source: &Path) -> Vec<Example> {
    benchmarks::build(b, source, &BuildOptions::default(), &NoOracle)
        .unwrap_or_else(|e| panic!("{b}: {e}"))
        .examples
}

/// The sha256 a dataset card records for its output.
fn card_sha256(b: Benchmark) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../datasets")
        .join(format!("{}.md", b.name()));
    let card = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let at = card
        .find("sha256: `")
        .unwrap_or_else(|| panic!("{}: no \"sha256: `...`\" line", path.display()));
    card[at + 9..at + 9 + 64].to_string()
}

/// Same bytes on a second build, no repeated text or id, and the card's sha256.
fn check_stable(b: Benchmark, source: &Path, examples: &[Example]) {
    let bytes = benchmarks::to_jsonl(examples);
    assert_eq!(
        bytes,
        benchmarks::to_jsonl(&build(b, source)),
        "{b}: rebuild differs"
    );
    let texts: HashSet<&str> = examples.iter().map(|e| e.text.as_str()).collect();
    assert_eq!(texts.len(), examples.len(), "{b}: repeated text");
    let ids: HashSet<&str> = examples.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), examples.len(), "{b}: repeated id");
    assert_eq!(
        hex::encode(Sha256::digest(&bytes)),
        card_sha256(b),
        "{b}: output differs from the sha256 in datasets/{b}.md (rebuild and update the card)"
    );
}

fn by_id<'a>(examples: &'a [Example], id: &str) -> &'a Example {
    examples
        .iter()
        .find(|e| e.id == id)
        .unwrap_or_else(|| panic!("no example {id}"))
}

#[test]
fn wikisplit_bench_100_and_1000() {
    let Some(dir) = corpus("wiki-split") else {
        return;
    };
    let small = build(Benchmark::WikiSplit100, &dir);
    let large = build(Benchmark::WikiSplit1000, &dir);
    assert_eq!(small.len(), 100);
    assert_eq!(large.len(), 1000);
    let small_texts: HashSet<&str> = small.iter().map(|e| e.text.as_str()).collect();
    assert!(
        large.iter().all(|e| !small_texts.contains(e.text.as_str())),
        "not disjoint"
    );
    for e in small.iter().chain(&large) {
        assert_eq!(e.references.len(), 2, "{}", e.id);
        for r in &e.references {
            let words = r
                .split_whitespace()
                .filter(|w| w.chars().any(char::is_alphanumeric));
            assert!(words.count() >= 5, "{}: short split {r:?}", e.id);
        }
        for residue in [" ,", " .", " 's ", " n't", "``", "''", "( ", " )"] {
            assert!(
                !e.text.contains(residue),
                "{}: {residue:?} left in {:?}",
                e.id,
                e.text
            );
        }
    }
    check_stable(Benchmark::WikiSplit100, &dir, &small);
    check_stable(Benchmark::WikiSplit1000, &dir, &large);
    // Checked by hand against test.tsv lines 26 and 18.
    let e = by_id(&small, "wikisplit-test-26");
    assert_eq!(
        e.text,
        "\"My Sweet Lord\" is a song by English musician and former Beatle George Harrison that was released in November 1970 on his triple album \"All Things Must Pass\"."
    );
    assert_eq!(
        e.references,
        [
            "\"My Sweet Lord\" is a song by English musician and former Beatle, George Harrison.",
            "It was released in November 1970 on his triple album \"All Things Must Pass\"."
        ]
    );
    let e = by_id(&large, "wikisplit-test-18");
    assert_eq!(
        e.text,
        "\"I Don't Care if the Sun Don't Shine\" is a popular song, popularized by Patti Page in 1950."
    );
    assert_eq!(
        e.references[1],
        "The most popular version was done by Patti Page in 1950."
    );
}

#[test]
fn socialclaimsplit_100_and_1000() {
    let Some(dir) = corpus("fever") else {
        return;
    };
    let small = build(Benchmark::SocialClaimSplit100, &dir);
    let large = build(Benchmark::SocialClaimSplit1000, &dir);
    assert_eq!(small.len(), 100);
    assert_eq!(large.len(), 1000);
    let small_claims: HashSet<&str> = small
        .iter()
        .flat_map(|e| e.references.iter().map(String::as_str))
        .collect();
    assert!(
        large
            .iter()
            .flat_map(|e| &e.references)
            .all(|r| !small_claims.contains(r.as_str())),
        "a claim is in both"
    );
    for (set, n) in [(&small, 25), (&large, 250)] {
        let stats = profile::profile(set);
        for m in socialclaimsplit::MARKERS {
            let share = stats.markers.iter().find(|s| s.marker == m).unwrap();
            assert_eq!(share.examples, n, "{m}");
        }
        for e in set.iter() {
            assert_eq!(e.references.len(), 2);
            let lower = e.text.to_lowercase();
            for r in &e.references {
                assert!(socialclaimsplit::is_atomic(r), "{}: {r:?}", e.id);
                let body = r.trim_end_matches('.').to_lowercase();
                assert!(lower.contains(&body), "{}: {r:?} not in {:?}", e.id, e.text);
            }
        }
    }
    check_stable(Benchmark::SocialClaimSplit100, &dir, &small);
    check_stable(Benchmark::SocialClaimSplit1000, &dir, &large);
    // Checked by hand against FEVER claims 5600 / 26332 and 172767 / 172762.
    let e = by_id(&small, "social-5600-26332");
    assert_eq!(
        e.text,
        "tbh Kelly Preston starred in The Cat in the Hat, but Kelly Preston was not in The Cat in the Hat"
    );
    assert_eq!(
        e.references,
        [
            "Kelly Preston starred in The Cat in the Hat.",
            "Kelly Preston was not in The Cat in the Hat."
        ]
    );
    assert_eq!(e.meta["labels"], serde_json::json!(["SUPPORTS", "REFUTES"]));
    let e = by_id(&small, "social-172767-172762");
    assert_eq!(
        e.text,
        "The Beach was only directed by John Daly because The Beach is an adventure drama novel."
    );
    assert_eq!(e.meta["marker"], "because");
}

#[test]
fn propsegment_dev() {
    let Some(dir) = corpus("propsegment") else {
        return;
    };
    let examples = build(Benchmark::PropSegmentDev, &dir);
    // 811 segmented dev sentences, 387 with Wikipedia text, 376 with a reference
    // response, 375 distinct texts.
    assert_eq!(examples.len(), 375);
    assert!(examples.iter().all(|e| !e.references.is_empty()));
    check_stable(Benchmark::PropSegmentDev, &dir, &examples);
    // Checked by hand against the reference response of this sentence (PropSegmEnt README).
    let e = by_id(&examples, "propsegment-14308197030619579685-2");
    assert_eq!(
        e.text,
        "This film marks the directorial debut for production designer Robert Stromberg."
    );
    assert_eq!(
        e.references,
        [
            "production designer Robert Stromberg.",
            "film marks the directorial debut for Robert Stromberg"
        ]
    );
}

/// Copies `name` from `dir` into a temporary folder with line `line` replaced by `bad`.
fn corrupted(dir: &Path, name: &str, line: usize, bad: &str) -> (tempfile::TempDir, PathBuf) {
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[line - 1] = bad;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    (tmp, path)
}

#[test]
fn malformed_source_lines_are_named() {
    let cases = [
        (
            "wiki-split",
            "test.tsv",
            Benchmark::WikiSplit100,
            1234,
            "only one column",
            ":1234: expected 2 tab-separated columns",
        ),
        (
            "fever",
            "paper_dev.jsonl",
            Benchmark::SocialClaimSplit100,
            4321,
            "{\"id\": 1, \"label\": \"SUPPORTS\"",
            ":4321: invalid JSON at column",
        ),
        (
            "fever",
            "paper_dev.jsonl",
            Benchmark::SocialClaimSplit1000,
            7,
            "{\"id\": \"x\", \"label\": \"SUPPORTS\", \"claim\": \"c\", \"evidence\": []}",
            ":7: invalid JSON at column",
        ),
        (
            "propsegment",
            "propositions.dev.json",
            Benchmark::PropSegmentDev,
            30,
            "   \"sentence_index\" 2",
            ":30: invalid JSON at column",
        ),
    ];
    for (corpus_name, file, b, line, bad, want) in cases {
        let Some(dir) = corpus(corpus_name) else {
            return;
        };
        let (tmp, path) = corrupted(&dir, file, line, bad);
        if b == Benchmark::PropSegmentDev {
            std::fs::copy(
                dir.join("document_clusters.dev.json"),
                tmp.path().join("document_clusters.dev.json"),
            )
            .unwrap();
        }
        let e = benchmarks::build(b, &path, &BuildOptions::default(), &NoOracle)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}{want}", path.display())), "{e}");
    }
}

#[test]
fn paper_sweep_points_at_the_benchmarks() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sweeps/paper.toml");
    let sweep = credence_shared::sweep::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sweep.modes.len(), 4);
    assert_eq!(sweep.models.len(), 4);
    assert!(sweep.models.iter().all(|m| matches!(
        m.backend,
        ModelBackend::Gguf { .. } | ModelBackend::Safetensors { .. } | ModelBackend::Openai { .. }
    )));
    let ids: Vec<&str> = sweep.datasets.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "socialclaimsplit-100",
            "wikisplit-bench-100",
            "wikisplit-bench-1000",
            "claimdecomp-bench-1000"
        ]
    );
    for d in &sweep.datasets {
        let b: Benchmark = d.id.parse().unwrap();
        assert!(
            d.path.ends_with(format!("datasets/{}.jsonl", b.name())),
            "{:?}",
            d.path
        );
    }
}
