//! The downstream fact-checking (AFC) example: a claim, its gold verdict and the evidence
//! sentences a judge reads it against (PAPER.md "AFC"). The `afc-*` dataset builders
//! write it, one JSON object per line:
//! `{"id", "text", "label": "SUPPORT"|"REFUTE", "evidence": ["..."], "meta": {...}}`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A claim's gold verdict after the paper's label protocol (each dataset's labels mapped
/// to two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verdict {
    /// The evidence supports the claim.
    #[serde(rename = "SUPPORT")]
    Support,
    /// The evidence refutes the claim.
    #[serde(rename = "REFUTE")]
    Refute,
}

impl Verdict {
    /// Both verdicts, SUPPORT first.
    pub const ALL: [Verdict; 2] = [Verdict::Support, Verdict::Refute];

    /// The name written in datasets and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Support => "SUPPORT",
            Verdict::Refute => "REFUTE",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One claim of an AFC dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AfcExample {
    /// Unique within its dataset.
    pub id: String,
    /// The claim to check.
    pub text: String,
    /// The gold verdict.
    pub label: Verdict,
    /// The evidence sentences (or passages, where the dataset marks no sentence
    /// boundaries), in order; never empty.
    pub evidence: Vec<String>,
    /// Where the claim came from (file, line, the dataset's own label, ...).
    #[serde(default)]
    pub meta: serde_json::Map<String, serde_json::Value>,
}

/// The key of an example's `meta` under which an AFC claim's gold verdict and evidence
/// travel through the store, which keeps the examples of every dataset in one table
/// (`credence_core::dataset::load_afc` puts them there; the AFC job reads them back).
pub const META_KEY: &str = "afc";

/// An AFC claim's gold verdict and evidence, as its stored example carries them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AfcGold {
    /// The gold verdict.
    pub label: Verdict,
    /// The evidence sentences, in order.
    pub evidence: Vec<String>,
}

impl AfcGold {
    /// The gold verdict and evidence of an example loaded from an AFC dataset; an error
    /// names what is missing (an example of a decomposition dataset has neither).
    pub fn of(example: &super::Example) -> Result<AfcGold, String> {
        let value = example.meta.get(META_KEY).ok_or_else(|| {
            format!(
                "example {:?} has no meta.{META_KEY} (gold label and evidence): not loaded from an AFC dataset",
                example.id
            )
        })?;
        serde_json::from_value(value.clone())
            .map_err(|e| format!("example {:?}: meta.{META_KEY}: {e}", example.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_serialise_as_the_dataset_labels() {
        for v in Verdict::ALL {
            assert_eq!(
                serde_json::to_string(&v).unwrap(),
                format!("\"{}\"", v.as_str())
            );
        }
        let e = AfcExample {
            id: "x-1".into(),
            text: "A claim.".into(),
            label: Verdict::Refute,
            evidence: vec!["One.".into(), "Two.".into()],
            meta: serde_json::Map::new(),
        };
        let line = serde_json::to_string(&e).unwrap();
        assert_eq!(
            line,
            r#"{"id":"x-1","text":"A claim.","label":"REFUTE","evidence":["One.","Two."],"meta":{}}"#
        );
        assert_eq!(serde_json::from_str::<AfcExample>(&line).unwrap(), e);
        assert!(serde_json::from_str::<Verdict>("\"NEUTRAL\"").is_err());
    }
}
