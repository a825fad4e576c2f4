//! Embedding metrics that need only vectors, not the encoder: the cosine matrix,
//! Semantic-F1 (average-max, PAPER.md "Metrics") with its three matching ablations
//! (Hungarian 1-to-1, thresholded at τ, Tanimoto), and the redundancy rate RR with the
//! paper's dup_count rule.

use super::hungarian::max_weight_assignment;
use super::soft_f1::{greedy_soft_f1, SoftF1};

/// Cosines between every row vector and every column vector.
#[derive(Debug, Clone, PartialEq)]
pub struct CosineMatrix {
    rows: usize,
    cols: usize,
    values: Vec<f64>,
}

impl CosineMatrix {
    /// Cosines of `rows[i]` and `cols[j]`, accumulated in f64. A zero vector has cosine 0
    /// with everything. Vectors of different lengths are compared on their common prefix;
    /// callers pass vectors of one encoder, which all have its dimension.
    ///
    /// ```
    /// use credence_core::matching::semantic::CosineMatrix;
    /// let m = CosineMatrix::new(&[vec![1.0, 0.0]], &[vec![0.0, 2.0], vec![3.0, 3.0]]);
    /// assert_eq!(m.get(0, 0), 0.0);
    /// assert!((m.get(0, 1) - 0.5f64.sqrt()).abs() < 1e-12);
    /// ```
    pub fn new<A: AsRef<[f32]>, B: AsRef<[f32]>>(rows: &[A], cols: &[B]) -> Self {
        let norm = |v: &[f32]| {
            v.iter()
                .map(|&x| f64::from(x) * f64::from(x))
                .sum::<f64>()
                .sqrt()
        };
        let col_norms: Vec<f64> = cols.iter().map(|c| norm(c.as_ref())).collect();
        let mut values = Vec::with_capacity(rows.len() * cols.len());
        for r in rows {
            let r = r.as_ref();
            let rn = norm(r);
            for (c, &cn) in cols.iter().zip(&col_norms) {
                let dot: f64 = r
                    .iter()
                    .zip(c.as_ref())
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum();
                values.push(if rn > 0.0 && cn > 0.0 {
                    dot / (rn * cn)
                } else {
                    0.0
                });
            }
        }
        CosineMatrix {
            rows: rows.len(),
            cols: cols.len(),
            values,
        }
    }

    /// Number of row vectors.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of column vectors.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Cosine of row `i` and column `j`.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        self.values[i * self.cols + j]
    }
}

/// Semantic-F1 as the paper defines it: rows are predicted claims, columns references;
/// P = mean over predictions of the best cosine to any reference, R likewise over
/// references, F1 = 2PR/(P+R). Unconstrained max, no threshold.
///
/// ```
/// use credence_core::matching::semantic::{semantic_f1, CosineMatrix};
/// let c = vec![vec![1.0f32, 0.0], vec![0.0, 1.0]];
/// assert_eq!(semantic_f1(&CosineMatrix::new(&c, &c)).f1, 1.0);
/// ```
pub fn semantic_f1(cos: &CosineMatrix) -> SoftF1 {
    greedy_soft_f1(cos.rows, cos.cols, |i, j| cos.get(i, j))
}

/// Ablation: Hungarian 1-to-1 matching. The matched cosines are summed (unmatched claims
/// score 0); P = sum / |predictions|, R = sum / |references|.
pub fn semantic_f1_hungarian(cos: &CosineMatrix) -> SoftF1 {
    if cos.rows == 0 || cos.cols == 0 {
        return SoftF1::ZERO;
    }
    let total = max_weight_assignment(cos.rows, cos.cols, |i, j| cos.get(i, j)).total;
    SoftF1::from_precision_recall(total / cos.rows as f64, total / cos.cols as f64)
}

/// Ablation: average-max with cosines below `tau` (the paper uses 0.90) counted as 0.
pub fn semantic_f1_thresholded(cos: &CosineMatrix, tau: f64) -> SoftF1 {
    greedy_soft_f1(cos.rows, cos.cols, |i, j| {
        let c = cos.get(i, j);
        if c >= tau {
            c
        } else {
            0.0
        }
    })
}

/// Ablation: average-max over the Tanimoto similarity T = cos / (2 - cos).
pub fn semantic_f1_tanimoto(cos: &CosineMatrix) -> SoftF1 {
    greedy_soft_f1(cos.rows, cos.cols, |i, j| tanimoto(cos.get(i, j)))
}

/// Tanimoto similarity of two unit vectors from their cosine: cos / (2 - cos).
pub fn tanimoto(cos: f64) -> f64 {
    cos / (2.0 - cos)
}

/// The paper's dup_count over the claims' own cosine matrix (claims x claims): the
/// number of claims i that have some j > i with cos(i, j) >= `tau_dup`, each claim
/// counted once.
pub fn dup_count(claims: &CosineMatrix, tau_dup: f64) -> usize {
    (0..claims.rows)
        .filter(|&i| ((i + 1)..claims.cols).any(|j| claims.get(i, j) >= tau_dup))
        .count()
}

