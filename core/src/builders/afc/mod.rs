//! The downstream fact-checking (AFC) datasets of the paper's last experiment (PAPER.md
//! "AFC"): FEVER, PubHealth, LIAR-PLUS, SciFact and CovidFact, each read from its folder
//! under the data folder, mapped to SUPPORT / REFUTE by the paper's label protocol, and
//! written as [`AfcExample`]s with the dataset's own evidence text (the paper retrieved
//! evidence; how is not stated, so it cannot be redone).
//!
//! One module per dataset reads its files into [`SourceClaim`]s (the dataset's label
//! as written, evidence possibly empty); `protocol` applies what every dataset shares,
//! in this order, and records each step in the funnel:
//! 1. the label protocol ([`AfcDataset::protocol`]): each source label maps to a verdict
//!    or is dropped; a label outside the protocol is an error naming its line;
//! 2. claims without evidence text are dropped (a judge has nothing to read them against);
//! 3. with a limit, a seeded sample ([`super::sampling`], stream 0): the candidates are
//!    shuffled and the first `limit` kept, so a smaller limit takes a subset of a larger.
//!
//! The examples stay in source order throughout, so the seed changes nothing without a
//! limit, and the same files, split, seed and limit give the same bytes.

pub mod covidfact;
pub mod fever;
pub mod liarplus;
mod protocol;
pub mod pubhealth;
pub mod scifact;

pub use protocol::verdict_counts;

use super::{line_error, BenchmarkError, Build};
use crate::domain::{AfcExample, Verdict};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// An AFC dataset that `credence dataset build` can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AfcDataset {
    /// COVID-Fact: r/COVID19 claims and counter-claims with their abstract's sentences.
    CovidFact,
    /// LIAR-PLUS: PolitiFact statements with the ruling's justification.
    LiarPlus,
    /// PubHealth test split: health claims with the 5 article sentences nearest them.
    PubHealth,
    /// SciFact: biomedical claims with the rationale sentences of the cited abstracts.
    SciFact,
    /// FEVER 1.0 paper_dev: Wikipedia claims; evidence text from FEVER-Symmetric.
    Fever,
}

impl AfcDataset {
    /// Every AFC dataset, in the order of the paper's table but FEVER last.
    pub const ALL: [AfcDataset; 5] = [
        AfcDataset::CovidFact,
        AfcDataset::LiarPlus,
        AfcDataset::PubHealth,
        AfcDataset::SciFact,
        AfcDataset::Fever,
    ];

