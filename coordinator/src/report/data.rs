//! What a report is built from, read from a store in one place ([`RunData::load`]) for
//! every table and format.

use super::tables::PValueOptions;
use anyhow::Context;
use credence_core::afc::table::AfcTable;
use credence_core::audit::ConvergenceRow;
use credence_core::audit::StoredOutput;
use credence_core::sweep::SweepSpec;
use credence_core::timing::{self, TimingRow};
use credence_infra::store::{RunStatistics, Store};

/// Passes of the rule-repair table (the paper's k = 1, 2, 3).
pub const REPAIR_PASSES: u32 = 3;

/// What to read beyond the run's own records.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Another run of the same examples with another encoder (encoder_sensitivity).
    pub compare: Option<String>,
    /// Rerun the rule tier [`REPAIR_PASSES`] times over the base claims (repair_passes;
    /// minutes on a large run).
    pub repair_passes: bool,
    /// How the significance table prints its p-values.
    pub p_values: PValueOptions,
    /// Compute the AFC table (a bootstrap over the run's AFC results) when the run has
    /// `[afc]`.
    pub afc: bool,
}

/// A run to compare with (encoder_sensitivity).
#[derive(Debug, Clone)]
pub struct ComparedRun {
    /// Its id.
    pub run: String,
    /// Its recorded sweep.
    pub spec: SweepSpec,
    /// Its stored outputs.
    pub outputs: Vec<StoredOutput>,
}

/// Everything the tables are built from.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The run's recorded sweep (model, dataset and mode order; which models are
    /// baselines).
    pub spec: SweepSpec,
    /// The stored aggregates and comparisons.
    pub stats: RunStatistics,
    /// The timing table.
    pub timing: Vec<TimingRow>,
    /// Every stored output (gating, tau_dup).
    pub outputs: Vec<StoredOutput>,
    /// The run to compare with, when asked for.
    pub compare: Option<ComparedRun>,
    /// The convergence audit of every model x dataset (the rule tier run k times over the
    /// base claims), or why it could not run; `None` when not asked for.
    pub repair_passes: Option<Result<Vec<ConvergenceRow>, String>>,
    /// The p-value the significance table prints.
    pub p_values: PValueOptions,
    /// The AFC table, when the run has `[afc]` and it was asked for.
    pub afc: Option<AfcTable>,
}

impl RunData {
    /// Reads run `run` (and what `options` asks for) from `store`.
    pub async fn load(store: &dyn Store, run: &str, options: &LoadOptions) -> anyhow::Result<Self> {
        let stats = store.run_statistics(run).await?;
        let spec = store.run_sweep(run).await?;
        let outputs = store.run_outputs(run).await?;
        let timing = timing::with_llm_calls(
            timing::table(&store.stage_seconds(run).await?),
            &store.llm_calls(run).await?,
        );
        let compare = match &options.compare {
            None => None,
            Some(other) => Some(ComparedRun {
                run: other.clone(),
                spec: store
                    .run_sweep(other)
                    .await
                    .context("the run to compare with")?,
                outputs: store.run_outputs(other).await?,
            }),
        };
        let repair_passes = if options.repair_passes {
            let groups = crate::audit::groups(&outputs, &[], &[]);
            Some(if groups.is_empty() {
                Err("the run has no base outputs".to_string())
            } else {
                crate::audit::convergence_rows(
                    store,
                    &spec,
                    &outputs,
                    &groups,
                    REPAIR_PASSES,
                    false,
                )
                .await
                .map_err(|e| format!("{e:#}"))
            })
        } else {
            None
        };
        let afc = match &spec.afc {
            Some(_) if options.afc => Some(afc_table(store, run, &spec).await?),
            _ => None,
        };
        Ok(RunData {
            afc,
            spec,
            stats,
            timing,
            outputs,
            compare,
            repair_passes,
            p_values: options.p_values,
        })
    }
}

/// The AFC table of a run: its stored AFC results through the paired bootstrap (off the
/// async runtime's threads), with the run's B and seed.
pub async fn afc_table(store: &dyn Store, run: &str, spec: &SweepSpec) -> anyhow::Result<AfcTable> {
    let rows = store.afc_results(run).await?;
    let boot = spec.bootstrap.stats();
    tokio::task::spawn_blocking(move || credence_core::afc::table::afc_table(&rows, &boot))
        .await
        .context("the AFC bootstrap task failed")
}

/// The timing table of a run (`credence report --timing`); an error when it has no stage
/// timings.
pub async fn timing_table(store: &dyn Store, run: &str) -> anyhow::Result<Vec<TimingRow>> {
    let table = timing::with_llm_calls(
        timing::table(&store.stage_seconds(run).await?),
        &store.llm_calls(run).await?,
    );
    if table.is_empty() {
        anyhow::bail!(
            "run {run:?} has no stage timings (its jobs ran before they were recorded, or none finished)"
        );
    }
    Ok(table)
}
