use super::*;
use crate::dataset::LoadedDataset;
use crate::domain::{ExampleMetrics, Mode};
use crate::job::{plan, PlannedDataset, PlannedModel};

fn dataset() -> LoadedDataset {
    LoadedDataset {
        path: "d.jsonl".into(),
        hash: "h".into(),
        examples: (0..5)
            .map(|i| Example {
                id: format!("e{i}"),
                text: format!("Text {i} and more."),
                references: vec![format!("Text {i}."), "More.".into()],
                meta: Default::default(),
            })
            .collect(),
    }
}

fn jobs() -> Vec<Job> {
    let models = [PlannedModel {
        name: "m".into(),
        fingerprint: "f".into(),
    }];
    let ds = [PlannedDataset {
        id: "d".into(),
        hash: "h".into(),
        len: 5,
    }];
    plan("run", &models, &ds, &[Mode::Base, Mode::Repair], 2, "c")
}

fn results(job: &Job, examples: &[Example], f1: f64) -> Vec<ExampleResult> {
    examples
        .iter()
        .map(|e| ExampleResult {
            example_id: e.id.clone(),
            base_claims: vec![e.text.clone()],
            claims: vec![e.text.clone()],
            pipeline_version: if job.mode == Mode::Base {
                "base".into()
            } else {
                "none".into()
            },
            llm_calls: 0,
            metrics: ExampleMetrics {
                n_claims: 1,
                jaccard_f1: f1,
                ..Default::default()
            },
        })
        .collect()
}

async fn count(store: &SqliteStore, table: &str) -> i64 {
    sqlx::query(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn results_are_idempotent_and_summarised_in_plan_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    let ds = dataset();
    let jobs = jobs();
    let run = RunRecord {
        run_id: "run".into(),
        spec_json: "{}".into(),
    };
    let planned = [PlannedDatasetRecord { id: "d", data: &ds }];
    store.record_plan(&run, &planned, &jobs).await.unwrap();
    store.record_plan(&run, &planned, &jobs).await.unwrap();
    assert_eq!(count(&store, "examples").await, 5);
    assert_eq!(count(&store, "jobs").await, 6);

    for job in &jobs {
        let ex = store.shard_examples(job).await.unwrap();
        assert_eq!(ex.len() as u32, job.len);
        assert_eq!(ex[0], ds.examples[job.start as usize]);
        assert!(store.mark_running(job, "w1").await.unwrap());
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
        assert!(!store.mark_running(job, "w2").await.unwrap());
    }
    store
        .aggregate_config(&ConfigRef::of(&jobs[0]))
        .await
        .unwrap();
    store
        .aggregate_config(&ConfigRef::of(&jobs[0]))
        .await
        .unwrap();
    let means: Vec<(String, i64, f64)> = sqlx::query_as(
        "SELECT metric, n, mean FROM aggregates WHERE mode = 'base' ORDER BY metric",
    )
    .fetch_all(store.pool())
    .await
    .unwrap();
    assert_eq!(
        means,
        [("jaccard_f1".into(), 5, 0.5), ("n_claims".into(), 5, 1.0)]
    );
    assert_eq!(count(&store, "example_metrics").await, 10);
    assert_eq!(count(&store, "predictions").await, 10);
    assert_eq!(store.finished_jobs("run").await.unwrap().len(), 6);

    let summary = store.summary(&jobs).await.unwrap();
    assert_eq!(summary.len(), 2);
    assert_eq!(
        (summary[0].mode, summary[0].n, summary[0].jaccard_f1),
        (Mode::Base, 5, 0.5)
    );
    assert_eq!(
        (summary[1].mode, summary[1].jaccard_f1),
        (Mode::Repair, 1.0)
    );
    assert_eq!(summary[0].semantic_f1, None);

    let view: i64 = sqlx::query("SELECT count(*) FROM results WHERE pipeline_version = 'none'")
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get(0);
    assert_eq!(view, 5);
}

#[tokio::test]
async fn failed_jobs_stay_unfinished_and_done_is_final() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    let ds = dataset();
    let jobs = jobs();
    let run = RunRecord {
        run_id: "run".into(),
        spec_json: "{}".into(),
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
    let state: String = sqlx::query("SELECT state FROM jobs WHERE job_key = ?")
        .bind(&jobs[1].key)
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "done");
}

#[tokio::test]
async fn caches_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    let texts = vec!["a".to_string(), "b".to_string()];
    store
        .put_embeddings("enc", &[("b".into(), vec![0.5, -1.25])])
        .await
        .unwrap();
    store
        .put_embeddings("enc", &[("b".into(), vec![9.0, 9.0])])
        .await
        .unwrap();
    let got = store.embeddings("enc", &texts).await.unwrap();
    assert_eq!(got, vec![None, Some(vec![0.5, -1.25])]);
    assert_eq!(
        store.embeddings("other", &texts).await.unwrap(),
        vec![None, None]
    );

    assert_eq!(store.generation("m", "p", "greedy").await.unwrap(), None);
    store
        .put_generation("m", "p", "greedy", "A.\nB.")
        .await
        .unwrap();
    assert_eq!(
        store
            .generation("m", "p", "greedy")
            .await
            .unwrap()
            .as_deref(),
        Some("A.\nB.")
    );
    assert_eq!(store.generation("m", "p", "t=0.7").await.unwrap(), None);
}
