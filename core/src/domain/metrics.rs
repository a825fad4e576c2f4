//! The per-example metrics: their one definition. Each metric is named once, in the
//! [`example_metrics!`] invocation below, with its Rust type, its doc and (for the
//! metrics the end-of-run table shows) its column label, `[claim_share]` when one
//! example's value is a share over its claims ([`Per`]), and `as "Heading" higher|lower`
//! for how the report's tables show it ([`Presentation`]; digits and percentages follow the
//! type). Everything else is derived from
//! that list: the [`ExampleMetrics`] struct the pipeline fills, [`ExampleMetrics::DEFS`],
//! the long-form rows both stores write (`metric_values`: one row per job, example and
//! metric), the wide SQL views people query (`example_metrics`, `results`), the
//! aggregation and the summary table. Adding a metric is one line here.
//!
//! ```
//! use credence_core::domain::ExampleMetrics;
//! let mut m = ExampleMetrics { n_claims: Some(3), avr: Some(1.0 / 3.0), ..Default::default() };
//! m.verify_ok = Some(false);
//! let stored: Vec<(&str, f64)> = m.values().collect();
//! assert_eq!(stored, [("n_claims", 3.0), ("avr", 1.0 / 3.0), ("verify_ok", 0.0)]);
//! let back = ExampleMetrics::from_values(stored).unwrap();
//! assert_eq!(back, m);
//! ```

use serde::{Deserialize, Serialize};

/// How a metric's value is stored and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// A real number (a rate, a score).
    Real,
    /// A non-negative count.
    Count,
    /// A yes/no outcome, stored as 1 or 0 so that its mean is a share.
    Flag,
}

impl MetricKind {
    /// The SQL type of the metric's column in the wide views.
    pub fn sql_type(self) -> &'static str {
        match self {
            MetricKind::Real => "DOUBLE PRECISION",
            MetricKind::Count | MetricKind::Flag => "BIGINT",
        }
    }
}

/// What one example's value of a metric is a mean over. The tables' mean of every
/// metric is over examples (each example weighs 1, and the bootstrap resamples
/// examples); for a [`Per::ClaimShare`] metric that is the macro average of the
/// per-example shares, not the share of all claims pooled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    /// A property of the example (a count, a flag, an F1, a share over the source's
    /// entities or verbs).
    Example,
    /// A share over the example's claims (or reference claims): AVR, RR, soft precision
    /// and recall.
    ClaimShare,
}

/// Which way a metric is better, for the best value a table marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Higher is better (Semantic-F1, EPR, verify%).
    Higher,
    /// Lower is better (AVR, RR, parse failures).
    Lower,
}

/// How the report's tables and plots show a metric's mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Presentation {
    /// The column heading (`Semantic-F1`); the metric's name when none is given.
    pub heading: &'static str,
    /// Which way is better (`None`: the tables mark no best value).
    pub better: Option<Better>,
    /// Shown as a percentage (a flag's mean, a share of examples).
    pub percent: bool,
    /// Decimals shown.
    pub digits: usize,
}

impl Presentation {
    /// A flag's mean as a percentage with one decimal, a count's mean with two, a real
    /// value with three.
    const fn of(kind: MetricKind, heading: &'static str, better: Option<Better>) -> Presentation {
        let (percent, digits) = match kind {
            MetricKind::Flag => (true, 1),
            MetricKind::Count => (false, 2),
            MetricKind::Real => (false, 3),
        };
        Presentation {
            heading,
            better,
            percent,
            digits,
        }
    }

    /// What a mean is multiplied by to be shown (100 for a percentage).
    pub fn scale(&self) -> f64 {
        if self.percent {
            100.0
        } else {
            1.0
        }
    }
}

/// One per-example metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MetricDef {
    /// The metric's name: its column in the views, its `metric` in `metric_values` and
    /// `aggregates`.
    pub name: &'static str,
    /// How its value is stored.
    pub kind: MetricKind,
    /// What it measures.
    pub doc: &'static str,
    /// Its column in the end-of-run summary table, if shown there.
    pub label: Option<&'static str>,
    /// What one example's value averages over (the tables' mean is always over
    /// examples).
    pub per: Per,
    /// How the report shows its mean.
    pub presentation: Presentation,
}

/// A metric name that is not in [`ExampleMetrics::DEFS`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown metric {0:?}")]
pub struct UnknownMetric(pub String);

