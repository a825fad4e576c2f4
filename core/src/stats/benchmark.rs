//! The bootstrap benchmark of issue 14: 64 configurations (4 datasets x 4 models x 4
//! modes) of n = 1,000 examples, B = 10,000: the mean and 95% interval of one metric per
//! configuration, and 48 paired tests (every mode against base, per model and dataset).
//! The data are synthetic (SplitMix64), the work is what an aggregation does: index
//! rows regenerated and summed, percentiles, p-values. `bench/bootstrap.sh` runs it
//! (`credence stats bench`) next to NumPy.

use super::rng::SplitMix64;
use super::{ci, paired, Bootstrap, IndexMatrix, LEVEL};
use serde::Serialize;
use std::time::Instant;

/// The shape of the benchmark.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    /// Datasets.
    pub datasets: usize,
    /// Configurations per dataset (models x modes).
    pub configs_per_dataset: usize,
    /// Modes per model (the first is base).
    pub modes: usize,
    /// Examples per dataset.
    pub n: usize,
    /// Resamples.
    pub resamples: usize,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            datasets: 4,
            configs_per_dataset: 16,
            modes: 4,
            n: 1000,
            resamples: 10_000,
        }
    }
}

/// What one timed run computed (checksums keep the work from being optimised away).
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Threads in the rayon pool.
    pub threads: usize,
    /// Wall-clock seconds, best of the repeats.
    pub seconds: f64,
    /// Intervals computed.
    pub intervals: usize,
    /// Paired tests computed.
    pub tests: usize,
    /// Sum of interval ends and p-values.
    pub checksum: f64,
}

/// The synthetic metric vectors: per dataset, per configuration, n values in [0, 1).
pub fn synthetic(shape: &Shape) -> Vec<Vec<Vec<f64>>> {
    let mut g = SplitMix64::new(2026);
    (0..shape.datasets)
        .map(|_| {
            (0..shape.configs_per_dataset)
                .map(|c| {
                    (0..shape.n)
                        .map(|_| {
                            let u = (g.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                            (u + 0.02 * (c % shape.modes) as f64).min(1.0)
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// Runs the workload once: intervals for every configuration, tests of each mode
/// against its model's base.
pub fn run_once(shape: &Shape, data: &[Vec<Vec<f64>>], seed: u64) -> (usize, usize, f64) {
    let boot = Bootstrap {
        resamples: shape.resamples,
        seed,
    };
    let (mut intervals, mut tests, mut checksum) = (0, 0, 0.0);
    for (d, configs) in data.iter().enumerate() {
        let cols: Vec<&[f64]> = configs.iter().map(Vec::as_slice).collect();
        let means =
            IndexMatrix::new(&boot, &format!("dataset-{d}"), shape.n).resampled_means(&cols);
        for m in &means {
            let iv = ci::percentile_ci(m, LEVEL);
            checksum += iv.low + iv.high;
            intervals += 1;
        }
        for (c, m) in means.iter().enumerate() {
            let base = c - c % shape.modes;
            if c != base {
                let deltas = paired::resampled_differences(m, &means[base]);
                let iv = ci::percentile_ci(&deltas, LEVEL);
                checksum += iv.low + iv.high + paired::two_sided_p(&deltas);
                tests += 1;
            }
        }
    }
    (intervals, tests, checksum)
}

/// Times the workload on a pool of `threads` (best of `repeats`).
pub fn time(shape: &Shape, threads: usize, repeats: usize) -> Timing {
    let data = synthetic(shape);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a rayon pool");
    let mut best = f64::INFINITY;
    let mut last = (0, 0, 0.0);
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        last = pool.install(|| run_once(shape, &data, 42));
        best = best.min(t.elapsed().as_secs_f64());
    }
    Timing {
        threads,
        seconds: best,
        intervals: last.0,
        tests: last.1,
        checksum: last.2,
    }
}
