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
pub mod view;
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

/// A store opened from [`StoreArgs`], on its engine.
enum Opened {
    Sqlite(credence_infra::store::sqlite::SqliteStore),
    Postgres(credence_infra::store::postgres::PgStore),
}

impl StoreArgs {
    /// Opens the store and checks that it holds `run`.
    pub async fn open(&self, run: &str) -> anyhow::Result<Box<dyn credence_infra::store::Store>> {
        Ok(match self.connect(run).await? {
            Opened::Sqlite(s) => Box::new(s),
            Opened::Postgres(s) => Box::new(s),
        })
    }

    /// Opens the store, to be read an example at a time (`credence view`), and checks
    /// that it holds `run`.
    pub async fn open_browser(
        &self,
        run: &str,
    ) -> anyhow::Result<std::sync::Arc<dyn credence_infra::store::browse::ExampleBrowser>> {
        Ok(match self.connect(run).await? {
            Opened::Sqlite(s) => std::sync::Arc::new(s),
            Opened::Postgres(s) => std::sync::Arc::new(s),
        })
    }

    async fn connect(&self, run: &str) -> anyhow::Result<Opened> {
        use anyhow::Context;
        use credence_infra::store::{postgres::PgStore, sqlite::SqliteStore, Store};
        let store = match (&self.db, &self.database) {
            (Some(db), _) => {
                if !db.exists() {
                    anyhow::bail!("{}: no such results file", db.display());
                }
                Opened::Sqlite(
                    SqliteStore::open(db)
                        .await
                        .with_context(|| format!("opening {}", db.display()))?,
                )
            }
            (None, Some(url)) => Opened::Postgres(PgStore::connect(url, 2).await?),
            (None, None) => {
                anyhow::bail!("give --db FILE (embedded) or --database URL (distributed)")
            }
        };
        let spec = match &store {
            Opened::Sqlite(s) => s.run_spec(run).await?,
            Opened::Postgres(s) => s.run_spec(run).await?,
        };
        if spec.is_none() {
            anyhow::bail!("no run {run:?} in the store");
        }
        Ok(store)
    }
}