/// A Rust type a metric can have, with its lossless conversion to the stored `f64`.
trait MetricValue: Copy {
    const KIND: MetricKind;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl MetricValue for f64 {
    const KIND: MetricKind = MetricKind::Real;
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl MetricValue for u32 {
    const KIND: MetricKind = MetricKind::Count;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> Self {
        // Counts are stored from u32s, so the value is a whole number in range.
        v as u32
    }
}

impl MetricValue for bool {
    const KIND: MetricKind = MetricKind::Flag;
    fn to_f64(self) -> f64 {
        if self {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
}

macro_rules! example_metrics {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty $([$per:ident])? $(=> $label:literal)?
        $(as $heading:literal $($better:ident)?)?, )+) => {
        /// Per-example metrics of one mode's claims. A metric is `None` when the sweep
        /// lacks what it needs (e.g. Semantic-F1 without an encoder), never a made-up
        /// value; a `None` metric has no stored row and reads as NULL in the views.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        pub struct ExampleMetrics {
            $( $(#[doc = $doc])+ pub $name: Option<$ty>, )+
        }

        impl ExampleMetrics {
            /// Every metric, in the order of the views' columns.
            pub const DEFS: &'static [MetricDef] = &[
                $( MetricDef {
                    name: stringify!($name),
                    kind: <$ty as MetricValue>::KIND,
                    doc: concat!($($doc),+),
                    label: example_metrics!(@label $($label)?),
                    per: example_metrics!(@per $($per)?),
                    presentation: Presentation::of(
                        <$ty as MetricValue>::KIND,
                        example_metrics!(@heading $name $($heading)?),
                        example_metrics!(@better $($($better)?)?),
                    ),
                }, )+
            ];

            /// The definition of the metric named `name`.
            pub fn def(name: &str) -> Option<&'static MetricDef> {
                Self::DEFS.iter().find(|d| d.name == name)
            }

            /// The metrics that are set, as (name, stored value), in [`Self::DEFS`] order.
            pub fn values(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
                [$( (stringify!($name), self.$name.map(MetricValue::to_f64)), )+]
                    .into_iter()
                    .filter_map(|(name, v)| v.map(|v| (name, v)))
            }

            /// Sets one metric from its stored value.
            pub fn set(&mut self, name: &str, value: f64) -> Result<(), UnknownMetric> {
                match name {
                    $( stringify!($name) => self.$name = Some(MetricValue::from_f64(value)), )+
                    _ => return Err(UnknownMetric(name.to_string())),
                }
                Ok(())
            }

            /// The metrics read back from stored (name, value) pairs.
            pub fn from_values<'a>(
                values: impl IntoIterator<Item = (&'a str, f64)>,
            ) -> Result<Self, UnknownMetric> {
                let mut m = ExampleMetrics::default();
                for (name, value) in values {
                    m.set(name, value)?;
                }
                Ok(m)
            }
        }
    };
    (@label $label:literal) => { Some($label) };
    (@label) => { None };
    (@per claim_share) => { Per::ClaimShare };
    (@per) => { Per::Example };
    (@heading $name:ident $heading:literal) => { $heading };
    (@heading $name:ident) => { stringify!($name) };
    (@better higher) => { Some(Better::Higher) };
    (@better lower) => { Some(Better::Lower) };
    (@better) => { None };
}

example_metrics! {
    /// Number of final claims.
    n_claims: u32 => "claims",
    /// Jaccard-F1 precision: mean over claims of the best max(Jaccard, difflib ratio).
    jaccard_p: f64 [claim_share],
    /// Jaccard-F1 recall: mean over references of the best max(Jaccard, difflib ratio).
    jaccard_r: f64 [claim_share],
    /// Jaccard-F1: greedy soft-F1 with sim = max(Jaccard, difflib ratio).
    jaccard_f1: f64 => "jaccard_f1" as "Jaccard-F1" higher,
    /// Semantic-F1 precision: mean over claims of the highest cosine to a reference.
    semantic_p: f64 [claim_share],
    /// Semantic-F1 recall: mean over references of the highest cosine to a claim.
    semantic_r: f64 [claim_share],
    /// Semantic-F1 (average-max, unthresholded; the paper's headline metric).
    semantic_f1: f64 => "semantic_f1" as "Semantic-F1" higher,
    /// Semantic-F1 precision under a Hungarian one-to-one matching.
    semantic_hungarian_p: f64 [claim_share],
    /// Semantic-F1 recall under a Hungarian one-to-one matching.
    semantic_hungarian_r: f64 [claim_share],
    /// Semantic-F1 under a Hungarian one-to-one matching (matching ablation).
    semantic_hungarian_f1: f64,
    /// Semantic-F1 precision counting only cosines >= 0.90.
    semantic_thresholded_p: f64 [claim_share],
    /// Semantic-F1 recall counting only cosines >= 0.90.
    semantic_thresholded_r: f64 [claim_share],
    /// Semantic-F1 counting only cosines >= 0.90 (matching ablation).
    semantic_thresholded_f1: f64,
    /// Semantic-F1 precision with Tanimoto similarity cos / (2 - cos).
    semantic_tanimoto_p: f64 [claim_share],
    /// Semantic-F1 recall with Tanimoto similarity cos / (2 - cos).
    semantic_tanimoto_r: f64 [claim_share],
    /// Semantic-F1 with Tanimoto similarity cos / (2 - cos) (matching ablation).
    semantic_tanimoto_f1: f64,
    /// Number of distinct entities of the source (tier 1 and tier 2).
    n_entities: u32,
    /// Entity preservation rate over both tiers; 1 when the source has no entity.
    epr: f64 => "epr" as "EPR" higher,
    /// Entity preservation rate of the tier-1 (regex) entities alone.
    epr_tier1: f64,
    /// Entity preservation rate of the tier-2 (NER) entities alone.
    epr_tier2: f64,
    /// Atomicity violation rate: share of claims failing the atomicity predicate.
    avr: f64 [claim_share] => "avr" as "AVR" lower,
    /// Number of compound-boundary nodes over all claims.
    n_viol: u32,
    /// Number of claims with a later claim at cosine >= tau_dup.
    dup_count: u32,
    /// Redundancy rate: dup_count / number of claims.
    rr: f64 [claim_share] => "rr" as "RR" lower,
    /// Whether the claims pass all three verifier checks (AVR 0, EPR >= min_epr, no
    /// duplicate); its mean is verify%.
    verify_ok: bool => "verify%" as "verify%" higher,
    /// Number of claims flagged for an unresolved pronoun subject (self-containment).
    n_unresolved: u32,
    /// Modality consistency: share of the source's reporting verbs kept in the claims.
    mc: f64 => "mc",
    /// Theorem T4's interference: AVR is 0 while EPR is below 1.
    interference: bool,
    /// Whether the LLM's answer held no claim its prompt's parser could read (the
    /// FActScore prompt without a "- " bullet), scored as an empty list; its mean is the
    /// parse-failure rate. Unset for the baselines, which have no answer to parse.
    parse_failed: bool as "parse failures %" lower,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_field_is_listed() {
        let mut names: Vec<&str> = ExampleMetrics::DEFS.iter().map(|d| d.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        let json = serde_json::to_value(ExampleMetrics::default()).unwrap();
        assert_eq!(json.as_object().unwrap().len(), n);
        for d in ExampleMetrics::DEFS {
            assert!(json.get(d.name).is_some(), "{} is not a field", d.name);
            assert!(!d.doc.is_empty());
        }
    }

    #[test]
    fn the_report_shows_each_metric_as_its_definition_says() {
        let shown = |name: &str| ExampleMetrics::def(name).unwrap().presentation;
        let f1 = shown("semantic_f1");
        assert_eq!(
            (f1.heading, f1.better, f1.percent, f1.digits),
            ("Semantic-F1", Some(Better::Higher), false, 3)
        );
        assert_eq!(shown("avr").better, Some(Better::Lower));
        let verify = shown("verify_ok");
        assert_eq!(
            (verify.heading, verify.scale(), verify.digits),
            ("verify%", 100.0, 1)
        );
        // Without a heading: the name, no direction, digits by type.
        let n = shown("n_claims");
        assert_eq!((n.heading, n.better, n.digits), ("n_claims", None, 2));
        assert!(ExampleMetrics::def("f2").is_none());
    }

    #[test]
    fn kinds_follow_the_types() {
        let kind = |name: &str| {
            ExampleMetrics::DEFS
                .iter()
                .find(|d| d.name == name)
                .unwrap()
                .kind
        };
        assert_eq!(kind("n_claims"), MetricKind::Count);
        assert_eq!(kind("epr"), MetricKind::Real);
        assert_eq!(kind("verify_ok"), MetricKind::Flag);
    }

    #[test]
    fn values_round_trip_and_skip_unset_metrics() {
        let m = ExampleMetrics {
            n_claims: Some(4),
            semantic_f1: Some(0.875),
            verify_ok: Some(true),
            interference: Some(false),
            n_viol: Some(0),
            ..ExampleMetrics::default()
        };
        let values: Vec<(&str, f64)> = m.values().collect();
        assert_eq!(
            values,
            [
                ("n_claims", 4.0),
                ("semantic_f1", 0.875),
                ("n_viol", 0.0),
                ("verify_ok", 1.0),
                ("interference", 0.0)
            ]
        );
        assert_eq!(ExampleMetrics::from_values(values).unwrap(), m);
        assert_eq!(
            ExampleMetrics::from_values([("f2", 1.0)]).unwrap_err(),
            UnknownMetric("f2".into())
        );
    }
}
