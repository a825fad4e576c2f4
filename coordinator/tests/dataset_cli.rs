//! `credence dataset build` and `credence dataset stats` as a user runs them, on the real
//! corpora in `../shared/data`: two builds give the same bytes, the printed sha256 is the
//! file's, stats prints the counts and the marker profile, and for SocialClaimSplit
//! (built from the data folder) the paper's figures beside them. Under `CI=true` a
//! missing corpus fails the test; elsewhere it is skipped.

#[path = "../../core/tests/support/skip.rs"]
mod skip;

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use skip::corpus;

fn wiki_split() -> Option<PathBuf> {
    corpus("wiki-split")
}

/// The data folder, when it holds SocialClaimSplit's four corpora.
fn social_data() -> Option<PathBuf> {
    for name in ["fever", "scifact", "covidfact", "liar-plus"] {
        corpus(name)?;
    }
    corpus(".")
}

fn credence(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_credence"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("credence runs")
}

/// What `credence dataset build BENCHMARK --source SOURCE --out OUT EXTRA..` printed.
struct Built {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn build(benchmark: &str, source: &Path, out: &Path, extra: &[&str]) -> Built {
    let (source, out) = (source.to_str().unwrap(), out.to_str().unwrap());
    let mut args = vec![
        "dataset", "build", benchmark, "--source", source, "--out", out,
    ];
    args.extend_from_slice(extra);
    let run = credence(&args);
    Built {
        ok: run.status.success(),
        stdout: String::from_utf8_lossy(&run.stdout).to_string(),
        stderr: String::from_utf8_lossy(&run.stderr).to_string(),
    }
}

/// [`build`] that must succeed and print the sha256 of the file it wrote; with the
/// file's bytes.
fn build_ok(benchmark: &str, source: &Path, out: &Path, extra: &[&str]) -> (Built, Vec<u8>) {
    let built = build(benchmark, source, out, extra);
    assert!(built.ok, "{}{}", built.stdout, built.stderr);
    let bytes = std::fs::read(out).unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));
    assert!(
        built.stdout.contains(&format!("sha256 {sha}")),
        "{}",
        built.stdout
    );
    (built, bytes)
}

