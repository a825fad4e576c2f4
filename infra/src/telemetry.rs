//! Prometheus metrics of the distributed engine's processes and the `/metrics` endpoint
//! that serves them (bind 127.0.0.1 unless told otherwise). Histograms have explicit
//! buckets so dashboards can rely on them.

use crate::observe::{CacheKind, JobObserver, JobOutcome, LlmRequest};
use crate::store::postgres::ops::RunGauges;
use credence_core::domain::Mode;
use credence_core::domain::Stage;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::net::SocketAddr;

/// Seconds a job takes, from a few milliseconds (baselines) to an hour (long LLM shards).
const JOB_SECONDS_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0, 3600.0,
];

/// What a worker counts.
#[derive(Clone)]
pub struct WorkerMetrics {
    registry: Registry,
    /// Deliveries handled, by model and outcome (`done`, `skipped`, `retry`, `failed`,
    /// `aggregated`, `rejected`).
    pub deliveries: IntCounterVec,
    /// Seconds from taking a job to its commit, by model and mode.
    pub job_seconds: HistogramVec,
    /// The job path's families, fed through the [`JobObserver`] seam.
    pub job: JobFamilies,
}

/// Why metrics could not be set up or served.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// A metric could not be registered.
    #[error("registering metrics: {0}")]
    Register(#[from] prometheus::Error),
    /// The endpoint could not bind its address.
    #[error("serving metrics on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

impl WorkerMetrics {
    /// Registers the worker's metrics.
    pub fn new() -> Result<Self, TelemetryError> {
        let registry = Registry::new();
        let deliveries = IntCounterVec::new(
            Opts::new(
                "credence_worker_deliveries_total",
                "Deliveries handled by outcome",
            ),
            &["model", "outcome"],
        )?;
        let job_seconds = HistogramVec::new(
            HistogramOpts::new(
                "credence_worker_job_seconds",
                "Seconds from taking a job to its commit",
            )
            .buckets(JOB_SECONDS_BUCKETS.to_vec()),
            &["model", "mode"],
        )?;
        registry.register(Box::new(deliveries.clone()))?;
        registry.register(Box::new(job_seconds.clone()))?;
        let job = JobFamilies::register(&registry)?;
        Ok(WorkerMetrics {
            registry,
            deliveries,
            job_seconds,
            job,
        })
    }

    /// The registry to serve.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// Seconds a stage takes over a shard: from a millisecond (a rule) to ten minutes (an
/// LLM shard).
const STAGE_SECONDS_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0, 600.0,
];

/// Seconds of one LLM request.
const LLM_SECONDS_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
];

/// Why a worker dead-letters a message: unreadable, forged (not a planned job), an
/// aggregation that failed, a job that failed its last delivery.
pub const DEAD_LETTER_REASONS: [&str; 4] = ["unreadable", "forged", "aggregation", "failed"];

/// The families of the job path a worker (or the embedded engine) serves, fed through
/// [`JobObserver`].
#[derive(Clone)]
pub struct JobFamilies {
    /// Jobs by model, mode and outcome.
    pub jobs: IntCounterVec,
    /// Examples whose results were committed, by model and mode.
    pub examples: IntCounterVec,
    /// Seconds per stage of a shard, by model and stage.
    pub stage_seconds: HistogramVec,
    /// LLM prompt tokens, by model.
    pub llm_prompt_tokens: IntCounterVec,
    /// LLM generated tokens, by model.
    pub llm_generated_tokens: IntCounterVec,
    /// Seconds per LLM request, by model.
    pub llm_request_seconds: HistogramVec,
    /// LLM request retries, by model.
    pub llm_retries: IntCounterVec,
    /// LLM generations that stopped at `max_new_tokens`, by model.
    pub llm_at_limit: IntCounterVec,
    /// Cache hits, by cache.
    pub cache_hits: IntCounterVec,
    /// Cache misses, by cache.
    pub cache_misses: IntCounterVec,
    /// Messages dead-lettered, by reason.
    pub dead_letters: IntCounterVec,
    /// Seconds of a job, by model, mode and outcome.
    pub job_seconds: HistogramVec,
    /// 1 while the process serves jobs.
    pub up: IntGauge,
    /// 1 for the model of the job the worker took last (one series at a time).
    pub current_model: IntGaugeVec,
}

