//! The benchmark builders: the paper's benchmark variants (which are not public) rebuilt
//! deterministically from public corpora, plus PropSegmEnt's human-annotated dev
//! sentences. One module per benchmark reads its corpus and builds examples in the
//! [`crate::dataset`] format; [`afc`] builds the downstream fact-checking datasets
//! (claims with a verdict and evidence, [`crate::domain::AfcExample`]); [`sampling`] owns
//! the seeded shuffle every builder uses and [`profile`] the statistics a dataset card
//! records (counts, marker profile).
//!
//! A build is a pure function of the source file, the seed and the options: the same
//! inputs give byte-identical JSONL. Every builder reports its *funnel* (how many source
//! rows survive each filter), which the dataset cards in `datasets/` quote.
//!
//! ClaimDecompBench needs a rule oracle for its references. The oracle lives with the
//! decomposers in the worker (it will use the dependency parser there), so the builder
//! takes it as a [`ReferenceSplitter`] and this crate stays model-free.
//!
//! ```no_run
//! use credence_core::builders::{self, Benchmark, BuildOptions, ReferenceSplitter};
//! struct Sentences;
//! impl ReferenceSplitter for Sentences {
//!     fn name(&self) -> &str { "sentences" }
//!     fn split(&self, text: &str) -> Vec<String> {
//!         credence_core::sentences::split_sentences(text).into_iter().map(String::from).collect()
//!     }
//! }
//! let source = std::path::Path::new("../shared/data/wiki-split");
//! let built = builders::build(Benchmark::WikiSplit100, source, &BuildOptions::default(), &Sentences)?;
//! let sha256 = builders::write_jsonl(std::path::Path::new("wiki100.jsonl"), &built.examples)?;
//! println!("{} examples, sha256 {sha256}", built.examples.len());
//! # Ok::<(), credence_core::builders::BenchmarkError>(())
//! ```

pub mod afc;
pub mod agnews;
pub mod claimdecomp;
pub mod profile;
pub mod propsegment;
pub mod sampling;
pub mod socialclaimsplit;
pub mod wikisplit;

use crate::domain::Example;
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A benchmark that `credence dataset build` can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Benchmark {
    /// WikiSplitBench-100: 100 WikiSplit test rows.
    WikiSplit100,
    /// WikiSplitBench-1000: 1,000 WikiSplit test rows, disjoint from the 100.
    WikiSplit1000,
    /// ClaimDecompBench-1000: AG News title + lead joined at a coordinator, oracle splits.
    ClaimDecomp1000,
    /// SocialClaimSplit-100 (reconstruction): social-media posts of several compound
    /// sentences made of public atomic claims (FEVER, SciFact, COVID-Fact, LIAR-PLUS).
    SocialClaimSplit100,
    /// SocialClaimSplit-1000 (reconstruction), no claim shared with the 100.
    SocialClaimSplit1000,
    /// PropSegmEnt dev: Wikipedia sentences with their gold propositions.
    PropSegmentDev,
}

impl Benchmark {
    /// Every benchmark, in the order of the dataset cards.
    pub const ALL: [Benchmark; 6] = [
        Benchmark::WikiSplit100,
        Benchmark::WikiSplit1000,
        Benchmark::ClaimDecomp1000,
        Benchmark::SocialClaimSplit100,
        Benchmark::SocialClaimSplit1000,
        Benchmark::PropSegmentDev,
    ];

