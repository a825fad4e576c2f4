//! One module per subcommand; each parses its arguments and calls the library.

pub mod bench_embed;
pub mod bench_pipeline;
pub mod coordinator;
pub mod dataset;
pub mod decompose;
pub mod dlq;
pub mod embed;
pub mod nlp;
pub mod repair;
pub mod report;
pub mod run;
mod signals;
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
