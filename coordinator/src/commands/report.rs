//! `credence report RUN`: a finished run's statistics from either engine's store.

use anyhow::{bail, Context};
use clap::Args;
use credence::report::{self, Format};
use credence_shared::store::{postgres::PgStore, sqlite::SqliteStore, Store};
use credence_shared::timing;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct ReportArgs {
    /// The run id (the sweep's name).
    run: String,
    /// The embedded engine's SQLite file.
    #[arg(long, conflicts_with = "database")]
    db: Option<PathBuf>,
    /// The distributed engine's PostgreSQL URL.
    #[arg(long, env = "CREDENCE_DATABASE_URL", hide_env_values = true)]
    database: Option<String>,
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
        let store: Box<dyn Store> = match (&args.db, &args.database) {
            (Some(db), _) => {
                if !db.exists() {
                    bail!("{}: no such results file", db.display());
                }
                Box::new(
                    SqliteStore::open(db)
                        .await
                        .with_context(|| format!("opening {}", db.display()))?,
                )
            }
            (None, Some(url)) => Box::new(PgStore::connect(url, 2).await?),
            (None, None) => bail!("give --db FILE (embedded) or --database URL (distributed)"),
        };
        if store.run_spec(&args.run).await?.is_none() {
            bail!("no run {:?} in the store", args.run);
        }
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
