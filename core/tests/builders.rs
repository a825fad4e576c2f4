//! The benchmark builders on the real corpora in `../shared/data` (beside the workspace):
//! counts, disjointness, filters, determinism, hand-checked examples, the sha256 recorded
//! in each dataset card, and malformed source lines. ClaimDecompBench, which needs the
//! worker's rule oracle, is tested in `worker/tests/claimdecomp_bench.rs`.
//!
//! Under `CI=true` a missing corpus fails the test; elsewhere the test is skipped with a
//! printed reason.

#[path = "support/skip.rs"]
mod skip;

use credence_core::builders::{
    self, profile, socialclaimsplit, Benchmark, BuildOptions, ReferenceSplitter,
};
use credence_core::sweep::ModelBackend;
use credence_core::Example;
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use skip::corpus;

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
    builders::build(b, source, &BuildOptions::default(), &NoOracle)
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
    let bytes = builders::to_jsonl(examples);
    assert_eq!(
        bytes,
        builders::to_jsonl(&build(b, source)),
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

/// The data folder holding SocialClaimSplit's four corpora, or None (skip) outside CI
/// when one is missing.
fn social_corpora() -> Option<PathBuf> {
    let mut data = None;
    for c in socialclaimsplit::Corpus::ALL {
        data = Some(corpus(c.name())?.parent()?.to_path_buf());
    }
    data
}

/// Every claim text of SocialClaimSplit's corpora, read here independently of the
/// builder: the `claim` field of each JSON line, trimmed.
fn corpus_claims(data: &Path) -> HashSet<String> {
    let mut out = HashSet::new();
    for corpus in socialclaimsplit::Corpus::ALL {
        for file in corpus.files() {
            let text = std::fs::read_to_string(data.join(file)).unwrap();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let row: serde_json::Value = serde_json::from_str(line).unwrap();
                out.insert(row["claim"].as_str().unwrap().trim().to_string());
            }
        }
    }
    out
}

#[test]
fn socialclaimsplit_100_and_1000() {
    let Some(data) = social_corpora() else {
        return;
    };
    let small = build(Benchmark::SocialClaimSplit100, &data);
    let large = build(Benchmark::SocialClaimSplit1000, &data);
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
    let sources = corpus_claims(&data);
    for set in [&small, &large] {
        let stats = profile::profile(set);
        let n = set.len();
        assert!(
            (8.0..=13.0).contains(&stats.references.mean),
            "{n}: {} references per example",
            stats.references.mean
        );
        let share = |m: &str| stats.markers.iter().find(|s| s.marker == m).unwrap().share;
        assert!(
            (share("because") - profile::PAPER_SOCIAL_BECAUSE).abs() <= 0.10,
            "{n}: because in {}",
            share("because")
        );
        assert!(
            (share("but") - profile::PAPER_SOCIAL_BUT).abs() <= 0.10,
            "{n}: but in {}",
            share("but")
        );
        let mut claims = HashSet::new();
        for e in set.iter() {
            let sentences = e.meta["sentences"].as_array().unwrap();
            assert!((4..=6).contains(&sentences.len()), "{}", e.id);
            let lower = e.text.to_lowercase();
            let mut refs = e.references.iter();
            for sentence in sentences {
                let n = sentence["claims"].as_u64().unwrap() as usize;
                // A relative clause takes the subject of the sentence's first two claims.
                let subject = sentence["subject"].as_str().unwrap_or_default();
                for (i, r) in refs.by_ref().take(n).enumerate() {
                    assert!(claims.insert(r.as_str()), "{}: {r:?} used twice", e.id);
                    assert!(sources.contains(r), "{}: {r:?} not in the corpora", e.id);
                    assert!(socialclaimsplit::is_atomic(r), "{}: {r:?}", e.id);
                    let mut body = socialclaimsplit::surface::clause(r, false);
                    if i < 2 && !subject.is_empty() {
                        body = body[subject.len() + 1..].to_string();
                    }
                    let body = socialclaimsplit::surface::lower_starter(&body).to_lowercase();
                    assert!(lower.contains(&body), "{}: {r:?} not in {:?}", e.id, e.text);
                }
            }
            assert!(
                refs.next().is_none(),
                "{}: more references than claims",
                e.id
            );
            for (i, a) in e.references.iter().enumerate() {
                for b in &e.references[i + 1..] {
                    assert!(
                        !socialclaimsplit::near_duplicate(a, b),
                        "{}: {a:?} / {b:?}",
                        e.id
                    );
                }
            }
        }
    }
    check_stable(Benchmark::SocialClaimSplit100, &data, &small);
    check_stable(Benchmark::SocialClaimSplit1000, &data, &large);
    // Checked by hand against LIAR-PLUS val2.jsonl lines 438, 977, 166, 964, 1241 and
    // test2.jsonl lines 175, 1167, 476.
    let e = by_id(&small, "social-liar-plus-11630");
    assert_eq!(e.meta["corpus"], "liar-plus");
    let ids: Vec<&str> = e.meta["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["11630", "10827", "5461", "6843", "3034", "4925", "2290", "11025"]
    );
    assert_eq!(e.meta["claims"][3]["label"], "pants-fire");
    assert_eq!(
        e.references[0],
        "More black babies are aborted in NYC than born."
    );
    assert_eq!(
        e.references[7],
        "Six thousand people have sought addiction treatment through expanded Medicaid."
    );
    assert!(e.text.starts_with(
        "fun fact: more black babies are aborted in NYC than born because the state budget"
    ));
    // FEVER claims 172465 and 172479 (paper_dev.jsonl lines 6796 and 4892), folded into
    // a relative clause over their page's name.
    let e = by_id(&small, "social-fever-109335");
    assert!(
        e.text.contains(
            "Matteo Renzi, who was born on January 11th, 1975, was once the Prime Minister of Italy."
        ),
        "{}",
        e.text
    );
    let at = e
        .references
        .iter()
        .position(|r| r == "Matteo Renzi was born on January 11th, 1975.")
        .unwrap();
    assert_eq!(
        e.references[at + 1],
        "Matteo Renzi was once the Prime Minister of Italy."
    );
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
        let e = builders::build(b, &path, &BuildOptions::default(), &NoOracle)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("{}{want}", path.display())), "{e}");
    }
}

