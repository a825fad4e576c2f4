//! Downstream fact-checking (AFC; PAPER.md "AFC"): how a judge's verdicts on a claim's
//! sub-claims become the claim's verdict and score, and the three numbers the paper
//! reports per decomposer, dataset and setting (accuracy, macro-F1 over the two labels,
//! ROC-AUC of the score against SUPPORT). Pure computation: the judge's prompt and the
//! parse of its answer are the worker's (`llm::nli`).
//!
//! ```
//! use credence_core::afc::{compound, Judgement, NliLabel, Verdict};
//! let subs = [
//!     Judgement::new(NliLabel::Support, 0.9),
//!     Judgement::new(NliLabel::Support, 0.5),
//!     Judgement::new(NliLabel::Neutral, 0.0),
//! ];
//! let c = compound(&subs).unwrap();
//! assert_eq!(c.verdict, Verdict::Support); // 2 of 3: a strict majority
//! assert!((c.score - 1.4 / 3.0).abs() < 1e-12);
//! ```

pub use crate::domain::Verdict;

pub mod table;
use crate::stats::correlation::average_ranks;
use serde::{Deserialize, Serialize};

/// What the NLI judge says of one (claim, evidence) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NliLabel {
    /// The evidence entails the claim.
    Support,
    /// The evidence says nothing either way.
    Neutral,
    /// The evidence contradicts the claim.
    Contradict,
}

impl NliLabel {
    /// The score a judgement takes when the judge gave a label but no score: +1, 0, -1.
    #[must_use]
    pub fn default_score(self) -> f64 {
        match self {
            NliLabel::Support => 1.0,
            NliLabel::Neutral => 0.0,
            NliLabel::Contradict => -1.0,
        }
    }

    /// `SUPPORT`, `NEUTRAL` or `CONTRADICT`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            NliLabel::Support => "SUPPORT",
            NliLabel::Neutral => "NEUTRAL",
            NliLabel::Contradict => "CONTRADICT",
        }
    }
}

/// One judgement: a label and a score in [-1, 1] (-1 contradicts, 1 supports).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// The judge's label.
    pub label: NliLabel,
    /// Its score, in [-1, 1].
    pub score: f64,
}

impl Judgement {
    /// A judgement; the score is clamped into [-1, 1].
    #[must_use]
    pub fn new(label: NliLabel, score: f64) -> Self {
        Judgement {
            label,
            score: score.clamp(-1.0, 1.0),
        }
    }

    /// A label without a score: its default score.
    #[must_use]
    pub fn from_label(label: NliLabel) -> Self {
        Judgement::new(label, label.default_score())
    }

    /// What an unparsable answer counts as: NEUTRAL with score 0.
    #[must_use]
    pub fn unparsable() -> Self {
        Judgement::from_label(NliLabel::Neutral)
    }
}

/// A claim's verdict and score, from its sub-claims' judgements or from one judgement of
/// the whole claim.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Compound {
    /// SUPPORT or REFUTE.
    pub verdict: Verdict,
    /// The score ROC-AUC ranks claims by.
    pub score: f64,
}

/// The verdict without decomposition: SUPPORT iff the judge says SUPPORT; the score is
/// its score.
#[must_use]
pub fn whole(judgement: Judgement) -> Compound {
    Compound {
        verdict: if judgement.label == NliLabel::Support {
            Verdict::Support
        } else {
            Verdict::Refute
        },
        score: judgement.score,
    }
}

/// The verdict from sub-claims: SUPPORT when SUPPORT judgements are a strict majority of
/// all of them (NEUTRAL counts against; a tie is REFUTE); the score is the mean of their
/// scores. `None` for an empty decomposition: the caller judges the claim whole instead
/// (and counts it).
#[must_use]
pub fn compound(subs: &[Judgement]) -> Option<Compound> {
    if subs.is_empty() {
        return None;
    }
    let supports = subs.iter().filter(|j| j.label == NliLabel::Support).count();
    let verdict = if 2 * supports > subs.len() {
        Verdict::Support
    } else {
        Verdict::Refute
    };
    let score = subs.iter().map(|j| j.score).sum::<f64>() / subs.len() as f64;
    Some(Compound { verdict, score })
}

/// How a claim is put to the judge (the paper's three columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfcSetting {
    /// The claim whole, one judgement.
    None,
    /// Split by the decomposer under the CREDENCE prompt and the sweep's AFC
    /// decomposition mode; each sub-claim judged alone.
    Credence,
    /// Split by the same model under the FActScore prompt (base mode); each sub-claim
    /// judged alone.
    Factscore,
}

impl AfcSetting {
    /// Every setting, in the paper's column order.
    pub const ALL: [AfcSetting; 3] = [
        AfcSetting::None,
        AfcSetting::Factscore,
        AfcSetting::Credence,
    ];

    /// `none`, `credence` or `factscore`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AfcSetting::None => "none",
            AfcSetting::Credence => "credence",
            AfcSetting::Factscore => "factscore",
        }
    }
}

impl std::fmt::Display for AfcSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AfcSetting {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AfcSetting::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| format!("unknown AFC setting {s:?}; expected none, credence, factscore"))
    }
}

