-- Per-example metrics in long form: one row per job, example and metric, so that a new
-- metric needs no schema change. The metric list has one definition
-- (shared/src/domain/metrics.rs); the wide views people query (example_metrics, results)
-- are generated from it when the store opens, and recorded in generated_views.
CREATE TABLE metric_values (
    job_key     TEXT NOT NULL,
    example_id  TEXT NOT NULL,
    metric      TEXT NOT NULL,
    value       REAL NOT NULL,
    PRIMARY KEY (job_key, example_id, metric),
    FOREIGN KEY (job_key, example_id) REFERENCES predictions (job_key, example_id)
);

INSERT INTO metric_values (job_key, example_id, metric, value)
SELECT job_key, example_id, 'n_claims', n_claims FROM example_metrics
UNION ALL SELECT job_key, example_id, 'jaccard_f1', jaccard_f1 FROM example_metrics
UNION ALL SELECT job_key, example_id, 'semantic_f1', semantic_f1 FROM example_metrics WHERE semantic_f1 IS NOT NULL
UNION ALL SELECT job_key, example_id, 'epr', epr FROM example_metrics WHERE epr IS NOT NULL
UNION ALL SELECT job_key, example_id, 'avr', avr FROM example_metrics WHERE avr IS NOT NULL
UNION ALL SELECT job_key, example_id, 'rr', rr FROM example_metrics WHERE rr IS NOT NULL
UNION ALL SELECT job_key, example_id, 'verify_ok', verified FROM example_metrics WHERE verified IS NOT NULL
UNION ALL SELECT job_key, example_id, 'n_viol', n_viol FROM example_metrics WHERE n_viol IS NOT NULL;

DROP VIEW results;
DROP TABLE example_metrics;

-- The verifier's report on a mode's claims (JSON), and what the repair tiers did (JSON).
ALTER TABLE predictions ADD COLUMN verifier_json TEXT;
ALTER TABLE predictions ADD COLUMN repair_json TEXT;
CREATE INDEX predictions_by_config ON predictions (run_id, model, dataset, mode);

-- Views generated from the metric list, with the sha256 of the SQL that made them.
CREATE TABLE generated_views (
    name    TEXT PRIMARY KEY,
    sha256  TEXT NOT NULL
);