#[test]
fn socialclaimsplit_malformed_lines_and_wrong_folder_are_named() {
    let Some(data) = social_corpora() else {
        return;
    };
    let cases = [
        (
            "fever/paper_dev.jsonl",
            4321,
            "{\"id\": 1, \"label\": \"SUPPORTS\"",
        ),
        (
            "fever/paper_dev.jsonl",
            7,
            "{\"id\": \"x\", \"label\": \"SUPPORTS\", \"claim\": \"c\", \"evidence\": []}",
        ),
        (
            "liar-plus/dataset/jsonl/test2.jsonl",
            12,
            "{\"json_file_id\": 5, \"label\": \"true\", \"claim\": \"c\"}",
        ),
    ];
    for (file, line, bad) in cases {
        let tmp = tempfile::tempdir().unwrap();
        for c in socialclaimsplit::Corpus::ALL {
            for f in c.files() {
                let to = tmp.path().join(f);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(data.join(f), &to).unwrap();
            }
        }
        let text = std::fs::read_to_string(data.join(file)).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[line - 1] = bad;
        std::fs::write(tmp.path().join(file), lines.join("\n") + "\n").unwrap();
        let e = builders::build(
            Benchmark::SocialClaimSplit100,
            tmp.path(),
            &BuildOptions::default(),
            &NoOracle,
        )
        .unwrap_err()
        .to_string();
        let want = format!(
            "{}:{line}: invalid JSON at column",
            tmp.path().join(file).display()
        );
        assert!(e.starts_with(&want), "{e}");
    }
    let fever = data.join("fever");
    let e = builders::build(
        Benchmark::SocialClaimSplit1000,
        &fever,
        &BuildOptions::default(),
        &NoOracle,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(&format!("{}: not the corpora folder", fever.display())),
        "{e}"
    );
}

#[test]
fn paper_sweep_points_at_the_benchmarks() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sweeps/paper.toml");
    let sweep = credence_core::sweep::load(&path).unwrap_or_else(|e| panic!("{e}"));
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
