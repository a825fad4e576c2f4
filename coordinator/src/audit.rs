//! Audits of a finished run beyond its means (`credence audit`, and the report's
//! repair_passes table):
//! - [`convergence`]: the rule tier run 1..k times over every model x dataset's stored
//!   `base` claims, with the parser, encoder and verifier settings the run recorded:
//!   Theorems T1-T4 of PAPER.md "Convergence" and the paper's "P2 better" count;
//! - [`gating`]: the gating false negatives (gated %, FN %, mean FN AVR per model) from
//!   the stored `base` and `repair` outputs.
//!
//! The figures are computed in `credence_core::audit`; this module reads the run and
//! reruns the rule tier.

use anyhow::{bail, Context};
use credence_core::audit::StoredOutput;
use credence_core::audit::{self, ConvergenceRow, GatingRow};
use credence_core::domain::Mode;
use credence_core::sweep::SweepSpec;
use credence_core::Example;
use credence_infra::cache::MemoEmbeddings;
use credence_infra::store::Store;
use credence_worker::pipeline::convergence;
use credence_worker::pipeline::scoring::Scorer;
use std::collections::HashMap;
use std::time::Instant;

/// The gating audit of a run: per model x dataset, per model and overall.
pub async fn gating(store: &dyn Store, run: &str) -> anyhow::Result<Vec<GatingRow>> {
    let rows = audit::gating(&store.run_outputs(run).await?);
    if rows.is_empty() {
        bail!(
            "run {run:?} has no example with both a base and a repair output (sweep the \
             base and repair modes)"
        );
    }
    Ok(rows)
}

/// The convergence audit of a run: the rule tier `passes` times over the stored base
/// claims of each model x dataset (only `models` and `datasets` when not empty), with
/// the settings the run recorded (with `progress`, what it does on standard error).
pub async fn convergence(
    store: &dyn Store,
    run: &str,
    passes: u32,
    models: &[String],
    datasets: &[String],
    progress: bool,
) -> anyhow::Result<Vec<ConvergenceRow>> {
    let sweep = store.run_sweep(run).await?;
    let outputs = store.run_outputs(run).await?;
    let groups = groups(&outputs, models, datasets);
    if groups.is_empty() {
        bail!(
            "run {run:?} has no base outputs{} (the audit starts from the base claims)",
            if models.is_empty() && datasets.is_empty() {
                ""
            } else {
                " for the models and datasets given"
            }
        );
    }
    convergence_rows(store, &sweep, &outputs, &groups, passes, progress).await
}

/// The convergence audit of each model x dataset in `groups`: the rule tier `passes`
/// times over the stored base claims, with the parser, encoder and verifier settings of
/// the run's recorded sweep (with `progress`, what it does on standard error).
pub async fn convergence_rows(
    store: &dyn Store,
    sweep: &SweepSpec,
    outputs: &[StoredOutput],
    groups: &[(String, String)],
    passes: u32,
    progress: bool,
) -> anyhow::Result<Vec<ConvergenceRow>> {
    if progress {
        eprintln!("loading the parser and encoder the run recorded...");
    }
    let scorer = tokio::task::spawn_blocking({
        let sweep = sweep.clone();
        move || Scorer::load(&sweep.nlp, sweep.encoder.as_ref(), &sweep.verifier)
    })
    .await?
    .context("loading the run's parser and encoder")?;
    // The models of a dataset share its sentences (and often claims): the groups run
    // dataset by dataset, each text parsed and its embedding looked up once per dataset.
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| &groups[g].1);
    let mut rows: Vec<Option<ConvergenceRow>> = groups.iter().map(|_| None).collect();
    let mut docs = HashMap::new();
    let mut cache = MemoEmbeddings::new(store);
    for (k, &g) in order.iter().enumerate() {
        let (model, dataset) = &groups[g];
        if k > 0 && groups[order[k - 1]].1 != *dataset {
            docs = HashMap::new();
            cache = MemoEmbeddings::new(store);
        }
        let in_group = |o: &&StoredOutput| &o.model == model && &o.dataset == dataset;
        let base: Vec<&StoredOutput> = outputs
            .iter()
            .filter(in_group)
            .filter(|o| o.mode == Mode::Base)
            .collect();
        let examples: Vec<Example> = base
            .iter()
            .map(|o| Example {
                id: o.example_id.clone(),
                text: o.text.clone(),
                references: o.references.clone(),
                meta: Default::default(),
            })
            .collect();
        let claims: Vec<Vec<String>> = base.iter().map(|o| o.claims.clone()).collect();
        let clock = Instant::now();
        if progress {
            eprint!("{model} / {dataset}: {} examples, pass", examples.len());
        }
        let trajectories = convergence::trajectories(
            &scorer,
            &cache,
            &mut docs,
            &examples,
            &claims,
            passes,
            |pass| {
                if progress {
                    eprint!(" {pass}")
                }
            },
        )
        .await
        .with_context(|| format!("repairing {model} / {dataset}"))?;
        if progress {
            eprintln!(" ({:.1} s)", clock.elapsed().as_secs_f64());
        }
        let ids: Vec<String> = examples.iter().map(|e| e.id.clone()).collect();
        let mine: Vec<StoredOutput> = outputs.iter().filter(in_group).cloned().collect();
        rows[g] = Some(audit::convergence(
            model,
            dataset,
            &ids,
            &trajectories,
            &mine,
            sweep.verifier.max_iterations,
        ));
    }
    Ok(rows.into_iter().flatten().collect())
}

/// The model x dataset pairs with base outputs, in stored order, filtered.
pub fn groups(
    outputs: &[StoredOutput],
    models: &[String],
    datasets: &[String],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for o in outputs.iter().filter(|o| o.mode == Mode::Base) {
        let key = (o.model.clone(), o.dataset.clone());
        let wanted = (models.is_empty() || models.contains(&o.model))
            && (datasets.is_empty() || datasets.contains(&o.dataset));
        if wanted && !out.contains(&key) {
            out.push(key);
        }
    }
    out
}
