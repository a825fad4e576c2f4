//! The store contract: what both engines' stores ([`SqlStore`] on SQLite and on
//! PostgreSQL) must do, each check run against each engine. Planning is idempotent,
//! results are idempotent on the job key and exactly one commit completes a
//! configuration, failed jobs stay unfinished and `done` is final, aggregation writes
//! the same rows again, the caches and leases round-trip, only a new delivery counts as
//! an attempt, shards index past u32::MAX, and the recorded sweep reads back typed.
//! What only one engine does (PostgreSQL's coordinator queries and concurrent commits,
//! SQLite's old migrations) is tested beside that engine.

mod support;

use credence_core::domain::{Example, ExampleMetrics, ExampleResult, Mode};
use credence_core::job::{ConfigRef, Job};
use credence_infra::cache::{CachedGeneration, EmbeddingCache, GenerationCache, TokenUsage};
use credence_infra::store::postgres::PgStore;
use credence_infra::store::sql::{Engine, Stmt};
use credence_infra::store::sql_store::SqlStore;
use credence_infra::store::sqlite::SqliteStore;
use credence_infra::store::{
    Attempt, JobCommit, PlannedDatasetRecord, RunRecord, Store, StoreError,
};
use support::fixtures::{dataset, jobs, spec_json};

/// Each check as a test per engine: `on_sqlite::NAME` on a new file, `on_postgres::NAME`
/// on a new database of the local server (skipped, or failed under CI, without it).
macro_rules! contract {
    ($($check:ident),* $(,)?) => {
        mod on_sqlite {
            $(
                #[tokio::test]
                async fn $check() {
                    let dir = tempfile::tempdir().unwrap();
                    let store = super::SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
                    super::$check(&store).await;
                }
            )*
        }
        mod on_postgres {
            $(
                #[tokio::test]
                async fn $check() {
                    if !super::support::servers_available(concat!("store contract ", stringify!($check))) {
                        return;
                    }
                    let db = super::support::TestDb::create();
                    let store = super::PgStore::connect(&db.url, 4).await.unwrap();
                    super::$check(&store).await;
                }
            )*
        }
    };
}

contract!(
    results_are_idempotent_and_aggregate_again_to_the_same_rows,
    failed_jobs_stay_unfinished_and_done_is_final,
    caches_round_trip,
    only_a_new_attempt_counts,
    a_shard_ending_past_u32_max_reads_its_examples,
    the_recorded_sweep_reads_back_typed_and_a_corrupt_one_is_named,
);

fn results(job: &Job, examples: &[Example], f1: f64) -> Vec<ExampleResult> {
    examples
        .iter()
        .enumerate()
        .map(|(i, e)| ExampleResult {
            example_id: e.id.clone(),
            base_claims: vec![e.text.clone()],
            claims: vec![e.text.clone()],
            pipeline_version: if job.mode == Mode::Base {
                "base".into()
            } else {
                "none".into()
            },
            // Calls in `repair` only: 1 on the first example of each shard.
            llm_calls: u32::from(job.mode == Mode::Repair && i % 2 == 0),
            verifier_json: None,
            repair_json: None,
            error: None,
            metrics: ExampleMetrics {
                n_claims: Some(1),
                jaccard_f1: Some(f1),
                ..Default::default()
            },
            stage_seconds: decompose_seconds(f1 + 0.25),
        })
        .collect()
}

fn decompose_seconds(seconds: f64) -> credence_core::domain::StageTimes {
    let mut t = credence_core::domain::StageTimes::default();
    t.add(credence_core::domain::Stage::Decompose, seconds);
    t
}

async fn count<DB: Engine>(store: &SqlStore<DB>, table: &str) -> i64 {
    let rows: Vec<(i64,)> = store
        .query(Stmt::new(format!("SELECT count(*) FROM {table}")))
        .await
        .unwrap();
    rows[0].0
}

