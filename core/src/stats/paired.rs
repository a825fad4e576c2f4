//! Paired comparisons of two configurations on the same examples: the mean difference,
//! its interval, and the bootstrap p-value of PAPER.md "Decided here":
//!
//! p = min(1, 2 · min(#{Δ*_b ≤ 0}, #{Δ*_b ≥ 0}) / B),
//!
//! Δ*_b = the mean of a minus the mean of b over resample b's example ids (the same ids
//! for both: the dataset's one index matrix). Two-sided; the one-sided "not better"
//! shares #{Δ*_b ≤ 0} / B and #{Δ*_b ≥ 0} / B are kept beside it. A system against
//! itself has Δ* ≡ 0, so both counts are B and p = 1. Holm's step-down correction
//! across a table's tests is [`holm`].
//!
//! ```
//! use credence_core::stats::paired::two_sided_p;
//! assert_eq!(two_sided_p(&[0.0; 10]), 1.0);
//! assert_eq!(two_sided_p(&[0.1; 10]), 0.0);
//! assert_eq!(two_sided_p(&[-0.1, 0.2, 0.3, 0.4]), 0.5);
//! ```

use super::ci::Interval;
use serde::Serialize;

/// The bootstrap test of one difference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PairedTest {
    /// Two-sided p-value.
    pub p_value: f64,
    /// #{Δ*_b ≤ 0} / B: the one-sided p-value of "a is not above b".
    pub p_le: f64,
    /// #{Δ*_b ≥ 0} / B: the one-sided p-value of "a is not below b".
    pub p_ge: f64,
}

/// The test from the resampled differences Δ*.
pub fn paired_test(deltas: &[f64]) -> PairedTest {
    let b = deltas.len() as f64;
    let le = deltas.iter().filter(|&&d| d <= 0.0).count() as f64;
    let ge = deltas.iter().filter(|&&d| d >= 0.0).count() as f64;
    PairedTest {
        p_value: (2.0 * le.min(ge) / b).min(1.0),
        p_le: le / b,
        p_ge: ge / b,
    }
}

/// The two-sided p-value alone.
pub fn two_sided_p(deltas: &[f64]) -> f64 {
    paired_test(deltas).p_value
}

/// Holm's step-down adjusted p-values, in the input's order: sorted ascending, the k-th
/// smallest (0-based) is multiplied by m - k, capped at 1 and made non-decreasing.
///
/// ```
/// use credence_core::stats::paired::holm;
/// assert_eq!(holm(&[0.01, 0.04, 0.03]), [0.03, 0.06, 0.06]);
/// ```
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut out = vec![0.0; m];
    let mut running: f64 = 0.0;
    for (k, &i) in order.iter().enumerate() {
        running = running.max(((m - k) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// A paired difference with its interval and test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// Examples compared.
    pub n: usize,
    /// mean(a) - mean(b).
    pub diff: f64,
    /// Its interval.
    pub ci: Interval,
    /// Its test.
    pub test: PairedTest,
}

/// Δ*_b = a*_b - b*_b from two configurations' resampled means on the same rows.
pub fn resampled_differences(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x - y).collect()
}