    /// The name used on the command line and for the output and card files.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::WikiSplit100 => "wikisplit-bench-100",
            Benchmark::WikiSplit1000 => "wikisplit-bench-1000",
            Benchmark::ClaimDecomp1000 => "claimdecomp-bench-1000",
            Benchmark::SocialClaimSplit100 => "socialclaimsplit-100",
            Benchmark::SocialClaimSplit1000 => "socialclaimsplit-1000",
            Benchmark::PropSegmentDev => "propsegment-dev",
        }
    }

    /// The source file looked for when `--source` names a folder; None when the source
    /// is itself a folder of corpora (SocialClaimSplit reads four, see
    /// [`socialclaimsplit::Corpus::files`]).
    pub fn source_file(self) -> Option<&'static str> {
        match self {
            Benchmark::WikiSplit100 | Benchmark::WikiSplit1000 => Some("test.tsv"),
            Benchmark::ClaimDecomp1000 => Some("test.csv"),
            Benchmark::SocialClaimSplit100 | Benchmark::SocialClaimSplit1000 => None,
            Benchmark::PropSegmentDev => Some(propsegment::PROPOSITIONS_FILE),
        }
    }

    /// What it is, in a line (for `credence dataset --help`).
    pub fn summary(self) -> &'static str {
        match self {
            Benchmark::WikiSplit100 => {
                "100 WikiSplit test sentences with their two-sentence splits"
            }
            Benchmark::WikiSplit1000 => "1,000 more, disjoint from the 100",
            Benchmark::ClaimDecomp1000 => {
                "AG News title + lead joined at a coordinator, rule-oracle references"
            }
            Benchmark::SocialClaimSplit100 => {
                "social-media posts of compound sentences made of public atomic claims"
            }
            Benchmark::SocialClaimSplit1000 => {
                "1,000 more such posts, no claim shared with the 100"
            }
            Benchmark::PropSegmentDev => {
                "PropSegmEnt dev Wikipedia sentences with gold propositions"
            }
        }
    }

    /// The number of examples the benchmark has by definition (PropSegmEnt: all that
    /// pass its filters).
    pub fn size(self) -> Option<usize> {
        match self {
            Benchmark::WikiSplit100 | Benchmark::SocialClaimSplit100 => Some(100),
            Benchmark::WikiSplit1000
            | Benchmark::SocialClaimSplit1000
            | Benchmark::ClaimDecomp1000 => Some(1000),
            Benchmark::PropSegmentDev => None,
        }
    }
}

impl fmt::Display for Benchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Benchmark {
    type Err = BenchmarkError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Benchmark::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| BenchmarkError::UnknownBenchmark(s.to_string()))
    }
}

/// Anything `credence dataset build` can make: a decomposition benchmark (examples with
/// reference claims) or an AFC dataset (claims with a verdict and evidence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buildable {
    /// A decomposition benchmark.
    Benchmark(Benchmark),
    /// A downstream fact-checking dataset.
    Afc(afc::AfcDataset),
}

impl Buildable {
    /// Every name, benchmarks first, comma-separated (for help and errors).
    pub fn all_names() -> String {
        Benchmark::ALL
            .iter()
            .map(|b| b.name())
            .chain(afc::AfcDataset::ALL.iter().map(|d| d.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every name with its summary, one per line, under a heading per kind (for
    /// `credence dataset --help`).
    pub fn catalogue() -> String {
        let mut out = String::from(
            "Decomposition benchmarks (id, text, references, meta; --source as named below):\n",
        );
        for b in Benchmark::ALL {
            out.push_str(&format!("  {:<24}{}\n", b.name(), b.summary()));
        }
        out.push_str(
            "AFC datasets (id, text, label SUPPORT|REFUTE, evidence, meta; --source: the data \
             folder):\n",
        );
        for d in afc::AfcDataset::ALL {
            out.push_str(&format!("  {:<24}{}\n", d.name(), d.summary()));
        }
        out
    }

    /// The name used on the command line and for the output and card files.
    pub fn name(self) -> &'static str {
        match self {
            Buildable::Benchmark(b) => b.name(),
            Buildable::Afc(d) => d.name(),
        }
    }
}

impl fmt::Display for Buildable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Buildable {
    type Err = BenchmarkError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse()
            .map(Buildable::Benchmark)
            .or_else(|_| s.parse().map(Buildable::Afc))
            .map_err(|_| BenchmarkError::UnknownDataset(s.to_string()))
    }
}

/// Which part of a shuffled candidate list a sized benchmark takes: the -100 variant
/// positions 0..100, the -1000 variant 100..1100, so the two are disjoint by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slice {
    /// Positions 0..100.
    First100,
    /// Positions 100..1100.
    Next1000,
}

impl Slice {
    /// The positions taken.
    pub fn range(self) -> std::ops::Range<usize> {
        match self {
            Slice::First100 => 0..100,
            Slice::Next1000 => 100..1100,
        }
    }

    /// The positions of `benchmark`'s slice, or `TooFew` when `available` candidates do
    /// not reach its end.
    fn checked(
        self,
        benchmark: Benchmark,
        path: &Path,
        available: usize,
    ) -> Result<std::ops::Range<usize>, BenchmarkError> {
        let range = self.range();
        if available < range.end {
            return Err(BenchmarkError::TooFew {
                benchmark,
                path: path.to_path_buf(),
                wanted: range.end,
                eligible: available,
            });
        }
        Ok(range)
    }
}

/// Settings of a build.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildOptions {
    /// Seed of the ChaCha20 stream behind every random choice (the paper's is 42).
    pub seed: u64,
    /// WikiSplit only: rows whose optional third column (an entailment score) is below
    /// this are dropped. The paper keeps WikiSplit++ pairs with entailment >= 0.90.
    pub min_entailment: f64,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            seed: 42,
            min_entailment: 0.90,
        }
    }
}

