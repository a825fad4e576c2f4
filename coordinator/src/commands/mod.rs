//! One module per subcommand; each parses its arguments and calls the library.

pub mod audit;
pub mod bench_embed;
pub mod bench_llm;
pub mod bench_pipeline;
pub mod coordinator;
pub mod dataset;
pub mod decompose;
pub mod dlq;
pub mod embed;
mod flags;
pub mod nlp;
pub mod repair;
pub mod report;
pub mod run;
mod signals;
pub mod simulate;
pub mod stats;
pub mod sweep;
pub mod verify;
pub mod worker;

/// Logs go to standard error, filtered by `RUST_LOG` (default: warnings).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Which engine's store holds a finished run: `--db FILE` or `--database URL`.
#[derive(clap::Args)]
pub struct StoreArgs {
    /// The embedded engine's SQLite file.
    #[arg(long, conflicts_with = "database")]
    db: Option<std::path::PathBuf>,
    /// The distributed engine's PostgreSQL URL.
    #[arg(long, env = "CREDENCE_DATABASE_URL", hide_env_values = true)]
    database: Option<String>,
}

impl StoreArgs {
    /// Opens the store and checks that it holds `run`.
    pub async fn open(&self, run: &str) -> anyhow::Result<Box<dyn credence_infra::store::Store>> {
        use anyhow::Context;
        use credence_infra::store::{postgres::PgStore, sqlite::SqliteStore, Store};
        let store: Box<dyn Store> = match (&self.db, &self.database) {
            (Some(db), _) => {
                if !db.exists() {
                    anyhow::bail!("{}: no such results file", db.display());
                }
                Box::new(
                    SqliteStore::open(db)
                        .await
                        .with_context(|| format!("opening {}", db.display()))?,
                )
            }
            (None, Some(url)) => Box::new(PgStore::connect(url, 2).await?),
            (None, None) => {
                anyhow::bail!("give --db FILE (embedded) or --database URL (distributed)")
            }
        };
        if store.run_spec(run).await?.is_none() {
            anyhow::bail!("no run {run:?} in the store");
        }
        Ok(store)
    }
}
