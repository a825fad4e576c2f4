//! Watching a sweep, end to end: a real Prometheus (the Debian package) scrapes a worker,
//! the coordinator and RabbitMQ's `rabbitmq_prometheus` plugin during a short distributed
//! sweep: SmolLM2-135M (real GGUF weights) and a baseline, with the encoder, over two
//! datasets, one of them poisoned so that its jobs fail and are dead-lettered. Then:
//! - `/metrics` of the worker and of the coordinator serve every family, non-zero where
//!   the sweep did that work, family by family;
//! - every PromQL expression of `dashboards/*.json` (panels and template variables)
//!   returns data through Prometheus's HTTP API;
//! - every SQL query of the dashboards returns rows from the run's PostgreSQL database;
//! - every panel has a title, a unit and a description, on a provisioned datasource.
//!
//! Template variables are substituted as Grafana would: `$run` by the run, a multi-value
//! `$model` by a regex in PromQL and by a quoted list in SQL, `$__rate_interval` by a
//! window that spans the whole sweep.

use super::support::{block_on, skip, workspace, Cluster};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RUN: &str = "watched";
const MODELS: [&str; 2] = ["smollm2", "conjunction-oracle"];
const DATASETS: [&str; 2] = ["good", "bad"];
/// The plugin's port on the test broker.
const RABBITMQ_METRICS: &str = "127.0.0.1:15692";

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn smollm2() -> Option<PathBuf> {
    let dir = std::env::var_os("CREDENCE_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("models"));
    let file = dir.join("SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf");
    if file.is_file() {
        return Some(file);
    }
    skip::skip(&format!("{} not found (run scripts/setup)", file.display()))
}

fn prometheus_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain([PathBuf::from("/usr/bin")])
            .map(|d| d.join("prometheus"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        return skip::skip(
            "prometheus is not installed (Debian package `prometheus`; scripts/setup --services installs it)",
        );
    }
    found
}

fn rabbitmq_plugin_up() -> bool {
    let up = RABBITMQ_METRICS
        .parse()
        .is_ok_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok());
    if !up {
        skip::skip::<()>(&format!(
            "RabbitMQ's rabbitmq_prometheus plugin does not answer on {RABBITMQ_METRICS} (`rabbitmq-plugins enable rabbitmq_prometheus`; scripts/setup --services enables it)"
        ));
    }
    up
}

/// Two datasets of sample sentences (4 and 2 examples, shards of 2) and the sweep.
fn write_sweep(dir: &Path) -> PathBuf {
    let texts = [
        "The bridge collapsed in 2019 and the road to Springfield was blocked.",
        "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
        "The council approved the budget, but the opposition voted against it.",
        "Apple sold 20 million phones in March because demand in China rose.",
        "The river flooded the town and the school closed for a week.",
        "Tesla opened a factory in Berlin and hired 3,000 workers.",
    ];
    for (dataset, range) in [("good", 0..4), ("bad", 4..6)] {
        let mut data = String::new();
        for i in range {
            let ex = serde_json::json!({"id": format!("{dataset}{i}"), "text": texts[i], "references": [texts[i]]});
            data.push_str(&ex.to_string());
            data.push('\n');
        }
        std::fs::write(dir.join(format!("{dataset}.jsonl")), data).expect("dataset");
    }
    let sweep = dir.join("watched.toml");
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"{RUN}\"\nmodes = [\"base\", \"repair\", \"self_repair\", \"all\"]\nshard_size = 2\n\n\
             [encoder]\npreset = \"all-MiniLM-L6-v2\"\n\n\
             [[models]]\nname = \"smollm2\"\npreset = \"smollm2-135m-instruct\"\nprompt = \"credence\"\nmax_new_tokens = 48\n\n\
             [[models]]\nname = \"conjunction-oracle\"\nbackend = \"conjunction-oracle\"\n\n\
             [[datasets]]\nid = \"good\"\npath = \"good.jsonl\"\n\n\
             [[datasets]]\nid = \"bad\"\npath = \"bad.jsonl\"\n\n\
             [[comparisons]]\na = \"conjunction-oracle/base\"\nb = \"smollm2/base\"\ndataset = \"good\"\n"
        ),
    )
    .expect("sweep");
    sweep
}

