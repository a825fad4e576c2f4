//! `credence run SWEEP.toml`: the embedded engine.

use anyhow::Context;
use clap::Args;
use credence::embedded::{self, RunOptions};
use credence::summary;
use credence_infra::observe::{JobObserver, NoObserver};
use credence_infra::telemetry::WorkerMetrics;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Run a sweep in this process: plans model x dataset x mode x shard jobs, runs them on
/// N worker tasks, writes everything to a SQLite file, and prints the mean of each metric
/// per model x dataset x mode. Running it again does only the jobs without results, so a
/// run stopped by Ctrl-C (or killed) continues where it was.
#[derive(Args)]
pub struct RunArgs {
    /// The sweep file (TOML): models, datasets, modes, shard size, encoder, verifier.
    sweep: PathBuf,
    /// SQLite file for plans, results and caches (created if missing).
    #[arg(long, default_value = "credence.db", env = "CREDENCE_DB")]
    db: PathBuf,
    /// Worker tasks running jobs concurrently.
    #[arg(long, default_value_t = default_workers())]
    workers: usize,
    /// Deliveries before a failing job is marked failed.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    max_deliveries: u32,
    /// Print the summary as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Hide the progress bars.
    #[arg(long)]
    quiet: bool,
    /// Serve Prometheus metrics on this address while the run lasts (HOST:PORT, or PORT
    /// alone for 127.0.0.1:PORT): jobs, examples, seconds per stage, LLM tokens and
    /// requests, cache hits and misses, as a worker of the distributed engine does.
    #[arg(long, value_name = "ADDR", value_parser = credence_infra::telemetry::parse_metrics_addr)]
    metrics_addr: Option<std::net::SocketAddr>,
}

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Runs the command; the exit code says whether every job has results.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let sweep = credence_core::sweep::load(&args.sweep)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\ninterrupt: finishing the jobs in flight; run the same command again to continue");
                let _ = stop_tx.send(true);
            }
        });
        let observer: Arc<dyn JobObserver> = match args.metrics_addr {
            None => Arc::new(NoObserver),
            Some(addr) => {
                let metrics = WorkerMetrics::new()?;
                metrics.job.up.set(1);
                let listener = credence_infra::telemetry::bind(addr).await?;
                let registry = metrics.registry().clone();
                tokio::spawn(async move {
                    if let Err(e) = credence_infra::telemetry::serve_on(listener, registry).await {
                        tracing::error!(error = %e, "metrics endpoint stopped");
                    }
                });
                Arc::new(metrics.job)
            }
        };
        let opts = RunOptions {
            db: args.db.clone(),
            workers: args.workers,
            max_deliveries: args.max_deliveries,
            progress: !args.quiet && std::io::stderr().is_terminal(),
            observer,
        };
        let report_run = sweep.name.clone();
        let report = embedded::run(sweep, &opts, stop_rx).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report.summary)?);
        } else {
            eprintln!(
                "{} jobs planned: {} already done, {} run now, {} failed",
                report.planned,
                report.already_done,
                report.completed,
                report.failed.len()
            );
            if let Some(c) = report.embedding_cache {
                eprintln!("embedding cache: {} hits, {} misses", c.hits, c.misses);
            }
            if !report.summary.is_empty() || report.afc.is_none() {
                print!("{}", summary::render(&report.summary));
            }
            if let Some(afc) = &report.afc {
                print!("{}", summary::render_afc(afc));
                eprintln!(
                    "AFC intervals and differences: credence report {} --db {} --table afc",
                    report_run, args.db.display()
                );
            }
            for c in &report.unaggregated {
                eprintln!(
                    "not in the table: {} / {} / {} (not every job finished, so it was not aggregated)",
                    c.model, c.dataset, c.mode
                );
            }
            println!("results: {}", args.db.display());
        }
        for (_, error) in &report.failed {
            eprintln!("failed: {error}");
        }
        if report.interrupted {
            eprintln!("interrupted: run the same command again to continue");
            return Ok(ExitCode::from(130));
        }
        Ok(if report.failed.is_empty() && report.rejected == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}