async fn results_are_idempotent_and_aggregate_again_to_the_same_rows<DB: Engine>(
    store: &SqlStore<DB>,
) {
    let ds = dataset(5);
    let jobs = jobs(5, 2);
    let run = RunRecord {
        run_id: "run".into(),
        spec_json: spec_json(),
    };
    let planned = [PlannedDatasetRecord { id: "d", data: &ds }];
    store.record_plan(&run, &planned, &jobs).await.unwrap();
    store.record_plan(&run, &planned, &jobs).await.unwrap();
    assert_eq!(count(store, "examples").await, 5);
    assert_eq!(count(store, "jobs").await, 6);

    for job in &jobs {
        let ex = store.shard_examples(job).await.unwrap();
        assert_eq!(ex.len() as u32, job.len);
        assert_eq!(ex[0], ds.examples[job.start as usize]);
        assert_eq!(
            store.mark_running(job, "w1", Attempt::New).await.unwrap(),
            Some(1)
        );
        let f1 = if job.mode == Mode::Base { 0.5 } else { 1.0 };
        let commit = store
            .record_results(job, &results(job, &ex, f1))
            .await
            .unwrap();
        // Shards 0..2 of each mode: only the third completes the configuration.
        assert!(commit.newly_done);
        assert_eq!(commit.completes_config, job.shard == 2, "{job:?}");
        // A redelivered job writes again: nothing changes, nothing completes again.
        let again = store
            .record_results(job, &results(job, &ex, 0.0))
            .await
            .unwrap();
        assert_eq!(again, JobCommit::default());
        assert_eq!(
            store.mark_running(job, "w2", Attempt::New).await.unwrap(),
            None
        );
    }
    // One stage row per example and job, from the first write.
    let timings = store.stage_seconds("run").await.unwrap();
    assert_eq!(timings.len(), 10);
    for t in &timings {
        assert_eq!(t.stage, credence_core::domain::Stage::Decompose);
        let f1 = if t.mode == Mode::Base { 0.5 } else { 1.0 };
        assert_eq!(t.seconds, f1 + 0.25, "{t:?}");
    }
    // What the audits read, in model, dataset, mode and dataset order.
    let outputs = store.run_outputs("run").await.unwrap();
    assert_eq!(outputs.len(), 10);
    let ids: Vec<(Mode, &str)> = outputs
        .iter()
        .map(|o| (o.mode, o.example_id.as_str()))
        .collect();
    assert_eq!(ids[..2], [(Mode::Base, "e0"), (Mode::Base, "e1")]);
    assert_eq!(ids[5], (Mode::Repair, "e0"));
    assert_eq!(outputs[1].text, ds.examples[1].text);
    assert_eq!(outputs[1].references, ds.examples[1].references);
    assert_eq!(outputs[1].claims, vec![ds.examples[1].text.clone()]);
    assert_eq!((outputs[1].avr, outputs[1].verify_ok), (None, None));
    assert_eq!(outputs[1].llm_calls, 0);
    // The calls summed per model and mode, as the timing table reads them: repair's
    // three shards call once each, over its 5 examples.
    let calls = store.llm_calls("run").await.unwrap();
    let sums: Vec<(Mode, u64, u64)> = calls.iter().map(|c| (c.mode, c.calls, c.outputs)).collect();
    assert_eq!(sums, [(Mode::Base, 0, 5), (Mode::Repair, 3, 5)]);
    let summed: u64 = outputs.iter().map(|o| u64::from(o.llm_calls)).sum();
    assert_eq!(summed, 3);
    let config = ConfigRef::of(&jobs[0]);
    let first = credence_infra::aggregation::aggregate_config(store, &config)
        .await
        .unwrap();
    let again = credence_infra::aggregation::aggregate_config(store, &config)
        .await
        .unwrap();
    assert_eq!(first, again);
    // Repair finished before base was aggregated: base's aggregation writes the pair.
    let cmp: Vec<(String, String, i64, f64, f64)> = store
        .query(Stmt::new(
            "SELECT a_mode, b_mode, n, delta, p_value FROM comparisons WHERE metric = 'jaccard_f1'",
        ))
        .await
        .unwrap();
    assert_eq!(cmp, [("repair".into(), "base".into(), 5, 0.5, 0.0)]);
    let means: Vec<(String, i64, f64)> = store
        .query(Stmt::new(
            "SELECT metric, n, mean FROM aggregates WHERE mode = 'base' ORDER BY metric",
        ))
        .await
        .unwrap();
    assert_eq!(
        means,
        [("jaccard_f1".into(), 5, 0.5), ("n_claims".into(), 5, 1.0)]
    );
    assert_eq!(count(store, "example_metrics").await, 10);
    assert_eq!(count(store, "predictions").await, 10);
    assert_eq!(store.finished_jobs("run").await.unwrap().len(), 6);

    // The wide view: one column per metric, NULL where the metric was not computed.
    let (n_claims, jaccard, semantic): (i64, f64, Option<f64>) = store
        .query(Stmt::new(
            "SELECT n_claims, jaccard_f1, semantic_f1 FROM example_metrics
             WHERE mode = 'base' ORDER BY example_id LIMIT 1",
        ))
        .await
        .unwrap()[0];
    assert_eq!((n_claims, jaccard, semantic), (1, 0.5, None));

    let (view,): (i64,) = store
        .query(Stmt::new(
            "SELECT count(*) FROM results WHERE pipeline_version = 'none'",
        ))
        .await
        .unwrap()[0];
    assert_eq!(view, 5);
}

