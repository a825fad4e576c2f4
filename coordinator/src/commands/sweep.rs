//! `credence sweep launch|status|resume|cancel`: a sweep on the distributed engine.

use super::flags;
use super::signals::stop_on_signals;
use anyhow::Context;
use clap::{Args, Subcommand};
use credence::distributed::reaper::{self, ReaperSettings};
use credence::distributed::{self, status, ConnectArgs, Connections, LaunchReport};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// A sweep across machines: the plan and results in PostgreSQL, jobs on RabbitMQ,
/// run by `credence worker` processes.
#[derive(Args)]
pub struct SweepArgs {
    #[command(subcommand)]
    command: SweepCommand,
}

#[derive(Subcommand)]
enum SweepCommand {
    /// Validate the sweep, write its plan in one transaction, publish its jobs.
    Launch(LaunchArgs),
    /// Progress per model x dataset x mode, with rates, ETA and failures; --watch redraws
    /// it live until the run ends.
    Status(StatusArgs),
    /// Re-publish every job of a run that has no results (after a crash, a cancel, or
    /// once the cause of failures is fixed).
    Resume(RunArgs),
    /// Stop a run: its jobs without results are cancelled (workers skip them).
    Cancel(RunArgs),
}

#[derive(Args)]
struct LaunchArgs {
    /// The sweep file (TOML).
    sweep: PathBuf,
    #[command(flatten)]
    connect: ConnectArgs,
    /// Write the plan but publish nothing (`sweep resume` publishes it).
    #[arg(long)]
    plan_only: bool,
    /// Stay and reap (re-publish lost jobs) until the run is complete, then print its
    /// status.
    #[arg(long)]
    follow: bool,
    #[command(flatten)]
    reaper: ReaperArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct StatusArgs {
    /// The run id (the sweep's name).
    run: String,
    #[command(flatten)]
    connect: ConnectArgs,
    /// Print the status as JSON (with --watch: one object per line, per refresh).
    #[arg(long)]
    json: bool,
    /// Keep redrawing live bars (rate, ETA, jobs by state) until the run completes or
    /// stops; exits 0 when complete, 1 when it stopped with jobs left or failed.
    #[arg(long)]
    watch: bool,
    /// Seconds between refreshes with --watch.
    #[arg(long, default_value = "2", requires = "watch", value_parser = flags::positive_seconds)]
    interval: Duration,
}

#[derive(Args)]
struct RunArgs {
    /// The run id (the sweep's name).
    run: String,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// Settings of the reaper (`launch --follow`, `coordinator serve`).
#[derive(Args, Debug, Clone)]
pub struct ReaperArgs {
    /// Seconds between reaper passes.
    #[arg(long, default_value = "10", value_parser = flags::positive_seconds)]
    pub reap_every: Duration,
    /// Seconds without a heartbeat after which a running job's worker is presumed dead.
    #[arg(long, default_value = "60", value_parser = flags::positive_seconds)]
    pub stale_after: Duration,
    /// Seconds after which a queued job with an empty queue (or an unfinished
    /// aggregation) is presumed lost and re-published.
    #[arg(long, default_value = "120", value_parser = flags::positive_seconds)]
    pub lost_after: Duration,
    /// Attempts after which a job whose workers keep dying is marked failed.
    #[arg(long, default_value_t = 5)]
    pub max_attempts: u32,
}

impl ReaperArgs {
    /// The reaper's settings.
    pub fn settings(&self) -> ReaperSettings {
        let secs = |s: Duration| s.max(Duration::from_millis(50));
        ReaperSettings {
            interval: secs(self.reap_every),
            stale_after: secs(self.stale_after),
            lost_after: secs(self.lost_after),
            max_attempts: self.max_attempts,
        }
    }
}

/// A command-line tool waits this long for a lost broker before giving up.
const CLI_RECONNECT: Duration = Duration::from_secs(60);

/// Runs the command.
pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        match args.command {
            SweepCommand::Launch(a) => launch(a).await,
            SweepCommand::Status(a) => {
                let conn = a.connect.connect(Some(CLI_RECONNECT)).await?;
                let done: anyhow::Result<ExitCode> = async {
                    if a.watch {
                        let s = status::watch(&conn.store, &a.run, a.interval, a.json).await?;
                        return Ok(if s.complete {
                            ExitCode::SUCCESS
                        } else {
                            ExitCode::FAILURE
                        });
                    }
                    let s = status::read(&conn.store, &a.run).await?;
                    if a.json {
                        println!("{}", serde_json::to_string_pretty(&s)?);
                    } else {
                        print!("{}", status::render(&s));
                    }
                    Ok(ExitCode::SUCCESS)
                }
                .await;
                conn.close().await;
                done
            }
            SweepCommand::Resume(a) => {
                let conn = a.connect.connect(Some(CLI_RECONNECT)).await?;
                let done = distributed::resume(&a.run, &conn).await;
                conn.close().await;
                let r = done?;
                eprintln!(
                    "run {}: {} jobs, {} done, {} re-published",
                    r.run_id, r.planned, r.already_done, r.published
                );
                Ok(ExitCode::SUCCESS)
            }
            SweepCommand::Cancel(a) => {
                let conn = a.connect.connect(Some(CLI_RECONNECT)).await?;
                let done: anyhow::Result<ExitCode> = async {
                    if !conn.store.run_exists(&a.run).await? {
                        anyhow::bail!(
                            "no run {:?} in the store at {}",
                            a.run,
                            conn.store.location()
                        );
                    }
                    let n = conn.store.cancel_run(&a.run).await?;
                    eprintln!(
                        "run {}: {n} jobs cancelled; `credence sweep resume {}` continues it",
                        a.run, a.run
                    );
                    Ok(ExitCode::SUCCESS)
                }
                .await;
                conn.close().await;
                done
            }
        }
    })
}

async fn launch(a: LaunchArgs) -> anyhow::Result<ExitCode> {
    // Validation (sweep, datasets, models) comes before any connection or write.
    let sweep = credence_core::sweep::load(&a.sweep)?;
    let conn = a.connect.connect(Some(CLI_RECONNECT)).await?;
    let done: anyhow::Result<ExitCode> = async {
        let report = distributed::launch(sweep, &conn, a.plan_only).await?;
        print_launch(&report, a.json)?;
        if !a.follow {
            return Ok(ExitCode::SUCCESS);
        }
        follow(&conn, &report.run_id, &a.reaper.settings()).await
    }
    .await;
    conn.close().await;
    done
}

fn print_launch(r: &LaunchReport, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(r)?);
    } else {
        eprintln!(
            "run {}: {} jobs planned, {} already done, {} published",
            r.run_id, r.planned, r.already_done, r.published
        );
    }
    Ok(())
}

/// Reaps until the run has settled, then prints its status; fails if any job failed.
async fn follow(
    conn: &Connections,
    run_id: &str,
    settings: &ReaperSettings,
) -> anyhow::Result<ExitCode> {
    match reaper::follow(conn, run_id, settings, stop_on_signals()?).await {
        Some(s) => {
            print!("{}", status::render(&s));
            Ok(if s.complete {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        None => {
            eprintln!(
                "interrupted: the workers go on; `credence sweep status {run_id}` shows progress"
            );
            Ok(ExitCode::from(130))
        }
    }
}
