//! The loop's decoding, and its behaviour on hostile keys, forged messages, a store that
//! is briefly unreachable and a shutdown during that outage, against the in-process
//! queue and a real SQLite store.

use super::*;
use crate::decompose::{ConjunctionOracle, Decomposer};
use async_trait::async_trait;
use credence_core::aggregation::Aggregation as StoreAggregation;
use credence_core::dataset::LoadedDataset;
use credence_core::domain::{Example, ExampleResult, Mode};
use credence_core::job::{plan, PlannedDataset, PlannedModel};
use credence_core::stats::ConfigValues;
use credence_infra::cache::{EmbeddingCache, GenerationCache, TokenUsage};
use credence_infra::observe::{NoObserver, Observed, Recorder};
use credence_infra::queue::memory::MemoryQueue;
use credence_infra::queue::DeadLetter;
use credence_infra::store::sqlite::SqliteStore;
use credence_infra::store::{Attempt, PlannedDatasetRecord, RunRecord, RunStatistics, StoreError};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};

#[test]
fn decode_names_what_is_wrong() {
    assert_eq!(
        decode(b"{oops").unwrap_err(),
        "malformed message: key must be a string at line 1 column 2"
    );
    assert_eq!(
        decode(br#"{"kind":"job","v":9}"#).unwrap_err(),
        "unknown message version 9; this worker reads version 1"
    );
    assert_eq!(
        decode(br#"{"kind":"job"}"#).unwrap_err(),
        "malformed message: no version field \"v\""
    );
    assert!(decode(br#"{"kind":"job","v":1,"job":{}}"#)
        .unwrap_err()
        .starts_with("malformed message: missing field"));
}

#[test]
fn decode_work_reads_aggregation_messages() {
    let body = br#"{"kind":"aggregate","v":1,"run_id":"r","model":"m","dataset":"d","mode":"self_repair"}"#;
    assert_eq!(
        decode_work(body).unwrap(),
        Work::Aggregate(ConfigRef {
            run_id: "r".into(),
            model: "m".into(),
            dataset: "d".into(),
            mode: credence_core::Mode::SelfRepair,
        })
    );
    assert_eq!(
        decode(body).unwrap_err(),
        "an aggregation message where a job was expected"
    );
}

/// A store whose `run_spec` fails as if the database were down for its first `outage`
/// calls; everything else goes to the SQLite store inside.
struct FlakyStore {
    inner: SqliteStore,
    outage: AtomicU32,
}

impl FlakyStore {
    fn down(&self) -> Result<(), StoreError> {
        let left = self.outage.load(Ordering::SeqCst);
        if left == 0 {
            return Ok(());
        }
        self.outage.store(left - 1, Ordering::SeqCst);
        Err(StoreError::Query {
            what: "run spec",
            source: sqlx::Error::PoolTimedOut,
        })
    }
}

#[async_trait]
impl EmbeddingCache for FlakyStore {
    async fn embeddings(
        &self,
        encoder_fingerprint: &str,
        texts: &[String],
    ) -> Result<Vec<Option<Vec<f32>>>, StoreError> {
        self.inner.embeddings(encoder_fingerprint, texts).await
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

#[async_trait]
impl GenerationCache for FlakyStore {
    async fn generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
    ) -> Result<Option<credence_infra::cache::CachedGeneration>, StoreError> {
        self.inner
            .generation(model_fingerprint, prompt, params)
            .await
    }
    async fn put_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        completion: &str,
        usage: TokenUsage,
    ) -> Result<(), StoreError> {
        self.inner
            .put_generation(model_fingerprint, prompt, params, completion, usage)
            .await
    }

    async fn lease_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        self.inner
            .lease_generation(model_fingerprint, prompt, params, holder, ttl)
            .await
    }

    async fn release_generation(
        &self,
        model_fingerprint: &str,
        prompt: &str,
        params: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        self.inner
            .release_generation(model_fingerprint, prompt, params, holder)
            .await
    }
}

#[async_trait]
impl Store for FlakyStore {
    async fn record_plan(
        &self,
        run: &RunRecord,
        datasets: &[PlannedDatasetRecord<'_>],
        jobs: &[Job],
    ) -> Result<(), StoreError> {
        self.inner.record_plan(run, datasets, jobs).await
    }
    async fn finished_jobs(&self, run_id: &str) -> Result<HashSet<String>, StoreError> {
        self.inner.finished_jobs(run_id).await
    }
    async fn shard_examples(&self, job: &Job) -> Result<Vec<Example>, StoreError> {
        self.inner.shard_examples(job).await
    }
    async fn mark_running(
        &self,
        job: &Job,
        worker: &str,
        attempt: Attempt,
    ) -> Result<Option<u32>, StoreError> {
        self.inner.mark_running(job, worker, attempt).await
    }
    async fn heartbeat(&self, job: &Job, worker: &str) -> Result<(), StoreError> {
        self.inner.heartbeat(job, worker).await
    }
    async fn record_results(
        &self,
        job: &Job,
        results: &[ExampleResult],
    ) -> Result<JobCommit, StoreError> {
        self.inner.record_results(job, results).await
    }
    async fn record_afc_results(
        &self,
        job: &Job,
        results: &[credence_core::afc::AfcResult],
    ) -> Result<JobCommit, StoreError> {
        self.inner.record_afc_results(job, results).await
    }
    async fn afc_results(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::afc::StoredAfc>, StoreError> {
        self.inner.afc_results(run_id).await
    }
    async fn mark_failed(&self, job: &Job, error: &str) -> Result<(), StoreError> {
        self.inner.mark_failed(job, error).await
    }
    async fn run_spec(&self, run_id: &str) -> Result<Option<String>, StoreError> {
        self.down()?;
        self.inner.run_spec(run_id).await
    }
    async fn config_values(&self, config: &ConfigRef) -> Result<ConfigValues, StoreError> {
        self.inner.config_values(config).await
    }
    async fn config_finished(&self, config: &ConfigRef) -> Result<bool, StoreError> {
        self.inner.config_finished(config).await
    }
    async fn run_statistics(&self, run_id: &str) -> Result<RunStatistics, StoreError> {
        self.inner.run_statistics(run_id).await
    }
    async fn write_aggregation(&self, aggregation: &StoreAggregation) -> Result<(), StoreError> {
        self.inner.write_aggregation(aggregation).await
    }
    async fn stage_seconds(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::timing::StageRow>, StoreError> {
        self.inner.stage_seconds(run_id).await
    }

    async fn llm_calls(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::timing::LlmCalls>, StoreError> {
        self.inner.llm_calls(run_id).await
    }

    async fn generation_usage(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_infra::store::GenerationUsage>, StoreError> {
        self.inner.generation_usage(run_id).await
    }

    async fn run_outputs(
        &self,
        run_id: &str,
    ) -> Result<Vec<credence_core::audit::StoredOutput>, StoreError> {
        self.inner.run_outputs(run_id).await
    }

    async fn planned_job(&self, key: &str) -> Result<Option<Job>, StoreError> {
        self.inner.planned_job(key).await
    }
}

/// One planned job of run "r" (model "m" = the sentence splitter) in a fresh SQLite
/// store whose `run_spec` is unreachable `outage` times.
async fn planned_store(dir: &std::path::Path, outage: u32) -> (FlakyStore, Job) {
    let inner = SqliteStore::open(&dir.join("s.db")).await.unwrap();
    let data = LoadedDataset {
        path: "d.jsonl".into(),
        hash: "h".into(),
        examples: vec![Example {
            id: "e0".into(),
            text: "Ada wrote code and Bob read it.".into(),
            references: vec![],
            meta: Default::default(),
        }],
    };
    let models = [PlannedModel {
        name: "m".into(),
        fingerprint: ConjunctionOracle::new().fingerprint().to_string(),
    }];
    let datasets = [PlannedDataset {
        id: "d".into(),
        hash: "h".into(),
        len: 1,
    }];
    let jobs = plan("r", &models, &datasets, &[Mode::Base], 1, "c");
    let run = RunRecord {
        run_id: "r".into(),
        spec_json: "{}".into(),
    };
    inner
        .record_plan(
            &run,
            &[PlannedDatasetRecord {
                id: "d",
                data: &data,
            }],
            &jobs,
        )
        .await
        .unwrap();
    let store = FlakyStore {
        inner,
        outage: AtomicU32::new(outage),
    };
    (store, jobs[0].clone())
}

/// Publishes `job` on a closed in-process queue and consumes until it drains; the events.
async fn consume_one(job: &Job, store: &dyn Store, max_deliveries: u32) -> Vec<JobEvent> {
    consume_observed(job, store, max_deliveries, Arc::new(NoObserver)).await
}

/// [`consume_one`], reporting to `observer`.
async fn consume_observed(
    job: &Job,
    store: &dyn Store,
    max_deliveries: u32,
    observer: Arc<dyn JobObserver>,
) -> Vec<JobEvent> {
    let queue = MemoryQueue::new(max_deliveries);
    let body = serde_json::to_vec(&Message::job(job.clone())).unwrap();
    queue.publish("q", body).await.unwrap();
    queue.close();
    let (_stop, shutdown) = watch::channel(false);
    drain(&queue, store, max_deliveries, observer, shutdown).await
}

/// Consumes `queue`'s lane "q" with the sentence-splitter model "m" until it ends (closed
/// and drained) or `shutdown` turns true; the events.
async fn drain(
    queue: &MemoryQueue,
    store: &dyn Store,
    max_deliveries: u32,
    observer: Arc<dyn JobObserver>,
    shutdown: watch::Receiver<bool>,
) -> Vec<JobEvent> {
    let mut consumer = queue.consume("q").await.unwrap();
    let handler = JobHandler::new([]).with_decomposer("m", Arc::new(ConjunctionOracle::new()));
    let settings = LoopSettings {
        worker_id: "w".into(),
        max_deliveries,
        heartbeat: None,
        aggregation: Aggregation::Off,
        observer: observer.clone(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    consume(&mut *consumer, &handler, store, &settings, &tx, shutdown)
        .await
        .unwrap();
    drop(tx);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    events
}

/// A key with a two-byte character across byte 12 (where the log line cuts the key)
/// is refused like any other forged key, not a panic of the consumer task.
#[tokio::test]
async fn a_key_with_multibyte_characters_does_not_panic_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut job) = planned_store(dir.path(), 0).await;
    job.key = format!("a{}", "é".repeat(40));
    let events = consume_one(&job, &store, 3).await;
    assert!(
        matches!(events.as_slice(), [JobEvent::Rejected { reason }] if reason == "forged: key does not match fields"),
        "{events:?}"
    );
}

/// A store outage retried in place (the same delivery) is one attempt, not one per try:
/// an outage must not push a job toward its delivery limit.
#[tokio::test]
async fn a_retry_in_place_is_not_a_new_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let (store, job) = planned_store(dir.path(), 3).await;
    // The run's recorded sweep is "{}", so once the store answers the job fails for
    // good on its one delivery; by then it was retried in place three times.
    let events = consume_one(&job, &store, 1).await;
    assert!(
        matches!(events.as_slice(), [JobEvent::Failed { .. }]),
        "{events:?}"
    );
    let (attempts, state): (i64, String) =
        sqlx::query_as("SELECT attempts, state FROM jobs WHERE job_key = ?")
            .bind(&job.key)
            .fetch_one(store.inner.pool())
            .await
            .unwrap();
    assert_eq!((attempts, state.as_str()), (1, "failed"));
}

/// A delivery counted but never run (a message a consumer had prefetched when its
/// connection was lost) does not use up an attempt: the failing job is dead-lettered
/// after as many attempts that ran as the limit allows, and its dead letter says so.
#[tokio::test]
async fn a_delivery_that_never_ran_does_not_use_up_an_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let (store, job) = planned_store(dir.path(), 0).await;
    let queue = MemoryQueue::new(3);
    let body = serde_json::to_vec(&Message::job(job.clone())).unwrap();
    queue.publish("q", body).await.unwrap();
    {
        let mut lost = queue.consume("q").await.unwrap();
        // Taken off the queue and dropped unsettled: it returns counted.
        drop(lost.next().await.unwrap().expect("the message"));
    }
    queue.close();
    let (_stop, shutdown) = watch::channel(false);
    let events = drain(&queue, &store, 3, Arc::new(NoObserver), shutdown).await;
    assert!(
        matches!(
            events.as_slice(),
            [
                JobEvent::Retry { .. },
                JobEvent::Retry { .. },
                JobEvent::Failed { .. }
            ]
        ),
        "{events:?}"
    );
    assert_eq!(job_row(&store, &job.key).await, ("failed".into(), 3));
    let dead = queue.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].deliveries, 3, "{dead:?}");
}

/// The loop reports a job's end to the observer seam: its outcome and, for a job that
/// fails its last delivery, the dead letter.
#[tokio::test]
async fn the_loop_reports_outcomes_to_the_observer() {
    let dir = tempfile::tempdir().unwrap();
    let (store, job) = planned_store(dir.path(), 0).await;
    let recorder = Arc::new(Recorder::default());
    let events = consume_observed(&job, &store, 1, recorder.clone()).await;
    assert!(
        matches!(events.as_slice(), [JobEvent::Failed { .. }]),
        "{events:?}"
    );
    assert_eq!(
        recorder.seen(),
        [
            Observed::CurrentModel("m".into()),
            Observed::DeadLetter("failed"),
            Observed::Job("m".into(), Mode::Base, JobOutcome::Failed),
        ]
    );
}

/// A heartbeat that cannot finish (a store with every pooled connection taken by the
/// job's own requests) must not keep the job from finishing and giving them back.
#[tokio::test]
async fn the_job_runs_on_while_its_heartbeat_waits() {
    let permits = Arc::new(tokio::sync::Semaphore::new(1));
    // The job holds the only "connection" across a wait, as a request in flight does.
    let work = {
        let permits = permits.clone();
        async move {
            let _held = permits.acquire().await.expect("open");
            tokio::time::sleep(Duration::from_millis(60)).await;
            "done"
        }
    };
    let beats = AtomicU32::new(0);
    let beat = || async {
        let _conn = permits.acquire().await.expect("open");
        beats.fetch_add(1, Ordering::SeqCst);
    };
    let done = tokio::time::timeout(
        Duration::from_secs(10),
        with_heartbeat(work, Duration::from_millis(5), beat),
    )
    .await
    .expect("the job finishes while its heartbeat waits for the connection it holds");
    assert_eq!(done, "done");
}

#[tokio::test]
async fn the_heartbeat_keeps_beating_while_the_job_runs() {
    let beats = AtomicU32::new(0);
    // A job that finishes only after its third heartbeat.
    let work = async {
        while beats.load(Ordering::SeqCst) < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let beat = || async {
        beats.fetch_add(1, Ordering::SeqCst);
    };
    tokio::time::timeout(
        Duration::from_secs(10),
        with_heartbeat(work, Duration::from_millis(10), beat),
    )
    .await
    .expect("three heartbeats while the job runs");
}

/// The job row's state and attempts.
async fn job_row(store: &FlakyStore, key: &str) -> (String, i64) {
    sqlx::query_as("SELECT state, attempts FROM jobs WHERE job_key = ?")
        .bind(key)
        .fetch_one(store.inner.pool())
        .await
        .unwrap()
}

/// Publishes `body` alone, consumes it with delivery limit 3, and returns the events,
/// the dead letters and what the observer saw.
async fn consume_body(
    store: &FlakyStore,
    body: Vec<u8>,
) -> (Vec<JobEvent>, Vec<DeadLetter>, Vec<Observed>) {
    let queue = MemoryQueue::new(3);
    queue.publish("q", body).await.unwrap();
    queue.close();
    let recorder = Arc::new(Recorder::default());
    let (_stop, shutdown) = watch::channel(false);
    let events = drain(&queue, store, 3, recorder.clone(), shutdown).await;
    (events, queue.dead_letters().await.unwrap(), recorder.seen())
}

/// Forged job messages are dead-lettered once with their reason, and touch neither the
/// planned job's row nor a model metric label.
#[tokio::test]
async fn forged_job_messages_are_dead_lettered_once_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (store, job) = planned_store(dir.path(), 0).await;
    let before = job_row(&store, &job.key).await;
    let with_key = |mut j: Job| {
        j.key = credence_core::job::content_key(&j);
        j
    };
    let forgeries = [
        // A real key with the fields of another configuration.
        (
            Job {
                mode: Mode::Repair,
                model: "other-model".into(),
                ..job.clone()
            },
            "forged: key does not match fields",
        ),
        // A real key with another model fingerprint (a model reload per delivery).
        (
            Job {
                model_fingerprint: "not-the-model".into(),
                ..job.clone()
            },
            "forged: key does not match fields",
        ),
        // Consistent fields and key, of a run that was never planned.
        (
            with_key(Job {
                run_id: "unknown-run".into(),
                ..job.clone()
            }),
            "forged: no planned job has this key (unknown run, model, dataset or shard)",
        ),
        // Consistent fields and key, with a fingerprint the plan does not have.
        (
            with_key(Job {
                model_fingerprint: "not-the-model".into(),
                ..job.clone()
            }),
            "forged: no planned job has this key (unknown run, model, dataset or shard)",
        ),
    ];
    for (forged, why) in forgeries {
        let body = serde_json::to_vec(&Message::job(forged.clone())).unwrap();
        let (events, dead, seen) = consume_body(&store, body).await;
        assert!(
            matches!(events.as_slice(), [JobEvent::Rejected { reason }] if reason == why),
            "{forged:?}: {events:?}"
        );
        assert_eq!(dead.len(), 1, "{dead:?}");
        assert_eq!((dead[0].reason.as_str(), dead[0].deliveries), (why, 1));
        assert_eq!(seen, [Observed::DeadLetter("forged")], "no model label");
        assert_eq!(
            job_row(&store, &job.key).await,
            before,
            "the real job untouched"
        );
    }
}

/// A job row whose fields differ from the message under the same (content) key: the
/// store was written by something other than the planner; refused, naming the field.
#[tokio::test]
async fn a_message_that_differs_from_its_planned_row_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, job) = planned_store(dir.path(), 0).await;
    sqlx::query("UPDATE jobs SET dataset_hash = 'tampered' WHERE job_key = ?")
        .bind(&job.key)
        .execute(store.inner.pool())
        .await
        .unwrap();
    let events = consume_one(&job, &store, 3).await;
    assert!(
        matches!(events.as_slice(), [JobEvent::Rejected { reason }]
            if reason == "forged: field dataset_hash differs from the planned job with this key"),
        "{events:?}"
    );
}

/// An aggregation message of a configuration that is not finished (or not planned) is
/// refused rather than aggregated early.
#[tokio::test]
async fn a_forged_aggregation_message_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, job) = planned_store(dir.path(), 0).await;
    for (run, model) in [("r", "m"), ("r", "unknown"), ("unknown-run", "m")] {
        let body = serde_json::to_vec(&Message::Aggregate {
            v: MESSAGE_VERSION,
            run_id: run.into(),
            model: model.into(),
            dataset: job.dataset.clone(),
            mode: job.mode,
        })
        .unwrap();
        let (events, dead, _) = consume_body(&store, body).await;
        let why = "forged: aggregation of a configuration that is unknown or not finished";
        assert!(
            matches!(events.as_slice(), [JobEvent::Rejected { reason }] if reason == why),
            "{run}/{model}: {events:?}"
        );
        assert_eq!(dead.len(), 1);
    }
}

