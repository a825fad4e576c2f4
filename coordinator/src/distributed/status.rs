//! `sweep status`: a run's progress per model x dataset x mode (a bar, jobs by state,
//! examples, rate and ETA), and its failed jobs with their errors; text or JSON.

use credence_infra::store::postgres::ops::{ConfigProgress, FailedJob};
use credence_infra::store::postgres::PgStore;
use serde::Serialize;
use std::fmt::Write;

/// A run's status.
#[derive(Debug, Clone, Serialize)]
pub struct RunStatus {
    /// The run.
    pub run_id: String,
    /// Progress per configuration, in plan order.
    pub configs: Vec<ConfigProgress>,
    /// Jobs that failed their last delivery.
    pub failures: Vec<FailedJob>,
    /// Every job has results and every configuration is aggregated.
    pub complete: bool,
    /// No job is waiting or running: nothing more will happen without `resume`.
    pub settled: bool,
}

/// Reads the status of a run.
pub async fn read(store: &PgStore, run_id: &str) -> anyhow::Result<RunStatus> {
    if !store.run_exists(run_id).await? {
        anyhow::bail!("no run {run_id:?} in the store at {}", store.location());
    }
    let configs = store.progress(run_id).await?;
    let failures = store.failures(run_id).await?;
    let complete = configs
        .iter()
        .all(|c| c.done == c.jobs && c.state == "complete");
    let settled = configs
        .iter()
        .all(|c| c.waiting == 0 && c.running == 0 && c.state != "aggregating");
    Ok(RunStatus {
        run_id: run_id.to_string(),
        configs,
        failures,
        complete,
        settled,
    })
}

/// Renders the status as text: one bar per configuration, then the failures.
pub fn render(status: &RunStatus) -> String {
    let mut out = String::new();
    let width = status
        .configs
        .iter()
        .map(|c| c.model.len() + c.dataset.len() + c.mode.as_str().len() + 6)
        .max()
        .unwrap_or(0);
    let _ = writeln!(out, "run {}", status.run_id);
    for c in &status.configs {
        let name = format!("{} / {} / {}", c.model, c.dataset, c.mode);
        let filled = (30 * c.done).checked_div(c.jobs).unwrap_or(0) as usize;
        let bar = format!("{}{}", "=".repeat(filled), " ".repeat(30 - filled));
        let (rate, eta) = rate_and_eta(c);
        let _ = writeln!(
            out,
            "{name:<width$} [{bar}] {}/{} jobs {}/{} ex  {rate}  {eta}  running {}  waiting {}  failed {}{}  {}",
            c.done,
            c.jobs,
            c.examples_done,
            c.examples,
            c.running,
            c.waiting,
            c.failed,
            if c.cancelled > 0 {
                format!("  cancelled {}", c.cancelled)
            } else {
                String::new()
            },
            c.state,
        );
    }
    for f in &status.failures {
        let _ = writeln!(out, "{}", failure_line(f));
    }
    let _ = writeln!(out, "{}", verdict(status));
    out
}

/// The status line of a finished or running run (the last line of [`render`]).
pub fn verdict(status: &RunStatus) -> &'static str {
    if status.complete {
        "complete"
    } else if status.settled && !status.failures.is_empty() {
        "stopped with failures: fix the cause, then `credence dlq replay` or `credence sweep resume`"
    } else if status.settled {
        "stopped: `credence sweep resume` publishes the jobs without results"
    } else {
        "in progress"
    }
}

/// A configuration's rate (`12.3 ex/s`, `-` before any finished job) and ETA (`eta 4m05s`,
/// `eta -`, or `done`).
fn rate_and_eta(c: &ConfigProgress) -> (String, String) {
    let rate = c
        .rate
        .map_or_else(|| "-".into(), |r| format!("{r:.1} ex/s"));
    let eta = match (c.eta_seconds, c.done == c.jobs) {
        (_, true) => "done".to_string(),
        (Some(s), false) => format!("eta {}", credence_core::timing::span(s)),
        (None, false) => "eta -".to_string(),
    };
    (rate, eta)
}