async fn failed_jobs_stay_unfinished_and_done_is_final<DB: Engine>(store: &SqlStore<DB>) {
    let ds = dataset(5);
    let jobs = jobs(5, 2);
    let run = RunRecord {
        run_id: "run".into(),
        spec_json: spec_json(),
    };
    store
        .record_plan(&run, &[PlannedDatasetRecord { id: "d", data: &ds }], &jobs)
        .await
        .unwrap();
    store.mark_failed(&jobs[0], "boom").await.unwrap();
    assert!(store.finished_jobs("run").await.unwrap().is_empty());
    let ex = store.shard_examples(&jobs[1]).await.unwrap();
    let commit = store
        .record_results(&jobs[1], &results(&jobs[1], &ex, 1.0))
        .await
        .unwrap();
    assert!(commit.newly_done && !commit.completes_config);
    store.mark_failed(&jobs[1], "late failure").await.unwrap();
    let (state,): (String,) = store
        .query::<(String,)>(
            Stmt::new("SELECT state FROM jobs WHERE job_key = $1").bind(&jobs[1].key),
        )
        .await
        .unwrap()[0]
        .clone();
    assert_eq!(state, "done");
}

async fn caches_round_trip<DB: Engine>(store: &SqlStore<DB>) {
    assert_eq!(
        store.embeddings("enc", &["b".to_string()]).await.unwrap(),
        vec![None]
    );
    store
        .put_embeddings("enc", &[("b".into(), vec![0.5, -1.25])])
        .await
        .unwrap();
    store
        .put_embeddings("enc", &[("b".into(), vec![9.0])])
        .await
        .unwrap();
    let texts = vec!["a".to_string(), "b".to_string()];
    assert_eq!(
        store.embeddings("enc", &texts).await.unwrap(),
        vec![None, Some(vec![0.5, -1.25])]
    );
    store
        .put_generation(
            "m",
            "p",
            "greedy",
            "A.",
            TokenUsage {
                prompt_tokens: Some(9),
                completion_tokens: Some(2),
                seconds: Some(1.5),
            },
        )
        .await
        .unwrap();
    store
        .put_generation("m", "p", "greedy", "B.", TokenUsage::default())
        .await
        .unwrap();
    assert_eq!(
        store.generation("m", "p", "greedy").await.unwrap(),
        Some(CachedGeneration {
            completion: "A.".into(),
            seconds: Some(1.5),
        })
    );
    let tokens: Vec<(Option<i64>, Option<i64>)> = store
        .query(Stmt::new(
            "SELECT CAST(prompt_tokens AS BIGINT), CAST(completion_tokens AS BIGINT)
             FROM generation_cache WHERE model_fingerprint = 'm'",
        ))
        .await
        .unwrap();
    assert_eq!(tokens, [(Some(9), Some(2))]);

    // One lease per key: a second holder is refused until the first gives it back or
    // its lease runs out (by the database's clock in PostgreSQL, the machine's in SQLite).
    let ttl = std::time::Duration::from_secs(60);
    assert!(store
        .lease_generation("m", "q", "greedy", "w1", ttl)
        .await
        .unwrap());
    assert!(!store
        .lease_generation("m", "q", "greedy", "w2", ttl)
        .await
        .unwrap());
    // Its holder renews it; nobody else can.
    assert!(store
        .lease_generation("m", "q", "greedy", "w1", ttl)
        .await
        .unwrap());
    assert!(!store
        .lease_generation("m", "q", "greedy", "w2", ttl)
        .await
        .unwrap());
    assert!(store
        .lease_generation("m", "q", "other", "w2", ttl)
        .await
        .unwrap());
    store
        .release_generation("m", "q", "greedy", "w2")
        .await
        .unwrap();
    assert!(
        !store
            .lease_generation("m", "q", "greedy", "w2", ttl)
            .await
            .unwrap(),
        "only the holder releases"
    );
    store
        .release_generation("m", "q", "greedy", "w1")
        .await
        .unwrap();
    assert!(store
        .lease_generation("m", "q", "greedy", "w2", ttl)
        .await
        .unwrap());
    let short = std::time::Duration::from_millis(50);
    assert!(store
        .lease_generation("m", "r", "greedy", "w1", ttl)
        .await
        .unwrap());
    // A renewal with a short term: the lease now runs out 50 ms from now.
    assert!(store
        .lease_generation("m", "r", "greedy", "w1", short)
        .await
        .unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        store
            .lease_generation("m", "r", "greedy", "w3", ttl)
            .await
            .unwrap(),
        "a lease that ran out is taken over"
    );
    assert_eq!(
        store.embeddings("other", &["b".to_string()]).await.unwrap(),
        vec![None]
    );
    assert_eq!(store.generation("m", "p", "t=0.7").await.unwrap(), None);
}

