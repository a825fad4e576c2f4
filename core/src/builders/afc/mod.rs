//! The downstream fact-checking (AFC) datasets of the paper's last experiment (PAPER.md
//! "AFC"): FEVER, PubHealth, LIAR-PLUS, SciFact and CovidFact, each read from its folder
//! under the data folder, mapped to SUPPORT / REFUTE by the paper's label protocol, and
//! written as [`AfcExample`]s with the dataset's own evidence text (the paper retrieved
//! evidence; how is not stated, so it cannot be redone).
//!
//! One module per dataset reads its files into [`SourceClaim`]s (the dataset's label
//! as written, evidence possibly empty); this module applies what every dataset shares,
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
pub mod pubhealth;
pub mod scifact;

use super::{line_error, sampling, BenchmarkError, Build};
use crate::domain::{AfcExample, Verdict};
use std::collections::{BTreeMap, HashMap};
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
    let built = protocol_then_sample(dataset, file, source, split, options)?;
    tracing::info!(
        dataset = dataset.name(),
        examples = built.examples.len(),
        "built"
    );
    Ok(built)
}

/// Steps 1-3 of the module docs.
fn protocol_then_sample(
    dataset: AfcDataset,
    file: &str,
    source: Source,
    split: Option<Split>,
    options: &AfcOptions,
) -> Result<Build<AfcExample>, BenchmarkError> {
    let mut built = Build {
        examples: Vec::new(),
        funnel: Vec::new(),
    };
    built.step(format!("claims in {file}"), source.claims.len());
    let protocol = dataset.protocol();
    let mut per_label: BTreeMap<&str, usize> = BTreeMap::new();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    let mut kept = Vec::new();
    for claim in source.claims {
        let Some(&(label, verdict)) = protocol.iter().find(|(l, _)| *l == claim.label) else {
            return Err(line_error(
                &source.path,
                claim.line,
                format!(
                    "field \"label\": {:?} is not one of {}",
                    claim.label,
                    protocol
                        .iter()
                        .map(|(l, _)| *l)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if let Some(first) = first_line_of.insert(claim.id.clone(), claim.line) {
            return Err(line_error(
                &source.path,
                claim.line,
                format!("duplicate id {:?} (first on line {first})", claim.id),
            ));
        }
        *per_label.entry(label).or_default() += 1;
        let Some(verdict) = verdict else {
            continue;
        };
        let mut meta = serde_json::Map::new();
        meta.insert("source".into(), file.into());
        if let Some(split) = split {
            meta.insert("split".into(), split.name().into());
        }
        meta.insert("line".into(), claim.line.into());
        meta.insert("label".into(), claim.label.into());
        meta.extend(claim.meta);
        kept.push(AfcExample {
            id: claim.id,
            text: claim.text,
            label: verdict,
            evidence: claim.evidence,
            meta,
        });
    }
    built.step(
        format!(
            "label protocol: {}",
            describe_protocol(protocol, &per_label)
        ),
        kept.len(),
    );
    kept.retain(|e| !e.evidence.is_empty());
    built.step(
        format!("with evidence text ({})", verdict_counts(&kept)),
        kept.len(),
    );
    if let Some(limit) = options.limit {
        if limit < kept.len() {
            let mut order: Vec<usize> = (0..kept.len()).collect();
            sampling::shuffle(&mut sampling::stream(options.seed, 0), &mut order);
            let mut take = order[..limit].to_vec();
            take.sort_unstable();
            let mut slots: Vec<Option<AfcExample>> = kept.into_iter().map(Some).collect();
            kept = take.iter().filter_map(|&i| slots[i].take()).collect();
            built.step(
                format!(
                    "seeded sample of {limit} (seed {}) ({})",
                    options.seed,
                    verdict_counts(&kept)
                ),
                kept.len(),
            );
        } else {
            built.step(
                format!("all of them (limit {limit} is not below the count)"),
                kept.len(),
            );
        }
    }
    built.examples = kept;
    Ok(built)
}

/// "SUPPORT 727 (true 211, mostly-true 249, half-true 267), REFUTE 556 (...), dropped 0":
/// the source labels met, grouped by the verdict they map to, in protocol order.
fn describe_protocol(
    protocol: &[(&str, Option<Verdict>)],
    per_label: &BTreeMap<&str, usize>,
) -> String {
    let group = |verdict: Option<Verdict>, name: &str| {
        let members: Vec<(&str, usize)> = protocol
            .iter()
            .filter(|(_, v)| *v == verdict)
            .filter_map(|(l, _)| per_label.get(l).map(|&n| (*l, n)))
            .collect();
        let total: usize = members.iter().map(|(_, n)| n).sum();
        if members.is_empty() {
            return format!("{name} 0");
        }
        let parts: Vec<String> = members.iter().map(|(l, n)| format!("{l} {n}")).collect();
        format!("{name} {total} ({})", parts.join(", "))
    };
    format!(
        "{}, {}, {}",
        group(Some(Verdict::Support), "SUPPORT"),
        group(Some(Verdict::Refute), "REFUTE"),
        group(None, "dropped")
    )
}

/// "SUPPORT 124, REFUTE 64".
pub fn verdict_counts(examples: &[AfcExample]) -> String {
    Verdict::ALL
        .iter()
        .map(|&v| format!("{v} {}", examples.iter().filter(|e| e.label == v).count()))
        .collect::<Vec<_>>()
        .join(", ")
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

    fn claim(line: usize, label: &str, evidence: &[&str]) -> SourceClaim {
        SourceClaim {
            line,
            id: format!("x-{line}"),
            text: format!("Claim {line}."),
            label: label.into(),
            evidence: evidence.iter().map(|s| s.to_string()).collect(),
            meta: serde_json::Map::new(),
        }
    }

    fn source(claims: Vec<SourceClaim>) -> Source {
        Source {
            path: PathBuf::from("pubhealth/pubhealth_test.csv"),
            claims,
        }
    }

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

    #[test]
    fn protocol_maps_drops_and_counts_and_refuses_unknown_labels() {
        let claims = vec![
            claim(2, "true", &["E."]),
            claim(3, "mixture", &["E."]),
            claim(4, "false", &["E."]),
            claim(5, "true", &[]),
            claim(6, "unproven", &["E."]),
        ];
        let built = protocol_then_sample(
            AfcDataset::PubHealth,
            pubhealth::FILE,
            source(claims.clone()),
            None,
            &AfcOptions::default(),
        )
        .unwrap();
        let ids: Vec<&str> = built.examples.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["x-2", "x-4"]);
        assert_eq!(built.examples[1].label, Verdict::Refute);
        assert_eq!(built.examples[1].meta["label"], "false");
        assert_eq!(built.examples[1].meta["line"], 4);
        let steps: Vec<(&str, usize)> = built
            .funnel
            .iter()
            .map(|s| (s.step.as_str(), s.remaining))
            .collect();
        assert_eq!(
            steps,
            [
                ("claims in pubhealth/pubhealth_test.csv", 5),
                (
                    "label protocol: SUPPORT 2 (true 2), REFUTE 1 (false 1), dropped 2 (mixture 1, unproven 1)",
                    3
                ),
                ("with evidence text (SUPPORT 1, REFUTE 1)", 2),
            ]
        );

        let mut bad = claims.clone();
        bad[3].label = "pants-fire".into();
        let e = protocol_then_sample(
            AfcDataset::PubHealth,
            pubhealth::FILE,
            source(bad),
            None,
            &AfcOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "pubhealth/pubhealth_test.csv:5: field \"label\": \"pants-fire\" is not one of true, false, mixture, unproven"
        );
        let mut twice = claims;
        twice[2].id = "x-2".into();
        let e = protocol_then_sample(
            AfcDataset::PubHealth,
            pubhealth::FILE,
            source(twice),
            None,
            &AfcOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "pubhealth/pubhealth_test.csv:4: duplicate id \"x-2\" (first on line 2)"
        );
    }

    #[test]
    fn a_limit_takes_a_seeded_subset_in_source_order() {
        let claims: Vec<SourceClaim> = (1..=40)
            .map(|i| claim(i, if i % 3 == 0 { "false" } else { "true" }, &["E."]))
            .collect();
        let run = |seed, limit| {
            let options = AfcOptions {
                seed,
                limit: Some(limit),
                split: None,
            };
            protocol_then_sample(
                AfcDataset::PubHealth,
                pubhealth::FILE,
                source(claims.clone()),
                None,
                &options,
            )
            .unwrap()
        };
        let lines = |b: &Build<AfcExample>| -> Vec<usize> {
            b.examples
                .iter()
                .map(|e| e.meta["line"].as_u64().unwrap() as usize)
                .collect()
        };
        let ten = run(42, 10);
        assert_eq!(ten.examples.len(), 10);
        assert_eq!(lines(&ten), lines(&run(42, 10)));
        assert!(lines(&ten).windows(2).all(|w| w[0] < w[1]));
        assert_ne!(lines(&ten), lines(&run(7, 10)));
        let twenty = lines(&run(42, 20));
        assert!(lines(&ten).iter().all(|l| twenty.contains(l)));
        let last = ten.funnel.last().unwrap();
        assert_eq!(last.remaining, 10);
        assert!(last
            .step
            .starts_with("seeded sample of 10 (seed 42) (SUPPORT "));
        let all = run(42, 40);
        assert_eq!(all.examples.len(), 40);
        assert_eq!(
            all.funnel.last().unwrap().step,
            "all of them (limit 40 is not below the count)"
        );
    }
}