/// One claim put to the judge and what it said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgedClaim {
    /// The (sub-)claim.
    pub claim: String,
    /// The judge's label.
    pub label: NliLabel,
    /// Its score in [-1, 1].
    pub score: f64,
    /// The judge's answer held no label (counted NEUTRAL, 0).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unparsable: bool,
}

/// What an AFC job found for one claim: the claims judged, the verdict and score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AfcResult {
    /// The claim's id within its dataset.
    pub example_id: String,
    /// The gold verdict.
    pub gold: Verdict,
    /// The claims judged, in order: the sub-claims, or the claim itself (setting
    /// `none`, or an empty decomposition).
    pub judged: Vec<JudgedClaim>,
    /// The compound verdict (or the whole claim's).
    pub verdict: Verdict,
    /// Its score.
    pub score: f64,
    /// The decomposition was empty and the claim was judged whole.
    pub fell_back: bool,
    /// Sub-claims the decomposition gave (0 for `none` and for a fallback).
    pub n_subclaims: u32,
    /// Calls to a model for this claim in this job (decomposition, repair tiers, one per
    /// judgement), counted whether or not the answer came from the generation cache, as
    /// a decomposition's are: the calls belong to the claim, not to the process.
    pub llm_calls: u32,
    /// Why the claim could not be decomposed, when it could not (then it fell back).
    pub error: Option<String>,
}

impl AfcResult {
    /// The verdict and score of `judged` under `setting`: the whole claim's for `none`
    /// and for a fallback, else the compound of the sub-claims.
    #[must_use]
    pub fn verdict_of(judged: &[JudgedClaim], whole_claim: bool) -> Compound {
        let judgements: Vec<Judgement> = judged
            .iter()
            .map(|j| Judgement::new(j.label, j.score))
            .collect();
        match (whole_claim, compound(&judgements)) {
            (false, Some(c)) => c,
            _ => whole(
                judgements
                    .first()
                    .copied()
                    .unwrap_or_else(Judgement::unparsable),
            ),
        }
    }

    /// Judgements whose answer held no label.
    #[must_use]
    pub fn unparsable(&self) -> u32 {
        self.judged.iter().filter(|j| j.unparsable).count() as u32
    }
}

/// One claim of an AFC configuration as stored: what the report's AFC table reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredAfc {
    /// The decomposer.
    pub model: String,
    /// The AFC dataset's id.
    pub dataset: String,
    /// The setting.
    pub setting: AfcSetting,
    /// The claim's id.
    pub example_id: String,
    /// The gold verdict.
    pub gold: Verdict,
    /// The verdict.
    pub verdict: Verdict,
    /// Its score.
    pub score: f64,
    /// Sub-claims of the decomposition.
    pub n_subclaims: u32,
    /// Judged whole after an empty decomposition.
    pub fell_back: bool,
    /// Judgements whose answer held no label.
    pub unparsable: u32,
}

/// Accuracy, macro-F1 and ROC-AUC of verdicts against gold labels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AfcMetrics {
    /// Share of claims whose verdict equals the gold label.
    pub accuracy: f64,
    /// The mean of the two labels' F1 (a label's F1 is 0 when it has no true positive).
    pub macro_f1: f64,
    /// ROC-AUC of the score against gold SUPPORT (ties count a half); `None` when the
    /// gold labels are all one class.
    pub roc_auc: Option<f64>,
}

/// The metrics of `predicted` against `gold` (same order, same length, not empty).
///
/// ```
/// use credence_core::afc::{metrics, Compound, Verdict::*};
/// let gold = [Support, Support, Refute, Refute];
/// let c = |verdict, score| Compound { verdict, score };
/// let m = metrics(&gold, &[c(Support, 0.9), c(Refute, 0.2), c(Refute, 0.1), c(Support, 0.3)]);
/// assert_eq!(m.accuracy, 0.5);
/// assert_eq!(m.macro_f1, 0.5);
/// assert_eq!(m.roc_auc, Some(0.75));
/// ```
///
/// # Panics
/// When the lengths differ or there is no claim.
#[must_use]
pub fn metrics(gold: &[Verdict], predicted: &[Compound]) -> AfcMetrics {
    assert_eq!(
        gold.len(),
        predicted.len(),
        "gold and predicted lengths differ"
    );
    assert!(!gold.is_empty(), "no claim to score");
    let correct = gold
        .iter()
        .zip(predicted)
        .filter(|(g, p)| **g == p.verdict)
        .count();
    let f1 = |label: Verdict| {
        let (mut tp, mut fp, mut fn_) = (0usize, 0usize, 0usize);
        for (g, p) in gold.iter().zip(predicted) {
            match (*g == label, p.verdict == label) {
                (true, true) => tp += 1,
                (false, true) => fp += 1,
                (true, false) => fn_ += 1,
                (false, false) => {}
            }
        }
        if tp == 0 {
            0.0
        } else {
            2.0 * tp as f64 / (2 * tp + fp + fn_) as f64
        }
    };
    let scores: Vec<f64> = predicted.iter().map(|p| p.score).collect();
    AfcMetrics {
        accuracy: correct as f64 / gold.len() as f64,
        macro_f1: (f1(Verdict::Support) + f1(Verdict::Refute)) / 2.0,
        roc_auc: roc_auc(gold, &scores),
    }
}

