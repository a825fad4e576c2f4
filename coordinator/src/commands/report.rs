//! `credence report RUN`: a finished run's statistics and the paper's tables from either
//! engine's store.

use anyhow::{bail, Context};
use clap::Args;
use credence::report::{self, Format};
use credence_shared::timing;
use std::process::ExitCode;

/// Passes of the rule-repair table (the paper's k = 1, 2, 3).
const REPAIR_PASSES: u32 = 3;

#[derive(Args)]
pub struct ReportArgs {
    /// The run id (the sweep's name).
    run: String,
    #[command(flatten)]
    store: super::StoreArgs,
    /// Output format: md, latex (a whole document; pdflatex compiles it), csv (one line
    /// per table cell), json (every aggregate and comparison, and the tables) or html (one
    /// self-contained page with plots and the tables).
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// Only this table (repeat for several; default: every table). Tables: main (per
    /// dataset: model x mode with Semantic-F1, EPR, AVR, RR, verify%), timing,
    /// semantic_vs_jaccard, baselines, matching, tau_dup, repair_passes (runs the rule
    /// tier again with the run's parser and encoder), gating, encoder_sensitivity (with
    /// --compare), significance.
    #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(report::tables::TABLES))]
    table: Vec<String>,
    /// Another run in the same store over the same examples, scored with another
    /// [encoder]: adds the encoder_sensitivity table (Pearson and Spearman correlation of
    /// per-example Semantic-F1, model rank preservation, mean offset).
    #[arg(long, value_name = "RUN")]
    compare: Option<String>,
    /// The significance table prints the one-sided "not better" share (resampled
    /// differences <= 0 where higher is better, >= 0 for AVR and RR) instead of the
    /// two-sided p-value.
    #[arg(long)]
    one_sided: bool,
    /// Holm-adjust the significance table's p-values across each table's tests.
    #[arg(long)]
    holm: bool,
    /// Print the timing table instead: per model and mode, the seconds an example takes
    /// through the mode's pipeline (mean, std, median) and examples per minute. Run the
    /// sweep with the `verify` mode for the paper's verifier line.
    #[arg(long)]
    timing: bool,
    /// With --timing: the table as JSON rows.
    #[arg(long, requires = "timing")]
    json: bool,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let store = args.store.open(&args.run).await?;
        if args.timing {
            let table = timing::table(&store.stage_seconds(&args.run).await?);
            if table.is_empty() {
                bail!("run {:?} has no stage timings (its jobs ran before they were recorded, or none finished)", args.run);
            }
            if args.json {
                println!("{}", serde_json::to_string_pretty(&table)?);
            } else {
                print!("{}", report::text::timing(&table));
            }
            return Ok(ExitCode::SUCCESS);
        }
        let stats = store.run_statistics(&args.run).await?;
        let spec = store
            .recorded_sweep(&args.run)
            .await?
            .context("the run has no recorded sweep")?;
        let timing = timing::table(&store.stage_seconds(&args.run).await?);
        let outputs = store.run_outputs(&args.run).await?;
        let compared = match &args.compare {
            None => None,
            Some(other) => {
                let other_spec = store
                    .recorded_sweep(other)
                    .await?
                    .with_context(|| format!("no run {other:?} in the store to compare with"))?;
                Some((other.as_str(), other_spec, store.run_outputs(other).await?))
            }
        };
        let wanted = |name: &str| args.table.is_empty() || args.table.iter().any(|t| t == name);
        let repair_passes = if wanted("repair_passes") {
            let groups = super::audit::groups(&outputs, &[], &[]);
            Some(if groups.is_empty() {
                Err("the run has no base outputs".to_string())
            } else {
                super::audit::convergence_rows(&*store, &spec, &outputs, &groups, REPAIR_PASSES, false)
                    .await
                    .map_err(|e| format!("{e:#}"))
            })
        } else {
            None
        };
        let data = report::tables::ReportData {
            spec: &spec,
            stats: &stats,
            timing: &timing,
            outputs: &outputs,
            compare: compared
                .as_ref()
                .map(|(run, spec, outputs)| (*run, spec, outputs.as_slice())),
            repair_passes: repair_passes.as_ref(),
            p_values: report::tables::PValueOptions {
                one_sided: args.one_sided,
                holm: args.holm,
            },
        };
        let tables = report::tables::build(&data, &args.table);
        match args.format {
            Format::Json => println!(
                "{}",
                serde_json::to_string_pretty(&report::json(&stats, &tables))?
            ),
            Format::Md => print!("{}", report::render::markdown(&tables)),
            Format::Latex => print!("{}", report::render::latex(&args.run, &tables)),
            Format::Csv => print!("{}", report::render::csv(&tables)),
            Format::Html => print!(
                "{}",
                report::html::html(&args.run, &spec, &stats, &tables).map_err(anyhow::Error::msg)?
            ),
        }
        Ok(ExitCode::SUCCESS)
    })
}