/// Splits a compound sentence into reference claims (ClaimDecompBench's rule oracle).
pub trait ReferenceSplitter {
    /// Name and version, recorded in each example's meta.
    fn name(&self) -> &str;
    /// The claims of `text`, in order.
    fn split(&self, text: &str) -> Vec<String>;
}

/// How many source rows remained after one filter of a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunnelStep {
    /// What the step keeps, e.g. "each split sentence has >= 5 word tokens".
    pub step: String,
    /// Rows (or candidates) left after it.
    pub remaining: usize,
}

/// The result of a build: the examples (a benchmark's [`Example`]s, an AFC dataset's
/// [`crate::domain::AfcExample`]s), and how the source was narrowed down to them.
#[derive(Debug, Clone, PartialEq)]
pub struct Build<E = Example> {
    /// The examples, in output order.
    pub examples: Vec<E>,
    /// The filters, in the order applied.
    pub funnel: Vec<FunnelStep>,
}

impl<E> Build<E> {
    fn step(&mut self, step: impl Into<String>, remaining: usize) {
        self.funnel.push(FunnelStep {
            step: step.into(),
            remaining,
        });
    }
}

/// A build that failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchmarkError {
    /// The name is not one of the benchmarks.
    #[error("unknown benchmark {0:?}; expected one of wikisplit-bench-100, wikisplit-bench-1000, claimdecomp-bench-1000, socialclaimsplit-100, socialclaimsplit-1000, propsegment-dev")]
    UnknownBenchmark(String),
    /// The name is neither a benchmark nor an AFC dataset.
    #[error("unknown dataset {0:?}; expected one of {names}", names = Buildable::all_names())]
    UnknownDataset(String),
    /// A build option that does not apply (a split the dataset does not have, ...).
    #[error("{0}")]
    Options(String),
    /// A source or output file could not be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error, in the message rather than as a `source`, so that an
        /// error chain does not print it twice.
        error: std::io::Error,
    },
    /// A source line is malformed.
    #[error("{path}:{line}: {message}")]
    Line {
        /// The source file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, naming the column or field.
        message: String,
    },
    /// A source file is well-formed but inconsistent (e.g. an index out of range).
    #[error("{path}: {message}")]
    Invalid {
        /// The source file.
        path: PathBuf,
        /// What is wrong, naming the record.
        message: String,
    },
    /// Too few source rows pass the filters for the benchmark's size.
    #[error("{benchmark}: only {eligible} candidates pass the filters of {path}, {wanted} needed")]
    TooFew {
        /// The benchmark.
        benchmark: Benchmark,
        /// The source file.
        path: PathBuf,
        /// Examples needed.
        wanted: usize,
        /// Candidates available.
        eligible: usize,
    },
}

/// Builds a benchmark from its source. `source` is the corpus file, or the folder holding
/// it under its usual name ([`Benchmark::source_file`]); for SocialClaimSplit, the data
/// folder holding its corpora.
pub fn build(
    benchmark: Benchmark,
    source: &Path,
    options: &BuildOptions,
    oracle: &dyn ReferenceSplitter,
) -> Result<Build, BenchmarkError> {
    let source = resolve_source(benchmark, source);
    let built = match benchmark {
        Benchmark::WikiSplit100 => wikisplit::build(&source, options, Slice::First100)?,
        Benchmark::WikiSplit1000 => wikisplit::build(&source, options, Slice::Next1000)?,
        Benchmark::ClaimDecomp1000 => claimdecomp::build(&source, options, oracle)?,
        Benchmark::SocialClaimSplit100 => {
            socialclaimsplit::build(&source, options, Slice::First100)?
        }
        Benchmark::SocialClaimSplit1000 => {
            socialclaimsplit::build(&source, options, Slice::Next1000)?
        }
        Benchmark::PropSegmentDev => propsegment::build(&source)?,
    };
    tracing::info!(
        benchmark = benchmark.name(),
        examples = built.examples.len(),
        "built"
    );
    Ok(built)
}

/// The source of a benchmark: `path` itself, or its usual file inside `path`.
pub fn resolve_source(benchmark: Benchmark, path: &Path) -> PathBuf {
    match benchmark.source_file() {
        Some(file) if path.is_dir() => path.join(file),
        _ => path.to_path_buf(),
    }
}

/// The JSONL bytes of examples (benchmark or AFC), exactly as [`write_jsonl`] writes
/// them: one compact JSON object per line, fields in declaration order.
pub fn to_jsonl<E: serde::Serialize>(examples: &[E]) -> Vec<u8> {
    let mut out = Vec::new();
    for ex in examples {
        // Writing structs of strings, numbers and string-keyed maps into a Vec cannot fail.
        serde_json::to_writer(&mut out, ex).expect("JSON into memory");
        out.push(b'\n');
    }
    out
}

