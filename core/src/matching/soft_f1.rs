//! Greedy ("average-max") soft-F1 over a similarity matrix, and Jaccard-F1 built on it
//! (PAPER.md "Metrics", "Decided here").

use unicode_segmentation::UnicodeSegmentation;

/// Precision, recall and F1 of one prediction list against one reference list.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoftF1 {
    /// Mean over predictions of the best similarity to any reference.
    pub precision: f64,
    /// Mean over references of the best similarity to any prediction.
    pub recall: f64,
    /// 2PR / (P + R), 0 when both are 0.
    pub f1: f64,
}

impl SoftF1 {
    /// The score of an empty prediction or reference list.
    pub const ZERO: SoftF1 = SoftF1 {
        precision: 0.0,
        recall: 0.0,
        f1: 0.0,
    };

    /// The score with these precision and recall: F1 is their harmonic mean, 0 when
    /// both are 0.
    pub fn from_precision_recall(precision: f64, recall: f64) -> SoftF1 {
        let f1 = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        SoftF1 {
            precision,
            recall,
            f1,
        }
    }
}

/// Greedy soft-F1 for `n_pred` predictions and `n_ref` references, where `sim(i, j)` is
/// the similarity of prediction `i` and reference `j`. Unconstrained max, no threshold.
/// An empty side gives [`SoftF1::ZERO`].
///
/// ```
/// use credence_core::matching::soft_f1::greedy_soft_f1;
/// let sims = [[1.0, 0.0], [0.5, 0.0]];
/// let s = greedy_soft_f1(2, 2, |i, j| sims[i][j]);
/// assert_eq!(s.precision, 0.75);
/// assert_eq!(s.recall, 0.5);
/// ```
pub fn greedy_soft_f1(n_pred: usize, n_ref: usize, sim: impl Fn(usize, usize) -> f64) -> SoftF1 {
    if n_pred == 0 || n_ref == 0 {
        return SoftF1::ZERO;
    }
    let mut best_ref = vec![f64::NEG_INFINITY; n_ref];
    let mut p_sum = 0.0;
    for i in 0..n_pred {
        let mut best = f64::NEG_INFINITY;
        for (j, br) in best_ref.iter_mut().enumerate() {
            let s = sim(i, j);
            best = best.max(s);
            *br = br.max(s);
        }
        p_sum += best;
    }
    let precision = p_sum / n_pred as f64;
    let recall = best_ref.iter().sum::<f64>() / n_ref as f64;
    SoftF1::from_precision_recall(precision, recall)
}

/// Jaccard tokens: lower-cased words split on Unicode word boundaries, punctuation dropped.
pub fn jaccard_tokens(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut words: Vec<String> = lower.unicode_words().map(str::to_string).collect();
    words.sort();
    words.dedup();
    words
}

/// Jaccard index of two sorted, deduplicated token sets; 0 when both are empty.
pub fn jaccard(a: &[String], b: &[String]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut inter) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                inter += 1;
                i += 1;
                j += 1;
            }
        }
    }
    inter as f64 / (a.len() + b.len() - inter) as f64
}

/// Jaccard-F1: greedy soft-F1 with sim = max(Jaccard, difflib ratio), the ratio taken on
/// the lower-cased strings with the prediction first.
pub fn jaccard_f1<S: AsRef<str>, R: AsRef<str>>(predictions: &[S], references: &[R]) -> SoftF1 {
    let pred_lower: Vec<String> = predictions
        .iter()
        .map(|p| p.as_ref().to_lowercase())
        .collect();
    let ref_lower: Vec<String> = references
        .iter()
        .map(|r| r.as_ref().to_lowercase())
        .collect();
    let pred_tok: Vec<Vec<String>> = predictions
        .iter()
        .map(|p| jaccard_tokens(p.as_ref()))
        .collect();
    let ref_tok: Vec<Vec<String>> = references
        .iter()
        .map(|r| jaccard_tokens(r.as_ref()))
        .collect();
    let mut sims = vec![0.0; predictions.len() * references.len()];
    for i in 0..predictions.len() {
        for j in 0..references.len() {
            let jac = jaccard(&pred_tok[i], &ref_tok[j]);
            let ratio = super::difflib::ratio(&pred_lower[i], &ref_lower[j]);
            sims[i * references.len() + j] = jac.max(ratio);
        }
    }
    greedy_soft_f1(predictions.len(), references.len(), |i, j| {
        sims[i * references.len() + j]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_sides_score_zero() {
        assert_eq!(jaccard_f1::<&str, &str>(&[], &["a"]), SoftF1::ZERO);
        assert_eq!(jaccard_f1::<&str, &str>(&["a"], &[]), SoftF1::ZERO);
    }

    #[test]
    fn identical_lists_score_one() {
        let c = ["The bridge collapsed.", "The road was blocked."];
        let s = jaccard_f1(&c, &c);
        assert_eq!(s.f1, 1.0);
    }

    #[test]
    fn tokens_ignore_case_and_punctuation() {
        assert_eq!(
            jaccard_tokens("The U.S. economy, the ECONOMY!"),
            ["economy", "the", "u.s"]
        );
        let a = jaccard_tokens("Paris is big.");
        let b = jaccard_tokens("paris is small");
        assert_eq!(jaccard(&a, &b), 0.5);
    }

    #[test]
    fn greedy_is_unconstrained_max() {
        // Both predictions match the first reference best: greedy lets them share it.
        let m = [[0.9, 0.1], [0.8, 0.2]];
        let s = greedy_soft_f1(2, 2, |i, j| m[i][j]);
        assert!((s.precision - 0.85).abs() < 1e-12);
        assert!((s.recall - 0.55).abs() < 1e-12);
        assert!((s.f1 - 2.0 * 0.85 * 0.55 / 1.4).abs() < 1e-12);
    }

    #[test]
    fn jaccard_f1_takes_the_larger_similarity() {
        // Word sets equal (Jaccard 1) though the order differs (ratio < 1).
        let s = jaccard_f1(&["rates raised the bank"], &["The bank raised rates."]);
        assert_eq!(s.f1, 1.0);
        // Character overlap without shared words: the ratio carries the score.
        let s = jaccard_f1(&["colour"], &["color"]);
        let r = super::super::difflib::ratio("colour", "color");
        assert!((s.f1 - r).abs() < 1e-12 && r > 0.9);
    }
}
