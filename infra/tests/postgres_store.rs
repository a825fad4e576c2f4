//! What only the PostgreSQL store does, against the real server: migrations (twice,
//! concurrently), the `configs` rows that count a configuration's jobs down so that
//! exactly one commit completes it even when its last jobs commit at once, the
//! coordinator's queries, and a wrong URL. What both engines do is the store contract
//! (`store_contract.rs`).

mod support;

use credence_core::dataset::LoadedDataset;
use credence_core::domain::{Example, ExampleMetrics, ExampleResult, Mode};
use credence_core::domain::{Stage, StageTimes};
use credence_core::job::ConfigRef;
use credence_core::job::Job;
use credence_infra::store::postgres::PgStore;
use credence_infra::store::{Attempt, PlannedDatasetRecord, RunRecord, Store, StoreError};
use std::sync::Arc;
use support::fixtures::{dataset, jobs, spec_json};
use support::{servers_available, TestDb};

fn results(examples: &[Example], f1: f64) -> Vec<ExampleResult> {
    examples
        .iter()
        .map(|e| ExampleResult {
            example_id: e.id.clone(),
            base_claims: vec![e.text.clone()],
            claims: vec![e.text.clone(), "x".into()],
            pipeline_version: "base".into(),
            llm_calls: 0,
            verifier_json: Some(r#"{"n_viol":1}"#.into()),
            repair_json: None,
            error: None,
            metrics: ExampleMetrics {
                n_claims: Some(2),
                jaccard_f1: Some(f1),
                epr: Some(0.5),
                verify_ok: Some(true),
                n_viol: Some(1),
                ..ExampleMetrics::default()
            },
            stage_seconds: {
                let mut t = StageTimes::default();
                t.add(Stage::Decompose, f1 + 0.25);
                t
            },
        })
        .collect()
}

async fn count(store: &PgStore, sql: &str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(store.pool())
        .await
        .unwrap()
}

async fn planned_store(db: &TestDb, n: usize, shard: u32) -> (PgStore, LoadedDataset, Vec<Job>) {
    // Two stores migrating at once: the migrator's advisory lock serialises them.
    let (a, b) = tokio::join!(PgStore::connect(&db.url, 4), PgStore::connect(&db.url, 4));
    let (store, _) = (a.unwrap(), b.unwrap());
    let ds = dataset(n);
    let jobs = jobs(n as u32, shard);
    let run = RunRecord {
        run_id: "run".into(),
        spec_json: spec_json(),
    };
    let planned = [PlannedDatasetRecord { id: "d", data: &ds }];
    store.record_plan(&run, &planned, &jobs).await.unwrap();
    store.record_plan(&run, &planned, &jobs).await.unwrap();
    (store, ds, jobs)
}

#[tokio::test]
async fn results_are_idempotent_and_one_commit_completes_each_configuration() {
    if !servers_available("postgres store") {
        return;
    }
    let db = TestDb::create();
    let (store, ds, jobs) = planned_store(&db, 5, 2).await;
    assert_eq!(count(&store, "SELECT count(*) FROM examples").await, 5);
    assert_eq!(count(&store, "SELECT count(*) FROM jobs").await, 6);
    assert_eq!(count(&store, "SELECT count(*) FROM configs").await, 2);

    for job in &jobs {
        let ex = store.shard_examples(job).await.unwrap();
        assert_eq!(
            ex,
            ds.examples[job.start as usize..(job.start + job.len) as usize]
        );
        assert_eq!(
            store.mark_running(job, "w1", Attempt::New).await.unwrap(),
            Some(1)
        );
        store.heartbeat(job, "w1").await.unwrap();
        let commit = store.record_results(job, &results(&ex, 0.5)).await.unwrap();
        assert!(commit.newly_done);
        assert_eq!(commit.completes_config, job.shard == 2, "{job:?}");
        let again = store.record_results(job, &results(&ex, 0.0)).await.unwrap();
        assert!(!again.newly_done && !again.completes_config);
        assert_eq!(
            store.mark_running(job, "w2", Attempt::New).await.unwrap(),
            None
        );
    }
    // One stage row per example and job, from the first write.
    let timings = store.stage_seconds("run").await.unwrap();
    assert_eq!(timings.len(), 10);
    assert!(timings
        .iter()
        .all(|t| t.stage == Stage::Decompose && t.seconds == 0.75));
    // What the audits read: every output with its source, references and metrics, in
    // model, dataset, mode and dataset order.
    let outputs = store.run_outputs("run").await.unwrap();
    assert_eq!(outputs.len(), 10);
    assert_eq!(outputs[0].mode, Mode::Base);
    assert_eq!(outputs[5].mode, Mode::Repair);
    let first = &outputs[0];
    assert_eq!(
        (first.example_id.as_str(), first.text.as_str()),
        ("e0", ds.examples[0].text.as_str())
    );
    assert_eq!(first.references, ds.examples[0].references);
    assert_eq!(first.claims, vec![ds.examples[0].text.clone(), "x".into()]);
    assert_eq!(
        (first.epr, first.n_viol, first.verify_ok, first.avr),
        (Some(0.5), Some(1.0), Some(true), None)
    );
    assert!(store.run_outputs("other").await.unwrap().is_empty());
    assert_eq!(count(&store, "SELECT count(*) FROM predictions").await, 10);
    assert_eq!(count(&store, "SELECT count(*) FROM results").await, 10);
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM example_metrics WHERE jaccard_f1 = 0.5"
        )
        .await,
        10
    );
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM configs WHERE state = 'aggregating'"
        )
        .await,
        2
    );
    let config = ConfigRef::of(&jobs[0]);
    let first = credence_infra::aggregation::aggregate_config(&store, &config)
        .await
        .unwrap();
    let again = credence_infra::aggregation::aggregate_config(&store, &config)
        .await
        .unwrap();
    assert_eq!(first, again);
    let means: Vec<(String, i64, f64)> = sqlx::query_as(
        "SELECT metric, n, mean FROM aggregates WHERE mode = 'base' ORDER BY metric",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        means,
        [
            ("epr".to_string(), 5, 0.5),
            ("jaccard_f1".to_string(), 5, 0.5),
            ("n_claims".to_string(), 5, 2.0),
            ("n_viol".to_string(), 5, 1.0),
            ("verify_ok".to_string(), 5, 1.0)
        ]
    );
    let state: String = sqlx::query_scalar("SELECT state FROM configs WHERE mode = 'base'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(state, "complete");
    // The generated views: typed columns per metric, the verifier report as jsonb.
    let (n_viol, verify_ok, semantic, report): (i64, i64, Option<f64>, Option<serde_json::Value>) =
        sqlx::query_as(
            "SELECT n_viol, verify_ok, semantic_f1, verifier FROM results
             WHERE mode = 'base' ORDER BY example_id LIMIT 1",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(
        (n_viol, verify_ok, semantic, report),
        (1, 1, None, Some(serde_json::json!({"n_viol": 1})))
    );
    let (n, verify_ok): (i64, Option<f64>) =
        sqlx::query_as("SELECT n, verify_ok FROM config_summary WHERE mode = 'base'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!((n, verify_ok), (5, Some(1.0)));
    let progress = store.progress("run").await.unwrap();
    assert_eq!(progress.len(), 2);
    assert_eq!(
        (
            progress[0].done,
            progress[0].jobs,
            progress[0].examples_done
        ),
        (3, 3, 5)
    );
    assert!(store.unfinished_jobs("run").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_last_commits_complete_the_configuration_exactly_once() {
    if !servers_available("postgres store") {
        return;
    }
    let db = TestDb::create();
    let (store, ds, jobs) = planned_store(&db, 40, 1).await;
    let store = Arc::new(store);
    // Every job of both configurations commits at once, twice over (redeliveries).
    let mut tasks = tokio::task::JoinSet::new();
    for job in jobs.iter().chain(jobs.iter()).cloned() {
        let store = store.clone();
        let ex = vec![ds.examples[job.start as usize].clone()];
        tasks.spawn(async move { store.record_results(&job, &results(&ex, 1.0)).await });
    }
    let mut completing = 0;
    let mut newly_done = 0;
    while let Some(r) = tasks.join_next().await {
        let commit = r.unwrap().unwrap();
        completing += usize::from(commit.completes_config);
        newly_done += usize::from(commit.newly_done);
    }
    assert_eq!(newly_done, jobs.len());
    assert_eq!(completing, 2, "one completing commit per configuration");
    assert_eq!(
        count(&store, "SELECT count(*) FROM example_metrics").await,
        80
    );
}

#[tokio::test]
async fn coordinator_queries() {
    if !servers_available("postgres store") {
        return;
    }
    let db = TestDb::create();
    let (store, _ds, jobs) = planned_store(&db, 5, 2).await;
    let keys: Vec<String> = jobs.iter().map(|j| j.key.clone()).collect();
    assert_eq!(store.mark_queued(&keys).await.unwrap(), 6);
    assert_eq!(
        store
            .mark_running(&jobs[0], "w1", Attempt::New)
            .await
            .unwrap(),
        Some(1)
    );
    store.mark_failed(&jobs[1], "boom").await.unwrap();
    let failures = store.failures("run").await.unwrap();
    assert_eq!((failures.len(), failures[0].error.as_str()), (1, "boom"));
    // A heartbeat older than zero seconds is stale.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let stale = store
        .stale_jobs(std::time::Duration::from_millis(10))
        .await
        .unwrap();
    assert_eq!(stale.len(), 1);
    assert!(store.requeue_stale(&stale[0].job, "w1").await.unwrap());
    assert!(!store.requeue_stale(&stale[0].job, "w1").await.unwrap());
    assert_eq!(
        store
            .queued_jobs(std::time::Duration::ZERO)
            .await
            .unwrap()
            .len(),
        5
    );
    assert_eq!(store.cancel_run("run").await.unwrap(), 6);
    assert_eq!(
        store
            .mark_running(&jobs[2], "w1", Attempt::New)
            .await
            .unwrap(),
        None
    );
    assert!(store
        .queued_jobs(std::time::Duration::ZERO)
        .await
        .unwrap()
        .is_empty());
    store.reopen_run("run").await.unwrap();
    assert_eq!(store.unfinished_jobs("run").await.unwrap(), jobs);
}

#[tokio::test]
async fn wrong_urls_name_the_host_not_the_password() {
    if !servers_available("postgres store") {
        return;
    }
    let err = PgStore::connect("postgres://alice:hunter2@127.0.0.1:1/credence", 1)
        .await
        .err()
        .expect("nothing listens on port 1");
    let text = err.to_string();
    assert!(
        text.starts_with("cannot open the store at 127.0.0.1:1/credence: "),
        "{text}"
    );
    assert!(!text.contains("hunter2") && !text.contains('\n'), "{text}");
    assert!(err.is_transient());
    let err = PgStore::connect("postgres://alice:hunter2@[bad", 1)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::BadUrl));
    assert!(!err.to_string().contains("hunter2"));
}
