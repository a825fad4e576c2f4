//! `credence audit`: checks of a finished run beyond its means.
//! - `convergence`: the rule tier run 1..k times over every model x dataset's stored
//!   `base` claims, with the parser, encoder and verifier settings the run recorded:
//!   Theorems T1-T4 of PAPER.md "Convergence" and the paper's "P2 better" count;
//! - `gating`: the gating false negatives (gated %, FN %, mean FN AVR per model) from
//!   the stored `base` and `repair` outputs.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use credence::report::text;
use credence_shared::audit::{self, ConvergenceRow};
use credence_shared::domain::Mode;
use credence_shared::store::{Store, StoredOutput};
use credence_shared::sweep::SweepSpec;
use credence_shared::Example;
use credence_worker::pipeline::convergence;
use credence_worker::pipeline::scoring::Scorer;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Re-run the rule tier 1..k passes over a run's base claims and report, per model x
    /// dataset: examples where a pass raised n_viol or RR or lowered EPR (T1), where AVR
    /// rose or fluctuated, passes to a fixed point (T2), self-repair calls that raised
    /// AVR (T3, from the stored self_repair and all outputs), the interference rate
    /// AVR = 0 with EPR < 1 (T4), and "P2 better": examples whose second pass lowered AVR
    /// or RR below the first's. Uses the parser, encoder and verifier settings the run
    /// recorded.
    Convergence(ConvergenceArgs),
    /// Gating false negatives: an example is gated when its repair claims equal its base
    /// claims, a false negative when gated with base AVR > 0.01. Per model x dataset,
    /// per model and overall (the run needs the base and repair modes).
    Gating(GatingArgs),
}

#[derive(Args)]
struct ConvergenceArgs {
    /// The run id (the sweep's name).
    run: String,
    #[command(flatten)]
    store: super::StoreArgs,
    /// Passes to run over each example (the paper checks 5).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=20))]
    passes: u32,
    /// Only this model (repeat for several; default: every model of the run).
    #[arg(long)]
    model: Vec<String>,
    /// Only this dataset (repeat for several; default: every dataset of the run).
    #[arg(long)]
    dataset: Vec<String>,
    /// Print the rows as JSON (every figure, the per-pass means included).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct GatingArgs {
    /// The run id (the sweep's name).
    run: String,
    #[command(flatten)]
    store: super::StoreArgs,
    /// Print the rows as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        match args.command {
            AuditCommand::Convergence(args) => convergence_audit(args).await,
            AuditCommand::Gating(args) => gating_audit(args).await,
        }
    })
}

async fn gating_audit(args: GatingArgs) -> anyhow::Result<ExitCode> {
    let store = args.store.open(&args.run).await?;
    let rows = audit::gating(&store.run_outputs(&args.run).await?);
    if rows.is_empty() {
        bail!(
            "run {:?} has no example with both a base and a repair output (sweep the \
             base and repair modes)",
            args.run
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", text::gating(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

async fn convergence_audit(args: ConvergenceArgs) -> anyhow::Result<ExitCode> {
    let store = args.store.open(&args.run).await?;
    let sweep = store
        .recorded_sweep(&args.run)
        .await?
        .context("the run has no recorded sweep")?;
    let outputs = store.run_outputs(&args.run).await?;
    let groups = groups(&outputs, &args.model, &args.dataset);
    if groups.is_empty() {
        bail!(
            "run {:?} has no base outputs{} (the audit starts from the base claims)",
            args.run,
            if args.model.is_empty() && args.dataset.is_empty() {
                String::new()
            } else {
                " for the models and datasets given".to_string()
            }
        );
    }
    let rows = convergence_rows(&*store, &sweep, &outputs, &groups, args.passes, true).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", text::convergence(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

/// The convergence audit of each model x dataset in `groups`: the rule tier `passes`
/// times over the stored base claims, with the parser, encoder and verifier settings of
/// the run's recorded sweep (with `progress`, what it does on standard error).
pub(crate) async fn convergence_rows(
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
    let mut rows: Vec<ConvergenceRow> = Vec::new();
    for (model, dataset) in groups {
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
        let trajectories =
            convergence::trajectories(&scorer, store, &examples, &claims, passes, |pass| {
                if progress {
                    eprint!(" {pass}")
                }
            })
            .await
            .with_context(|| format!("repairing {model} / {dataset}"))?;
        if progress {
            eprintln!(" ({:.1} s)", clock.elapsed().as_secs_f64());
        }
        let ids: Vec<String> = examples.iter().map(|e| e.id.clone()).collect();
        let mine: Vec<StoredOutput> = outputs.iter().filter(in_group).cloned().collect();
        rows.push(audit::convergence(
            model,
            dataset,
            &ids,
            &trajectories,
            &mine,
            sweep.verifier.max_iterations,
        ));
    }
    Ok(rows)
}

/// The model x dataset pairs with base outputs, in stored order, filtered.
pub(crate) fn groups(
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
