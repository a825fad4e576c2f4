//! Domain types of the CREDENCE experiments: examples, claims, modes, per-example results,
//! and the downstream fact-checking examples ([`AfcExample`]).

mod afc;
mod metrics;
mod stage;

pub use afc::{AfcExample, AfcGold, Verdict, META_KEY as AFC_META_KEY};
pub use metrics::{
    Better, ExampleMetrics, MetricDef, MetricKind, Per, Presentation, UnknownMetric,
};
pub use stage::{Stage, StageTimes};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One input sentence (or short passage) with its reference decomposition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// Unique within its dataset.
    pub id: String,
    /// The compound sentence to decompose.
    pub text: String,
    /// Reference atomic claims.
    pub references: Vec<String>,
    /// Free-form metadata carried through to the results (style, category, markers...).
    #[serde(default)]
    pub meta: serde_json::Map<String, serde_json::Value>,
}

/// An atomic claim as produced by a decomposer or the repairer.
pub type Claim = String;

/// How the claims of an example are produced (PAPER.md "Modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One decomposer call.
    Base,
    /// Base plus the verifier: a line of the paper's timing table, computed from the
    /// `base` jobs (which run the verifier for the metrics); never a job of its own, so
    /// a sweep cannot name it.
    Verify,
    /// Base plus the rule repair tier.
    Repair,
    /// Base plus one LLM self-repair call.
    SelfRepair,
    /// Base, rule tier, then the LLM tier with early exit.
    All,
}

impl Mode {
    /// The paper's four modes, in its order: a sweep's modes when it names none.
    pub const PAPER: [Mode; 4] = [Mode::Base, Mode::Repair, Mode::SelfRepair, Mode::All];

    /// Every mode, `verify` (the timing table's line) included.
    pub const EVERY: [Mode; 5] = [
        Mode::Base,
        Mode::Verify,
        Mode::Repair,
        Mode::SelfRepair,
        Mode::All,
    ];

    /// The name used in sweep files, the store and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Base => "base",
            Mode::Verify => "verify",
            Mode::Repair => "repair",
            Mode::SelfRepair => "self_repair",
            Mode::All => "all",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for a mode name that is not one of the four a sweep can run.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown mode {0:?}; expected base, repair, self_repair, all")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::PAPER
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

/// What a job produced for one example in one mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExampleResult {
    /// The example's id within its dataset.
    pub example_id: String,
    /// Claims of the base decomposition.
    pub base_claims: Vec<Claim>,
    /// Final claims of this mode.
    pub claims: Vec<Claim>,
    /// Which pipeline produced `claims` from `base_claims`: `none` while a mode has no
    /// pipeline behind it (the claims are the base claims, unchanged).
    pub pipeline_version: String,
    /// Number of decomposer / LLM calls spent on this example in this mode.
    pub llm_calls: u32,
    /// The verifier's report on `claims` as JSON (atomicity boundaries, entities kept and
    /// missing, duplicate pairs and each claim's highest cosine to a later claim,
    /// self-containment flags, modality), when the sweep verifies; deterministic.
    pub verifier_json: Option<String>,
    /// What the repair tiers did to the base claims in this mode (JSON: the rule tier's
    /// split, pronoun, inject and dedup steps with claim indices), for repair modes.
    pub repair_json: Option<String>,
    /// Why the example could not be decomposed (an unusable answer after every retry,
    /// or a request the server refused for its content); its claims are then empty and
    /// its metrics those of an empty list. `None` for every example that decomposed.
    pub error: Option<String>,
    /// The example's metrics.
    pub metrics: ExampleMetrics,
    /// Seconds per stage (the `stage_seconds` table, for the timing table; not part of
    /// the result rows, which stay deterministic). Never serialised.
    #[serde(skip)]
    pub stage_seconds: StageTimes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_round_trip() {
        for m in Mode::PAPER {
            assert_eq!(m.as_str().parse::<Mode>().unwrap(), m);
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.as_str()));
        }
        let err = "fix".parse::<Mode>().unwrap_err().to_string();
        assert_eq!(
            err,
            r#"unknown mode "fix"; expected base, repair, self_repair, all"#
        );
    }
}