/// A failed job as `sweep status` lists it.
fn failure_line(f: &FailedJob) -> String {
    format!(
        "failed: {} / {} / {} shard {} after {} deliveries: {}",
        f.model, f.dataset, f.mode, f.shard, f.attempts, f.error
    )
}

/// What one configuration's bar says beside its count: rate, ETA and jobs by state.
pub fn bar_message(c: &ConfigProgress) -> String {
    let (rate, eta) = rate_and_eta(c);
    format!(
        "{rate}  {eta}  jobs {}/{}  running {}  waiting {}  failed {}  {}",
        c.done, c.jobs, c.running, c.waiting, c.failed, c.state
    )
}

/// Redraws a run's status every `every` until it completes or settles (nothing more
/// will happen without `resume`): a live bar per model x dataset x mode with rate and
/// ETA on a terminal; where stderr is not one (a log file, CI), the text status each
/// time it changes; with `json` one status object per line. Returns the last status.
pub async fn watch(
    store: &PgStore,
    run_id: &str,
    every: std::time::Duration,
    json: bool,
) -> anyhow::Result<RunStatus> {
    use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
    let multi = MultiProgress::new();
    let style = ProgressStyle::with_template("{prefix:<44} [{bar:30}] {pos}/{len} ex  {msg}")
        .map_err(|e| anyhow::anyhow!("progress template: {e}"))?
        .progress_chars("=> ");
    let mut bars: Vec<ProgressBar> = Vec::new();
    let live = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last_text = String::new();
    loop {
        let status = read(store, run_id).await?;
        if json {
            println!("{}", serde_json::to_string(&status)?);
        } else if !live {
            // No terminal to redraw on: the text status, each time it changes.
            let text = render(&status);
            if text != last_text {
                print!("{text}");
                last_text = text;
            }
        } else {
            for (i, c) in status.configs.iter().enumerate() {
                if i == bars.len() {
                    let bar = multi.add(ProgressBar::new(c.examples));
                    bar.set_style(style.clone());
                    bar.set_prefix(format!("{} / {} / {}", c.model, c.dataset, c.mode));
                    bars.push(bar);
                }
                let bar = &bars[i];
                bar.set_length(c.examples);
                bar.set_position(c.examples_done);
                bar.set_message(bar_message(c));
            }
        }
        if status.complete || status.settled {
            for bar in &bars {
                bar.finish();
            }
            if !json && live {
                for f in &status.failures {
                    println!("{}", failure_line(f));
                }
                println!("{}", verdict(&status));
            }
            return Ok(status);
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use credence_core::Mode;

    #[test]
    fn renders_bars_rates_and_failures() {
        let status = RunStatus {
            run_id: "demo".into(),
            configs: vec![ConfigProgress {
                model: "oracle".into(),
                dataset: "sample".into(),
                mode: Mode::Base,
                state: "running".into(),
                jobs: 4,
                done: 2,
                running: 1,
                waiting: 0,
                failed: 1,
                cancelled: 0,
                examples: 40,
                examples_done: 20,
                rate: Some(2.0),
                eta_seconds: Some(10.0),
            }],
            failures: vec![FailedJob {
                model: "oracle".into(),
                dataset: "sample".into(),
                mode: Mode::Base,
                shard: 3,
                job_key: "k".into(),
                attempts: 3,
                error: "boom".into(),
            }],
            complete: false,
            settled: false,
        };
        let text = render(&status);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "run demo");
        assert_eq!(
            lines[1],
            "oracle / sample / base [===============               ] 2/4 jobs 20/40 ex  2.0 ex/s  eta 10s  running 1  waiting 0  failed 1  running"
        );
        assert_eq!(
            lines[2],
            "failed: oracle / sample / base shard 3 after 3 deliveries: boom"
        );
        assert_eq!(lines[3], "in progress");
    }
}
