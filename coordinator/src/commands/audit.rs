//! `credence audit`: checks of a finished run beyond its means (`convergence`,
//! `gating`), computed by [`credence::audit`].

use anyhow::Context;
use clap::{Args, Subcommand};
use credence::audit;
use credence::report::text;
use std::process::ExitCode;

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
    let rows = audit::gating(&*store, &args.run).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", text::gating(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

async fn convergence_audit(args: ConvergenceArgs) -> anyhow::Result<ExitCode> {
    let store = args.store.open(&args.run).await?;
    let rows = audit::convergence(
        &*store,
        &args.run,
        args.passes,
        &args.model,
        &args.dataset,
        true,
    )
    .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", text::convergence(&rows));
    }
    Ok(ExitCode::SUCCESS)
}
