//! `credence report RUN`: a finished run's statistics from either engine's store.

use anyhow::{bail, Context};
use clap::Args;
use credence::report::{self, Format};
use credence_shared::timing;
use std::process::ExitCode;

#[derive(Args)]
pub struct ReportArgs {
    /// The run id (the sweep's name).
    run: String,
    #[command(flatten)]
    store: super::StoreArgs,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
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
                print!("{}", timing::render(&table));
            }
            return Ok(ExitCode::SUCCESS);
        }
        let stats = store.run_statistics(&args.run).await?;
        match args.format {
            Format::Json => println!("{}", serde_json::to_string_pretty(&report::json(&stats))?),
        }
        Ok(ExitCode::SUCCESS)
    })
}
