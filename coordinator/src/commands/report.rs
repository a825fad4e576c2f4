//! `credence report RUN`: a finished run's statistics and the paper's tables from either
//! engine's store.

use anyhow::Context;
use clap::Args;
use credence::report::{self, Format};
use std::process::ExitCode;

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
    /// With --format html: link each figure of the model x mode tables to the examples
    /// behind it in `credence view` served at this address (e.g. 127.0.0.1:8321).
    #[arg(long, value_name = "ADDR")]
    view_addr: Option<String>,
    /// With --timing: the table as JSON rows.
    #[arg(long, requires = "timing")]
    json: bool,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let store = args.store.open(&args.run).await?;
        if args.timing {
            let table = report::timing_table(&*store, &args.run).await?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&table)?);
            } else {
                print!("{}", report::text::timing(&table));
            }
            return Ok(ExitCode::SUCCESS);
        }
        let wanted = |name: &str| args.table.is_empty() || args.table.iter().any(|t| t == name);
        let options = report::LoadOptions {
            compare: args.compare.clone(),
            repair_passes: wanted("repair_passes"),
            afc: wanted("afc"),
            p_values: report::tables::PValueOptions {
                one_sided: args.one_sided,
                holm: args.holm,
            },
        };
        let data = report::RunData::load(&*store, &args.run, &options).await?;
        let tables = report::tables::build(&data, &args.table);
        match args.format {
            Format::Json => println!(
                "{}",
                serde_json::to_string_pretty(&report::json(
                    &data.stats,
                    &tables,
                    data.afc.as_ref()
                ))?
            ),
            Format::Md => print!("{}", report::render::markdown(&tables)),
            Format::Latex => print!("{}", report::render::latex(&args.run, &tables)),
            Format::Csv => print!("{}", report::render::csv(&tables)),
            Format::Html => print!(
                "{}",
                report::html::html(
                    &args.run,
                    &data.spec,
                    &data.stats,
                    &tables,
                    data.afc.as_ref(),
                    args.view_addr.as_deref()
                )
                .map_err(anyhow::Error::msg)?
            ),
        }
        Ok(ExitCode::SUCCESS)
    })
}
