//! `credence coordinator serve`: the reaper of the distributed engine.

use super::signals::stop_on_signals;
use super::sweep::ReaperArgs;
use anyhow::Context;
use clap::{Args, Subcommand};
use credence::distributed::reaper;
use credence::distributed::ConnectArgs;
use credence_infra::telemetry::{self, ReaperMetrics};
use std::process::ExitCode;

/// The coordinator's long-running duties.
#[derive(Args)]
pub struct CoordinatorArgs {
    #[command(subcommand)]
    command: CoordinatorCommand,
}

#[derive(Subcommand)]
enum CoordinatorCommand {
    /// Run the reaper until SIGTERM: re-publish jobs whose worker's heartbeat went
    /// stale or whose message was lost, and aggregations that never completed.
    Serve(ServeArgs),
}

#[derive(Args)]
struct ServeArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    #[command(flatten)]
    reaper: ReaperArgs,
    /// Serve Prometheus metrics on this address: HOST:PORT, or PORT alone for
    /// 127.0.0.1:PORT (0.0.0.0:PORT serves every interface: only behind a firewall or
    /// NetworkPolicy). Default: no endpoint.
    #[arg(long, env = "CREDENCE_METRICS_ADDR", value_name = "ADDR",
          value_parser = credence_infra::telemetry::parse_metrics_addr)]
    metrics_addr: Option<std::net::SocketAddr>,
}

/// Runs the command.
pub fn run(args: CoordinatorArgs) -> anyhow::Result<ExitCode> {
    let CoordinatorCommand::Serve(a) = args.command;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let stop = stop_on_signals()?;
        let conn = a.connect.connect(None).await?;
        let metrics = match a.metrics_addr {
            Some(addr) => {
                let m = ReaperMetrics::new()?;
                let registry = m.registry().clone();
                tokio::spawn(async move {
                    if let Err(e) = telemetry::serve(addr, registry).await {
                        tracing::error!(error = %e, "metrics endpoint stopped");
                    }
                });
                Some(m)
            }
            None => None,
        };
        let served = reaper::serve(&conn, &a.reaper.settings(), metrics, stop).await;
        conn.close().await;
        served?;
        Ok(ExitCode::SUCCESS)
    })
}
