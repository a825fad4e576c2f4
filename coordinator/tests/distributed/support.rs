//! The harness of the distributed-engine tests: a database and a queue namespace of the
//! test's own (dropped after), `credence` processes with the servers' URLs in their
//! environment, worker processes that are killed when the test ends, a lock that keeps
//! the tests that stop a server apart from all others, guards that always restart a
//! stopped server, and row-for-row reads of results from PostgreSQL and SQLite.

#![allow(dead_code)]

#[path = "../../../core/tests/support/skip.rs"]
pub mod skip;

use credence_infra::queue::rabbitmq::{RabbitQueue, RabbitSettings};
use sqlx::Row;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// One result row as text; the same for a PostgreSQL and a SQLite row, so the two
/// engines' rows compare as strings (floats in full precision).
macro_rules! row_text {
    ($r:expr) => {{
        let r = $r;
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{:?}|{:?}",
            r.get::<String, _>(0),
            r.get::<String, _>(1),
            r.get::<String, _>(2),
            r.get::<String, _>(3),
            r.get::<String, _>(4),
            r.get::<String, _>(5),
            r.get::<String, _>(6),
            r.get::<String, _>(7),
            r.get::<String, _>(8),
            r.get::<i64, _>(9),
            r.get::<Option<String>, _>(10),
            r.get::<Option<String>, _>(11),
        )
    }};
}

/// One stored metric value as text: every metric of every example, whatever the list.
macro_rules! metric_text {
    ($r:expr) => {{
        let r = $r;
        format!(
            "{}|{}|{}|{:?}",
            r.get::<String, _>(0),
            r.get::<String, _>(1),
            r.get::<String, _>(2),
            r.get::<f64, _>(3),
        )
    }};
}

/// One `aggregates` row as text (floats in full precision).
macro_rules! aggregate_text {
    ($r:expr) => {{
        let r = $r;
        format!(
            "{}|{}|{}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            r.get::<String, _>(0),
            r.get::<String, _>(1),
            r.get::<String, _>(2),
            r.get::<String, _>(3),
            r.get::<String, _>(4),
            r.get::<i64, _>(5),
            r.get::<f64, _>(6),
            r.get::<Option<f64>, _>(7),
            r.get::<Option<f64>, _>(8),
            r.get::<Option<i64>, _>(9),
            r.get::<Option<i64>, _>(10),
            r.get::<Option<String>, _>(11),
        )
    }};
}

/// One `comparisons` row as text (floats in full precision).
macro_rules! comparison_text {
    ($r:expr) => {{
        let r = $r;
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
            r.get::<String, _>(0),
            r.get::<String, _>(1),
            r.get::<String, _>(2),
            r.get::<String, _>(3),
            r.get::<String, _>(4),
            r.get::<String, _>(5),
            r.get::<String, _>(6),
            r.get::<i64, _>(7),
            r.get::<f64, _>(8),
            r.get::<Option<f64>, _>(9),
            r.get::<Option<f64>, _>(10),
            r.get::<Option<f64>, _>(11),
            r.get::<Option<f64>, _>(12),
            r.get::<Option<f64>, _>(13),
            r.get::<Option<i64>, _>(14),
            r.get::<Option<i64>, _>(15),
            r.get::<Option<String>, _>(16),
        )
    }};
}

/// Every row of `$sql` from `$pool` (either engine's; inside an async block).
macro_rules! fetch {
    ($pool:expr, $sql:expr) => {
        sqlx::query($sql)
            .fetch_all($pool)
            .await
            .unwrap_or_else(|e| panic!("{e}:\n{}", $sql))
    };
}

/// A run's result rows from `$pool` (either engine's pool, taken), in order and as text.
macro_rules! read_results {
    ($pool:expr) => {{
        let pool = $pool;
        ResultRows {
            predictions: fetch!(&pool, RESULT_ROWS)
                .iter()
                .map(|r| row_text!(r))
                .collect(),
            metrics: fetch!(&pool, METRIC_ROWS)
                .iter()
                .map(|r| metric_text!(r))
                .collect(),
        }
    }};
}

/// A run's bootstrap rows from `$pool` (either engine's pool, taken), sorted, as text.
macro_rules! read_stats {
    ($pool:expr) => {{
        let pool = $pool;
        StatsRows::sorted(
            fetch!(&pool, AGGREGATE_ROWS)
                .iter()
                .map(|r| aggregate_text!(r))
                .collect(),
            fetch!(&pool, COMPARISON_ROWS)
                .iter()
                .map(|r| comparison_text!(r))
                .collect(),
        )
    }};
}

