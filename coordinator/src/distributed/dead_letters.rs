//! The dead-letter queue of a namespace as people see it (`credence dlq list|replay`):
//! each message decoded into the run and job it belongs to, and the replay of a run's
//! jobs once their cause is fixed.
//!
//! A job can finish and still leave a copy here: when the broker restarts (or a
//! connection drops) after the job's results are committed but before its delivery is
//! acknowledged, the broker delivers it again, and each such loss counts against the
//! queue's delivery limit; a long job caught by several faults can reach it although it
//! is done. Such a letter is shown with its job done (`job_done`), and a replay leaves
//! that job's state as it is (the re-published copy is acknowledged without running).

use super::Connections;
use credence_infra::queue::{DeadLetter, Queue};
use credence_infra::store::Store;
use credence_worker::job_loop::{decode_work, Work};
use serde::Serialize;
use std::collections::{BTreeSet, HashSet};

/// A dead letter as shown to people.
#[derive(Debug, Serialize)]
pub struct Shown {
    /// The queue it came from.
    pub queue: String,
    /// How many times it was delivered.
    pub deliveries: u32,
    /// Why it is here.
    pub reason: String,
    /// Its run, when the message can be read.
    pub run: Option<String>,
    /// What it is: a job (model / dataset / mode shard N), an aggregation, or unreadable.
    pub what: String,
    /// Its job's key, for a job.
    pub job_key: Option<String>,
    /// Whether its job is done in the store (a copy left by a lost acknowledgement, not
    /// a failure).
    pub job_done: bool,
}

/// A dead letter decoded for people.
pub fn show(d: &DeadLetter) -> Shown {
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
        job_done: false,
    }
}

/// One dead letter as a line of `dlq list`.
pub fn line(l: &Shown) -> String {
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
    ) + if l.job_done {
        "  (its job is done: a copy left by a lost acknowledgement)"
    } else {
        ""
    }
}

/// The keys of the finished jobs of every run the letters name.
async fn finished(conn: &Connections, letters: &[Shown]) -> anyhow::Result<HashSet<String>> {
    let runs: BTreeSet<&str> = letters
        .iter()
        .filter(|s| s.job_key.is_some())
        .filter_map(|s| s.run.as_deref())
        .collect();
    let mut done = HashSet::new();
    for run in runs {
        done.extend(conn.store.finished_jobs(run).await?);
    }
    Ok(done)
}

/// Marks the letters whose job is done in the store.
async fn mark_done(conn: &Connections, letters: &mut [Shown]) -> anyhow::Result<()> {
    let done = finished(conn, letters).await?;
    for s in letters {
        s.job_done = s.job_key.as_ref().is_some_and(|k| done.contains(k));
    }
    Ok(())
}

/// The dead letters (of run `run`, when given), oldest first; nothing is removed.
pub async fn list(conn: &Connections, run: Option<&str>) -> anyhow::Result<Vec<Shown>> {
    let mut shown: Vec<Shown> = conn
        .queue
        .dead_letters()
        .await?
        .iter()
        .map(show)
        .filter(|s| run.is_none() || s.run.as_deref() == run)
        .collect();
    mark_done(conn, &mut shown).await?;
    Ok(shown)
}

/// Re-publishes the readable dead letters (of run `run`, when given) to their queues and
/// marks their jobs queued; the letters replayed. An unreadable message is left where it
/// is: it would only be dead-lettered again.
pub async fn replay(conn: &Connections, run: Option<&str>) -> anyhow::Result<Vec<Shown>> {
    let run = run.map(str::to_string);
    let (_, replayed) = conn
        .queue
        .replay_dead_letters(move |d| {
            let s = show(d);
            s.run.is_some() && (run.is_none() || s.run == run)
        })
        .await?;
    let mut shown: Vec<Shown> = replayed.iter().map(show).collect();
    mark_done(conn, &mut shown).await?;
    // A done job stays done: its re-published copy is acknowledged without running.
    let keys: Vec<String> = shown
        .iter()
        .filter(|s| !s.job_done)
        .filter_map(|s| s.job_key.clone())
        .collect();
    conn.store.mark_queued(&keys).await?;
    Ok(shown)
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
            job_done: false,
        }
    }

    #[test]
    fn a_line_says_when_the_job_is_done() {
        let mut s = shown(4);
        s.job_done = true;
        assert_eq!(
            line(&s),
            "credence.jobs.m  m / d / base shard 0  run r  4 deliveries  boom  \
             (its job is done: a copy left by a lost acknowledgement)"
        );
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