    /// The name used on the command line and for the output and card files.
    pub fn name(self) -> &'static str {
        match self {
            AfcDataset::CovidFact => "afc-covidfact",
            AfcDataset::LiarPlus => "afc-liar-plus",
            AfcDataset::PubHealth => "afc-pubhealth",
            AfcDataset::SciFact => "afc-scifact",
            AfcDataset::Fever => "afc-fever",
        }
    }

    /// What it is and which label protocol and evidence it has, in a line (for
    /// `credence dataset --help`).
    pub fn summary(self) -> &'static str {
        match self {
            AfcDataset::CovidFact => {
                "COVID-Fact: SUPPORTED/REFUTED; evidence: its abstract sentences"
            }
            AfcDataset::LiarPlus => {
                "LIAR-PLUS --split test2|val2, 6 ratings to 2; evidence: justification"
            }
            AfcDataset::PubHealth => {
                "PubHealth test, mixture/unproven dropped; evidence: top_k sentences"
            }
            AfcDataset::SciFact => {
                "SciFact --split dev|test|train, NEI dropped; evidence: rationales"
            }
            AfcDataset::Fever => {
                "FEVER paper_dev, NEI dropped; evidence: FEVER-Symmetric (claims it has)"
            }
        }
    }

    /// The splits it can be built from; empty when it has one file of claims.
    pub fn splits(self) -> &'static [Split] {
        match self {
            AfcDataset::LiarPlus => &[Split::Val2, Split::Test2],
            AfcDataset::SciFact => &[Split::Train, Split::Dev, Split::Test],
            AfcDataset::CovidFact | AfcDataset::PubHealth | AfcDataset::Fever => &[],
        }
    }

    /// The split built when none is asked for: LIAR-PLUS test2 (the paper evaluates on
    /// test sets); SciFact dev (the labelled split of the original release; the paper does
    /// not say which it used).
    pub fn default_split(self) -> Option<Split> {
        match self {
            AfcDataset::LiarPlus => Some(Split::Test2),
            AfcDataset::SciFact => Some(Split::Dev),
            AfcDataset::CovidFact | AfcDataset::PubHealth | AfcDataset::Fever => None,
        }
    }

    /// The file of claims of `split`, relative to the data folder.
    pub fn claims_file(self, split: Option<Split>) -> &'static str {
        match (self, split) {
            (AfcDataset::CovidFact, _) => covidfact::FILE,
            (AfcDataset::PubHealth, _) => pubhealth::FILE,
            (AfcDataset::Fever, _) => fever::FILE,
            (AfcDataset::LiarPlus, Some(Split::Val2)) => liarplus::VAL2,
            (AfcDataset::LiarPlus, _) => liarplus::TEST2,
            (AfcDataset::SciFact, Some(Split::Train)) => scifact::TRAIN,
            (AfcDataset::SciFact, Some(Split::Test)) => scifact::TEST,
            (AfcDataset::SciFact, _) => scifact::DEV,
        }
    }

    /// The paper's label protocol: each label the dataset writes, and the verdict it maps
    /// to (None: the claim is dropped). A label not listed is an error.
    pub fn protocol(self) -> &'static [(&'static str, Option<Verdict>)] {
        use Verdict::{Refute, Support};
        match self {
            AfcDataset::CovidFact => &[("SUPPORTED", Some(Support)), ("REFUTED", Some(Refute))],
            AfcDataset::LiarPlus => &[
                ("true", Some(Support)),
                ("mostly-true", Some(Support)),
                ("half-true", Some(Support)),
                ("barely-true", Some(Refute)),
                ("false", Some(Refute)),
                ("pants-fire", Some(Refute)),
            ],
            AfcDataset::PubHealth => &[
                ("true", Some(Support)),
                ("false", Some(Refute)),
                ("mixture", None),
                ("unproven", None),
            ],
            // This copy writes REFUTE where the original release writes CONTRADICT.
            AfcDataset::SciFact => &[
                ("SUPPORT", Some(Support)),
                ("CONTRADICT", Some(Refute)),
                ("REFUTE", Some(Refute)),
                (scifact::NO_RATIONALE, None),
            ],
            AfcDataset::Fever => &[
                ("SUPPORTS", Some(Support)),
                ("REFUTES", Some(Refute)),
                ("NOT ENOUGH INFO", None),
            ],
        }
    }

    /// The split to build: `asked`, else the default; an error when the dataset has no
    /// such split.
    pub fn split(self, asked: Option<Split>) -> Result<Option<Split>, BenchmarkError> {
        match asked {
            None => Ok(self.default_split()),
            Some(s) if self.splits().contains(&s) => Ok(Some(s)),
            Some(s) if self.splits().is_empty() => Err(BenchmarkError::Options(format!(
                "{self} has no splits (asked for {s})"
            ))),
            Some(s) => Err(BenchmarkError::Options(format!(
                "{self} has no split {s}; expected one of {}",
                names(self.splits())
            ))),
        }
    }
}

impl fmt::Display for AfcDataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AfcDataset {
    type Err = BenchmarkError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AfcDataset::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| BenchmarkError::UnknownDataset(s.to_string()))
    }
}

/// A split of a dataset that has several files of claims, named as its files are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Split {
    /// SciFact `claims_train.jsonl`.
    Train,
    /// SciFact `claims_dev.jsonl`.
    Dev,
    /// SciFact `claims_test.jsonl` (a labelled fold; the original test set is unlabelled).
    Test,
    /// LIAR-PLUS `val2.jsonl`.
    Val2,
    /// LIAR-PLUS `test2.jsonl`.
    Test2,
}

impl Split {
    /// Every split.
    pub const ALL: [Split; 5] = [
        Split::Train,
        Split::Dev,
        Split::Test,
        Split::Val2,
        Split::Test2,
    ];

    /// The name used on the command line and in meta.
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Dev => "dev",
            Split::Test => "test",
            Split::Val2 => "val2",
            Split::Test2 => "test2",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Split {
    type Err = BenchmarkError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Split::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                BenchmarkError::Options(format!(
                    "unknown split {s:?}; expected one of {}",
                    names(&Split::ALL)
                ))
            })
    }
}

