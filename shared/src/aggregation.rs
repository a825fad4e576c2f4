//! The aggregation of a configuration (model x dataset x mode), the same code in both
//! engines: when its last job commits, read its per-example metric vectors (by metric
//! name, so a metric the pipeline adds needs nothing here), compute each metric's mean
//! and interval ([`crate::stats`]), and the paired comparisons that it completes, then
//! write them in one transaction. The store only reads vectors and writes rows.
//!
//! Comparisons per model and dataset: every mode against `base`, `all` against
//! `repair`, and the sweep's `[[comparisons]]`. A comparison is written by the
//! aggregation of whichever of its two configurations finishes second (both, when they
//! finish together: the rows are the same, and rewriting is idempotent), because a
//! configuration's jobs are all `done` before its aggregation starts.

use crate::domain::Mode;
use crate::stats::{self, Bootstrap, CiMethod, ConfigValues, Estimate, MetricComparison};
use crate::store::{ConfigRef, Store, StoreError};
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

fn config_of(config: &ConfigRef, side: &ModelMode) -> ConfigRef {
    ConfigRef {
        run_id: config.run_id.clone(),
        model: side.model.clone(),
        dataset: config.dataset.clone(),
        mode: side.mode,
    }
}

/// CPU-bound statistics off the async runtime's threads.
async fn compute<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Corrupt {
            what: "bootstrap",
            message: format!("the statistics task failed: {e}"),
        })
}

/// Aggregates a finished configuration and writes the result (replacing earlier rows,
/// so a repeat is harmless); returns what it wrote.
pub async fn aggregate_config(
    store: &dyn Store,
    config: &ConfigRef,
) -> Result<Aggregation, StoreError> {
    let spec = store
        .recorded_sweep(&config.run_id)
        .await?
        .ok_or_else(|| StoreError::Corrupt {
            what: "aggregation",
            message: format!("run {:?} is not in the store", config.run_id),
        })?;
    let boot = spec.bootstrap.stats();
    let method = spec.bootstrap.ci;
    let values = std::sync::Arc::new(store.config_values(config).await?);
    let me = ModelMode {
        model: config.model.clone(),
        mode: config.mode,
    };
    let mut partners: Vec<(ModelMode, ModelMode, ConfigValues)> = Vec::new();
    for (a, b) in comparison_pairs(&spec, &config.dataset) {
        let other = if a == me {
            &b
        } else if b == me {
            &a
        } else {
            continue;
        };
        let other_ref = config_of(config, other);
        if store.config_finished(&other_ref).await? {
            partners.push((a.clone(), b.clone(), store.config_values(&other_ref).await?));
        }
    }
    let dataset = config.dataset.clone();
    let (estimates, comparisons) = {
        let values = values.clone();
        compute(move || {
            let estimates = stats::estimate_config(&boot, &dataset, &values, method);
            let comparisons = partners
                .into_iter()
                .map(|(a, b, other)| {
                    let metrics = if a.model == me.model && a.mode == me.mode {
                        stats::compare_configs(&boot, &dataset, &values, &other, method)
                    } else {
                        stats::compare_configs(&boot, &dataset, &other, &values, method)
                    };
                    PairComparison { a, b, metrics }
                })
                .collect();
            (estimates, comparisons)
        })
        .await?
    };
    let aggregation = Aggregation {
        config: config.clone(),
        bootstrap: boot,
        method,
        estimates,
        comparisons,
    };
    store.write_aggregation(&aggregation).await?;
    tracing::info!(
        model = %config.model, dataset = %config.dataset, mode = %config.mode,
        metrics = aggregation.estimates.len(), comparisons = aggregation.comparisons.len(),
        "configuration aggregated"
    );
    Ok(aggregation)
}
