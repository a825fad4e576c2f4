//! `credence dlq list|replay`: the dead-letter queue of the distributed engine.

use anyhow::Context;
use clap::{Args, Subcommand};
use credence::distributed::{ConnectArgs, Connections};
use credence_shared::queue::{DeadLetter, Queue};
use credence_worker::job_loop::{decode_work, Work};
use serde::Serialize;
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

/// A dead letter as shown to people.
#[derive(Debug, Serialize)]
struct Shown {
    queue: String,
    deliveries: u32,
    reason: String,
    run: Option<String>,
    what: String,
    job_key: Option<String>,
}

fn show(d: &DeadLetter) -> Shown {
    let (run, what, job_key) = match decode_work(&d.body) {
        Ok(Work::Job(j)) => (
            Some(j.run_id.clone()),
            format!("{} / {} / {} shard {}", j.model, j.dataset, j.mode, j.shard),
            Some(j.key),
        ),
        Ok(Work::Aggregate(c)) => (
            Some(c.run_id.clone()),
            format!("aggregate {} / {} / {}", c.model, c.dataset, c.mode),
            None,
        ),
        Err(_) => (None, format!("unreadable ({} bytes)", d.body.len()), None),
    };
    Shown {
        queue: d.queue.clone(),
        deliveries: d.deliveries,
        reason: d.reason.clone(),
        run,
        what,
        job_key,
    }
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

/// One dead letter as a line of `dlq list`.
fn line(l: &Shown) -> String {
    format!(
        "{}  {}  run {}  {} {}  {}",
        l.queue,
        l.what,
        l.run.as_deref().unwrap_or("-"),
        l.deliveries,
        if l.deliveries == 1 {
            "delivery"
        } else {
            "deliveries"
        },
        l.reason
    )
}

/// Runs the command.
pub fn run(args: DlqArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        match args.command {
            DlqCommand::List(a) => {
                let conn = a.connect.connect(Some(Duration::from_secs(60))).await?;
                let dead = conn.queue.dead_letters().await;
                conn.close().await;
                let shown: Vec<Shown> = dead?
                    .iter()
                    .map(show)
                    .filter(|s| a.run.is_none() || s.run == a.run)
                    .collect();
                print(&shown, a.json)?;
                Ok(ExitCode::SUCCESS)
            }
            DlqCommand::Replay(a) => {
                let conn = a.connect.connect(Some(Duration::from_secs(60))).await?;
                let done = replay(&conn, &a).await;
                conn.close().await;
                done
            }
        }
    })
}

/// `dlq replay`: re-publishes the readable dead letters (of one run) and marks their
/// jobs queued.
async fn replay(conn: &Connections, a: &ListArgs) -> anyhow::Result<ExitCode> {
    let run = a.run.clone();
    // Only messages that can be read are replayed: an unreadable one would
    // only be dead-lettered again.
    let (_, replayed) = conn
        .queue
        .replay_dead_letters(move |d| {
            let s = show(d);
            s.run.is_some() && (run.is_none() || s.run == run)
        })
        .await?;
    let shown: Vec<Shown> = replayed.iter().map(show).collect();
    let keys: Vec<String> = shown.iter().filter_map(|s| s.job_key.clone()).collect();
    conn.store.mark_queued(&keys).await?;
    print(&shown, a.json)?;
    eprintln!("{} dead letters replayed", shown.len());
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(deliveries: u32) -> Shown {
        Shown {
            queue: "credence.jobs.m".into(),
            deliveries,
            reason: "boom".into(),
            run: Some("r".into()),
            what: "m / d / base shard 0".into(),
            job_key: None,
        }
    }

    #[test]
    fn a_line_counts_deliveries_in_the_right_number() {
        assert_eq!(
            line(&shown(1)),
            "credence.jobs.m  m / d / base shard 0  run r  1 delivery  boom"
        );
        assert_eq!(
            line(&shown(4)),
            "credence.jobs.m  m / d / base shard 0  run r  4 deliveries  boom"
        );
    }
}
