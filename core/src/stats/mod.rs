//! The paired bootstrap: means with 95% confidence intervals for every per-example
//! metric of a configuration, and paired comparisons between configurations of one
//! dataset. Pure computation on per-example vectors (no I/O): the store reads the
//! vectors and writes the rows, [`crate::aggregation`] connects the two.
//!
//! - [`rng`]: the portable seeded generator (SplitMix64, Lemire bounded draws);
//! - [`resample`]: the one index matrix per (seed, dataset, n), and resampled means;
//! - [`ci`]: percentile (default) and BCa intervals;
//! - [`paired`]: the two-sided p-value of PAPER.md, one-sided shares, Holm.
//!
//! Every mean is over **examples**: each example weighs 1 whatever its number of claims
//! (the paper's tables and its bootstrap resample examples). For the metrics that are
//! themselves shares of an example's claims (AVR, RR, claim-level precision),
//! [`crate::domain::MetricDef::per`] says so; their mean is the macro average of the
//! per-example shares, not the share of all claims pooled.
//!
//! ```
//! use credence_core::stats::{estimate_config, compare_configs, Bootstrap, CiMethod, ConfigValues};
//! let boot = Bootstrap { resamples: 2000, seed: 42 };
//! let ids: Vec<String> = (0..50).map(|i| format!("ex{i}")).collect();
//! let base = ConfigValues::new(ids.clone(), [("avr", (0..50).map(|i| Some(f64::from(i % 3 == 0))).collect())]);
//! let all = ConfigValues::new(ids, [("avr", (0..50).map(|i| Some(f64::from(i % 9 == 0))).collect())]);
//! let est = estimate_config(&boot, "sample", &all, CiMethod::Percentile);
//! assert_eq!(est[0].metric, "avr");
//! assert!(est[0].ci.contains(est[0].mean));
//! let cmp = compare_configs(&boot, "sample", &all, &base, CiMethod::Percentile);
//! assert!(cmp[0].diff.diff < 0.0 && cmp[0].diff.test.p_value < 0.01);
//! ```

pub mod benchmark;
pub mod ci;
pub mod correlation;
pub mod paired;
pub mod resample;
pub mod rng;

pub use ci::{CiMethod, Interval};
pub use paired::{Difference, PairedTest};
pub use resample::IndexMatrix;

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The confidence level of every interval.
pub const LEVEL: f64 = 0.95;

/// Bootstrap settings: B and the seed (the sweep's `[bootstrap]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bootstrap {
    /// Number of resamples B.
    pub resamples: usize,
    /// Seed of every index matrix.
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 10_000,
            seed: 42,
        }
    }
}

/// The per-example values of one configuration (model x dataset x mode): example ids in
/// dataset order, and per metric one value per example (`None`: not computed for it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigValues {
    /// Example ids, in dataset order.
    pub example_ids: Vec<String>,
    /// Per metric name, the values in `example_ids` order.
    pub metrics: BTreeMap<String, Vec<Option<f64>>>,
}

impl ConfigValues {
    /// From ids and (metric, values) pairs.
    pub fn new<S: Into<String>>(
        example_ids: Vec<String>,
        metrics: impl IntoIterator<Item = (S, Vec<Option<f64>>)>,
    ) -> Self {
        ConfigValues {
            example_ids,
            metrics: metrics.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        }
    }
}

/// The mean of one metric with its interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// Metric name.
    pub metric: String,
    /// Examples with a value.
    pub n: usize,
    /// Mean over those examples.
    pub mean: f64,
    /// Its 95% interval.
    pub ci: Interval,
}

/// A paired comparison of one metric between two configurations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricComparison {
    /// Metric name.
    pub metric: String,
    /// The difference a - b with its interval and test.
    pub diff: Difference,
}

/// The examples (positions) a metric covers, and whether that is all of them.
fn covered(values: &[Option<f64>]) -> Vec<usize> {
    values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.map(|_| i))
        .collect()
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn interval(method: CiMethod, data: &[f64], resampled: &[f64]) -> Interval {
    match method {
        CiMethod::Percentile => ci::percentile_ci(resampled, LEVEL),
        CiMethod::Bca => ci::bca_ci(data, resampled, LEVEL),
    }
}