/// Tests that stop a server take it exclusively; every other test shares it.
static SERVERS: RwLock<()> = RwLock::new(());

pub enum ServerLock {
    Shared(RwLockReadGuard<'static, ()>),
    Exclusive(RwLockWriteGuard<'static, ()>),
}

pub fn pg_admin_url() -> String {
    std::env::var("CREDENCE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

pub fn broker_url() -> String {
    std::env::var("CREDENCE_TEST_BROKER_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into())
}

fn reachable(addr: &str) -> bool {
    addr.parse()
        .ok()
        .is_some_and(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
}

/// Whether the servers answer; under CI=true their absence fails the test.
pub fn servers_available(test: &str) -> bool {
    let (pg, mq) = (reachable("127.0.0.1:5432"), reachable("127.0.0.1:5672"));
    if pg && mq {
        return true;
    }
    let missing = format!(
        "{test}: needs PostgreSQL on 127.0.0.1:5432 ({}) and RabbitMQ on 127.0.0.1:5672 ({}); run scripts/setup --services",
        if pg { "up" } else { "down" },
        if mq { "up" } else { "down" }
    );
    skip::skip::<()>(&missing);
    false
}

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .arg(url)
        .args(["-v", "ON_ERROR_STOP=1", "-Atqc", sql])
        .output()
        .expect("psql is installed with PostgreSQL");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub struct Worker {
    pub id: String,
    pub child: Child,
    pub log: PathBuf,
}

/// One test's servers, files and processes.
pub struct Cluster {
    pub name: String,
    pub db_url: String,
    pub namespace: String,
    pub dir: tempfile::TempDir,
    pub workers: Vec<Worker>,
    pub models: Vec<String>,
    _lock: ServerLock,
}

impl Cluster {
    /// A cluster for a test; `None` (skip) when the servers are missing outside CI.
    pub fn new(test: &str, exclusive: bool) -> Option<Cluster> {
        let lock = if exclusive {
            ServerLock::Exclusive(SERVERS.write().unwrap_or_else(|p| p.into_inner()))
        } else {
            ServerLock::Shared(SERVERS.read().unwrap_or_else(|p| p.into_inner()))
        };
        if !servers_available(test) {
            return None;
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("credence_t_{}", &id[..16]);
        psql(&pg_admin_url(), &format!("CREATE DATABASE {name}"));
        let admin = pg_admin_url();
        let base = admin.rsplit_once('/').map_or(admin.as_str(), |(b, _)| b);
        Some(Cluster {
            db_url: format!("{base}/{name}"),
            name,
            namespace: format!("credence-t-{}", &id[..12]),
            dir: tempfile::tempdir().expect("a temp dir"),
            workers: Vec::new(),
            models: vec!["sentence-split".into(), "conjunction-oracle".into()],
            _lock: lock,
        })
    }

    /// `credence` with this cluster's servers in its environment.
    pub fn credence(&self) -> Command {
        self.command(env!("CARGO_BIN_EXE_credence"))
    }

    /// `program` with this cluster's servers in its environment (e.g. `script`, which
    /// runs `credence` under a pseudo-terminal).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("RUST_LOG", "warn")
            .env("CREDENCE_DATABASE_URL", &self.db_url)
            .env("CREDENCE_BROKER_URL", broker_url())
            .env("CREDENCE_QUEUE_NAMESPACE", &self.namespace)
            .env_remove("CREDENCE_DELIVERY_LIMIT");
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.credence()
            .args(args)
            .output()
            .expect("running credence")
    }

    /// Runs and asserts success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "credence {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    pub fn sql(&self, sql: &str) -> String {
        psql(&self.db_url, sql)
    }

    pub fn sql_i64(&self, sql: &str) -> i64 {
        self.sql(sql)
            .parse()
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// A RabbitMQ connection in this cluster's queue namespace (call inside `block_on`).
    pub async fn queue(&self) -> credence_infra::queue::rabbitmq::RabbitQueue {
        let mut s = credence_infra::queue::rabbitmq::RabbitSettings::new(&broker_url());
        s.namespace = self.namespace.clone();
        credence_infra::queue::rabbitmq::RabbitQueue::connect(s)
            .await
            .expect("connecting to the test's broker")
    }

    /// Starts a worker process for both baseline models.
    pub fn spawn_worker(&mut self, extra: &[&str]) -> usize {
        let db = self.db_url.clone();
        self.spawn_worker_via(&db, extra)
    }

    /// Starts a worker process that reaches the database at `db_url` (a proxy).
    pub fn spawn_worker_via(&mut self, db_url: &str, extra: &[&str]) -> usize {
        let id = format!("w{}", self.workers.len());
        let log = self.dir.path().join(format!("{id}.log"));
        let file = std::fs::File::create(&log).expect("worker log");
        let models = self.models.join(",");
        let child = self
            .credence()
            .env("RUST_LOG", "info")
            .env("CREDENCE_DATABASE_URL", db_url)
            .args([
                "worker",
                "--models",
                &models,
                "--heartbeat",
                "0.5",
                "--grace",
                "20",
            ])
            .args(["--worker-id", &id])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("starting a worker");
        self.workers.push(Worker { id, child, log });
        self.workers.len() - 1
    }

    pub fn sigkill(&mut self, i: usize) {
        let w = &mut self.workers[i];
        let _ = w.child.kill();
        let _ = w.child.wait();
    }

    /// SIGTERM; the worker's exit status.
    pub fn sigterm(&mut self, i: usize, within: Duration) -> ExitStatus {
        let w = &mut self.workers[i];
        let status = Command::new("kill")
            .args(["-TERM", &w.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let start = Instant::now();
        loop {
            if let Some(s) = w.child.try_wait().expect("waiting for a worker") {
                return s;
            }
            assert!(start.elapsed() < within, "worker {} ignored SIGTERM", w.id);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn worker_log(&self, i: usize) -> String {
        std::fs::read_to_string(&self.workers[i].log).unwrap_or_default()
    }

    /// Jobs of the run not yet settled (planned, queued or running).
    pub fn open_jobs(&self, run: &str) -> i64 {
        self.sql_i64(&format!(
            "SELECT count(*) FROM jobs WHERE run_id = '{run}' AND state IN ('planned', 'queued', 'running')"
        ))
    }

    pub fn done_jobs(&self, run: &str) -> i64 {
        self.sql_i64(&format!(
            "SELECT count(*) FROM jobs WHERE run_id = '{run}' AND state = 'done'"
        ))
    }

    /// Waits until no job is open and every configuration with all jobs done is
    /// aggregated.
    pub fn wait_settled(&self, run: &str, within: Duration) {
        let start = Instant::now();
        loop {
            let open = self.open_jobs(run);
            let aggregating = self.sql_i64(&format!(
                "SELECT count(*) FROM configs WHERE run_id = '{run}' AND state = 'aggregating'"
            ));
            if open == 0 && aggregating == 0 {
                return;
            }
            assert!(
                start.elapsed() < within,
                "run {run} not settled after {within:?}: {open} open jobs, {aggregating} aggregating; logs:\n{}",
                self.workers.iter().map(|w| std::fs::read_to_string(&w.log).unwrap_or_default()).collect::<Vec<_>>().join("\n")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs the embedded engine on the same sweep: the fault-free reference.
    pub fn embedded_rows(&self, sweep: &Path) -> ResultRows {
        let db = self.dir.path().join("embedded.db");
        let out = Command::new(env!("CARGO_BIN_EXE_credence"))
            .arg("run")
            .arg(sweep)
            .arg("--db")
            .arg(&db)
            .args(["--quiet", "--workers", "2"])
            .output()
            .expect("running credence run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        block_on(async { read_results!(self.embedded_pool().await) })
    }

    /// The embedded run's database made by [`Cluster::embedded_rows`].
    async fn embedded_pool(&self) -> sqlx::SqlitePool {
        let db = self.dir.path().join("embedded.db");
        sqlx::SqlitePool::connect(&format!("sqlite://{}", db.display()))
            .await
            .expect("opening the embedded results")
    }

    /// The distributed run's database.
    async fn pg_pool(&self) -> sqlx::PgPool {
        sqlx::PgPool::connect(&self.db_url)
            .await
            .expect("connecting")
    }

    /// Runs a query on the embedded run made by [`Cluster::embedded_rows`]; returns how
    /// many rows it gave.
    pub fn embedded_query(&self, sql: &str) -> usize {
        block_on(async { fetch!(&self.embedded_pool().await, sql).len() })
    }

    /// The bootstrap rows of the embedded run made by [`Cluster::embedded_rows`].
    pub fn embedded_stats(&self) -> StatsRows {
        block_on(async { read_stats!(self.embedded_pool().await) })
    }

    /// The distributed run's bootstrap rows, in the same order and text.
    pub fn pg_stats(&self) -> StatsRows {
        block_on(async { read_stats!(self.pg_pool().await) })
    }

    /// The distributed run's result rows, in the same order and text.
    pub fn pg_rows(&self) -> ResultRows {
        block_on(async { read_results!(self.pg_pool().await) })
    }

    /// Writes a sweep over `n` examples (the sample's, cycled with fresh ids) to the
    /// test's folder.
    pub fn write_sweep(&self, name: &str, n: usize, shard_size: u32) -> PathBuf {
        self.write_generated_sweep(name, n, shard_size, false)
    }

    /// Like [`Cluster::write_sweep`], but every example's text is made unique and the
    /// sweep embeds claims with all-MiniLM-L6-v2, so each job does real encoder work (tens
    /// of milliseconds rather than a few database round trips): a kill then lands mid-job
    /// far more often.
    pub fn write_encoded_sweep(&self, name: &str, n: usize, shard_size: u32) -> PathBuf {
        self.write_generated_sweep(name, n, shard_size, true)
    }

    fn write_generated_sweep(
        &self,
        name: &str,
        n: usize,
        shard_size: u32,
        encoder: bool,
    ) -> PathBuf {
        let sample = std::fs::read_to_string(workspace().join("examples/sample.jsonl"))
            .expect("the shipped sample");
        let lines: Vec<serde_json::Value> = sample
            .lines()
            .map(|l| serde_json::from_str(l).expect("sample line"))
            .collect();
        let mut data = String::new();
        for i in 0..n {
            let mut ex = lines[i % lines.len()].clone();
            ex["id"] = serde_json::Value::String(format!("g{i:05}"));
            if encoder {
                let text = ex["text"].as_str().expect("sample text").to_string();
                ex["text"] = serde_json::Value::String(format!("Report {i}: {text}"));
            }
            data.push_str(&ex.to_string());
            data.push('\n');
        }
        std::fs::write(self.dir.path().join(format!("{name}.jsonl")), data).expect("dataset");
        let sweep = self.dir.path().join(format!("{name}.toml"));
        let encoder = if encoder {
            "[encoder]\npreset = \"all-MiniLM-L6-v2\"\n\n"
        } else {
            ""
        };
        std::fs::write(
            &sweep,
            format!(
                "[sweep]\nname = \"{name}\"\nmodes = [\"base\", \"repair\", \"self_repair\", \"all\"]\nshard_size = {shard_size}\n\n{encoder}\
                 [[models]]\nname = \"sentence-split\"\nbackend = \"sentence-split\"\n\n\
                 [[models]]\nname = \"conjunction-oracle\"\nbackend = \"conjunction-oracle\"\n\n\
                 [[datasets]]\nid = \"gen\"\npath = \"{name}.jsonl\"\n"
            ),
        )
        .expect("sweep");
        sweep
    }
}

/// A run's result rows as text: one line per prediction, one per stored metric value
/// (every metric of the list, so new metrics are compared without a change here).
#[derive(Debug, PartialEq)]
pub struct ResultRows {
    pub predictions: Vec<String>,
    pub metrics: Vec<String>,
}

/// `aggregates` and `comparisons` as text, sorted in Rust (the engines' text collations
/// differ).
#[derive(Debug, PartialEq)]
pub struct StatsRows {
    pub aggregates: Vec<String>,
    pub comparisons: Vec<String>,
}

impl StatsRows {
    fn sorted(mut aggregates: Vec<String>, mut comparisons: Vec<String>) -> Self {
        aggregates.sort();
        comparisons.sort();
        StatsRows {
            aggregates,
            comparisons,
        }
    }
}

const AGGREGATE_ROWS: &str = "SELECT run_id, model, dataset, mode, metric, n, mean, ci_low,
        ci_high, resamples, seed, method FROM aggregates";

const COMPARISON_ROWS: &str = "SELECT run_id, dataset, a_model, a_mode, b_model, b_mode,
        metric, n, delta, ci_low, ci_high, p_value, p_le, p_ge, resamples, seed, method
 FROM comparisons";

const RESULT_ROWS: &str = "SELECT p.job_key, p.example_id, p.run_id, p.model, p.dataset, p.mode,
        p.base_claims_json, p.claims_json, p.pipeline_version, p.llm_calls, p.verifier_json,
        p.repair_json
 FROM predictions p ORDER BY p.job_key, p.example_id";

const METRIC_ROWS: &str = "SELECT job_key, example_id, metric, value FROM metric_values
 ORDER BY job_key, example_id, metric";

pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for w in &mut self.workers {
            let _ = w.child.kill();
            let _ = w.child.wait();
        }
        if std::thread::panicking() {
            // What went wrong on the workers, for a failure seen only in CI's output.
            for w in &self.workers {
                let log = std::fs::read_to_string(&w.log).unwrap_or_default();
                for line in log
                    .lines()
                    .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                {
                    eprintln!("[{}] {line}", w.id);
                }
            }
        }
        let mut settings = RabbitSettings::new(&broker_url());
        settings.namespace = self.namespace.clone();
        settings.reconnect_for = Some(Duration::from_secs(30));
        let mut queues: Vec<String> = self
            .models
            .iter()
            .map(|m| credence_infra::queue::job_queue(m))
            .collect();
        queues.push(credence_infra::queue::AGGREGATE_QUEUE.into());
        block_on(async move {
            if let Ok(q) = RabbitQueue::connect(settings).await {
                let _ = q.delete_queues(&queues).await;
            }
        });
        let _ = Command::new("psql")
            .arg(pg_admin_url())
            .args([
                "-Atqc",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

/// RabbitMQ stopped (`rabbitmqctl stop_app`) until dropped, which always starts it.
pub struct BrokerStopped;

impl BrokerStopped {
    pub fn stop() -> BrokerStopped {
        let out = Command::new("rabbitmqctl")
            .arg("stop_app")
            .output()
            .expect("rabbitmqctl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        BrokerStopped
    }
}

impl Drop for BrokerStopped {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl").arg("start_app").output();
        let _ = Command::new("rabbitmqctl")
            .args(["await_startup", "--timeout", "60"])
            .output();
    }
}

/// PostgreSQL stopped (`pg_ctlcluster VERSION main stop`) until dropped, which always
/// starts it again.
pub struct DatabaseStopped {
    version: String,
}

fn pg_version() -> String {
    let mut versions: Vec<String> = std::fs::read_dir("/etc/postgresql")
        .expect("PostgreSQL's configuration in /etc/postgresql")
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .collect();
    versions.sort_by_key(|v| v.parse::<u32>().unwrap_or(0));
    versions.pop().expect("a PostgreSQL cluster")
}

impl DatabaseStopped {
    pub fn stop() -> DatabaseStopped {
        let version = pg_version();
        let out = Command::new("pg_ctlcluster")
            .args([
                "--skip-systemctl-redirect",
                &version,
                "main",
                "stop",
                "-m",
                "fast",
            ])
            .output()
            .expect("pg_ctlcluster");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        DatabaseStopped { version }
    }
}

impl Drop for DatabaseStopped {
    fn drop(&mut self) {
        let _ = Command::new("pg_ctlcluster")
            .args(["--skip-systemctl-redirect", &self.version, "main", "start"])
            .output();
        for _ in 0..60 {
            if reachable("127.0.0.1:5432") {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// A TCP proxy on 127.0.0.1 in front of PostgreSQL that a test can take down and bring
/// back: down, it cuts every relayed connection and closes each new one at once, as a
/// database that is unreachable; the real server stays up for everything else.
pub struct DbProxy {
    port: u16,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    live: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl DbProxy {
    pub fn start() -> DbProxy {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a proxy port");
        let port = listener.local_addr().expect("its address").port();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let live = std::sync::Arc::new(std::sync::Mutex::new(Vec::<std::net::TcpStream>::new()));
        let (up2, live2) = (up.clone(), live.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if !up2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect("127.0.0.1:5432") else {
                    continue;
                };
                let pairs = [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ];
                {
                    let mut live = live2.lock().unwrap_or_else(|p| p.into_inner());
                    live.extend([client, server]);
                }
                for (from, to) in pairs {
                    if let (Ok(mut from), Ok(mut to)) = (from, to) {
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut from, &mut to);
                            let _ = to.shutdown(std::net::Shutdown::Both);
                        });
                    }
                }
            }
        });
        DbProxy { port, up, live }
    }

    /// `url` (a PostgreSQL URL on 127.0.0.1:5432) through the proxy.
    pub fn url(&self, url: &str) -> String {
        url.replace("127.0.0.1:5432", &format!("127.0.0.1:{}", self.port))
    }

    /// The database becomes unreachable through the proxy.
    pub fn down(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        for s in live.drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// The database is reachable again.
    pub fn up(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}
