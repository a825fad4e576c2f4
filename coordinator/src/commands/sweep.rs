//! `credence sweep plan|launch|status|resume|cancel`: a sweep on the distributed engine.

use super::flags;
use super::signals::stop_on_signals;
use anyhow::Context;
use clap::{Args, Subcommand};
use credence::distributed::reaper::{self, ReaperSettings};
use credence::distributed::{self, status, ConnectArgs, Connections, LaunchReport};
use credence::sizing;
use credence_core::estimate::{Fleet, ServerSpeed, Stated};
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
    /// Print the jobs a sweep puts on each queue and, with --estimate, how long it will
    /// take on a fleet: generation from each model server's tokens/s (measured H200
    /// speeds for Qwen3-8B, Phi-3-mini and Gemma-3-12b; --server for others), answer
    /// lengths and self-repair calls from a --pilot run or stated, CPU work per scored
    /// example likewise. Connects to nothing (but the pilot's store).
    Plan(PlanArgs),
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
struct PlanArgs {
    /// The sweep file (TOML).
    sweep: PathBuf,
    /// Also estimate the wall time.
    #[arg(long)]
    estimate: bool,
    /// Worker processes per model. A local model's worker has a GPU of its own; an
    /// OpenAI-compatible endpoint is one server shared by the model's workers.
    #[arg(long, default_value_t = 1, requires = "estimate",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    workers: u32,
    /// CPU cores for the verifier and metrics over the whole fleet (default: this
    /// machine's).
    #[arg(long, requires = "estimate", value_parser = positive)]
    cores: Option<f64>,
    /// A model's server speed: NAME=qwen3-8b|phi3-mini|gemma3-12b (the measured H200
    /// speeds) or NAME=ALONE:FULL[:LIMIT], tokens/s of one request alone and of LIMIT
    /// (default 32) in flight. Repeat per model; models named like a measured one take
    /// its speeds unless given.
    #[arg(long, value_name = "NAME=SPEED", requires = "estimate", value_parser = server_speed)]
    server: Vec<(String, ServerSpeed)>,
    /// A finished (or partly finished) pilot run whose measured answer tokens, LLM calls
    /// per example and CPU seconds per example the estimate takes (its store: --db or
    /// --database).
    #[arg(long, value_name = "RUN", requires = "estimate")]
    pilot: Option<String>,
    #[command(flatten)]
    store: super::StoreArgs,
    /// Mean answer tokens per generation (wins over the pilot's; default: the model's
    /// max_new_tokens, an upper bound).
    #[arg(long, requires = "estimate", value_parser = positive)]
    answer_tokens: Option<f64>,
    /// Share of examples that get self-repair calls in self_repair and all (wins over the
    /// pilot's; default 1: every example, max_llm_calls times, an upper bound).
    #[arg(long, requires = "estimate", value_parser = flags::fraction)]
    repair_share: Option<f64>,
    /// CPU milliseconds per scored example (parse, embed, verify, rule repair, metrics;
    /// wins over the pilot's, whose stage seconds are wall seconds: a pilot with more
    /// busy consumers than cores overstates them).
    #[arg(long, requires = "estimate", value_parser = positive)]
    cpu_ms: Option<f64>,
    /// Print the plan and estimate as JSON.
    #[arg(long)]
    json: bool,
}

fn positive(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("expected a number above 0, got {value:?}")),
    }
}

fn server_speed(value: &str) -> Result<(String, ServerSpeed), String> {
    let (name, speed) = value
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=SPEED, got {value:?}"))?;
    Ok((name.trim().to_string(), ServerSpeed::parse(speed.trim())?))
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
            SweepCommand::Plan(a) => plan(a).await,
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

async fn plan(a: PlanArgs) -> anyhow::Result<ExitCode> {
    let sweep = credence_core::sweep::load(&a.sweep)?;
    let lens = sizing::dataset_lens(&sweep)?;
    let afc_lens = sizing::afc_lens(&sweep)?;
    if !a.estimate {
        let mut counts = credence_core::estimate::counts(&sweep, &lens);
        credence_core::estimate::add_afc(&mut counts, &sweep, &afc_lens);
        if a.json {
            println!("{}", serde_json::to_string_pretty(&counts)?);
        } else {
            print!("{}", sizing::render_counts(&counts));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let pilot = match &a.pilot {
        Some(run) => {
            let store = a.store.open(run).await?;
            Some(sizing::read_pilot(&*store, run).await?)
        }
        None => None,
    };
    let fleet = Fleet {
        workers: a.workers as usize,
        cores: a.cores.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
        }),
    };
    let stated = Stated {
        answer_tokens: a.answer_tokens,
        repair_share: a.repair_share,
        cpu_seconds: a.cpu_ms.map(|ms| ms / 1000.0),
    };
    let speeds = sizing::speeds(&sweep, &a.server)?;
    let mut estimate =
        credence_core::estimate::estimate(&sweep, &lens, &speeds, fleet, stated, pilot.as_ref())
            .map_err(anyhow::Error::msg)?;
    credence_core::estimate::add_afc(&mut estimate.counts, &sweep, &afc_lens);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&estimate)?);
    } else {
        print!("{}", sizing::render_estimate(&estimate));
    }
    Ok(ExitCode::SUCCESS)
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
