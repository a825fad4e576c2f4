-- The paired bootstrap's results (shared/src/stats): each aggregate records how its
-- interval was computed, and paired comparisons get the same table as in PostgreSQL.
-- Written by the aggregation of a configuration when its last job commits, in both
-- engines; rewritten, not duplicated, when an aggregation runs again.
ALTER TABLE aggregates ADD COLUMN resamples INTEGER;
ALTER TABLE aggregates ADD COLUMN seed INTEGER;
ALTER TABLE aggregates ADD COLUMN method TEXT;

-- One row per metric of "a - b" on one dataset: every mode against base and all against
-- repair per model, plus the sweep's [[comparisons]]. p_value is two-sided,
-- min(1, 2 min(p_le, p_ge)); p_le = #{diff* <= 0} / B, p_ge = #{diff* >= 0} / B.
CREATE TABLE comparisons (
    run_id     TEXT NOT NULL,
    metric     TEXT NOT NULL,
    a_model    TEXT NOT NULL,
    a_mode     TEXT NOT NULL,
    b_model    TEXT NOT NULL,
    b_mode     TEXT NOT NULL,
    dataset    TEXT NOT NULL,
    n          INTEGER NOT NULL,
    delta      REAL NOT NULL,
    ci_low     REAL,
    ci_high    REAL,
    p_value    REAL,
    p_le       REAL,
    p_ge       REAL,
    resamples  INTEGER,
    seed       INTEGER,
    method     TEXT,
    PRIMARY KEY (run_id, metric, dataset, a_model, a_mode, b_model, b_mode)
);

-- For people: each comparison beside the two means it compares.
CREATE VIEW comparison_table AS
SELECT c.run_id, c.dataset, c.metric, c.a_model, c.a_mode, c.b_model, c.b_mode, c.n,
       a.mean AS a_mean, b.mean AS b_mean, c.delta, c.ci_low, c.ci_high, c.p_value,
       CASE WHEN c.p_value < 0.05 THEN 1 ELSE 0 END AS significant,
       c.resamples, c.seed, c.method
FROM comparisons c
LEFT JOIN aggregates a ON a.run_id = c.run_id AND a.model = c.a_model
     AND a.dataset = c.dataset AND a.mode = c.a_mode AND a.metric = c.metric
LEFT JOIN aggregates b ON b.run_id = c.run_id AND b.model = c.b_model
     AND b.dataset = c.dataset AND b.mode = c.b_mode AND b.metric = c.metric;

-- For people: each aggregate with its interval's width and its mode-vs-base test.
CREATE VIEW aggregate_table AS
SELECT g.run_id, g.model, g.dataset, g.mode, g.metric, g.n, g.mean, g.ci_low, g.ci_high,
       g.ci_high - g.ci_low AS ci_width, c.delta AS vs_base, c.p_value AS vs_base_p,
       g.resamples, g.seed, g.method
FROM aggregates g
LEFT JOIN comparisons c ON c.run_id = g.run_id AND c.dataset = g.dataset
     AND c.metric = g.metric AND c.a_model = g.model AND c.a_mode = g.mode
     AND c.b_model = g.model AND c.b_mode = 'base';
