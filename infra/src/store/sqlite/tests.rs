use credence_core::domain::ExampleMetrics;

/// A store written before metrics moved to long form keeps its values: migration 0002
/// moves every non-NULL column of the old `example_metrics` into `metric_values`, and the
/// generated view gives them back under the metric list's names.
#[tokio::test]
async fn migration_0002_keeps_the_old_metric_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}?mode=rwc", path.display()))
        .await
        .unwrap();
    sqlx::raw_sql(include_str!("../../../../migrations/sqlite/0001_init.sql"))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO runs (run_id, spec_json) VALUES ('r', '{}');
         INSERT INTO examples VALUES ('h', 0, 'e0', 'A and B.', '[\"A.\",\"B.\"]', '{}');
         INSERT INTO jobs (job_key, run_id, model, model_fingerprint, dataset, dataset_hash,
                           mode, shard, start, len, config_version, state)
         VALUES ('k', 'r', 'm', 'f', 'd', 'h', 'base', 0, 0, 1, 'c', 'done');
         INSERT INTO predictions VALUES ('k', 'e0', 'r', 'm', 'd', 'base', '[]', '[\"A and B.\"]', 'base', 0);
         INSERT INTO example_metrics VALUES ('k', 'e0', 'r', 'm', 'd', 'base', 1, 0.5, NULL, 1.0, 1.0, NULL, 0, 2);",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::raw_sql(include_str!(
        "../../../../migrations/sqlite/0002_metric_values.sql"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let moved: Vec<(String, f64)> =
        sqlx::query_as("SELECT metric, value FROM metric_values ORDER BY metric")
            .fetch_all(&pool)
            .await
            .unwrap();
    let expected = [
        ("avr", 1.0),
        ("epr", 1.0),
        ("jaccard_f1", 0.5),
        ("n_claims", 1.0),
        ("n_viol", 2.0),
        ("verify_ok", 0.0),
    ];
    assert_eq!(moved, expected.map(|(m, v)| (m.to_string(), v)).to_vec());
    for (metric, _) in &moved {
        assert!(
            ExampleMetrics::DEFS.iter().any(|d| d.name == metric),
            "{metric} is not in the metric list"
        );
    }
}
