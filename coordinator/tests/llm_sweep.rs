//! Sweeps with an LLM decomposer behind a local OpenAI-compatible server (real HTTP):
//! four workers of the distributed engine running all four modes at once make exactly
//! one base generation per example, and a second run makes none; the embedded engine
//! keeps many requests in flight against a slow server; `credence simulate-server`
//! serves a sweep.

#[path = "distributed/support.rs"]
mod support;

#[path = "../../worker/tests/support/llm_server.rs"]
mod llm_server;

#[path = "llm_sweep/afc.rs"]
mod afc;

use llm_server::{LlmServer, Reply};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::Cluster;

/// A runtime that keeps serving the test server while the test thread runs processes.
fn server_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// `n` distinct compound sentences, as a dataset file; their texts.
fn write_dataset(dir: &Path, name: &str, n: usize) -> (PathBuf, Vec<String>) {
    let mut data = String::new();
    let mut texts = Vec::new();
    for i in 0..n {
        let text = format!(
            "Station {i} reported heavy rain on Monday and the river rose by {i} centimetres."
        );
        let ex = serde_json::json!({
            "id": format!("e{i:04}"),
            "text": text,
            "references": [format!("Station {i} reported heavy rain on Monday."),
                           format!("The river rose by {i} centimetres.")],
        });
        data.push_str(&ex.to_string());
        data.push('\n');
        texts.push(text);
    }
    let path = dir.join(format!("{name}.jsonl"));
    std::fs::write(&path, data).expect("dataset");
    (path, texts)
}

fn write_sweep(
    dir: &Path,
    name: &str,
    base_url: &str,
    dataset: &Path,
    modes: &str,
    shard: u32,
) -> PathBuf {
    let sweep = dir.join(format!("{name}.toml"));
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"{name}\"\nmodes = [{modes}]\nshard_size = {shard}\n\n\
             [[models]]\nname = \"llm\"\npreset = \"openai\"\nbase_url = \"{base_url}\"\n\
             api_model = \"test-model\"\nmax_new_tokens = 256\n\n\
             [[datasets]]\nid = \"rain\"\npath = \"{}\"\n",
            dataset.display()
        ),
    )
    .expect("sweep");
    sweep
}

#[test]
fn four_workers_in_four_modes_make_one_base_generation_per_example() {
    let Some(mut c) = Cluster::new("llm exactly once", false) else {
        return;
    };
    let rt = server_runtime();
    // A little latency, so that the four mode jobs of a shard overlap on the workers.
    let server = rt.block_on(LlmServer::start(Duration::from_millis(30), |_, _| {
        Reply::Decompose
    }));
    let n = 48;
    let (dataset, texts) = write_dataset(c.dir.path(), "rain", n);
    let all_modes = "\"base\", \"repair\", \"self_repair\", \"all\"";
    let sweep = write_sweep(
        c.dir.path(),
        "llm1",
        &server.base_url(),
        &dataset,
        all_modes,
        4,
    );
    c.models = vec!["llm".into()];
    c.ok(&["sweep", "launch", &sweep.display().to_string()]);
    for _ in 0..4 {
        c.spawn_worker(&[]);
    }
    c.wait_settled("llm1", Duration::from_secs(180));
    assert_eq!(c.done_jobs("llm1"), (n as i64 / 4) * 4);
    let per_prompt = server.per_prompt();
    for t in &texts {
        assert_eq!(
            per_prompt.get(t),
            Some(&1),
            "one base generation of {t:?} for its four modes"
        );
    }
    assert_eq!(server.requests(), n, "no other model call");
    // The claims are the model's, parsed, in every mode's rows.
    assert_eq!(
        c.sql_i64(
            "SELECT count(*) FROM results WHERE run_id = 'llm1' AND jsonb_array_length(claims) = 2 \
             AND error IS NULL"
        ),
        (n * 4) as i64
    );
    assert_eq!(
        c.sql_i64("SELECT count(*) FROM generation_cache WHERE completion_tokens IS NOT NULL"),
        n as i64
    );
    assert_eq!(c.sql_i64("SELECT count(*) FROM generation_leases"), 0);

    // Launching the finished sweep again makes no call; nor does a new run of the same
    // model on the same examples (its jobs are new, its generations are cached).
    c.ok(&["sweep", "launch", &sweep.display().to_string()]);
    let again = write_sweep(
        c.dir.path(),
        "llm2",
        &server.base_url(),
        &dataset,
        all_modes,
        4,
    );
    c.ok(&["sweep", "launch", &again.display().to_string()]);
    c.wait_settled("llm2", Duration::from_secs(180));
    assert_eq!(c.done_jobs("llm2"), (n as i64 / 4) * 4);
    assert_eq!(server.requests(), n, "a second run makes no model call");
    drop(server);
}

