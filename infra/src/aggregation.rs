//! The aggregation job of a configuration (model x dataset x mode), the same code in both
//! engines: when its last job commits, read its per-example metric vectors (by metric
//! name, so a metric the pipeline adds needs nothing here) and those of the finished
//! configurations it is compared with, compute ([`credence_core::aggregation::aggregate`],
//! off the async runtime's threads), then write the result in one transaction. The store
//! only reads vectors and writes rows.

use crate::store::{Store, StoreError};
use credence_core::aggregation::{aggregate, comparison_pairs, config_of, Aggregation, Partner};
use credence_core::job::ConfigRef;
use credence_core::sweep::{AfcSpec, ModelMode};

/// Aggregates a finished configuration and writes the result (replacing earlier rows,
/// so a repeat is harmless); returns what it wrote.
pub async fn aggregate_config(
    store: &dyn Store,
    config: &ConfigRef,
) -> Result<Aggregation, StoreError> {
    let spec = store.run_sweep(&config.run_id).await?;
    let bootstrap = spec.bootstrap.stats();
    let method = spec.bootstrap.ci;
    if spec.afc.is_some() && AfcSpec::is_config_dataset(&config.dataset) {
        // An AFC configuration has no metric vectors: its numbers are paired across
        // settings, so `credence report --table afc` computes them from `afc_results` once
        // every setting is there. Aggregating it only marks it complete.
        let aggregation = Aggregation {
            config: config.clone(),
            bootstrap,
            method,
            estimates: Vec::new(),
            comparisons: Vec::new(),
        };
        store.write_aggregation(&aggregation).await?;
        return Ok(aggregation);
    }
    let values = store.config_values(config).await?;
    let me = ModelMode {
        model: config.model.clone(),
        mode: config.mode,
    };
    let mut partners: Vec<Partner> = Vec::new();
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
    let aggregation = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || {
            aggregate(&config, bootstrap, method, &values, partners)
        })
        .await
        .map_err(|e| StoreError::Corrupt {
            what: "bootstrap",
            message: format!("the statistics task failed: {e}"),
        })?
    };
    store.write_aggregation(&aggregation).await?;
    tracing::info!(
        model = %config.model, dataset = %config.dataset, mode = %config.mode,
        metrics = aggregation.estimates.len(), comparisons = aggregation.comparisons.len(),
        "configuration aggregated"
    );
    Ok(aggregation)
}
