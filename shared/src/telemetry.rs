//! Prometheus metrics of the distributed engine's processes and the `/metrics` endpoint
//! that serves them (bind 127.0.0.1 unless told otherwise). Histograms have explicit
//! buckets so dashboards can rely on them.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry, TextEncoder,
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
        Ok(WorkerMetrics {
            registry,
            deliveries,
            job_seconds,
        })
    }

    /// The registry to serve.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// What the reaper counts.
#[derive(Clone)]
pub struct ReaperMetrics {
    registry: Registry,
    /// Repairs by kind (`stale`, `failed`, `lost`, `aggregation`).
    pub repairs: IntCounterVec,
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
        Ok(ReaperMetrics { registry, repairs })
    }

    /// The registry to serve.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

/// Renders a registry in Prometheus' text format.
pub fn render(registry: &Registry) -> String {
    let mut buf = Vec::new();
    // Encoding gathered families into a Vec cannot fail.
    let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Serves `GET /metrics` on `addr` until the process ends.
pub async fn serve(addr: SocketAddr, registry: Registry) -> Result<(), TelemetryError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| TelemetryError::Bind { addr, source })?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = registry.clone();
            async move { render(&registry) }
        }),
    );
    tracing::info!(%addr, "serving /metrics");
    axum::serve(listener, app)
        .await
        .map_err(|source| TelemetryError::Bind { addr, source })
}

#[cfg(test)]
mod tests {
    use super::*;

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
