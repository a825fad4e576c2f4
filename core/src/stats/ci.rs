//! Confidence intervals from resampled means: the percentile interval (the default, as
//! PAPER.md "Decided here" fixes) and BCa (Efron 1987) as an option.
//!
//! Percentiles interpolate linearly between order statistics, as NumPy's default
//! `np.percentile(x, q)` ("linear", Hyndman and Fan type 7) does: the q-quantile of B
//! sorted values is at position h = (B - 1) q, between `x[floor h]` and `x[ceil h]`.
//!
//! ```
//! use credence_core::stats::ci::percentile_ci;
//! let resampled: Vec<f64> = (0..=100).map(f64::from).collect();
//! let ci = percentile_ci(&resampled, 0.95);
//! // (1 - 0.95) / 2 is 0.025 only up to rounding, so the ends are too.
//! assert!((ci.low - 2.5).abs() < 1e-9 && (ci.high - 97.5).abs() < 1e-9);
//! ```

use serde::{Deserialize, Serialize};

/// How an interval is computed from the resampled means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiMethod {
    /// The 2.5th and 97.5th percentiles of the resampled means.
    #[default]
    Percentile,
    /// Bias-corrected and accelerated: percentiles moved by the bias z0 (share of
    /// resampled means below the estimate) and the jackknife acceleration a.
    Bca,
}

impl CiMethod {
    /// The name stored in `aggregates.method` and `comparisons.method`.
    pub fn as_str(self) -> &'static str {
        match self {
            CiMethod::Percentile => "percentile",
            CiMethod::Bca => "bca",
        }
    }
}

/// A confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

impl Interval {
    /// Whether `x` lies in the closed interval.
    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// The q-quantile (0 ≤ q ≤ 1) of `values`, linear interpolation; reorders `values`.
/// O(B): two selections, no sort.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    assert!(!values.is_empty(), "quantile of no values");
    let h = (values.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let (_, &mut x_lo, above) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let frac = h - lo as f64;
    if frac == 0.0 || above.is_empty() {
        return x_lo;
    }
    let x_hi = above.iter().copied().fold(f64::INFINITY, f64::min);
    x_lo + frac * (x_hi - x_lo)
}

/// The percentile interval at `level` (0.95: the 2.5th and 97.5th percentiles).
pub fn percentile_ci(resampled: &[f64], level: f64) -> Interval {
    let alpha = (1.0 - level) / 2.0;
    quantiles(resampled, alpha, 1.0 - alpha)
}

fn quantiles(resampled: &[f64], q_low: f64, q_high: f64) -> Interval {
    let mut scratch = resampled.to_vec();
    let low = quantile(&mut scratch, q_low);
    let high = quantile(&mut scratch, q_high);
    Interval { low, high }
}

/// The BCa interval at `level` of the mean of `data`, from its resampled means.
/// z0 counts ties with the estimate as half (as SciPy's `bootstrap` does); a constant
/// sample has no acceleration (a = 0).
pub fn bca_ci(data: &[f64], resampled: &[f64], level: f64) -> Interval {
    let n = data.len() as f64;
    let sum: f64 = data.iter().sum();
    let theta = sum / n;
    let below = resampled.iter().filter(|&&t| t < theta).count() as f64;
    let ties = resampled.iter().filter(|&&t| t == theta).count() as f64;
    let z0 = normal_quantile((below + ties / 2.0) / resampled.len() as f64);
    // Jackknife means (leave one out) and their skewness.
    let jack: Vec<f64> = data.iter().map(|x| (sum - x) / (n - 1.0)).collect();
    let jbar = jack.iter().sum::<f64>() / n;
    let (num, den) = jack.iter().fold((0.0, 0.0), |(s3, s2), j| {
        let d = jbar - j;
        (s3 + d * d * d, s2 + d * d)
    });
    let a = if den > 0.0 {
        num / (6.0 * den.powf(1.5))
    } else {
        0.0
    };
    let alpha = (1.0 - level) / 2.0;
    let shift = |z: f64| {
        let q = normal_cdf(z0 + (z0 + z) / (1.0 - a * (z0 + z)));
        if q.is_nan() {
            0.5
        } else {
            q
        }
    };
    quantiles(
        resampled,
        shift(normal_quantile(alpha)),
        shift(normal_quantile(1.0 - alpha)),
    )
}

/// Standard normal CDF, via erfc (W. J. Cody's rational approximations are overkill
/// here; this is Numerical Recipes' erfc, relative error < 1.2e-7).
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Standard normal quantile (P. J. Acklam's algorithm, relative error < 1.2e-9);
/// ±infinity at 0 and 1.
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.024_25 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.024_25 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        // np.percentile([3, 1, 4, 1, 5], [2.5, 97.5]) == [1.0, 4.9]
        let x = [3.0, 1.0, 4.0, 1.0, 5.0];
        let ci = percentile_ci(&x, 0.95);
        assert_eq!(ci.low, 1.0);
        assert!((ci.high - 4.9).abs() < 1e-12);
        assert_eq!(quantile(&mut [7.0], 0.3), 7.0);
    }

    #[test]
    fn normal_functions_invert_each_other() {
        assert!((normal_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-8);
        for z in [-3.0, -1.0, 0.0, 0.5, 2.0] {
            assert!((normal_quantile(normal_cdf(z)) - z).abs() < 1e-5, "{z}");
        }
    }

    #[test]
    fn bca_of_a_symmetric_sample_is_near_the_percentile_interval() {
        let data: Vec<f64> = (0..200).map(|i| f64::from(i % 20)).collect();
        let resampled: Vec<f64> = (0..2001)
            .map(|i| 9.5 + (f64::from(i) - 1000.0) / 1000.0)
            .collect();
        let p = percentile_ci(&resampled, 0.95);
        let b = bca_ci(&data, &resampled, 0.95);
        assert!(
            (p.low - b.low).abs() < 0.01 && (p.high - b.high).abs() < 0.01,
            "{p:?} {b:?}"
        );
        let constant = bca_ci(&[1.0; 10], &[1.0; 100], 0.95);
        assert_eq!(
            constant,
            Interval {
                low: 1.0,
                high: 1.0
            }
        );
    }
}