fn names(splits: &[Split]) -> String {
    splits
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Settings of an AFC build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfcOptions {
    /// Seed of the sample a limit takes (unused without one).
    pub seed: u64,
    /// Keep a seeded sample of this many claims; None keeps every claim.
    pub limit: Option<usize>,
    /// The split, for LIAR-PLUS and SciFact; None takes [`AfcDataset::default_split`].
    pub split: Option<Split>,
}

impl Default for AfcOptions {
    fn default() -> Self {
        AfcOptions {
            seed: 42,
            limit: None,
            split: None,
        }
    }
}

/// A claim as a dataset module reads it, before the label protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceClaim {
    /// 1-based line of its record in the claims file (for errors and meta).
    pub line: usize,
    /// The example id (`<dataset>-<the dataset's id>`).
    pub id: String,
    /// The claim, trimmed; never empty.
    pub text: String,
    /// The label as the dataset writes it.
    pub label: String,
    /// Evidence sentences, trimmed, none empty; empty when the dataset has no evidence
    /// text for the claim.
    pub evidence: Vec<String>,
    /// Meta for the example (the protocol adds the source file, line and label).
    pub meta: serde_json::Map<String, serde_json::Value>,
}

/// What a dataset module read: the claims file and its claims, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// The claims file.
    pub path: PathBuf,
    /// The claims.
    pub claims: Vec<SourceClaim>,
}

/// Builds an AFC dataset from the data folder (the folder holding `covidfact/`,
/// `fever/`, `liar-plus/`, ...).
///
/// ```no_run
/// use credence_core::builders::afc::{self, AfcDataset, AfcOptions};
/// let data = std::path::Path::new("../shared/data");
/// let options = AfcOptions { limit: Some(100), ..AfcOptions::default() };
/// let built = afc::build(AfcDataset::SciFact, data, &options)?;
/// let sha256 = credence_core::builders::write_jsonl(std::path::Path::new("scifact.jsonl"), &built.examples)?;
/// println!("{} claims, sha256 {sha256}", built.examples.len());
/// # Ok::<(), credence_core::builders::BenchmarkError>(())
/// ```
pub fn build(
    dataset: AfcDataset,
    data: &Path,
    options: &AfcOptions,
) -> Result<Build<AfcExample>, BenchmarkError> {
    let split = dataset.split(options.split)?;
    let file = dataset.claims_file(split);
    if !data.join(file).is_file() {
        return Err(BenchmarkError::Invalid {
            path: data.to_path_buf(),
            message: format!("not the data folder: {dataset} reads {file} under it"),
        });
    }
    let source = match dataset {
        AfcDataset::CovidFact => covidfact::read(data)?,
        AfcDataset::LiarPlus => liarplus::read(data, file)?,
        AfcDataset::PubHealth => pubhealth::read(data)?,
        AfcDataset::SciFact => scifact::read(data, file)?,
        AfcDataset::Fever => fever::read(data)?,
    };
    let built = protocol::protocol_then_sample(dataset, file, source, split, options)?;
    tracing::info!(
        dataset = dataset.name(),
        examples = built.examples.len(),
        "built"
    );
    Ok(built)
}

/// Trims each sentence and drops those left empty.
pub(crate) fn clean_sentences<I, S>(sentences: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    sentences
        .into_iter()
        .map(|s| s.as_ref().trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The claim trimmed, or an error naming the line when nothing is left.
pub(crate) fn claim_text(path: &Path, line: usize, claim: &str) -> Result<String, BenchmarkError> {
    let text = claim.trim();
    if text.is_empty() {
        return Err(line_error(path, line, "field \"claim\" is empty"));
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_splits_round_trip_and_unknown_ones_are_refused() {
        for d in AfcDataset::ALL {
            assert_eq!(d.name().parse::<AfcDataset>().unwrap(), d);
            assert_eq!(d.split(None).unwrap(), d.default_split());
            for &s in d.splits() {
                assert_eq!(d.split(Some(s)).unwrap(), Some(s));
            }
        }
        for s in Split::ALL {
            assert_eq!(s.name().parse::<Split>().unwrap(), s);
        }
        let e = AfcDataset::SciFact
            .split(Some(Split::Val2))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "afc-scifact has no split val2; expected one of train, dev, test"
        );
        let e = AfcDataset::Fever
            .split(Some(Split::Dev))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "afc-fever has no splits (asked for dev)");
        assert!("afc-x".parse::<AfcDataset>().is_err());
        assert!("validation".parse::<Split>().is_err());
    }
}