/// A retry in place (the same delivery, after the database came back) is not a new
/// attempt: an outage does not push a job toward its delivery limit.
async fn only_a_new_attempt_counts<DB: Engine>(store: &SqlStore<DB>) {
    let ds = dataset(5);
    let jobs = jobs(5, 2);
    let run = RunRecord {
        run_id: "run".into(),
        spec_json: "{}".into(),
    };
    let planned = [PlannedDatasetRecord { id: "d", data: &ds }];
    store.record_plan(&run, &planned, &jobs).await.unwrap();
    let attempts = || async {
        let rows: Vec<(i64,)> = store
            .query(
                Stmt::new("SELECT CAST(attempts AS BIGINT) FROM jobs WHERE job_key = $1")
                    .bind(&jobs[0].key),
            )
            .await
            .unwrap();
        rows[0].0
    };
    assert_eq!(
        store
            .mark_running(&jobs[0], "w1", Attempt::New)
            .await
            .unwrap(),
        Some(1)
    );
    // Retries in place of the same delivery (the store was unreachable).
    for _ in 0..3 {
        assert_eq!(
            store
                .mark_running(&jobs[0], "w1", Attempt::SameDelivery)
                .await
                .unwrap(),
            Some(1)
        );
    }
    assert_eq!(attempts().await, 1);
    // A redelivery is a new attempt.
    assert_eq!(
        store
            .mark_running(&jobs[0], "w2", Attempt::New)
            .await
            .unwrap(),
        Some(2)
    );
    assert_eq!(attempts().await, 2);
}

/// A shard that ends past u32::MAX: `start + len` is computed in i64, so the shard reads
/// its rows instead of panicking (debug) or reading a wrapped, empty range (release).
async fn a_shard_ending_past_u32_max_reads_its_examples<DB: Engine>(store: &SqlStore<DB>) {
    let start = u32::MAX - 1;
    for pos in [
        i64::from(start) - 1,
        i64::from(start),
        i64::from(u32::MAX),
        i64::from(u32::MAX) + 1,
    ] {
        store
            .run(
                Stmt::new(
                    "INSERT INTO examples (dataset_hash, position, example_id, text,
                         references_json, meta_json)
                     VALUES ('big', $1, $2, 'T.', '[\"T.\"]', '{}')",
                )
                .bind(pos)
                .bind(format!("e{pos}")),
            )
            .await
            .unwrap();
    }
    let mut job = jobs(5, 2)[0].clone();
    job.dataset_hash = "big".into();
    job.start = start;
    job.len = 3;
    let ex = store.shard_examples(&job).await.unwrap();
    let ids: Vec<&str> = ex.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["e4294967294", "e4294967295", "e4294967296"]);
}

async fn the_recorded_sweep_reads_back_typed_and_a_corrupt_one_is_named<DB: Engine>(
    store: &SqlStore<DB>,
) {
    let ds = dataset(5);
    let planned = [PlannedDatasetRecord { id: "d", data: &ds }];
    let run = RunRecord {
        run_id: "run".into(),
        spec_json: spec_json(),
    };
    store
        .record_plan(&run, &planned, &jobs(5, 2))
        .await
        .unwrap();
    let sweep = store
        .recorded_sweep("run")
        .await
        .unwrap()
        .expect("recorded");
    assert_eq!(serde_json::to_string(&sweep).unwrap(), spec_json());
    assert_eq!(sweep.models[0].name, "m");
    assert!(store.recorded_sweep("absent").await.unwrap().is_none());

    store
        .run(Stmt::new(
            "UPDATE runs SET spec_json = '{\"sweep\": 1}' WHERE run_id = 'run'",
        ))
        .await
        .unwrap();
    match store.recorded_sweep("run").await {
        Err(StoreError::Corrupt { what, message }) => {
            assert_eq!(what, "recorded sweep");
            assert!(message.starts_with("run \"run\": "), "{message}");
        }
        other => panic!("a corrupt record read as {other:?}"),
    }
}
