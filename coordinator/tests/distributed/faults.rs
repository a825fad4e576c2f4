//! Faults mid-sweep: workers SIGKILLed mid-job, RabbitMQ stopped and started, PostgreSQL
//! down for 30 s, workers restarted while the database is unreachable. Each sweep must complete with exactly the rows of a fault-free run of
//! the embedded engine. The server tests hold the servers exclusively and restart them
//! through a guard, whatever happens.

use super::support::{workspace, BrokerStopped, Cluster, DatabaseStopped, DbProxy, ResultRows};
use crate::crafted::write_crafted_gguf;
use std::process::Child;
use std::time::{Duration, Instant};

/// `sweep launch --follow` as the coordinator process, reaping quickly.
fn follow(c: &Cluster, sweep: &str) -> Child {
    c.credence()
        .args(["sweep", "launch", sweep, "--follow"])
        .args([
            "--reap-every",
            "1",
            "--stale-after",
            "5",
            "--lost-after",
            "15",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting the coordinator")
}

/// Waits until the coordinator has recorded the plan of `run` with `jobs` jobs.
fn wait_planned(c: &Cluster, run: &str, jobs: i64) {
    let start = Instant::now();
    loop {
        let tables = c.sql_i64("SELECT count(*) FROM pg_tables WHERE tablename = 'jobs'");
        if tables == 1
            && c.sql_i64(&format!("SELECT count(*) FROM jobs WHERE run_id = '{run}'")) == jobs
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the plan of {run} was not recorded"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(child: Child, within: Duration) -> std::process::Output {
    let start = Instant::now();
    let mut child = child;
    loop {
        if child.try_wait().expect("waiting").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > within {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "the coordinator did not finish within {within:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn wait_done(c: &Cluster, run: &str, at_least: i64) {
    let start = Instant::now();
    while c.done_jobs(run) < at_least {
        assert!(start.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn workers_killed_mid_job_lose_and_duplicate_nothing() {
    let Some(mut c) = Cluster::new("worker kills", false) else {
        return;
    };
    // 200 examples in shards of 2: 100 shards x 2 models x 4 modes = 800 jobs.
    let sweep = c.write_encoded_sweep("kills", 200, 2);
    let expected = c.embedded_rows(&sweep);
    let coordinator = follow(&c, &sweep.display().to_string());
    wait_planned(&c, "kills", 800);
    let mut live: Vec<usize> = (0..3).map(|_| c.spawn_worker(&[])).collect();
    // Kill until five kills have hit a worker mid-job (a job it had marked running and
    // not committed: afterwards the job is not `done` by that worker).
    let mut caught = Vec::new();
    let mut kills = 0;
    while caught.len() < 5 {
        assert!(kills < 30, "30 kills and only {} mid-job", caught.len());
        let kill = kills;
        kills += 1;
        let victim = live.remove(kill % live.len());
        let id = c.workers[victim].id.clone();
        let running =
            format!("SELECT job_key FROM jobs WHERE state = 'running' AND worker = '{id}' LIMIT 1");
        let start = Instant::now();
        let mut key = String::new();
        while key.is_empty() && start.elapsed() < Duration::from_secs(10) {
            key = c.sql(&running);
        }
        c.sigkill(victim);
        let committed_by_victim = format!(
            "SELECT count(*) FROM jobs WHERE job_key = '{key}' AND state = 'done' AND worker = '{id}'"
        );
        if !key.is_empty() && c.sql_i64(&committed_by_victim) == 0 {
            caught.push(key);
        }
        live.push(c.spawn_worker(&[]));
    }
    let total = c.sql_i64("SELECT count(*) FROM jobs");
    assert_eq!(total, 800);
    // No check that the sweep was still unfinished here: each caught kill already hit a
    // job in flight (checked below by its second attempt), and on a quiet machine three
    // workers may finish the rest while the last replacement starts.
    let out = wait_exit(coordinator, Duration::from_secs(300));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A job the victim was on when it died ran again on another worker.
    let mid_job = caught
        .iter()
        .filter(|k| c.sql_i64(&format!("SELECT attempts FROM jobs WHERE job_key = '{k}'")) >= 2)
        .count();
    eprintln!("{kills} kills, {mid_job} of them mid-job");
    assert!(mid_job >= 5, "only {mid_job} kills caught a worker mid-job");
    assert_eq!(c.pg_rows(), expected, "rows differ from a fault-free run");
    assert!(
        c.sql_i64("SELECT sum(attempts) FROM jobs") > total,
        "some job ran twice"
    );
}

/// A sweep of `examples` examples in shards of 1 (8 jobs each) under way: the
/// coordinator following it, three workers, a hundred jobs done. Returns the fault-free
/// rows and the coordinator.
fn sweep_under_way(c: &mut Cluster, run: &str, examples: usize) -> (ResultRows, Child) {
    let sweep = c.write_sweep(run, examples, 1);
    let expected = c.embedded_rows(&sweep);
    let coordinator = follow(c, &sweep.display().to_string());
    let jobs = 8 * examples as i64;
    wait_planned(c, run, jobs);
    for _ in 0..3 {
        c.spawn_worker(&[]);
    }
    wait_done(c, run, 100);
    assert!(c.done_jobs(run) < jobs, "the sweep ended before the fault");
    (expected, coordinator)
}

/// Waits for the coordinator to report the run complete, then compares the rows.
fn completes_with(c: &Cluster, coordinator: Child, expected: &ResultRows) {
    let out = wait_exit(coordinator, Duration::from_secs(300));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&c.pg_rows(), expected, "rows differ from a fault-free run");
    assert_eq!(
        c.sql_i64("SELECT count(*) FROM jobs WHERE state <> 'done'"),
        0
    );
}

#[test]
fn a_broker_restart_mid_sweep_loses_nothing() {
    let Some(mut c) = Cluster::new("broker restart", true) else {
        return;
    };
    let (expected, coordinator) = sweep_under_way(&mut c, "restart", 150);
    {
        let _stopped = BrokerStopped::stop();
        std::thread::sleep(Duration::from_secs(3));
    }
    completes_with(&c, coordinator, &expected);
    for i in 0..3 {
        assert!(
            c.workers[i].child.try_wait().unwrap().is_none(),
            "worker {i} exited: {}",
            c.worker_log(i)
        );
        let log = c.worker_log(i);
        assert!(
            log.contains("reconnecting") || log.contains("resubscribing"),
            "{log}"
        );
    }
}

#[test]
fn a_database_outage_of_30_seconds_loses_nothing() {
    let Some(mut c) = Cluster::new("database outage", true) else {
        return;
    };
    let (expected, coordinator) = sweep_under_way(&mut c, "outage", 125);
    {
        let _stopped = DatabaseStopped::stop();
        std::thread::sleep(Duration::from_secs(30));
    }
    completes_with(&c, coordinator, &expected);
    let retried = (0..3).any(|i| {
        c.worker_log(i)
            .contains("the store is unreachable; retrying")
    });
    assert!(retried, "no worker noticed the outage");
}

/// A sweep of one job (one example, sentence-split, base mode) in the test's folder.
fn one_job_sweep(c: &Cluster, name: &str) -> String {
    let sample = std::fs::read_to_string(workspace().join("examples/sample.jsonl"))
        .expect("the shipped sample");
    let first = sample.lines().next().expect("a sample line");
    std::fs::write(
        c.dir.path().join(format!("{name}.jsonl")),
        format!("{first}\n"),
    )
    .expect("dataset");
    let sweep = c.dir.path().join(format!("{name}.toml"));
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"{name}\"\nmodes = [\"base\"]\nshard_size = 1\n\n\
             [[models]]\nname = \"sentence-split\"\nbackend = \"sentence-split\"\n\n\
             [[datasets]]\nid = \"one\"\npath = \"{name}.jsonl\"\n"
        ),
    )
    .expect("sweep");
    sweep.display().to_string()
}

/// Waits until `pred` holds of a worker's log.
fn wait_log(c: &Cluster, i: usize, what: &str, within: Duration) {
    let start = Instant::now();
    while !c.worker_log(i).contains(what) {
        assert!(
            start.elapsed() < within,
            "worker {i} never logged {what:?}: {}",
            c.worker_log(i)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A rolling restart during a database outage: the worker holding the job (waiting for
/// the database) is stopped with SIGTERM four times, a replacement started each time,
/// more stops than the delivery limit (3) allows returns. Once the database is back the
/// job completes and nothing is dead-lettered: a shutdown is not a failed delivery.
#[test]
fn worker_restarts_during_a_database_outage_dead_letter_nothing() {
    let Some(mut c) = Cluster::new("restarts in an outage", false) else {
        return;
    };
    c.models = vec!["sentence-split".into()];
    let sweep = one_job_sweep(&c, "restarts");
    let proxy = DbProxy::start();
    let via = proxy.url(&c.db_url);
    let originals: Vec<usize> = (0..5).map(|_| c.spawn_worker_via(&via, &[])).collect();
    for &i in &originals {
        wait_log(&c, i, "consuming", Duration::from_secs(60));
    }
    proxy.down();
    c.ok(&["sweep", "launch", &sweep]);
    let mut stopped = Vec::new();
    for round in 0..4 {
        let start = Instant::now();
        let holder = loop {
            let holding = originals.iter().copied().find(|i| {
                !stopped.contains(i)
                    && c.worker_log(*i)
                        .contains("the store is unreachable; retrying")
            });
            if let Some(i) = holding {
                break i;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "round {round}: no worker holds the job"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let status = c.sigterm(holder, Duration::from_secs(30));
        assert!(
            status.success(),
            "worker {holder}: {}",
            c.worker_log(holder)
        );
        assert!(
            c.worker_log(holder)
                .contains("the message returns to its queue without using a delivery"),
            "{}",
            c.worker_log(holder)
        );
        stopped.push(holder);
        let replacement = c.spawn_worker_via(&via, &[]);
        wait_log(
            &c,
            replacement,
            "the store is unreachable; waiting for it",
            Duration::from_secs(30),
        );
    }
    proxy.up();
    c.wait_settled("restarts", Duration::from_secs(60));
    assert_eq!(c.sql("SELECT state FROM jobs"), "done");
    let dead = c.ok(&["dlq", "list"]);
    assert!(dead.trim().is_empty(), "dead letters: {dead}");
}

/// A model file that fails its load's checks: its job fails with one line naming the
/// file and the field, is dead-lettered once after the delivery limit (not once per
/// worker that tried it), and both workers go on serving the other model's job and stop
/// cleanly afterwards.
#[test]
fn a_crafted_model_file_is_dead_lettered_once_and_the_workers_go_on() {
    let Some(mut c) = Cluster::new("crafted model file", false) else {
        return;
    };
    let bad = c.dir.path().join("bad.gguf");
    write_crafted_gguf(&bad);
    let sweep = one_job_sweep(&c, "crafted");
    let text = std::fs::read_to_string(&sweep).expect("sweep");
    std::fs::write(
        &sweep,
        text.replace(
            "[[datasets]]",
            "[[models]]\nname = \"bad\"\nbackend = \"gguf\"\npath = \"bad.gguf\"\n\n[[datasets]]",
        ),
    )
    .expect("sweep");
    c.models = vec!["sentence-split".into(), "bad".into()];
    let workers = [c.spawn_worker(&[]), c.spawn_worker(&[])];
    c.ok(&["sweep", "launch", &sweep]);
    c.wait_settled("crafted", Duration::from_secs(90));
    assert_eq!(
        c.sql("SELECT string_agg(model || ':' || state || ':' || attempts, ' ' ORDER BY model) FROM jobs"),
        "bad:failed:3 sentence-split:done:1"
    );
    let reason = format!(
        "{}: GGUF metadata has no tokenizer.ggml.tokens",
        bad.display()
    );
    let error = c.sql("SELECT error FROM jobs WHERE model = 'bad'");
    assert!(error.contains(&reason), "{error}");
    let dead = c.ok(&["dlq", "list"]);
    let lines: Vec<&str> = dead.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one dead letter: {dead}");
    assert!(
        lines[0].contains("3 deliveries") && lines[0].contains(&reason),
        "{dead}"
    );
    for i in workers {
        let status = c.sigterm(i, Duration::from_secs(30));
        assert!(status.success(), "worker {i}: {}", c.worker_log(i));
    }
}
