//! The distributed engine end to end, against the real PostgreSQL and RabbitMQ on
//! 127.0.0.1: the `credence` binary as coordinator and as separate worker processes.
//! Each test has a database and queue namespace of its own; the tests that stop a
//! server (in `faults`) run alone and always restart it.

#[path = "common/crafted.rs"]
mod crafted;
#[path = "distributed/faults.rs"]
mod faults;
#[path = "distributed/observability.rs"]
mod observability;
#[path = "distributed/support.rs"]
mod support;

use std::time::{Duration, Instant};
use support::{workspace, Cluster};

/// The fenced ```sql blocks of a Markdown file, in order.
/// The SQL blocks of a Markdown file with the engines each is written for: a block
/// fenced as `sql` runs on both, `sql postgres` and `sql sqlite` on one.
fn sql_blocks(path: &std::path::Path) -> Vec<(Vec<&'static str>, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut blocks = Vec::new();
    let mut open: Option<(Vec<&'static str>, String)> = None;
    for line in text.lines() {
        match (&mut open, line.trim_start()) {
            (None, l) if l.starts_with("```sql") => {
                let engines = match l.trim_start_matches("```sql").trim() {
                    "" => vec!["postgres", "sqlite"],
                    "postgres" => vec!["postgres"],
                    "sqlite" => vec!["sqlite"],
                    other => panic!("{}: a ```sql block for {other:?}", path.display()),
                };
                open = Some((engines, String::new()));
            }
            (Some(_), l) if l.starts_with("```") => blocks.extend(open.take()),
            (Some((_, block)), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

fn baselines() -> String {
    workspace()
        .join("examples/baselines.toml")
        .display()
        .to_string()
}

#[test]
fn three_workers_give_the_embedded_engines_rows_and_aggregate_once() {
    let Some(mut c) = Cluster::new("parity", false) else {
        return;
    };
    let expected = c.embedded_rows(std::path::Path::new(&baselines()));
    assert_eq!(expected.predictions.len(), 42 * 2 * 4);
    // Every prediction has its metrics (n_claims and Jaccard P/R/F1 at least).
    assert!(expected.metrics.len() >= 4 * expected.predictions.len());
    let report = c.ok(&["sweep", "launch", &baselines(), "--json"]);
    let report: serde_json::Value = serde_json::from_str(&report).expect("launch --json");
    assert_eq!(
        (report["planned"].as_u64(), report["published"].as_u64()),
        (Some(48), Some(48))
    );
    for _ in 0..3 {
        c.spawn_worker(&[]);
    }
    // Watched live: one status object per refresh until the run completes.
    let watch = c
        .credence()
        .args([
            "sweep",
            "status",
            "baselines",
            "--watch",
            "--json",
            "--interval",
            "0.2",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting sweep status --watch");
    c.wait_settled("baselines", Duration::from_secs(120));
    let watched = wait_for_output(watch, Duration::from_secs(60));
    assert!(
        watched.status.success(),
        "{}",
        String::from_utf8_lossy(&watched.stderr)
    );
    let frames: Vec<serde_json::Value> = String::from_utf8_lossy(&watched.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one status object per line"))
        .collect();
    let last = frames.last().expect("at least one frame");
    assert_eq!(last["complete"], serde_json::Value::Bool(true), "{last}");
    let done = |f: &serde_json::Value| -> u64 {
        f["configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["examples_done"].as_u64().unwrap())
            .sum()
    };
    assert!(
        frames.windows(2).all(|w| done(&w[0]) <= done(&w[1])),
        "progress went backwards"
    );
    assert_eq!(done(last), 42 * 8);
    assert_eq!(
        c.pg_rows(),
        expected,
        "distributed rows differ from the embedded engine's"
    );

    // The bootstrap (means, intervals, paired comparisons) gives the same rows, bit for
    // bit, in both engines: per model 3 modes against base and all against repair, and
    // the sweep's one cross-model comparison, for every metric.
    let stats = c.embedded_stats();
    let metrics = stats.aggregates.len() / 8;
    assert!(metrics >= 4, "{:?}", stats.aggregates);
    assert_eq!(stats.aggregates.len(), 8 * metrics);
    assert_eq!(stats.comparisons.len(), 9 * metrics);
    assert!(stats.aggregates[0].ends_with("|Some(10000)|Some(42)|Some(\"percentile\")"));
    assert_eq!(
        c.pg_stats(),
        stats,
        "distributed aggregates or comparisons differ from the embedded engine's"
    );

    // Every query of docs/QUERIES.md runs on this run (as `baselines` rather than
    // `demo`) in each engine it is written for: PostgreSQL here, the embedded
    // reference's SQLite file there. The first gives the paper's table in both: one row
    // per model x mode.
    let blocks = sql_blocks(&workspace().join("docs/QUERIES.md"));
    let on = |engine: &str| blocks.iter().filter(|(e, _)| e.contains(&engine)).count();
    assert!(on("postgres") >= 15 && on("sqlite") >= 15, "{blocks:?}");
    for (i, (engines, block)) in blocks.iter().enumerate() {
        let block = block.replace("'demo'", "'baselines'");
        if engines.contains(&"postgres") {
            let rows = c.sql(&block);
            if i == 0 {
                assert_eq!(rows.lines().count(), 8, "the paper's table:\n{rows}");
            }
        }
        if engines.contains(&"sqlite") {
            let rows = c.embedded_query(&block);
            if i == 0 {
                assert_eq!(rows, 8, "the paper's table in SQLite");
            }
        }
    }

    // Exactly one aggregation job per model x dataset x mode, decided in the store.
    assert_eq!(
        c.sql("SELECT string_agg(DISTINCT state || ':' || aggregations, ',') FROM configs"),
        "complete:1"
    );
    assert_eq!(
        c.sql_i64("SELECT count(*) FROM aggregates WHERE metric = 'jaccard_f1'"),
        8
    );
    assert_eq!(
        c.sql("SELECT round(mean::numeric, 6) FROM aggregates WHERE model = 'conjunction-oracle' AND mode = 'base' AND metric = 'jaccard_f1'"),
        c.sql("SELECT round(avg(jaccard_f1)::numeric, 6) FROM example_metrics WHERE model = 'conjunction-oracle' AND mode = 'base'")
    );
    // Fault-free: every job ran once.
    assert_eq!(
        c.sql_i64("SELECT sum(attempts) FROM jobs"),
        48,
        "jobs run more than once: {}",
        c.sql("SELECT string_agg(job_key || ' ' || attempts || ' ' || coalesce(error, ''), '; ') FROM jobs WHERE attempts > 1")
    );
    assert!(c.sql_i64("SELECT count(DISTINCT worker) FROM jobs") >= 2);

    let status = c.ok(&["sweep", "status", "baselines"]);
    assert_eq!(
        status
            .lines()
            .filter(|l| l.contains(" / sample / "))
            .count(),
        8,
        "{status}"
    );
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("conjunction-oracle / sample / base ")
                && l.contains("6/6 jobs 42/42 ex")),
        "{status}"
    );
    assert_eq!(status.lines().last(), Some("complete"), "{status}");
    let json: serde_json::Value =
        serde_json::from_str(&c.ok(&["sweep", "status", "baselines", "--json"]))
            .expect("status --json");
    assert_eq!(json["complete"], serde_json::Value::Bool(true));
    assert_eq!(json["configs"].as_array().map(Vec::len), Some(8));

    // Launching again publishes nothing: resume by difference.
    let again: serde_json::Value =
        serde_json::from_str(&c.ok(&["sweep", "launch", &baselines(), "--json"])).expect("json");
    assert_eq!(
        (again["already_done"].as_u64(), again["published"].as_u64()),
        (Some(48), Some(0))
    );

    for i in 0..3 {
        assert!(
            c.sigterm(i, Duration::from_secs(30)).success(),
            "{}",
            c.worker_log(i)
        );
    }
}

#[test]
fn a_coordinator_crash_between_plan_and_publish_is_resumed_without_duplicates() {
    let Some(mut c) = Cluster::new("crash before publish", false) else {
        return;
    };
    let expected = c.embedded_rows(std::path::Path::new(&baselines()));
    // --plan-only stops exactly where a crash after the plan's commit would.
    c.ok(&["sweep", "launch", &baselines(), "--plan-only"]);
    assert_eq!(
        c.sql("SELECT string_agg(DISTINCT state, ',') FROM jobs"),
        "planned"
    );
    c.spawn_worker(&[]);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.done_jobs("baselines"), 0, "nothing was published");

    // Cancel and resume on the way: a cancelled run does nothing until resumed.
    c.ok(&["sweep", "cancel", "baselines"]);
    assert_eq!(
        c.sql_i64("SELECT count(*) FROM jobs WHERE state = 'cancelled'"),
        48
    );
    let resumed = c.run(&["sweep", "resume", "baselines"]);
    assert!(resumed.status.success());
    assert!(String::from_utf8_lossy(&resumed.stderr).contains("48 re-published"));
    c.spawn_worker(&[]);
    c.wait_settled("baselines", Duration::from_secs(120));
    assert_eq!(c.pg_rows(), expected);
    assert_eq!(
        c.sql_i64("SELECT sum(attempts) FROM jobs"),
        48,
        "no job ran twice"
    );
    let again = c.run(&["sweep", "resume", "baselines"]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("0 re-published"));
    let missing = c.run(&["sweep", "status", "nosuchrun"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no run \"nosuchrun\""));
}

#[test]
fn a_poison_job_is_dead_lettered_shown_and_replayed_once_fixed() {
    let Some(mut c) = Cluster::new("poison", false) else {
        return;
    };
    let sweep = c.write_sweep("poison", 42, 8);
    let expected = c.embedded_rows(&sweep);
    let sweep = sweep.display().to_string();
    c.ok(&["sweep", "launch", &sweep, "--plan-only"]);
    // The cause: an example of shard 0 is missing from the store, so every shard-0 job
    // (2 models x 4 modes) fails on each delivery.
    c.sql("DELETE FROM examples WHERE position = 3");
    c.ok(&["sweep", "resume", "poison"]);
    c.spawn_worker(&[]);
    c.spawn_worker(&[]);
    c.wait_settled("poison", Duration::from_secs(120));
    assert_eq!(
        c.sql_i64("SELECT count(*) FROM failures WHERE run_id = 'poison'"),
        8
    );
    assert_eq!(
        c.sql("SELECT string_agg(DISTINCT attempts::text, ',') FROM failures"),
        "3"
    );
    assert_eq!(c.done_jobs("poison"), 40, "the rest of the sweep completes");
    let error = c.sql("SELECT error FROM failures LIMIT 1");
    assert!(error.contains("expects 8 examples at 0"), "{error}");

    let status = c.ok(&["sweep", "status", "poison"]);
    assert_eq!(
        status.lines().filter(|l| l.starts_with("failed: ")).count(),
        8,
        "{status}"
    );
    assert!(status.contains("after 3 deliveries"), "{status}");
    assert!(status.contains("failed 1"), "{status}");
    let listed = c.ok(&["dlq", "list", "--run", "poison"]);
    assert_eq!(listed.lines().count(), 8, "{listed}");
    assert!(
        listed.lines().all(|l| l.contains("shard 0")
            && l.contains("3 deliveries")
            && l.contains("expects 8 examples")),
        "{listed}"
    );

    // Fix the cause (re-recording the plan restores the example), then replay.
    c.ok(&["sweep", "launch", &sweep, "--plan-only"]);
    let replayed = c.run(&["dlq", "replay", "--run", "poison"]);
    assert!(String::from_utf8_lossy(&replayed.stderr).contains("8 dead letters replayed"));
    c.wait_settled("poison", Duration::from_secs(120));
    assert_eq!(c.done_jobs("poison"), 48);
    assert_eq!(c.pg_rows(), expected);
    assert_eq!(c.ok(&["dlq", "list", "--run", "poison"]), "");
    assert_eq!(
        c.ok(&["sweep", "status", "poison"]).lines().last(),
        Some("complete")
    );
}

#[test]
fn bad_messages_and_urls_are_reported_not_crashed_on() {
    let Some(mut c) = Cluster::new("bad input", false) else {
        return;
    };
    // A worker whose database URL carries a password (trust auth ignores it), logging
    // at debug level: the password must appear nowhere.
    let with_password = c.db_url.replacen("postgres@", "postgres:s3cr3t-pg@", 1);
    let w = {
        let mut cmd = c.credence();
        cmd.env("CREDENCE_DATABASE_URL", &with_password);
        let log = c.dir.path().join("debug.log");
        let child = cmd
            .env("RUST_LOG", "debug")
            .args([
                "worker",
                "--models",
                "sentence-split,conjunction-oracle",
                "--worker-id",
                "wd",
            ])
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        c.workers.push(support::Worker {
            id: "wd".into(),
            child,
            log,
        });
        c.workers.len() - 1
    };
    support::block_on(async {
        use credence_infra::queue::Queue;
        let q = c.queue().await;
        let name = credence_infra::queue::job_queue("sentence-split");
        q.publish(&name, b"{not json".to_vec()).await.unwrap();
        q.publish(&name, br#"{"kind":"job","v":9,"job":{}}"#.to_vec())
            .await
            .unwrap();
    });
    let start = Instant::now();
    let listed = loop {
        let listed = c.ok(&["dlq", "list"]);
        if listed.lines().count() == 2 || start.elapsed() > Duration::from_secs(30) {
            break listed;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    assert!(
        lines[0].contains("unreadable")
            && lines[0].contains("malformed message: key must be a string"),
        "{listed}"
    );
    assert!(
        lines[1].contains("unknown message version 9; this worker reads version 1"),
        "{listed}"
    );
    // The worker lives on and runs a sweep.
    c.ok(&["sweep", "launch", &baselines()]);
    c.wait_settled("baselines", Duration::from_secs(120));
    assert_eq!(c.done_jobs("baselines"), 48);
    assert!(
        c.workers[w].child.try_wait().unwrap().is_none(),
        "the worker crashed"
    );
    assert!(c.sigterm(w, Duration::from_secs(30)).success());
    let log = c.worker_log(w);
    assert!(
        log.contains("dead-lettering an unreadable message"),
        "{log}"
    );
    assert!(
        !log.contains("s3cr3t-pg"),
        "the password leaked into the log"
    );

    for (var, url, host) in [
        (
            "CREDENCE_DATABASE_URL",
            "postgres://alice:hunter2@127.0.0.1:1/credence",
            "cannot open the store at 127.0.0.1:1/credence: ",
        ),
        (
            "CREDENCE_BROKER_URL",
            "amqp://alice:hunter2@127.0.0.1:1/%2f",
            "cannot reach the broker at 127.0.0.1:1//: ",
        ),
        (
            "CREDENCE_DATABASE_URL",
            "postgres://alice:hunter2@[oops",
            "invalid database URL",
        ),
    ] {
        let out = c
            .credence()
            .env(var, url)
            .args(["sweep", "status", "baselines"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.starts_with("error: ") && err.contains(host), "{err}");
        assert!(
            !err.contains("hunter2") && !err.contains("panicked"),
            "{err}"
        );
    }
}

/// The planned job `sentence-split / base / shard 0` of the run `baselines`, as the store
/// holds it.
fn sentence_split_base_shard_0(c: &Cluster) -> credence_core::job::Job {
    let row = c.sql(
        "SELECT job_key || '|' || run_id || '|' || model_fingerprint || '|' || dataset || '|' \
         || dataset_hash || '|' || start || '|' || len || '|' || config_version FROM jobs \
         WHERE model = 'sentence-split' AND mode = 'base' AND shard = 0",
    );
    let f: Vec<&str> = row.split('|').collect();
    assert_eq!(f.len(), 8, "{row}");
    credence_core::job::Job {
        key: f[0].into(),
        run_id: f[1].into(),
        model: "sentence-split".into(),
        model_fingerprint: f[2].into(),
        dataset: f[3].into(),
        dataset_hash: f[4].into(),
        mode: credence_core::Mode::Base,
        shard: 0,
        start: f[5].parse().unwrap(),
        len: f[6].parse().unwrap(),
        config_version: f[7].into(),
        afc: None,
    }
}

/// A message with a real job key and other fields (here another mode) is refused on
/// receipt and dead-lettered once with its reason, shown by `dlq list` with its one
/// delivery; the job under that key runs from its own message, in its own mode.
#[test]
fn a_forged_message_is_dead_lettered_not_run() {
    let Some(mut c) = Cluster::new("forged", false) else {
        return;
    };
    c.ok(&["sweep", "launch", &baselines(), "--plan-only"]);
    // The planned job's fields under its key, but another mode.
    let mut forged = sentence_split_base_shard_0(&c);
    forged.mode = credence_core::Mode::Repair;
    let key = forged.key.clone();
    let body = serde_json::to_vec(&credence_core::job::Message::job(forged)).unwrap();
    // Published ahead of the real messages, so it reaches the worker first.
    support::block_on(async {
        use credence_infra::queue::Queue;
        let q = c.queue().await;
        q.publish(&credence_infra::queue::job_queue("sentence-split"), body)
            .await
            .unwrap();
        q.close().await;
    });
    c.ok(&["sweep", "launch", &baselines()]);
    c.spawn_worker(&[]);
    c.wait_settled("baselines", Duration::from_secs(120));
    assert_eq!(c.done_jobs("baselines"), 48);
    assert_eq!(
        c.sql(&format!(
            "SELECT string_agg(DISTINCT mode, ',') FROM predictions WHERE job_key = '{key}'"
        )),
        "base",
        "the forged message ran the job in its own mode"
    );
    let listed = c.ok(&["dlq", "list"]);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 1, "{listed}");
    assert!(
        lines[0].contains("1 delivery  forged: key does not match fields"),
        "{listed}"
    );
}

/// A finished job's message can still reach the dead letters: when the broker restarts
/// after a job's results are committed but before its delivery is acknowledged, the
/// broker delivers it again, and a long job caught by enough faults reaches the delivery
/// limit (seen in the rehearsal's faulted run). `dlq list` shows such a letter with its
/// job done, and a replay leaves the job done: nothing is marked to run again.
#[test]
fn a_finished_jobs_dead_letter_is_shown_done_and_replayed_without_reopening_it() {
    let Some(mut c) = Cluster::new("donecopy", false) else {
        return;
    };
    c.ok(&["sweep", "launch", &baselines()]);
    c.spawn_worker(&[]);
    c.wait_settled("baselines", Duration::from_secs(120));
    assert_eq!(c.done_jobs("baselines"), 48);
    let rows = c.pg_rows();
    c.sigterm(0, Duration::from_secs(60));
    let job = sentence_split_base_shard_0(&c);
    let body = serde_json::to_vec(&credence_core::job::Message::job(job)).unwrap();
    // The finished job's message, delivered once more and dead-lettered (no worker runs).
    support::block_on(async {
        use credence_infra::queue::Queue;
        let q = c.queue().await;
        let name = credence_infra::queue::job_queue("sentence-split");
        q.publish(&name, body).await.unwrap();
        let mut consumer = q.consume(&name).await.unwrap();
        let delivery = consumer
            .next()
            .await
            .unwrap()
            .expect("the published message");
        delivery
            .dead_letter("delivery limit reached: its consumers kept dying or returning it")
            .await
            .unwrap();
        drop(consumer);
        q.close().await;
    });
    let listed = c.ok(&["dlq", "list", "--run", "baselines"]);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(
        listed.contains("sentence-split / ")
            && listed.contains("(its job is done: a copy left by a lost acknowledgement)"),
        "{listed}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&c.ok(&["dlq", "list", "--run", "baselines", "--json"])).unwrap();
    assert_eq!(json[0]["job_done"], serde_json::Value::Bool(true), "{json}");
    let replayed = c.run(&["dlq", "replay", "--run", "baselines"]);
    assert!(String::from_utf8_lossy(&replayed.stderr).contains("1 dead letters replayed"));
    assert_eq!(
        c.done_jobs("baselines"),
        48,
        "the replay reopened a finished job"
    );
    // A worker takes the re-published copy and acknowledges it without running it.
    c.spawn_worker(&[]);
    c.wait_settled("baselines", Duration::from_secs(120));
    assert_eq!(c.ok(&["dlq", "list", "--run", "baselines"]), "");
    assert_eq!(c.done_jobs("baselines"), 48);
    assert_eq!(c.pg_rows(), rows);
}

/// Commands that end cleanly close their broker connection before the runtime stops, so
/// they print no lapin `ERROR` lines on the way out.
#[test]
fn clean_commands_print_no_errors_on_exit() {
    let Some(c) = Cluster::new("clean-exit", false) else {
        return;
    };
    for args in [
        &["sweep", "launch", &baselines(), "--plan-only"][..],
        &["sweep", "status", "baselines"],
        &["sweep", "status", "baselines", "--json"],
        &["sweep", "resume", "baselines"],
        &["sweep", "cancel", "baselines"],
        &["dlq", "list"],
    ] {
        let out = c.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "credence {args:?}: {stderr}");
        assert!(
            !stderr.contains("ERROR"),
            "credence {args:?} printed errors on a clean run:\n{stderr}"
        );
    }
}

/// `sweep status --watch` follows a run from before its jobs are published to its end,
/// then exits 0: under a pseudo-terminal (`script`) it redraws live bars; with no
/// terminal it prints the text status each time it changes.
#[test]
fn sweep_status_watch_follows_a_run_until_it_completes() {
    let Some(mut c) = Cluster::new("watch", false) else {
        return;
    };
    let sweep = c.write_sweep("watch", 24, 3).display().to_string();
    c.ok(&["sweep", "launch", &sweep, "--plan-only"]);
    let watch = format!(
        "{} sweep status watch --watch --interval 0.2",
        env!("CARGO_BIN_EXE_credence")
    );
    let on_terminal = c
        .command("script")
        .args(["-qefc", &watch, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs the watch under a pseudo-terminal");
    let in_a_log = c
        .credence()
        .args(["sweep", "status", "watch", "--watch", "--interval", "0.2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("credence sweep status --watch");
    // Both watch the planned run for a while before anything is published.
    std::thread::sleep(Duration::from_secs(2));
    c.ok(&["sweep", "resume", "watch"]);
    c.spawn_worker(&[]);
    c.spawn_worker(&[]);

    let log = wait_for_output(in_a_log, Duration::from_secs(180));
    let text = String::from_utf8_lossy(&log.stdout);
    assert!(
        log.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&log.stderr)
    );
    assert!(text.starts_with("run watch\n"), "{text}");
    assert!(
        text.contains("in progress"),
        "the first status, before publishing: {text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("sentence-split / gen / base ")
                && l.contains("] 8/8 jobs 24/24 ex")),
        "a finished bar: {text}"
    );
    assert!(
        text.matches("run watch\n").count() >= 2,
        "the status again once it changed: {text}"
    );
    assert_eq!(text.lines().last(), Some("complete"), "{text}");

    let term = wait_for_output(on_terminal, Duration::from_secs(180));
    let screen = String::from_utf8_lossy(&term.stdout);
    assert!(
        term.status.success(),
        "{screen}{}",
        String::from_utf8_lossy(&term.stderr)
    );
    assert!(
        screen.contains("conjunction-oracle / gen / all"),
        "{screen}"
    );
    assert!(screen.contains(" ex  "), "a bar's count: {screen}");
    // Redrawn in place: cursor movement, not one line per refresh.
    assert!(screen.contains("\x1b["), "no redraw escapes: {screen:?}");
    // The verdict after the bars (a terminal of unknown width gets no line breaks
    // between redraws).
    assert!(screen.trim_end().ends_with("complete"), "{screen:?}");
}

/// Waits for a child to exit (reading its output meanwhile, so a full pipe never stalls
/// it), killing it after `limit`; its output.
fn wait_for_output(child: std::process::Child, limit: Duration) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("the child's output"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("still running after {limit:?}");
        }
    }
}
