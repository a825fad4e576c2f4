//! The dead-letter queue of a namespace as people see it (`credence dlq list|replay`):
//! each message decoded into the run and job it belongs to, and the replay of a run's
//! jobs once their cause is fixed.

use super::Connections;
use credence_infra::queue::{DeadLetter, Queue};
use credence_worker::job_loop::{decode_work, Work};
use serde::Serialize;

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
    )
}

/// The dead letters (of run `run`, when given), oldest first; nothing is removed.
pub async fn list(conn: &Connections, run: Option<&str>) -> anyhow::Result<Vec<Shown>> {
    Ok(conn
        .queue
        .dead_letters()
        .await?
        .iter()
        .map(show)
        .filter(|s| run.is_none() || s.run.as_deref() == run)
        .collect())
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
    let shown: Vec<Shown> = replayed.iter().map(show).collect();
    let keys: Vec<String> = shown.iter().filter_map(|s| s.job_key.clone()).collect();
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
