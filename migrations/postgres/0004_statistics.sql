-- The paired bootstrap's results (shared/src/stats): each aggregate records how its
-- interval was computed, and comparisons (created empty in 0001) get the same columns as in SQLite.
-- Written by the aggregation of a configuration when its last job commits, in both
-- engines; rewritten, not duplicated, when an aggregation runs again.
ALTER TABLE aggregates ADD COLUMN resamples bigint;
ALTER TABLE aggregates ADD COLUMN seed bigint;
ALTER TABLE aggregates ADD COLUMN method text;

-- One row per metric of "a - b" on one dataset: every mode against base and all against
-- repair per model, plus the sweep's [[comparisons]]. p_value is two-sided,
-- min(1, 2 min(p_le, p_ge)); p_le = #{diff* <= 0} / B, p_ge = #{diff* >= 0} / B.
ALTER TABLE comparisons ADD COLUMN p_le double precision;
ALTER TABLE comparisons ADD COLUMN p_ge double precision;
ALTER TABLE comparisons ADD COLUMN resamples bigint;
ALTER TABLE comparisons ADD COLUMN seed bigint;
ALTER TABLE comparisons ADD COLUMN method text;

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