#[test]
fn build_twice_same_bytes_then_stats() {
    let Some(source) = wiki_split() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for name in ["a.jsonl", "b.jsonl"] {
        let out = tmp.path().join(name);
        let (Built { stdout, stderr, .. }, bytes) =
            build_ok("wikisplit-bench-100", &source, &out, &["--seed", "42"]);
        assert!(stdout.contains("100 examples written"), "{stdout}");
        assert!(stderr.contains("rows of test.tsv"), "{stderr}");
        files.push(bytes);
    }
    assert_eq!(files[0], files[1]);

    let a = tmp.path().join("a.jsonl");
    let run = credence(&["dataset", "stats", a.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    assert!(
        stdout.contains("examples      100 (100 distinct texts)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("references    2.00 per example (min 2, max 2)"),
        "{stdout}"
    );
    for marker in ["and", "but", "because", "so"] {
        assert!(
            stdout.contains(&format!("\n  {marker:<9} ")),
            "{marker}: {stdout}"
        );
    }
    let run = credence(&["dataset", "stats", "--json", a.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(json["examples"], 100);
    assert_eq!(json["sha256"], hex::encode(Sha256::digest(&files[0])));
}

#[test]
fn socialclaimsplit_from_the_data_folder_with_the_paper_beside_its_stats() {
    let Some(data) = social_data() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // Named like the benchmark, so that stats knows which paper figures to show.
    let out = tmp.path().join("socialclaimsplit-100.jsonl");
    let (Built { stdout, stderr, .. }, _) = build_ok("socialclaimsplit-100", &data, &out, &[]);
    assert!(stdout.contains("100 examples written"), "{stdout}");
    for step in [
        "fever: claims in fever/paper_dev.jsonl",
        "liar-plus: atomic",
        "distinct claims over the four corpora",
        "because in 72 and but in 62 of them by quota",
    ] {
        assert!(stderr.contains(step), "{step}: {stderr}");
    }

    let run = credence(&["dataset", "stats", out.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}");
    let line = |start: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start:?} in {stdout}"))
            .to_string()
    };
    assert!(
        line("references").ends_with("paper 10.8 (Social-100, T 1423)"),
        "{stdout}"
    );
    assert!(
        line("  because").starts_with("  because     72.0%  (72)"),
        "{stdout}"
    );
    assert!(
        line("  because").ends_with("paper 72.0% (Social-100, T 920)"),
        "{stdout}"
    );
    assert!(
        line("  but").ends_with("paper 62.0% (Social-100, T 920)"),
        "{stdout}"
    );
    assert!(line("sentences").starts_with("sentences     "), "{stdout}");
    let run = credence(&["dataset", "stats", "--json", out.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(json["paper"]["references"]["value"], 10.8);
    // Another name: the paper's figures by --benchmark, or none.
    let renamed = tmp.path().join("mine.jsonl");
    std::fs::copy(&out, &renamed).unwrap();
    let run = credence(&["dataset", "stats", renamed.to_str().unwrap()]);
    assert!(!String::from_utf8_lossy(&run.stdout).contains("paper"));
    let run = credence(&[
        "dataset",
        "stats",
        "--benchmark",
        "socialclaimsplit-1000",
        renamed.to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&run.stdout).contains("paper 10.8 (Social-100, T 1423)"));

    // The FEVER folder alone, as the old two-claim build took, is refused.
    let run = build(
        "socialclaimsplit-1000",
        &data.join("fever"),
        &tmp.path().join("x.jsonl"),
        &[],
    );
    assert!(!run.ok);
    assert!(
        run.stderr.contains("not the corpora folder"),
        "{}",
        run.stderr
    );
}

#[test]
fn unknown_benchmark_and_missing_source_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.jsonl");
    let run = build("wiki", Path::new("."), &out, &[]);
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("unknown dataset \"wiki\"; expected one of wikisplit-bench-100"),
        "{}",
        run.stderr
    );
    let run = build(
        "wikisplit-bench-100",
        &tmp.path().join("nope.tsv"),
        &out,
        &[],
    );
    assert!(!run.ok);
    assert!(run.stderr.contains("nope.tsv"), "{}", run.stderr);
    assert!(!out.exists());
}

/// The data folder, when it holds what the AFC builders read for SciFact.
fn scifact_data() -> Option<PathBuf> {
    corpus("scifact")?;
    corpus("scifact-corpus")?;
    corpus(".")
}

#[test]
fn afc_build_twice_same_bytes_with_limit_and_split() {
    let Some(data) = scifact_data() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for name in ["a.jsonl", "b.jsonl"] {
        let out = tmp.path().join(name);
        let (Built { stdout, stderr, .. }, bytes) = build_ok(
            "afc-scifact",
            &data,
            &out,
            &["--split", "test", "--limit", "50", "--seed", "7"],
        );
        assert!(
            stdout.contains("afc-scifact: 50 examples written"),
            "{stdout}"
        );
        for step in [
            "   300  claims in scifact/claims_test.jsonl\n",
            "   200  label protocol: SUPPORT 100 (SUPPORT 100), REFUTE 100 (REFUTE 100), dropped 100 (NOT ENOUGH INFO 100)\n",
            "    50  seeded sample of 50 (seed 7) (SUPPORT ",
        ] {
            assert!(stderr.contains(step), "{step}: {stderr}");
        }
        files.push(bytes);
    }
    assert_eq!(files[0], files[1]);
    let lines: Vec<serde_json::Value> = String::from_utf8(files.remove(0))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 50);
    for line in &lines {
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 5, "{line}");
        for key in ["id", "text", "label", "evidence", "meta"] {
            assert!(keys.contains(&key), "{key}: {line}");
        }
        assert!(["SUPPORT", "REFUTE"].contains(&line["label"].as_str().unwrap()));
        assert!(!line["evidence"].as_array().unwrap().is_empty());
        assert_eq!(line["meta"]["split"], "test");
    }
}

#[test]
fn afc_options_and_names_are_checked_and_explained() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x.jsonl");
    let out = out.to_str().unwrap();
    let missing = tmp.path().join("nowhere");
    let missing = missing.to_str().unwrap();
    // (name, source, extra flag and value, what stderr must say)
    let cases = [
        (
            "afc-fever",
            ".",
            ["--split", "dev"],
            "afc-fever has no splits (asked for dev)",
        ),
        (
            "afc-scifact",
            ".",
            ["--split", "test2"],
            "afc-scifact has no split test2; expected one of train, dev, test",
        ),
        ("afc-scifact", ".", ["--split", "x"], "unknown split \"x\""),
        ("afc-pubhealth", ".", ["--limit", "0"], "--limit"),
        (
            "propsegment-dev",
            ".",
            ["--limit", "5"],
            "--limit and --split apply to the afc-* datasets only, not propsegment-dev",
        ),
        (
            "afc-covidfact",
            missing,
            ["--seed", "1"],
            "not the data folder: afc-covidfact reads covidfact/COVIDFACT_dataset.jsonl under it",
        ),
    ];
    for (name, source, [flag, value], want) in cases {
        let args = [
            "dataset", "build", name, "--source", source, "--out", out, flag, value,
        ];
        let run = credence(&args);
        assert!(!run.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    assert!(!Path::new(out).exists());

    for args in [&["dataset", "--help"][..], &["dataset", "build", "--help"]] {
        let run = credence(args);
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(run.status.success(), "{stdout}");
        for name in [
            "wikisplit-bench-100",
            "afc-covidfact",
            "afc-liar-plus",
            "afc-pubhealth",
            "afc-scifact",
            "afc-fever",
        ] {
            assert!(stdout.contains(&format!("\n  {name} ")), "{name}: {stdout}");
        }
        assert!(
            stdout.contains("label SUPPORT|REFUTE, evidence"),
            "{stdout}"
        );
    }
}
