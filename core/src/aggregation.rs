//! What the aggregation of a configuration (model x dataset x mode) computes, with no
//! I/O: each metric's mean and interval ([`crate::stats`]) over the configuration's
//! per-example vectors, and the paired comparisons it completes. The aggregation job of
//! either engine (`credence_infra::aggregation`) reads the vectors, calls
//! [`aggregate`] off the async runtime and writes the result.
//!
//! Comparisons per model and dataset: every mode against `base`, `all` against
//! `repair`, and the sweep's `[[comparisons]]`. A comparison is written by the
//! aggregation of whichever of its two configurations finishes second (both, when they
//! finish together: the rows are the same, and rewriting is idempotent), because a
//! configuration's jobs are all `done` before its aggregation starts.

use crate::domain::Mode;
use crate::job::ConfigRef;
use crate::stats::{self, Bootstrap, CiMethod, ConfigValues, Estimate, MetricComparison};
use crate::sweep::{ModelMode, SweepSpec};

/// The comparisons of one pair of configurations: a - b on one dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct PairComparison {
    /// The system.
    pub a: ModelMode,
    /// The baseline.
    pub b: ModelMode,
    /// One row per metric both have.
    pub metrics: Vec<MetricComparison>,
}

/// What one aggregation writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregation {
    /// The configuration aggregated.
    pub config: ConfigRef,
    /// B and seed.
    pub bootstrap: Bootstrap,
    /// Interval method.
    pub method: CiMethod,
    /// Mean and interval per metric.
    pub estimates: Vec<Estimate>,
    /// The comparisons this configuration completes.
    pub comparisons: Vec<PairComparison>,
}

/// The pairs (a, b) of configurations of one dataset compared in a run, in a fixed
/// order: per model, every mode against base, then all against repair; then the sweep's
/// `[[comparisons]]` on that dataset.
pub fn comparison_pairs(spec: &SweepSpec, dataset: &str) -> Vec<(ModelMode, ModelMode)> {
    let has = |m: Mode| spec.modes.contains(&m);
    let mm = |model: &str, mode: Mode| ModelMode {
        model: model.to_string(),
        mode,
    };
    let mut out = Vec::new();
    for model in &spec.models {
        if has(Mode::Base) {
            // `verify` has base's rows: no comparison to make.
            for &mode in spec
                .modes
                .iter()
                .filter(|&&m| m != Mode::Base && m != Mode::Verify)
            {
                out.push((mm(&model.name, mode), mm(&model.name, Mode::Base)));
            }
        }
        if has(Mode::All) && has(Mode::Repair) {
            out.push((mm(&model.name, Mode::All), mm(&model.name, Mode::Repair)));
        }
    }
    for c in spec.comparisons.iter().filter(|c| c.dataset == dataset) {
        let pair = (c.a.clone(), c.b.clone());
        if !out.contains(&pair) {
            out.push(pair);
        }
    }
    out
}

/// `config` with the model and mode of `side`: the other configuration of a comparison.
pub fn config_of(config: &ConfigRef, side: &ModelMode) -> ConfigRef {
    ConfigRef {
        run_id: config.run_id.clone(),
        model: side.model.clone(),
        dataset: config.dataset.clone(),
        mode: side.mode,
    }
}

/// A finished partner of a configuration: the pair (a, b) it is compared in, and the
/// other side's values.
pub type Partner = (ModelMode, ModelMode, ConfigValues);

/// Aggregates `config` from its values and those of its finished partners: the
/// bootstrap estimates of every metric, and one comparison per partner (a - b, whichever
/// side `config` is). CPU-bound: B resamples per metric.
pub fn aggregate(
    config: &ConfigRef,
    bootstrap: Bootstrap,
    method: CiMethod,
    values: &ConfigValues,
    partners: Vec<Partner>,
) -> Aggregation {
    let estimates = stats::estimate_config(&bootstrap, &config.dataset, values, method);
    let comparisons = partners
        .into_iter()
        .map(|(a, b, other)| {
            let metrics = if a.model == config.model && a.mode == config.mode {
                stats::compare_configs(&bootstrap, &config.dataset, values, &other, method)
            } else {
                stats::compare_configs(&bootstrap, &config.dataset, &other, values, method)
            };
            PairComparison { a, b, metrics }
        })
        .collect();
    Aggregation {
        config: config.clone(),
        bootstrap,
        method,
        estimates,
        comparisons,
    }
}