impl JobFamilies {
    /// Registers the families in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, TelemetryError> {
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, TelemetryError> {
                let c = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(c.clone()))?;
                Ok(c)
            };
        let histogram = |name: &str,
                         help: &str,
                         labels: &[&str],
                         buckets: &[f64]|
         -> Result<HistogramVec, TelemetryError> {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                labels,
            )?;
            registry.register(Box::new(h.clone()))?;
            Ok(h)
        };
        let up = IntGauge::new("credence_worker_up", "1 while the worker serves jobs")?;
        registry.register(Box::new(up.clone()))?;
        let current_model = IntGaugeVec::new(
            Opts::new(
                "credence_worker_current_model",
                "1 for the model the worker holds",
            ),
            &["model"],
        )?;
        registry.register(Box::new(current_model.clone()))?;
        up.set(1);
        let dead_letters = counter(
            "credence_dead_letters_total",
            "Messages dead-lettered, by reason",
            &["reason"],
        )?;
        // Every reason is served from the start (at 0), so a dashboard shows "none yet"
        // rather than no data.
        for reason in DEAD_LETTER_REASONS {
            dead_letters.with_label_values(&[reason]);
        }
        Ok(JobFamilies {
            jobs: counter(
                "credence_jobs_total",
                "Jobs by model, mode and outcome",
                &["model", "mode", "outcome"],
            )?,
            examples: counter(
                "credence_examples_processed_total",
                "Examples whose results were committed",
                &["model", "mode"],
            )?,
            stage_seconds: histogram(
                "credence_stage_seconds",
                "Seconds per stage of a shard",
                &["model", "stage"],
                &STAGE_SECONDS_BUCKETS,
            )?,
            llm_prompt_tokens: counter(
                "credence_llm_prompt_tokens_total",
                "LLM prompt tokens",
                &["model"],
            )?,
            llm_generated_tokens: counter(
                "credence_llm_generated_tokens_total",
                "LLM generated tokens",
                &["model"],
            )?,
            llm_request_seconds: histogram(
                "credence_llm_request_seconds",
                "Seconds per LLM request",
                &["model"],
                &LLM_SECONDS_BUCKETS,
            )?,
            llm_retries: counter(
                "credence_llm_retries_total",
                "LLM requests tried again",
                &["model"],
            )?,
            llm_at_limit: counter(
                "credence_llm_generations_at_limit_total",
                "LLM generations that stopped at max_new_tokens (possibly cut off)",
                &["model"],
            )?,
            cache_hits: counter(
                "credence_cache_hits_total",
                "Cache lookups answered",
                &["cache"],
            )?,
            cache_misses: counter(
                "credence_cache_misses_total",
                "Cache lookups missed",
                &["cache"],
            )?,
            dead_letters,
            job_seconds: histogram(
                "credence_job_seconds",
                "Seconds of a job from taking it to its end",
                &["model", "mode", "outcome"],
                &JOB_SECONDS_BUCKETS,
            )?,
            up,
            current_model,
        })
    }
}