/// Groups columns by the examples they cover, so that columns covering the same
/// examples share one pass over the index matrix (normally all of them).
fn by_coverage<T>(items: Vec<(Vec<usize>, T)>) -> Vec<(Vec<usize>, Vec<T>)> {
    let mut groups: Vec<(Vec<usize>, Vec<T>)> = Vec::new();
    for (cover, item) in items {
        match groups.iter_mut().find(|(c, _)| *c == cover) {
            Some((_, g)) => g.push(item),
            None => groups.push((cover, vec![item])),
        }
    }
    groups
}

/// Mean and interval of every metric of a configuration of `dataset`, in metric-name
/// order. A metric set for every example uses the dataset's (seed, dataset, n) matrix;
/// one set for only m examples is resampled over those with the (seed, dataset, m) one.
pub fn estimate_config(
    boot: &Bootstrap,
    dataset: &str,
    values: &ConfigValues,
    method: CiMethod,
) -> Vec<Estimate> {
    let items: Vec<(Vec<usize>, &str)> = values
        .metrics
        .iter()
        .map(|(name, v)| (covered(v), name.as_str()))
        .filter(|(c, _)| !c.is_empty())
        .collect();
    let mut out = Vec::new();
    for (cover, names) in by_coverage(items) {
        let data: Vec<Vec<f64>> = names
            .iter()
            .map(|name| {
                let v = &values.metrics[*name];
                cover.iter().map(|&i| v[i].unwrap_or(f64::NAN)).collect()
            })
            .collect();
        let cols: Vec<&[f64]> = data.iter().map(Vec::as_slice).collect();
        let resampled = IndexMatrix::new(boot, dataset, cover.len()).resampled_means(&cols);
        for ((name, x), r) in names.iter().zip(&data).zip(&resampled) {
            out.push(Estimate {
                metric: name.to_string(),
                n: x.len(),
                mean: mean(x),
                ci: interval(method, x, r),
            });
        }
    }
    out.sort_by(|a, b| a.metric.cmp(&b.metric));
    out
}

/// One metric's values of a and b on the examples both have.
type PairedColumns<'a> = (&'a str, Vec<f64>, Vec<f64>);

/// Paired comparison of every metric `a` and `b` (two configurations of `dataset`)
/// both have, over the examples both have values for, in `a`'s order: a - b.
/// With BCa, the jackknife runs on the per-example differences, whose mean is the
/// difference of the means.
pub fn compare_configs(
    boot: &Bootstrap,
    dataset: &str,
    a: &ConfigValues,
    b: &ConfigValues,
    method: CiMethod,
) -> Vec<MetricComparison> {
    let b_pos: HashMap<&str, usize> = b
        .example_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let items: Vec<(Vec<usize>, PairedColumns<'_>)> = a
        .metrics
        .iter()
        .filter_map(|(name, va)| {
            let vb = b.metrics.get(name)?;
            let (mut cover, mut xa, mut xb) = (Vec::new(), Vec::new(), Vec::new());
            for (i, id) in a.example_ids.iter().enumerate() {
                let Some(x) = va[i] else { continue };
                let Some(y) = b_pos.get(id.as_str()).and_then(|&j| vb[j]) else {
                    continue;
                };
                cover.push(i);
                xa.push(x);
                xb.push(y);
            }
            (!cover.is_empty()).then_some((cover, (name.as_str(), xa, xb)))
        })
        .collect();
    let mut out = Vec::new();
    for (cover, group) in by_coverage(items) {
        let cols: Vec<&[f64]> = group
            .iter()
            .flat_map(|(_, xa, xb)| [xa.as_slice(), xb.as_slice()])
            .collect();
        let resampled = IndexMatrix::new(boot, dataset, cover.len()).resampled_means(&cols);
        for (k, (name, xa, xb)) in group.iter().enumerate() {
            let deltas = paired::resampled_differences(&resampled[2 * k], &resampled[2 * k + 1]);
            let ci = match method {
                CiMethod::Percentile => ci::percentile_ci(&deltas, LEVEL),
                CiMethod::Bca => {
                    let d: Vec<f64> = xa.iter().zip(xb).map(|(x, y)| x - y).collect();
                    ci::bca_ci(&d, &deltas, LEVEL)
                }
            };
            out.push(MetricComparison {
                metric: name.to_string(),
                diff: Difference {
                    n: cover.len(),
                    diff: mean(xa) - mean(xb),
                    ci,
                    test: paired::paired_test(&deltas),
                },
            });
        }
    }
    out.sort_by(|x, y| x.metric.cmp(&y.metric));
    out
}

#[cfg(test)]
mod tests;
