//! `credence dlq list|replay`: the dead-letter queue of the distributed engine.

use anyhow::Context;
use clap::{Args, Subcommand};
use credence::distributed::dead_letters::{self, line, Shown};
use credence::distributed::ConnectArgs;
use std::process::ExitCode;
use std::time::Duration;

/// Messages that failed their last delivery or could not be read.
#[derive(Args)]
pub struct DlqArgs {
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Subcommand)]
enum DlqCommand {
    /// List the dead letters with why they are there.
    List(ListArgs),
    /// Move dead-lettered jobs back to their queues (once their cause is fixed).
    Replay(ListArgs),
}

#[derive(Args)]
struct ListArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Only the messages of this run.
    #[arg(long)]
    run: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn print(letters: &[Shown], json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(letters)?);
        return Ok(());
    }
    for l in letters {
        println!("{}", line(l));
    }
    Ok(())
}

/// Runs the command.
pub fn run(args: DlqArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        match args.command {
            DlqCommand::List(a) => {
                let conn = a.connect.connect(Some(Duration::from_secs(60))).await?;
                let shown = dead_letters::list(&conn, a.run.as_deref()).await;
                conn.close().await;
                print(&shown?, a.json)?;
            }
            DlqCommand::Replay(a) => {
                let conn = a.connect.connect(Some(Duration::from_secs(60))).await?;
                let replayed = dead_letters::replay(&conn, a.run.as_deref()).await;
                conn.close().await;
                let replayed = replayed?;
                print(&replayed, a.json)?;
                eprintln!("{} dead letters replayed", replayed.len());
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