/// A Prometheus of the test's own, scraping every second.
fn start_prometheus(binary: &Path, dir: &Path, worker: u16, coordinator: u16) -> (Killed, u16) {
    let port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n\
             \x20 - job_name: credence-worker\n    static_configs: [{{targets: [\"127.0.0.1:{worker}\"]}}]\n\
             \x20 - job_name: credence-coordinator\n    static_configs: [{{targets: [\"127.0.0.1:{coordinator}\"]}}]\n\
             {}",
            rabbitmq_scrape_jobs()
        ),
    )
    .expect("prometheus.yml");
    let log = std::fs::File::create(dir.join("prometheus.log")).expect("prometheus log");
    let child = Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting prometheus");
    let prometheus = Killed(child);
    let start = Instant::now();
    while get(&format!("http://127.0.0.1:{port}/-/ready")).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "prometheus not ready after 60 s: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (prometheus, port)
}

/// The RabbitMQ scrape jobs of `deploy/prometheus.yml` (the broker-wide `/metrics` and
/// the per-queue `/metrics/detailed`), pointed at the test broker: the test scrapes what
/// a deployment scrapes.
fn rabbitmq_scrape_jobs() -> String {
    let deployed = std::fs::read_to_string(workspace().join("deploy/prometheus.yml"))
        .expect("deploy/prometheus.yml");
    let jobs: String = deployed
        .split("\n  - job_name: ")
        .skip(1)
        .filter(|job| job.starts_with("rabbitmq"))
        .map(|job| format!("  - job_name: {}\n", job.trim_end()))
        .collect();
    assert!(
        jobs.contains("/metrics/detailed"),
        "deploy/prometheus.yml must scrape RabbitMQ's plugin, per-queue metrics (/metrics/detailed) included:\n{deployed}"
    );
    jobs.replace("rabbitmq:15692", RABBITMQ_METRICS)
}

fn get(url: &str) -> Result<String, String> {
    block_on(async {
        let r = reqwest::get(url).await.map_err(|e| e.to_string())?;
        let status = r.status();
        let body = r.text().await.map_err(|e| e.to_string())?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!("{status}: {body}"))
        }
    })
}

/// An instant query; the result list (a scalar as one result).
fn query(prometheus: u16, expr: &str) -> Result<Vec<Value>, String> {
    let body = block_on(async {
        reqwest::Client::new()
            .get(format!("http://127.0.0.1:{prometheus}/api/v1/query"))
            .query(&[("query", expr)])
            .send()
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())
    })?;
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if v["status"] != "success" {
        return Err(format!("{}: {}", v["errorType"], v["error"]));
    }
    Ok(match &v["data"]["result"] {
        Value::Array(a) => a.clone(),
        other => vec![serde_json::json!({"value": other})],
    })
}

/// Whether any result has a number that is not NaN.
fn has_number(results: &[Value]) -> bool {
    results.iter().any(|r| {
        let values: Vec<&Value> = match (&r["value"], &r["values"]) {
            (Value::Array(v), _) => vec![&v[1]],
            (_, Value::Array(vs)) => vs.iter().map(|v| &v[1]).collect(),
            _ => vec![],
        };
        values.iter().any(|v| {
            v.as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .is_some_and(|x| !x.is_nan())
        })
    })
}