impl JobObserver for JobFamilies {
    fn stage(&self, model: &str, stage: Stage, seconds: f64) {
        self.stage_seconds
            .with_label_values(&[model, stage.name()])
            .observe(seconds);
    }
    fn job(&self, model: &str, mode: Mode, outcome: JobOutcome, seconds: f64) {
        let labels = [model, mode.as_str(), outcome.name()];
        self.jobs.with_label_values(&labels).inc();
        self.job_seconds.with_label_values(&labels).observe(seconds);
    }
    fn examples(&self, model: &str, mode: Mode, n: u64) {
        self.examples
            .with_label_values(&[model, mode.as_str()])
            .inc_by(n);
    }
    fn llm_request(&self, model: &str, request: LlmRequest) {
        self.llm_prompt_tokens
            .with_label_values(&[model])
            .inc_by(request.prompt_tokens);
        self.llm_generated_tokens
            .with_label_values(&[model])
            .inc_by(request.generated_tokens);
        self.llm_request_seconds
            .with_label_values(&[model])
            .observe(request.seconds);
        self.llm_retries
            .with_label_values(&[model])
            .inc_by(request.retries);
        let at_limit = self.llm_at_limit.with_label_values(&[model]);
        if request.hit_limit {
            at_limit.inc();
        }
    }
    fn cache(&self, cache: CacheKind, hits: u64, misses: u64) {
        self.cache_hits
            .with_label_values(&[cache.name()])
            .inc_by(hits);
        self.cache_misses
            .with_label_values(&[cache.name()])
            .inc_by(misses);
    }
    fn dead_letter(&self, reason: &'static str) {
        self.dead_letters.with_label_values(&[reason]).inc();
    }
    fn current_model(&self, model: &str) {
        self.current_model.reset();
        self.current_model.with_label_values(&[model]).set(1);
    }
}

/// What the reaper counts.
#[derive(Clone)]
pub struct ReaperMetrics {
    registry: Registry,
    /// Repairs by kind (`stale`, `failed`, `lost`, `aggregation`).
    pub repairs: IntCounterVec,
    /// Jobs of a run by state (`done`, `running`, `waiting`, `failed`, `cancelled`).
    pub run_jobs: IntGaugeVec,
    /// Examples of a run with committed results.
    pub run_examples_done: IntGaugeVec,
    /// Seconds until a run is expected to finish, at its current rate.
    pub run_eta_seconds: GaugeVec,
    /// Jobs re-published because their worker's heartbeat went stale.
    pub stale_republished: IntCounter,
}

impl ReaperMetrics {
    /// Registers the reaper's metrics.
    pub fn new() -> Result<Self, TelemetryError> {
        let registry = Registry::new();
        let repairs = IntCounterVec::new(
            Opts::new(
                "credence_reaper_repairs_total",
                "Jobs and aggregations the reaper repaired",
            ),
            &["kind"],
        )?;
        registry.register(Box::new(repairs.clone()))?;
        let run_jobs = IntGaugeVec::new(
            Opts::new("credence_run_jobs", "Jobs of a run by state"),
            &["run", "state"],
        )?;
        let run_examples_done = IntGaugeVec::new(
            Opts::new(
                "credence_run_examples_done",
                "Examples of a run with committed results",
            ),
            &["run"],
        )?;
        let run_eta_seconds = GaugeVec::new(
            Opts::new(
                "credence_run_eta_seconds",
                "Seconds until the run is expected to finish at its current rate",
            ),
            &["run"],
        )?;
        let stale_republished = IntCounter::new(
            "credence_stale_heartbeats_republished_total",
            "Jobs re-published because their worker's heartbeat went stale",
        )?;
        registry.register(Box::new(run_jobs.clone()))?;
        registry.register(Box::new(run_examples_done.clone()))?;
        registry.register(Box::new(run_eta_seconds.clone()))?;
        registry.register(Box::new(stale_republished.clone()))?;
        Ok(ReaperMetrics {
            registry,
            repairs,
            run_jobs,
            run_examples_done,
            run_eta_seconds,
            stale_republished,
        })
    }

    /// The registry to serve.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Shows where each active run stands: its jobs by state, examples done and ETA
    /// (none before its first result). Runs no longer active drop out.
    pub fn show_runs(&self, runs: &[RunGauges]) {
        self.run_jobs.reset();
        self.run_examples_done.reset();
        self.run_eta_seconds.reset();
        for r in runs {
            let run = r.run_id.as_str();
            for (state, n) in [
                ("done", r.done),
                ("running", r.running),
                ("waiting", r.waiting),
                ("failed", r.failed),
                ("cancelled", r.cancelled),
            ] {
                self.run_jobs.with_label_values(&[run, state]).set(n as i64);
            }
            self.run_examples_done
                .with_label_values(&[run])
                .set(r.examples_done as i64);
            if let Some(eta) = r.eta_seconds() {
                self.run_eta_seconds.with_label_values(&[run]).set(eta);
            }
        }
    }
}