/// The funnel as `credence dataset build` prints it and the dataset cards quote it: one
/// line per step, the count right-aligned in six columns, two spaces, the step.
pub fn render_funnel(funnel: &[FunnelStep]) -> String {
    funnel
        .iter()
        .map(|s| format!("{:>6}  {}\n", s.remaining, s.step))
        .collect()
}

/// Writes examples as JSONL (through a temporary file beside `path`, so a failed write
/// leaves no half file) and returns the sha256 of the bytes written, hex.
pub fn write_jsonl<E: serde::Serialize>(
    path: &Path,
    examples: &[E],
) -> Result<String, BenchmarkError> {
    let bytes = to_jsonl(examples);
    let io_err = |error| BenchmarkError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, &bytes).map_err(io_err)?;
    std::fs::rename(&tmp, path).map_err(io_err)?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Reads a whole source file as UTF-8; invalid bytes are reported with their line.
pub(crate) fn read_source(path: &Path) -> Result<String, BenchmarkError> {
    let bytes = std::fs::read(path).map_err(|error| BenchmarkError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count();
        let line_start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        BenchmarkError::Line {
            path: path.to_path_buf(),
            line,
            message: format!("not valid UTF-8 at byte {}", at - line_start + 1),
        }
    })
}

/// A `Line` error for `path`.
pub(crate) fn line_error(path: &Path, line: usize, message: impl Into<String>) -> BenchmarkError {
    BenchmarkError::Line {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}

/// A JSON syntax or shape error from serde_json, placed at its line in `path`.
pub(crate) fn json_error(path: &Path, first_line: usize, e: &serde_json::Error) -> BenchmarkError {
    let message = e.to_string();
    let message = message
        .rfind(" at line ")
        .map_or(message.as_str(), |at| &message[..at]);
    line_error(
        path,
        first_line + e.line().saturating_sub(1),
        format!("invalid JSON at column {}: {message}", e.column()),
    )
}

/// Every record of a JSONL file with its 1-based line, blank lines skipped; the first
/// malformed line (bad JSON, a missing or mistyped field) is an error naming it.
pub(crate) fn json_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Vec<(usize, T)>, BenchmarkError> {
    let text = read_source(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(line).map_err(|e| json_error(path, i + 1, &e))?;
        out.push((i + 1, record));
    }
    Ok(out)
}

/// Number of words (whitespace-separated tokens holding a letter or digit).
pub(crate) fn word_count(text: &str) -> usize {
    text.split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for b in Benchmark::ALL {
            assert_eq!(b.name().parse::<Benchmark>().unwrap(), b);
        }
        let e = "wiki".parse::<Benchmark>().unwrap_err().to_string();
        assert!(e.starts_with("unknown benchmark \"wiki\"; expected one of wikisplit-bench-100"));
    }

    #[test]
    fn buildable_names_cover_both_kinds() {
        assert_eq!(
            "propsegment-dev".parse::<Buildable>().unwrap(),
            Buildable::Benchmark(Benchmark::PropSegmentDev)
        );
        assert_eq!(
            "afc-fever".parse::<Buildable>().unwrap(),
            Buildable::Afc(afc::AfcDataset::Fever)
        );
        let e = "fever".parse::<Buildable>().unwrap_err().to_string();
        assert!(
            e.starts_with("unknown dataset \"fever\"; expected one of wikisplit-bench-100,"),
            "{e}"
        );
        assert!(e.ends_with("propsegment-dev, afc-covidfact, afc-liar-plus, afc-pubhealth, afc-scifact, afc-fever"), "{e}");
    }

    #[test]
    fn invalid_utf8_names_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tsv");
        std::fs::write(&path, b"fine\nab\xffc\n").unwrap();
        let e = read_source(&path).unwrap_err().to_string();
        assert!(e.ends_with("x.tsv:2: not valid UTF-8 at byte 3"), "{e}");
    }

    #[test]
    fn write_jsonl_returns_the_sha256_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.jsonl");
        let ex = Example {
            id: "a".into(),
            text: "A and B.".into(),
            references: vec!["A.".into(), "B.".into()],
            meta: serde_json::Map::new(),
        };
        let sha = write_jsonl(&path, std::slice::from_ref(&ex)).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(sha, hex::encode(Sha256::digest(&bytes)));
        assert_eq!(crate::dataset::load(&path).unwrap().examples, [ex]);
    }
}
