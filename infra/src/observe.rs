//! The one seam the job path reports to. The consumer loop and the job handler call a
//! [`JobObserver`] (a stage's seconds, a job's outcome, examples, LLM requests, cache
//! lookups, dead letters); a worker process implements it with Prometheus
//! ([`crate::telemetry::WorkerMetrics`]), tests with a [`Recorder`], and a process that
//! watches nothing with [`NoObserver`]. Labels are bounded (model, mode, stage, outcome,
//! cache): never an example or a job.

use crate::cache::EmbeddingCache;
use crate::error::StoreError;
use credence_core::domain::{Mode, Stage};
use std::sync::Mutex;

/// How a delivered job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobOutcome {
    /// Results committed.
    Done,
    /// No work needed (already done, or cancelled).
    Skipped,
    /// Failed; back to the queue.
    Retry,
    /// Failed its last delivery; marked failed and dead-lettered.
    Failed,
}

impl JobOutcome {
    /// The `outcome` label.
    pub fn name(self) -> &'static str {
        match self {
            JobOutcome::Done => "done",
            JobOutcome::Skipped => "skipped",
            JobOutcome::Retry => "retry",
            JobOutcome::Failed => "failed",
        }
    }
}

/// Which cache a lookup went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheKind {
    /// LLM generations.
    Generation,
    /// Sentence embeddings.
    Embedding,
}

impl CacheKind {
    /// The `cache` label.
    pub fn name(self) -> &'static str {
        match self {
            CacheKind::Generation => "generation",
            CacheKind::Embedding => "embedding",
        }
    }
}

/// One LLM request as the decomposer saw it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LlmRequest {
    /// Tokens in the rendered prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Seconds from sending the request to its last token.
    pub seconds: f64,
    /// Tries that failed before this one succeeded.
    pub retries: u64,
    /// Whether the generation stopped at its token limit instead of ending by itself.
    pub hit_limit: bool,
}

/// Where the job path reports what it did. Every method has a no-op default, so a new
/// family never forces every implementation to change.
pub trait JobObserver: Send + Sync {
    /// A stage of a job of `model` took `seconds`.
    fn stage(&self, model: &str, stage: Stage, seconds: f64) {
        let _ = (model, stage, seconds);
    }

    /// A delivered job ended with `outcome` after `seconds`.
    fn job(&self, model: &str, mode: Mode, outcome: JobOutcome, seconds: f64) {
        let _ = (model, mode, outcome, seconds);
    }

    /// `n` examples of a job of `model` x `mode` were processed (their results committed).
    fn examples(&self, model: &str, mode: Mode, n: u64) {
        let _ = (model, mode, n);
    }

    /// The decomposer of `model` made one LLM request.
    fn llm_request(&self, model: &str, request: LlmRequest) {
        let _ = (model, request);
    }

    /// A cache answered `hits` lookups and missed `misses`.
    fn cache(&self, cache: CacheKind, hits: u64, misses: u64) {
        let _ = (cache, hits, misses);
    }

    /// A message was dead-lettered (`reason`: `unreadable`, `forged` (not a planned job)
    /// or `failed`).
    fn dead_letter(&self, reason: &'static str) {
        let _ = reason;
    }

    /// This worker took a job of `model` (the model it works with now).
    fn current_model(&self, model: &str) {
        let _ = model;
    }
}

/// Observes nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoObserver;

/// An embedding cache whose every lookup is reported to an observer (hits and misses),
/// so the job path counts embedding-cache traffic where it happens, whatever encoder or
/// store is behind it.
pub struct ObservedEmbeddings<'a> {
    inner: &'a dyn EmbeddingCache,
    observer: &'a dyn JobObserver,
}

impl<'a> ObservedEmbeddings<'a> {
    /// `inner`, reporting to `observer`.
    pub fn new(inner: &'a dyn EmbeddingCache, observer: &'a dyn JobObserver) -> Self {
        ObservedEmbeddings { inner, observer }
    }
}

#[async_trait::async_trait]
impl EmbeddingCache for ObservedEmbeddings<'_> {
    async fn embeddings(
        &self,
        encoder_fingerprint: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        let found = self.inner.embeddings(encoder_fingerprint, texts).await?;
        let hits = found.iter().filter(|v| v.is_some()).count() as u64;
        self.observer
            .cache(CacheKind::Embedding, hits, found.len() as u64 - hits);
        Ok(found)
    }

    async fn put_embeddings(
        &self,
        encoder_fingerprint: &str,
        entries: &[(String, Vec<f32>)],
    ) -> Result<(), StoreError> {
        self.inner
            .put_embeddings(encoder_fingerprint, entries)
            .await
    }
}

impl JobObserver for NoObserver {}

/// One report to a [`Recorder`].
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// [`JobObserver::stage`].
    Stage(String, Stage),
    /// [`JobObserver::job`].
    Job(String, Mode, JobOutcome),
    /// [`JobObserver::examples`].
    Examples(String, Mode, u64),
    /// [`JobObserver::llm_request`].
    Llm(String, LlmRequest),
    /// [`JobObserver::cache`].
    Cache(CacheKind, u64, u64),
    /// [`JobObserver::dead_letter`].
    DeadLetter(&'static str),
    /// [`JobObserver::current_model`].
    CurrentModel(String),
}

/// Keeps every report, for tests (seconds are left out: they are not deterministic).
#[derive(Debug, Default)]
pub struct Recorder {
    seen: Mutex<Vec<Observed>>,
}

impl Recorder {
    /// What was reported so far, in order.
    pub fn seen(&self) -> Vec<Observed> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Observed>> {
        // Every mutation is one push, so a poisoned list is still consistent.
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl JobObserver for Recorder {
    fn stage(&self, model: &str, stage: Stage, _seconds: f64) {
        self.lock().push(Observed::Stage(model.into(), stage));
    }
    fn job(&self, model: &str, mode: Mode, outcome: JobOutcome, _seconds: f64) {
        self.lock().push(Observed::Job(model.into(), mode, outcome));
    }
    fn examples(&self, model: &str, mode: Mode, n: u64) {
        self.lock().push(Observed::Examples(model.into(), mode, n));
    }
    fn llm_request(&self, model: &str, request: LlmRequest) {
        self.lock().push(Observed::Llm(model.into(), request));
    }
    fn cache(&self, cache: CacheKind, hits: u64, misses: u64) {
        self.lock().push(Observed::Cache(cache, hits, misses));
    }
    fn dead_letter(&self, reason: &'static str) {
        self.lock().push(Observed::DeadLetter(reason));
    }
    fn current_model(&self, model: &str) {
        self.lock().push(Observed::CurrentModel(model.into()));
    }
}
