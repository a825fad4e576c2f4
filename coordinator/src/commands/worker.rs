//! `credence worker --models ...`: a worker process of the distributed engine.

use super::flags;
use super::signals::stop_on_signals;
use anyhow::Context;
use clap::Args;
use credence::distributed::ConnectArgs;
use credence_infra::queue::Queue;
use credence_infra::store::Store;
use credence_infra::telemetry::WorkerMetrics;
use credence_worker::serve::{serve, WorkerOptions};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Consume the job queues of the given models (and the aggregation queue): run each
/// job, commit its results, then ack. SIGTERM stops consuming, finishes the job in
/// flight (or returns it to the queue after the grace period) and exits 0; a job waiting
/// for an unreachable database goes back to its queue at once, without using one of its
/// deliveries. A consumer that stops unexpectedly (a panic, a queue error) ends the
/// worker with one error line and exit status 1, for its orchestrator to replace.
#[derive(Args)]
pub struct WorkerArgs {
    /// Model names as written in the sweep files, comma separated; each model loads
    /// once, at its first job.
    #[arg(long, value_delimiter = ',', required = true)]
    models: Vec<String>,
    #[command(flatten)]
    connect: ConnectArgs,
    /// Seconds between heartbeats of the running job.
    #[arg(long, default_value = "10", value_parser = flags::positive_seconds)]
    heartbeat: Duration,
    /// Seconds after SIGTERM to finish the job in flight before returning it.
    #[arg(long, default_value = "60", value_parser = flags::seconds)]
    grace: Duration,
    /// Name of this worker in the store (default: host-pid).
    #[arg(long)]
    worker_id: Option<String>,
    /// Serve Prometheus metrics on this address: HOST:PORT, or PORT alone for
    /// 127.0.0.1:PORT (0.0.0.0:PORT serves every interface: only behind a firewall or
    /// NetworkPolicy). Default: no endpoint.
    #[arg(long, env = "CREDENCE_METRICS_ADDR", value_name = "ADDR",
          value_parser = credence_infra::telemetry::parse_metrics_addr)]
    metrics_addr: Option<std::net::SocketAddr>,
}

/// Runs the command.
pub fn run(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let stop = stop_on_signals()?;
        let Some(conn) = args.connect.connect_waiting(stop.clone()).await? else {
            return Ok(ExitCode::SUCCESS);
        };
        let worker_id = args.worker_id.unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "worker".into());
            format!("{host}-{}", std::process::id())
        });
        let opts = WorkerOptions {
            models: args.models,
            worker_id,
            max_deliveries: conn.delivery_limit,
            heartbeat: args.heartbeat.max(Duration::from_millis(50)),
        };
        tracing::info!(worker = %opts.worker_id, models = ?opts.models, store = %conn.store.location(), broker = %conn.queue.location(), "worker starting");
        let metrics = match args.metrics_addr {
            Some(addr) => {
                let m = WorkerMetrics::new()?;
                let registry = m.registry().clone();
                tokio::spawn(async move {
                    if let Err(e) = credence_infra::telemetry::serve(addr, registry).await {
                        tracing::error!(error = %e, "metrics endpoint stopped");
                    }
                });
                Some(m)
            }
            None => None,
        };
        // Kept to close the connection before exit (lapin logs errors otherwise).
        let broker = conn.queue.clone();
        let store: Arc<dyn Store> = Arc::new(conn.store);
        let queue: Arc<dyn Queue> = Arc::new(conn.queue);
        let mut stopped = stop.clone();
        let work = serve(store, queue, &opts, metrics, stop);
        tokio::pin!(work);
        let report = tokio::select! {
            r = &mut work => {
                if r.is_err() {
                    broker.close().await;
                }
                r?
            }
            _ = async {
                let _ = stopped.wait_for(|s| *s).await;
                tokio::time::sleep(args.grace).await;
            } => {
                tracing::warn!("grace period over; the job in flight returns to the queue");
                broker.close().await;
                return Ok(ExitCode::SUCCESS);
            }
        };
        broker.close().await;
        tracing::info!(?report, "worker stopped");
        Ok(ExitCode::SUCCESS)
    })
}
