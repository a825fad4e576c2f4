//! Repetition (desideratum D4): duplicate claim pairs at cosine ≥ τ_dup, dup_count and the
//! redundancy rate RR (PAPER.md "Metrics"), plus what the τ_dup sensitivity table needs to
//! recompute RR at any τ without re-embedding: each claim's highest cosine to a later
//! claim (dup_count at τ = number of claims whose value is ≥ τ).

use credence_core::matching::semantic::CosineMatrix;
use serde::{Deserialize, Serialize};

/// Two claims whose cosine reaches τ_dup.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DuplicatePair {
    /// The earlier claim.
    pub i: usize,
    /// The later claim (`j > i`).
    pub j: usize,
    /// Their cosine.
    pub cos: f64,
}

/// Repetition findings of a claim list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepetitionReport {
    /// Every pair `i < j` with cos ≥ τ_dup, ordered by `i` then `j`.
    pub pairs: Vec<DuplicatePair>,
    /// Number of claims i with some j > i at cos ≥ τ_dup (each claim counted once).
    pub dup_count: u32,
    /// dup_count / |C|; 0 for an empty list.
    pub rr: f64,
    /// Claim i's highest cosine to any later claim; `None` for the last claim.
    pub max_later_cos: Vec<Option<f64>>,
}

/// The repetition report of `n` claims from their claims x claims cosine matrix. Only
/// the first `n` rows and columns are read; a smaller matrix is read as far as it goes.
pub(super) fn check(n: usize, cos: &CosineMatrix, tau_dup: f64) -> RepetitionReport {
    let size = n.min(cos.rows()).min(cos.cols());
    let mut pairs = Vec::new();
    let mut max_later_cos = vec![None; n];
    for (i, best) in max_later_cos.iter_mut().enumerate().take(size) {
        for j in (i + 1)..size {
            let c = cos.get(i, j);
            if best.is_none_or(|b: f64| c > b) {
                *best = Some(c);
            }
            if c >= tau_dup {
                pairs.push(DuplicatePair { i, j, cos: c });
            }
        }
    }
    let dup_count = max_later_cos
        .iter()
        .filter(|b| b.is_some_and(|b| b >= tau_dup))
        .count();
    RepetitionReport {
        pairs,
        dup_count: dup_count as u32,
        rr: if n == 0 {
            0.0
        } else {
            dup_count as f64 / n as f64
        },
        max_later_cos,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use credence_core::matching::semantic::{dup_count, redundancy_rate};

    /// Unit vectors in the plane at the given angles' cosines to the x axis.
    fn at(cosines: &[f64]) -> Vec<Vec<f32>> {
        cosines
            .iter()
            .map(|&c| vec![c as f32, (1.0 - c * c).sqrt() as f32])
            .collect()
    }

    #[test]
    fn agrees_with_the_shared_metric() {
        let v = at(&[1.0, 0.93, 0.5, 1.0]);
        let m = CosineMatrix::new(&v, &v);
        let r = check(4, &m, 0.92);
        assert_eq!(r.dup_count as usize, dup_count(&m, 0.92));
        assert_eq!(r.rr, redundancy_rate(&m, 0.92));
        assert_eq!(r.max_later_cos.len(), 4);
        assert_eq!(r.max_later_cos[3], None);
    }

    #[test]
    fn empty_list() {
        let m = CosineMatrix::new::<Vec<f32>, Vec<f32>>(&[], &[]);
        let r = check(0, &m, 0.92);
        assert_eq!(r.dup_count, 0);
        assert_eq!(r.rr, 0.0);
        assert!(r.pairs.is_empty() && r.max_later_cos.is_empty());
    }
}