/// Renders a registry in Prometheus' text format.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    // Encoding gathered families into a Vec cannot fail.
    let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The host `/metrics` binds when an address gives only a port: loopback, so a process on
/// a shared machine (a Slurm node, a workstation) serves its metrics to that machine only.
/// Recipes where Prometheus scrapes across a network (compose, Kubernetes) say `0.0.0.0`.
pub const DEFAULT_METRICS_HOST: std::net::IpAddr =
    std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// Reads a `--metrics-addr` / `CREDENCE_METRICS_ADDR` value: `HOST:PORT`, or a bare
/// `PORT` (also `:PORT`) on [`DEFAULT_METRICS_HOST`].
///
/// ```
/// use credence_infra::telemetry::parse_metrics_addr;
/// assert_eq!(parse_metrics_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
/// assert_eq!(parse_metrics_addr("0.0.0.0:9464").unwrap().to_string(), "0.0.0.0:9464");
/// ```
pub fn parse_metrics_addr(text: &str) -> Result<SocketAddr, String> {
    let t = text.trim();
    if let Ok(port) = t.strip_prefix(':').unwrap_or(t).parse::<u16>() {
        return Ok(SocketAddr::new(DEFAULT_METRICS_HOST, port));
    }
    t.parse().map_err(|_| {
        format!("{text:?} is not HOST:PORT or PORT (e.g. 127.0.0.1:9464, or 9464 for that)")
    })
}

/// Binds the metrics endpoint's address (so a taken port fails at once, with the
/// address named).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, TelemetryError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| TelemetryError::Bind { addr, source })
}

/// Serves `GET /metrics` on a bound listener until the process ends.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    registry: Registry,
) -> Result<(), TelemetryError> {
    let addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move { render(&registry) }
        }),
    );
    if addr.ip().is_unspecified() {
        // Reachable from every network the host is on: fine behind a NetworkPolicy or in
        // a compose network, not on a shared node.
        tracing::warn!(%addr, "serving /metrics on every interface; give a host (127.0.0.1:PORT) to keep it local");
    } else {
        tracing::info!(%addr, "serving /metrics");
    }
    axum::serve(listener, app)
        .await
        .map_err(|source| TelemetryError::Bind { addr, source })
}