/// `credence run SWEEP --db DB --quiet`, which must succeed.
fn run_embedded(sweep: &Path, db: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_credence"))
        .arg("run")
        .arg(sweep)
        .arg("--db")
        .arg(db)
        .arg("--quiet")
        .output()
        .expect("running credence run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_embedded_engine_keeps_many_requests_in_flight() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let rt = server_runtime();
    let server = rt.block_on(LlmServer::start(Duration::from_millis(200), |_, _| {
        Reply::Decompose
    }));
    let n = 1000;
    let (dataset, _) = write_dataset(dir.path(), "rain", n);
    let sweep = write_sweep(
        dir.path(),
        "fast",
        &server.base_url(),
        &dataset,
        "\"base\"",
        100,
    );
    let db = dir.path().join("fast.db");
    let started = Instant::now();
    run_embedded(&sweep, &db);
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(server.requests(), n);
    println!(
        "embedded sweep, {n} examples, 200 ms per answer: {:.1} examples/s, peak {} requests in flight",
        n as f64 / seconds,
        server.peak_in_flight()
    );
    assert!(
        server.peak_in_flight() >= 20,
        "peak in flight {}",
        server.peak_in_flight()
    );
    drop(server);
}

#[test]
fn decompose_prints_the_completion_and_the_claims() {
    let rt = server_runtime();
    let server = rt.block_on(LlmServer::start(Duration::ZERO, |_, user| {
        if user.contains("Please breakdown") {
            Reply::Answer("- The bridge collapsed.\n- The road was closed".into())
        } else {
            Reply::Answer(
                "Here are the claims:\n1. The bridge collapsed.\n2. The road was closed.".into(),
            )
        }
    }));
    let decompose = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_credence"))
            .args(["decompose", "The bridge collapsed and the road was closed."])
            .args(["--model", "openai", "--base-url", &server.base_url()])
            .args(["--api-model", "test-model"])
            .args(extra)
            .output()
            .expect("running credence decompose")
    };
    let out = decompose(&["--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON out");
    assert_eq!(
        json["claims"],
        serde_json::json!(["The bridge collapsed.", "The road was closed."])
    );
    assert!(json["completion"]
        .as_str()
        .unwrap()
        .starts_with("Here are the claims:"));
    assert_eq!(json["parse_failed"], false);

    let out = decompose(&["--prompt", "factscore"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("  2. The road was closed."), "{text}");
    let bodies = server.state.bodies.lock().unwrap().clone();
    let last = &bodies[bodies.len() - 1]["messages"];
    assert_eq!(
        last.as_array().unwrap().len(),
        1,
        "FActScore: one user message"
    );

    // The whole pipeline on the sentence: the model's answer is one compound claim, the
    // rule tier splits it, the LLM tier is not needed.
    let server2 = rt.block_on(LlmServer::start(Duration::ZERO, |_, _| {
        Reply::Answer("The bridge collapsed and the road was closed.".into())
    }));
    let out = Command::new(env!("CARGO_BIN_EXE_credence"))
        .args(["decompose", "The bridge collapsed and the road was closed."])
        .args(["--model", "openai", "--base-url", &server2.base_url()])
        .args(["--api-model", "test-model", "--mode", "all", "--json"])
        .output()
        .expect("running credence decompose --mode all");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON out");
    assert_eq!(
        json["claims"],
        serde_json::json!(["The bridge collapsed.", "The road was closed."])
    );
    assert_eq!(json["pipeline_version"], "gate+rule-1+self-repair-v1");
    assert_eq!(json["trace"]["gate"], "opened");
    assert_eq!(json["trace"]["early_exit"], true);
    assert_eq!(json["verifier"]["avr"], 0.0);
    assert_eq!(server2.requests(), 1, "the base call only");
    drop(server2);

    // A preset whose key variable is unset: one line that names the variable.
    let out = Command::new(env!("CARGO_BIN_EXE_credence"))
        .args(["decompose", "A sentence.", "--model", "gemini-2.5-flash"])
        .env_remove("GEMINI_API_KEY")
        .output()
        .expect("running credence decompose");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("GEMINI_API_KEY"), "{err}");
    drop(server);
}

/// Ends the simulated server process if a test fails before it stops it.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `credence simulate-server` behind an embedded sweep in all four modes: its base
/// decompositions are the conjunction oracle's (the baseline beside it in the sweep gives
/// the same claims), the 503s it sends at its seeded rate are retried, each answered
/// request is one stored generation, and on SIGINT it prints its counters and exits 0.
#[test]
fn the_simulated_server_serves_a_sweep_in_all_four_modes() {
    use std::io::{BufRead, BufReader, Read};
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut server = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_credence"))
            .args([
                "simulate-server",
                "--addr",
                "127.0.0.1:0",
                "--batch-limit",
                "8",
            ])
            .args([
                "--decode-tps",
                "2000",
                "--batch-tps",
                "8000",
                "--ttft-ms",
                "5",
            ])
            .args(["--rate-503", "0.1", "--seed", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("starting the simulated server"),
    );
    let mut stderr = BufReader::new(server.0.stderr.take().expect("stderr"));
    let mut first = String::new();
    stderr
        .read_line(&mut first)
        .expect("the server's first line");
    let base_url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .trim_end_matches(':')
        .to_string();
    let n = 40;
    let (dataset, _) = write_dataset(dir.path(), "rain", n);
    let sweep = dir.path().join("sim.toml");
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"sim\"\nmodes = [\"base\", \"repair\", \"self_repair\", \"all\"]\n\
             shard_size = 10\n\n[[models]]\nname = \"llm\"\npreset = \"openai\"\n\
             base_url = \"{base_url}\"\napi_model = \"qwen3-8b\"\nmax_new_tokens = 256\n\n\
             [[models]]\nname = \"oracle\"\nbackend = \"conjunction-oracle\"\n\n\
             [[datasets]]\nid = \"rain\"\npath = \"{}\"\n",
            dataset.display()
        ),
    )
    .expect("sweep");
    let db = dir.path().join("sim.db");
    run_embedded(&sweep, &db);
    let sql = |q: &str| {
        let o = Command::new("sqlite3").arg(&db).arg(q).output().unwrap();
        assert!(
            o.status.success(),
            "{q}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(sql("select count(*) from predictions"), (8 * n).to_string());
    let same = "select count(*) from predictions a join predictions b \
                on a.example_id = b.example_id and a.mode = b.mode \
                where a.mode = 'base' and a.model = 'llm' and b.model = 'oracle' \
                and a.claims_json = b.claims_json";
    assert_eq!(sql(same), n.to_string());
    let generations: u64 = sql("select count(*) from generation_cache")
        .parse()
        .unwrap();

    let status = Command::new("kill")
        .args(["-INT", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert!(server.0.wait().unwrap().success(), "{rest}");
    let counts: serde_json::Value = serde_json::from_str(rest.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {rest}"));
    assert_eq!(counts["answered"].as_u64(), Some(generations), "{counts}");
    assert!(generations >= n as u64, "{counts}");
    let unavailable = counts["unavailable"].as_u64().unwrap();
    assert!(unavailable > 0, "{counts}");
    assert_eq!(
        counts["requests"].as_u64(),
        Some(generations + unavailable),
        "{counts}"
    );

    // The run as a pilot of itself: `sweep plan --estimate` counts the jobs the launch
    // made and reads the run's answer lengths (the server's own count), self-repair calls
    // per example and CPU seconds per scored example.
    let plan = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_credence"))
            .args(["sweep", "plan"])
            .arg(&sweep)
            .args(["--estimate", "--pilot", "sim", "--db"])
            .arg(&db)
            .args(extra)
            .output()
            .unwrap()
    };
    let unnamed = plan(&[]);
    let said = String::from_utf8_lossy(&unnamed.stderr);
    assert!(
        !unnamed.status.success() && said.contains("llm") && said.contains("--server"),
        "{said}"
    );
    let out = plan(&["--server", "llm=100:800:8", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let jobs = |model: &str| {
        sql(&format!(
            "select count(*) from jobs where model = '{model}'"
        ))
    };
    assert_eq!(e["counts"]["models"][0]["jobs"].to_string(), jobs("llm"));
    assert_eq!(e["counts"]["models"][1]["jobs"].to_string(), jobs("oracle"));
    let g = &e["models"][0]["generation"];
    let tokens = counts["completion_tokens"].as_f64().unwrap() / generations as f64;
    assert_eq!(g["answer_tokens"]["source"], "pilot", "{e}");
    assert!(
        (g["answer_tokens"]["value"].as_f64().unwrap() - tokens).abs() < 1e-9,
        "{e}"
    );
    let calls: f64 =
        sql("select sum(llm_calls) from predictions where model = 'llm' and mode = 'all'")
            .parse()
            .unwrap();
    let all = &g["repair_calls"]["all"];
    assert_eq!(all["source"], "pilot");
    assert!(
        (all["value"].as_f64().unwrap() - (calls / n as f64 - 1.0)).abs() < 1e-9,
        "{e}"
    );
    // Ten examples a shard on one shared server with a batch of eight.
    assert_eq!(g["in_flight"], 8);
    assert!(e["models"][1]["generation"].is_null());
    for mode in ["base", "repair", "self_repair", "all"] {
        let cpu = &e["cpu"]["seconds_per_example"][mode];
        assert_eq!(cpu["source"], "pilot", "{e}");
        assert!(cpu["value"].as_f64().unwrap() > 0.0, "{e}");
    }
    let text = plan(&["--server", "llm=100:800:8", "--workers", "2"]);
    let text = String::from_utf8_lossy(&text.stdout);
    for line in [
        "credence.jobs.llm",
        "credence.aggregate",
        "pilot run sim",
        "wall: ",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
}