/// `/metrics` text as (series, value) pairs.
fn samples(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The sum of the samples of `name` whose labels contain every `label="value"` of
/// `with`; `None` when the family serves no such sample.
fn total(samples: &[(String, f64)], name: &str, with: &[&str]) -> Option<f64> {
    let matching: Vec<f64> = samples
        .iter()
        .filter(|(s, _)| {
            let (n, labels) = s.split_once('{').unwrap_or((s.as_str(), ""));
            n == name && with.iter().all(|w| labels.contains(w))
        })
        .map(|(_, v)| *v)
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}

/// Every query of a dashboard: (panel or variable, datasource uid, query text).
fn queries(dashboard: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let uid = |ds: &Value| ds["uid"].as_str().unwrap_or_default().to_string();
    let mut stack: Vec<&Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    while let Some(panel) = stack.pop() {
        stack.extend(panel["panels"].as_array().into_iter().flatten());
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or_default().to_string();
        for t in panel["targets"].as_array().into_iter().flatten() {
            let ds = if t["datasource"].is_object() {
                uid(&t["datasource"])
            } else {
                uid(&panel["datasource"])
            };
            let text = t["expr"]
                .as_str()
                .or(t["rawSql"].as_str())
                .unwrap_or_default();
            out.push((format!("panel {title:?}"), ds, text.to_string()));
        }
    }
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] != "query" {
            continue;
        }
        let text = match &v["query"] {
            Value::String(s) => s.clone(),
            q => q["query"].as_str().unwrap_or_default().to_string(),
        };
        out.push((
            format!("variable ${}", v["name"].as_str().unwrap_or_default()),
            uid(&v["datasource"]),
            text,
        ));
    }
    out
}

/// `text` with the dashboards' variables replaced as Grafana would for this run; fails
/// on a variable it does not know.
fn substitute(text: &str, sql: bool) -> String {
    let list = |values: &[&str]| {
        if sql {
            values
                .iter()
                .map(|v| format!("'{v}'"))
                .collect::<Vec<_>>()
                .join(",")
        } else {
            values.join("|")
        }
    };
    let mut out = text.to_string();
    for (name, value) in [
        ("__rate_interval", "10m".to_string()),
        ("__interval", "15s".to_string()),
        ("__range", "10m".to_string()),
        ("run", RUN.to_string()),
        ("model", list(&MODELS)),
        ("dataset", list(&DATASETS)),
        ("instance", ".+".to_string()),
        ("queue", ".+".to_string()),
    ] {
        out = out
            .replace(&format!("${{{name}}}"), &value)
            .replace(&format!("${name}"), &value);
    }
    assert!(!out.contains('$'), "an unknown template variable in {text}");
    out
}