/// Serves `GET /metrics` on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, registry: Registry) -> Result<(), TelemetryError> {
    serve_on(bind(addr).await?, registry).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every family of the job path is on `/metrics` once fed through the seam, each
    /// with a non-zero value.
    #[test]
    fn every_job_family_is_served_through_the_seam() {
        let m = WorkerMetrics::new().unwrap();
        let seam: &dyn JobObserver = &m.job;
        for stage in Stage::EVERY {
            seam.stage("oracle", stage, 0.003);
        }
        seam.job("oracle", Mode::Base, JobOutcome::Done, 0.2);
        seam.examples("oracle", Mode::Base, 7);
        seam.llm_request(
            "oracle",
            LlmRequest {
                prompt_tokens: 120,
                generated_tokens: 40,
                seconds: 0.8,
                retries: 1,
                hit_limit: true,
            },
        );
        seam.cache(CacheKind::Generation, 2, 1);
        seam.cache(CacheKind::Embedding, 5, 3);
        seam.dead_letter("failed");
        seam.current_model("oracle");
        let text = render(m.registry());
        for sample in [
            r#"credence_jobs_total{mode="base",model="oracle",outcome="done"} 1"#,
            r#"credence_examples_processed_total{mode="base",model="oracle"} 7"#,
            r#"credence_llm_prompt_tokens_total{model="oracle"} 120"#,
            r#"credence_llm_generated_tokens_total{model="oracle"} 40"#,
            r#"credence_llm_request_seconds_count{model="oracle"} 1"#,
            r#"credence_llm_retries_total{model="oracle"} 1"#,
            r#"credence_llm_generations_at_limit_total{model="oracle"} 1"#,
            r#"credence_cache_hits_total{cache="generation"} 2"#,
            r#"credence_cache_misses_total{cache="embedding"} 3"#,
            r#"credence_dead_letters_total{reason="failed"} 1"#,
            r#"credence_job_seconds_count{mode="base",model="oracle",outcome="done"} 1"#,
            "credence_worker_up 1",
            r#"credence_worker_current_model{model="oracle"} 1"#,
        ] {
            assert!(text.contains(sample), "{sample} missing from:\n{text}");
        }
        for stage in Stage::EVERY {
            let sample = format!(
                r#"credence_stage_seconds_bucket{{model="oracle",stage="{}",le="0.005"}} 1"#,
                stage.name()
            );
            assert!(text.contains(&sample), "{sample} missing from:\n{text}");
        }
    }

    /// A bare port binds loopback; only an explicit host binds anything wider.
    #[test]
    fn a_metrics_address_without_a_host_binds_loopback() {
        for port_only in ["9464", ":9464", " 9464 "] {
            let addr = parse_metrics_addr(port_only).unwrap();
            assert_eq!(
                addr,
                SocketAddr::from(([127, 0, 0, 1], 9464)),
                "{port_only:?}"
            );
            assert!(addr.ip().is_loopback());
        }
        assert_eq!(
            parse_metrics_addr("0.0.0.0:9464").unwrap(),
            SocketAddr::from(([0, 0, 0, 0], 9464))
        );
        assert_eq!(
            parse_metrics_addr("[::1]:9").unwrap().to_string(),
            "[::1]:9"
        );
        for bad in ["", "host:9464", "70000", "127.0.0.1"] {
            let e = parse_metrics_addr(bad).unwrap_err();
            assert!(e.contains("HOST:PORT"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn coordinator_families_show_each_active_run() {
        let m = ReaperMetrics::new().unwrap();
        let run = |id: &str, done: u64, examples_done: u64, open: u64, since| RunGauges {
            run_id: id.into(),
            done,
            running: 1,
            waiting: 2,
            failed: 1,
            cancelled: 0,
            examples_done,
            examples_open: open,
            seconds_since_start: since,
        };
        // 10 examples in 20 s: 0.5 ex/s; 20 open (10 more in a failed job): 40 s to go.
        m.show_runs(&[
            run("demo", 3, 10, 20, Some(20.0)),
            run("old", 0, 0, 30, None),
        ]);
        m.stale_republished.inc();
        let text = render(m.registry());
        for sample in [
            r#"credence_run_jobs{run="demo",state="done"} 3"#,
            r#"credence_run_jobs{run="demo",state="waiting"} 2"#,
            r#"credence_run_examples_done{run="demo"} 10"#,
            r#"credence_run_eta_seconds{run="demo"} 40"#,
            r#"credence_run_jobs{run="old",state="running"} 1"#,
            "credence_stale_heartbeats_republished_total 1",
        ] {
            assert!(text.contains(sample), "{sample} missing from:\n{text}");
        }
        // No ETA before a first result; none to wait for once only the failed job is
        // left; a run that is no longer active drops out.
        assert!(
            !text.contains(r#"credence_run_eta_seconds{run="old"}"#),
            "{text}"
        );
        m.show_runs(&[run("demo", 4, 30, 0, Some(30.0))]);
        let text = render(m.registry());
        assert!(
            text.contains(r#"credence_run_eta_seconds{run="demo"} 0"#),
            "{text}"
        );
        assert!(!text.contains(r#"run="old""#), "{text}");
    }

    #[test]
    fn renders_counters_and_explicit_buckets() {
        let m = WorkerMetrics::new().unwrap();
        m.deliveries.with_label_values(&["oracle", "done"]).inc();
        m.job_seconds
            .with_label_values(&["oracle", "base"])
            .observe(0.02);
        let text = render(m.registry());
        assert!(
            text.contains(r#"credence_worker_deliveries_total{model="oracle",outcome="done"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"credence_worker_job_seconds_bucket{mode="base",model="oracle",le="0.025"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"credence_worker_job_seconds_bucket{mode="base",model="oracle",le="0.01"} 0"#
            ),
            "{text}"
        );
    }
}