/// ROC-AUC of `scores` against gold SUPPORT: the probability that a SUPPORT claim scores
/// above a REFUTE one, a tie counting a half (the Mann-Whitney statistic over average
/// ranks). `None` when either class is absent.
///
/// # Panics
/// When the lengths differ.
#[must_use]
pub fn roc_auc(gold: &[Verdict], scores: &[f64]) -> Option<f64> {
    assert_eq!(gold.len(), scores.len(), "gold and score lengths differ");
    let positives = gold.iter().filter(|g| **g == Verdict::Support).count();
    let negatives = gold.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let ranks = average_ranks(scores);
    let rank_sum: f64 = gold
        .iter()
        .zip(&ranks)
        .filter(|(g, _)| **g == Verdict::Support)
        .map(|(_, r)| r)
        .sum();
    let (p, n) = (positives as f64, negatives as f64);
    Some((rank_sum - p * (p + 1.0) / 2.0) / (p * n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Verdict::{Refute, Support};

    fn j(label: NliLabel, score: f64) -> Judgement {
        Judgement::new(label, score)
    }

    #[test]
    fn a_tie_and_neutral_votes_refute() {
        use NliLabel::*;
        let tie = compound(&[j(Support, 1.0), j(Contradict, -1.0)]).unwrap();
        assert_eq!(tie.verdict, Verdict::Refute);
        assert_eq!(tie.score, 0.0);
        let neutral = compound(&[j(Support, 1.0), j(Neutral, 0.0), j(Neutral, 0.0)]).unwrap();
        assert_eq!(neutral.verdict, Verdict::Refute);
        let majority = compound(&[j(Support, 0.4), j(Support, 0.6), j(Neutral, 0.2)]).unwrap();
        assert_eq!(majority.verdict, Verdict::Support);
        assert!((majority.score - 0.4).abs() < 1e-12);
        assert_eq!(compound(&[]), None);
    }

    #[test]
    fn whole_claims_support_only_on_support() {
        assert_eq!(whole(j(NliLabel::Support, 0.2)).verdict, Support);
        assert_eq!(whole(j(NliLabel::Neutral, 0.2)).verdict, Refute);
        assert_eq!(whole(j(NliLabel::Contradict, -0.7)).score, -0.7);
    }

    #[test]
    fn scores_are_clamped_and_labels_default() {
        assert_eq!(Judgement::new(NliLabel::Support, 3.0).score, 1.0);
        assert_eq!(Judgement::from_label(NliLabel::Contradict).score, -1.0);
        assert_eq!(Judgement::unparsable(), j(NliLabel::Neutral, 0.0));
    }

    /// AUC by its definition: every (positive, negative) pair, a tie a half.
    fn auc_by_pairs(gold: &[Verdict], scores: &[f64]) -> f64 {
        let (mut wins, mut pairs) = (0.0, 0.0);
        for (gi, si) in gold.iter().zip(scores) {
            for (gk, sk) in gold.iter().zip(scores) {
                if *gi == Support && *gk == Refute {
                    pairs += 1.0;
                    wins += if si > sk {
                        1.0
                    } else if si == sk {
                        0.5
                    } else {
                        0.0
                    };
                }
            }
        }
        wins / pairs
    }

    #[test]
    fn auc_equals_the_pairwise_definition_with_ties() {
        let mut state = 7u64;
        let mut next = || {
            state = crate::stats::rng::mix64(state);
            state
        };
        for _ in 0..50 {
            let n = 2 + (next() % 40) as usize;
            let gold: Vec<Verdict> = (0..n)
                .map(|_| if next() % 2 == 0 { Support } else { Refute })
                .collect();
            // Scores on a coarse grid, so ties are common.
            let scores: Vec<f64> = (0..n).map(|_| (next() % 5) as f64 / 4.0 - 0.5).collect();
            match roc_auc(&gold, &scores) {
                Some(auc) => assert!((auc - auc_by_pairs(&gold, &scores)).abs() < 1e-12),
                None => assert!(gold.iter().all(|g| *g == gold[0])),
            }
        }
        assert_eq!(roc_auc(&[Support, Support], &[0.1, 0.2]), None);
    }

    #[test]
    fn macro_f1_counts_a_label_never_predicted_as_zero() {
        let gold = [Support, Support, Refute];
        let all_support: Vec<Compound> = (0..3)
            .map(|_| Compound {
                verdict: Support,
                score: 1.0,
            })
            .collect();
        let m = metrics(&gold, &all_support);
        assert!((m.accuracy - 2.0 / 3.0).abs() < 1e-12);
        // SUPPORT: tp 2, fp 1, fn 0 -> 0.8; REFUTE: no true positive -> 0.
        assert!((m.macro_f1 - 0.4).abs() < 1e-12);
        assert_eq!(m.roc_auc, Some(0.5));
    }
}