#[test]
fn dashboards_return_data_from_a_watched_sweep() {
    let Some(mut c) = Cluster::new("observability", false) else {
        return;
    };
    let (Some(_), Some(prometheus_bin)) = (smollm2(), prometheus_binary()) else {
        return;
    };
    if !rabbitmq_plugin_up() {
        return;
    }
    c.models = MODELS.iter().map(|m| m.to_string()).collect();
    let dir = c.dir.path().to_path_buf();
    let sweep = write_sweep(&dir);
    let (worker_port, coordinator_port) = (free_port(), free_port());
    let (_prometheus, prom) =
        start_prometheus(&prometheus_bin, &dir, worker_port, coordinator_port);

    c.ok(&[
        "sweep",
        "launch",
        &sweep.display().to_string(),
        "--plan-only",
    ]);
    // The poison: an example of the `bad` dataset is missing from the store, so its
    // jobs fail on every delivery and are dead-lettered.
    c.sql(
        "DELETE FROM examples WHERE position = 1 AND dataset_hash = \
         (SELECT dataset_hash FROM run_datasets WHERE dataset_id = 'bad')",
    );
    c.ok(&["sweep", "resume", RUN]);
    let _coordinator = Killed(
        c.credence()
            .args(["coordinator", "serve", "--reap-every", "0.5"])
            .args(["--metrics-addr", &format!("127.0.0.1:{coordinator_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the coordinator"),
    );
    c.spawn_worker(&["--metrics-addr", &format!("127.0.0.1:{worker_port}")]);
    c.wait_settled(RUN, Duration::from_secs(600));
    // 2 models x 4 modes: the good dataset's 2 shards done, the bad one's failed.
    assert_eq!(c.done_jobs(RUN), 16);
    assert_eq!(
        c.sql_i64(&format!(
            "SELECT count(*) FROM failures WHERE run_id = '{RUN}'"
        )),
        8
    );
    // The coordinator's next pass and a few scrapes after the last change.
    std::thread::sleep(Duration::from_secs(4));

    // Every target up.
    let targets: Value = serde_json::from_str(
        &get(&format!("http://127.0.0.1:{prom}/api/v1/targets")).expect("targets"),
    )
    .expect("targets JSON");
    let active = targets["data"]["activeTargets"]
        .as_array()
        .expect("targets");
    assert!(active.len() >= 4, "{targets}");
    for t in active {
        assert_eq!(t["health"], "up", "a scrape target is down: {t}");
    }

    check_worker_families(
        &get(&format!("http://127.0.0.1:{worker_port}/metrics")).expect("worker /metrics"),
    );
    check_coordinator_families(
        &get(&format!("http://127.0.0.1:{coordinator_port}/metrics"))
            .expect("coordinator /metrics"),
    );

    let provisioned = std::fs::read_to_string(
        workspace().join("dashboards/provisioning/datasources/credence.yaml"),
    )
    .expect("the datasource provisioning file");
    let mut dashboards: Vec<PathBuf> = std::fs::read_dir(workspace().join("dashboards"))
        .expect("dashboards/")
        .map(|e| e.expect("a dashboards/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    dashboards.sort();
    let titles: Vec<String> = dashboards
        .iter()
        .map(|p| {
            let d: Value = serde_json::from_str(&std::fs::read_to_string(p).expect("a dashboard"))
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            d["title"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    for want in ["Sweep", "Workers", "Queue", "Results"] {
        assert!(
            titles.iter().any(|t| t.ends_with(want)),
            "no {want} dashboard in {titles:?}"
        );
    }
    let mut failures = Vec::new();
    let mut counted = BTreeMap::new();
    for path in &dashboards {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let d: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        failures.extend(panel_defects(&name, &d));
        for (what, uid, text) in queries(&d) {
            assert!(
                provisioned.contains(&format!("uid: {uid}")),
                "{name} {what}: datasource uid {uid:?} is not provisioned"
            );
            let outcome = match uid.as_str() {
                "credence-prometheus" => check_promql(prom, &text),
                "credence-postgres" => check_sql(&c, &text),
                other => Err(format!("unknown datasource {other}")),
            };
            *counted.entry(uid).or_insert(0) += 1;
            if let Err(e) = outcome {
                failures.push(format!("{name} {what}: {e}\n    {text}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "dashboard queries without data ({counted:?} checked):\n{}",
        failures.join("\n")
    );
    assert!(
        counted.get("credence-prometheus").copied().unwrap_or(0) >= 20,
        "{counted:?}"
    );
    assert!(
        counted.get("credence-postgres").copied().unwrap_or(0) >= 10,
        "{counted:?}"
    );
}

/// A panel without a title, unit or description.
fn panel_defects(name: &str, d: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().into_iter().flatten() {
        let title = p["title"].as_str().unwrap_or_default();
        for (what, value) in [
            ("title", &p["title"]),
            ("description", &p["description"]),
            ("unit", &p["fieldConfig"]["defaults"]["unit"]),
        ] {
            if value.as_str().is_none_or(|s| s.trim().is_empty()) {
                out.push(format!("{name} panel {title:?}: no {what}"));
            }
        }
    }
    out
}

fn check_promql(prometheus: u16, expr: &str) -> Result<(), String> {
    // `label_values(metric, label)` is Grafana's: the metric must have series with it.
    if let Some(args) = expr
        .strip_prefix("label_values(")
        .and_then(|r| r.strip_suffix(')'))
    {
        let (metric, label) = args
            .rsplit_once(',')
            .ok_or("label_values without a label")?;
        let label = label.trim();
        let results = query(prometheus, &substitute(metric.trim(), false))?;
        return if results.iter().any(|r| r["metric"][label].is_string()) {
            Ok(())
        } else {
            Err(format!("no series with label {label}"))
        };
    }
    let results = query(prometheus, &substitute(expr, false))?;
    if has_number(&results) {
        Ok(())
    } else {
        Err(format!(
            "no data ({} series, none with a number)",
            results.len()
        ))
    }
}

fn check_sql(c: &Cluster, sql: &str) -> Result<(), String> {
    let sql = substitute(sql, true);
    let out = Command::new("psql")
        .arg(&c.db_url)
        .args(["-v", "ON_ERROR_STOP=1", "-Atqc", &sql])
        .output()
        .map_err(|e| format!("psql: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    if String::from_utf8_lossy(&out.stdout).trim().is_empty() {
        return Err("no rows".into());
    }
    Ok(())
}

/// The worker's families after the sweep, family by family: each served, and non-zero
/// where the sweep did that work.
fn check_worker_families(text: &str) {
    let s = samples(text);
    let positive = |name: &str, with: &[&str]| {
        let v = total(&s, name, with);
        assert!(
            v.is_some_and(|v| v > 0.0),
            "{name}{with:?}: {v:?}, expected > 0 in:\n{text}"
        );
    };
    let served = |name: &str, with: &[&str]| {
        assert!(
            total(&s, name, with).is_some(),
            "{name}{with:?} is not served:\n{text}"
        );
    };
    positive("credence_jobs_total", &[r#"outcome="done""#]);
    positive("credence_jobs_total", &[r#"outcome="failed""#]);
    positive("credence_jobs_total", &[r#"outcome="retry""#]);
    for model in MODELS {
        positive(
            "credence_examples_processed_total",
            &[&format!(r#"model="{model}""#)],
        );
    }
    // The LLM's jobs run every stage, the self-repair tier included.
    for stage in [
        "decompose",
        "parse",
        "embed",
        "verify",
        "repair",
        "self_repair",
        "metrics",
        "store",
    ] {
        positive(
            "credence_stage_seconds_count",
            &[r#"model="smollm2""#, &format!(r#"stage="{stage}""#)],
        );
    }
    positive("credence_llm_prompt_tokens_total", &[r#"model="smollm2""#]);
    positive(
        "credence_llm_generated_tokens_total",
        &[r#"model="smollm2""#],
    );
    positive(
        "credence_llm_request_seconds_count",
        &[r#"model="smollm2""#],
    );
    // A local model is never retried: served, at 0.
    served("credence_llm_retries_total", &[r#"model="smollm2""#]);
    // Served from the model's first request (the count depends on what SmolLM2 writes).
    served(
        "credence_llm_generations_at_limit_total",
        &[r#"model="smollm2""#],
    );
    for cache in ["generation", "embedding"] {
        // The four modes of an example share its base generation and its claims'
        // embeddings: the first job misses, the others hit.
        positive(
            "credence_cache_hits_total",
            &[&format!(r#"cache="{cache}""#)],
        );
        positive(
            "credence_cache_misses_total",
            &[&format!(r#"cache="{cache}""#)],
        );
    }
    positive("credence_dead_letters_total", &[r#"reason="failed""#]);
    served("credence_dead_letters_total", &[r#"reason="unreadable""#]);
    positive("credence_job_seconds_count", &[r#"outcome="done""#]);
    positive("credence_worker_up", &[]);
    positive("credence_worker_current_model", &[]);
    positive("credence_worker_deliveries_total", &[]);
    positive("credence_worker_job_seconds_count", &[]);
}

/// The coordinator's families: the run's jobs by state, examples done, ETA (0: only the
/// failed jobs are left, and they wait for `resume`), re-published heartbeats.
fn check_coordinator_families(text: &str) {
    let s = samples(text);
    let run = format!(r#"run="{RUN}""#);
    assert_eq!(
        total(&s, "credence_run_jobs", &[&run, r#"state="done""#]),
        Some(16.0),
        "{text}"
    );
    assert_eq!(
        total(&s, "credence_run_jobs", &[&run, r#"state="failed""#]),
        Some(8.0),
        "{text}"
    );
    // 4 examples x 2 models x 4 modes.
    assert_eq!(
        total(&s, "credence_run_examples_done", &[&run]),
        Some(32.0),
        "{text}"
    );
    assert_eq!(
        total(&s, "credence_run_eta_seconds", &[&run]),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        total(&s, "credence_stale_heartbeats_republished_total", &[]),
        Some(0.0),
        "{text}"
    );
}
