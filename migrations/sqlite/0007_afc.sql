-- Downstream fact-checking (PAPER.md "AFC"). An AFC job is a row of `jobs` like any
-- other (state, attempts, heartbeat, the configuration's countdown), one decomposer x AFC
-- dataset x setting x shard; its `dataset` is the configuration's id
-- `<AFC dataset>@<setting>` and `afc_json` its AFC dataset, setting and judge. NULL for
-- a decomposition job.
ALTER TABLE jobs ADD COLUMN afc_json TEXT;

-- One row per claim per AFC job: the claims the judge read (the sub-claims, or the claim
-- itself), each judgement, and the claim's verdict and score. Written with the job's
-- `done` state in one transaction, keyed so that a redelivery changes nothing.
CREATE TABLE afc_results (
    job_key       TEXT NOT NULL REFERENCES jobs(job_key),
    example_id    TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    model         TEXT NOT NULL,   -- the decomposer
    dataset       TEXT NOT NULL,   -- the AFC dataset's id
    setting       TEXT NOT NULL CHECK (setting IN ('none', 'credence', 'factscore')),
    mode          TEXT NOT NULL,   -- the mode the sub-claims come from
    judge         TEXT NOT NULL,
    gold          TEXT NOT NULL CHECK (gold IN ('SUPPORT', 'REFUTE')),
    verdict       TEXT NOT NULL CHECK (verdict IN ('SUPPORT', 'REFUTE')),
    score         REAL NOT NULL,
    n_subclaims   INTEGER NOT NULL,   -- sub-claims of the decomposition (0: none, or empty)
    fell_back     INTEGER NOT NULL CHECK (fell_back IN (0, 1)),  -- empty decomposition: judged whole
    unparsable    INTEGER NOT NULL,   -- judgements whose answer held no label
    llm_calls     INTEGER NOT NULL,
    judged_json   TEXT NOT NULL,   -- [{"claim", "label", "score"}] in order
    error         TEXT,
    PRIMARY KEY (job_key, example_id)
);
CREATE INDEX afc_results_by_config ON afc_results (run_id, model, dataset, setting);

-- For people: one row per claim and setting, with its text and the judge's reading.
CREATE VIEW afc_examples AS
SELECT r.run_id, r.model AS decomposer, r.dataset, r.setting, r.example_id,
       e.text AS claim, r.gold, r.verdict, r.score,
       CASE WHEN r.verdict = r.gold THEN 1 ELSE 0 END AS correct,
       r.n_subclaims, r.fell_back, r.unparsable, r.judged_json AS judged, r.judge, r.mode
FROM afc_results r
JOIN jobs j ON j.job_key = r.job_key
JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = r.example_id;

-- The paper's AFC table without intervals (`credence report --table afc` adds the
-- paired bootstrap's): per decomposer, AFC dataset and setting, accuracy, macro-F1 over
-- the two labels (a label never predicted right scores 0), ROC-AUC of the score against
-- SUPPORT (average ranks for ties; NULL with one class), and the mean sub-claims.
CREATE VIEW afc_table AS
WITH ranked AS (
    SELECT r.*,
           rank() OVER (PARTITION BY run_id, model, dataset, setting ORDER BY score)
             + (count(*) OVER (PARTITION BY run_id, model, dataset, setting, score) - 1) / 2.0
             AS score_rank
    FROM afc_results r
), counts AS (
    SELECT run_id, model, dataset, setting,
           count(*) AS n,
           sum(CASE WHEN verdict = gold THEN 1 ELSE 0 END) AS correct,
           sum(CASE WHEN gold = 'SUPPORT' AND verdict = 'SUPPORT' THEN 1 ELSE 0 END) AS tp_s,
           sum(CASE WHEN gold = 'REFUTE' AND verdict = 'SUPPORT' THEN 1 ELSE 0 END) AS fp_s,
           sum(CASE WHEN gold = 'SUPPORT' AND verdict = 'REFUTE' THEN 1 ELSE 0 END) AS fn_s,
           sum(CASE WHEN gold = 'REFUTE' AND verdict = 'REFUTE' THEN 1 ELSE 0 END) AS tp_r,
           sum(CASE WHEN gold = 'SUPPORT' THEN 1 ELSE 0 END) AS pos,
           sum(CASE WHEN gold = 'SUPPORT' THEN score_rank ELSE 0 END) AS pos_rank_sum,
           avg(n_subclaims) AS mean_subclaims,
           sum(fell_back) AS fell_back,
           sum(unparsable) AS unparsable
    FROM ranked
    GROUP BY run_id, model, dataset, setting
)
SELECT run_id, model AS decomposer, dataset, setting, n,
       1.0 * correct / n AS accuracy,
       ((CASE WHEN tp_s = 0 THEN 0.0 ELSE 2.0 * tp_s / (2 * tp_s + fp_s + fn_s) END)
        + (CASE WHEN tp_r = 0 THEN 0.0 ELSE 2.0 * tp_r / (2 * tp_r + fn_s + fp_s) END)) / 2.0
         AS macro_f1,
       CASE WHEN pos = 0 OR pos = n THEN NULL
            ELSE (pos_rank_sum - pos * (pos + 1) / 2.0) / (1.0 * pos * (n - pos)) END AS roc_auc,
       mean_subclaims, fell_back, unparsable
FROM counts;