/// A worker stopped while its job waits for an unreachable store returns the message
/// without using a delivery: stopped five times with a delivery limit of 1, the job is
/// still in its queue, never dead-lettered, and its next delivery is still its first.
#[tokio::test]
async fn a_shutdown_during_a_store_outage_returns_the_job_without_using_a_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let (store, job) = planned_store(dir.path(), u32::MAX).await;
    let queue = MemoryQueue::new(1);
    let body = serde_json::to_vec(&Message::job(job.clone())).unwrap();
    queue.publish("q", body).await.unwrap();
    for restart in 0..5 {
        let (stop, shutdown) = watch::channel(false);
        let before = store.outage.load(Ordering::SeqCst);
        let worker = drain(&queue, &store, 1, Arc::new(NoObserver), shutdown);
        let stopper = async {
            // The job is held and the store has been found unreachable.
            while store.outage.load(Ordering::SeqCst) == before {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            stop.send(true).unwrap();
        };
        let (events, ()) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(worker, stopper)
        })
        .await
        .expect("the worker stops at shutdown");
        assert!(events.is_empty(), "restart {restart}: {events:?}");
        assert!(
            queue.dead_letters().await.unwrap().is_empty(),
            "restart {restart}"
        );
        assert_eq!(queue.depth("q"), 1, "restart {restart}");
    }
    queue.close();
    let mut consumer = queue.consume("q").await.unwrap();
    let d = consumer
        .next()
        .await
        .unwrap()
        .expect("the job is still queued");
    assert_eq!(d.previous_deliveries(), 0);
    d.ack().await.unwrap();
}