/// Redundancy rate RR = dup_count / |C|; 0 for an empty claim list (nothing repeats).
pub fn redundancy_rate(claims: &CosineMatrix, tau_dup: f64) -> f64 {
    if claims.rows == 0 {
        return 0.0;
    }
    dup_count(claims, tau_dup) as f64 / claims.rows as f64
}

/// RR at another threshold from each claim's highest cosine to a later claim (the
/// verifier stores them), without re-embedding: a claim is a duplicate at `tau` when that
/// cosine is >= `tau` (the last claim has none). Equals [`redundancy_rate`] of the matrix
/// the cosines came from.
pub fn redundancy_rate_at(later_cos: &[Option<f64>], tau: f64) -> f64 {
    if later_cos.is_empty() {
        return 0.0;
    }
    let dups = later_cos.iter().flatten().filter(|&&c| c >= tau).count();
    dups as f64 / later_cos.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(deg: f64) -> Vec<f32> {
        let r = deg.to_radians();
        vec![r.cos() as f32, r.sin() as f32]
    }

    #[test]
    fn cosine_matrix_is_scale_free_and_zero_safe() {
        let m = CosineMatrix::new(&[vec![2.0f32, 0.0], vec![0.0, 0.0]], &[vec![5.0f32, 0.0]]);
        assert_eq!((m.rows(), m.cols()), (2, 1));
        assert!((m.get(0, 0) - 1.0).abs() < 1e-12);
        assert_eq!(m.get(1, 0), 0.0);
    }

    #[test]
    fn greedy_lets_predictions_share_a_reference_hungarian_does_not() {
        // Two predictions close to reference 0, one reference far from both.
        let preds = [unit(0.0), unit(10.0)];
        let refs = [unit(5.0), unit(90.0)];
        let m = CosineMatrix::new(&preds, &refs);
        let greedy = semantic_f1(&m);
        let hung = semantic_f1_hungarian(&m);
        let c5 = 5f64.to_radians().cos();
        assert!((greedy.precision - c5).abs() < 1e-6);
        assert!(hung.precision < greedy.precision);
        // Hungarian: best is (0 -> 5deg, 10deg -> 90deg) or the swap; both sum the same way.
        let best = (c5 + 80f64.to_radians().cos()).max(c5 + 90f64.to_radians().cos());
        assert!((hung.precision - best / 2.0).abs() < 1e-6);
        assert!((hung.recall - best / 2.0).abs() < 1e-6);
    }

    #[test]
    fn hungarian_on_unequal_sizes_divides_by_each_side() {
        let preds = [unit(0.0)];
        let refs = [unit(0.0), unit(90.0)];
        let s = semantic_f1_hungarian(&CosineMatrix::new(&preds, &refs));
        assert!((s.precision - 1.0).abs() < 1e-6);
        assert!((s.recall - 0.5).abs() < 1e-6);
    }

    #[test]
    fn threshold_zeroes_weak_matches() {
        let preds = [unit(0.0), unit(60.0)];
        let refs = [unit(0.0)];
        let m = CosineMatrix::new(&preds, &refs);
        let s = semantic_f1_thresholded(&m, 0.9);
        assert!((s.precision - 0.5).abs() < 1e-6);
        assert!((s.recall - 1.0).abs() < 1e-6);
    }

    #[test]
    fn tanimoto_of_cosine() {
        assert_eq!(tanimoto(1.0), 1.0);
        assert_eq!(tanimoto(0.0), 0.0);
        assert!((tanimoto(0.5) - 1.0 / 3.0).abs() < 1e-12);
        let m = CosineMatrix::new(&[unit(60.0)], &[unit(0.0)]);
        assert!((semantic_f1_tanimoto(&m).f1 - 1.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn dup_count_counts_each_claim_once() {
        // Claims 0, 1, 2 are near-identical, 3 is different: 0 and 1 each have a later
        // duplicate, 2 does not (its duplicates come before it), 3 has none.
        let c = [unit(0.0), unit(1.0), unit(2.0), unit(90.0)];
        let m = CosineMatrix::new(&c, &c);
        assert_eq!(dup_count(&m, 0.92), 2);
        assert!((redundancy_rate(&m, 0.92) - 0.5).abs() < 1e-12);
        // The same from each claim's highest cosine to a later claim, at any threshold.
        let later: Vec<Option<f64>> = (0..c.len())
            .map(|i| ((i + 1)..c.len()).map(|j| m.get(i, j)).reduce(f64::max))
            .collect();
        for tau in [0.0, 0.5, 0.92, 0.9999, 1.0] {
            assert_eq!(
                redundancy_rate_at(&later, tau),
                redundancy_rate(&m, tau),
                "{tau}"
            );
        }
        assert_eq!(redundancy_rate_at(&[], 0.92), 0.0);
        let empty: [Vec<f32>; 0] = [];
        assert_eq!(
            redundancy_rate(&CosineMatrix::new(&empty, &empty), 0.92),
            0.0
        );
    }

    #[test]
    fn empty_sides_score_zero() {
        let empty: [Vec<f32>; 0] = [];
        let m = CosineMatrix::new(&empty, &[unit(0.0)]);
        assert_eq!(semantic_f1(&m), SoftF1::ZERO);
        assert_eq!(semantic_f1_hungarian(&m), SoftF1::ZERO);
    }
}
