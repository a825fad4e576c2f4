-- credence embedded store (SQLite). The PostgreSQL schema mirrors it.
-- Idempotency: every write is keyed so that replaying it changes nothing.

CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,
    spec_json   TEXT NOT NULL,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Which dataset files a run uses (a dataset id may point at a new file on a later plan).
CREATE TABLE run_datasets (
    run_id        TEXT NOT NULL REFERENCES runs(run_id),
    dataset_id    TEXT NOT NULL,
    dataset_hash  TEXT NOT NULL,
    path          TEXT NOT NULL,
    n_examples    INTEGER NOT NULL,
    PRIMARY KEY (run_id, dataset_id, dataset_hash)
);

-- Examples are stored once per dataset content hash, in file order.
CREATE TABLE examples (
    dataset_hash     TEXT NOT NULL,
    position         INTEGER NOT NULL,
    example_id       TEXT NOT NULL,
    text             TEXT NOT NULL,
    references_json  TEXT NOT NULL,
    meta_json        TEXT NOT NULL,
    PRIMARY KEY (dataset_hash, position),
    UNIQUE (dataset_hash, example_id)
);

CREATE TABLE jobs (
    job_key            TEXT PRIMARY KEY,
    run_id             TEXT NOT NULL REFERENCES runs(run_id),
    model              TEXT NOT NULL,
    model_fingerprint  TEXT NOT NULL,
    dataset            TEXT NOT NULL,
    dataset_hash       TEXT NOT NULL,
    mode               TEXT NOT NULL CHECK (mode IN ('base', 'repair', 'self_repair', 'all')),
    shard              INTEGER NOT NULL,
    start              INTEGER NOT NULL,
    len                INTEGER NOT NULL,
    config_version     TEXT NOT NULL,
    state              TEXT NOT NULL DEFAULT 'planned'
                       CHECK (state IN ('planned', 'queued', 'running', 'done', 'failed')),
    attempts           INTEGER NOT NULL DEFAULT 0,
    worker             TEXT,
    heartbeat_at       TEXT,
    error              TEXT,
    started_at         TEXT,
    finished_at        TEXT,
    created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX jobs_by_run_state ON jobs (run_id, state);

-- Claims per example per job (a job is one model x dataset x mode x shard). No timings
-- here: result rows are deterministic; job timings live in jobs.
CREATE TABLE predictions (
    job_key           TEXT NOT NULL REFERENCES jobs(job_key),
    example_id        TEXT NOT NULL,
    run_id            TEXT NOT NULL,
    model             TEXT NOT NULL,
    dataset           TEXT NOT NULL,
    mode              TEXT NOT NULL,
    base_claims_json  TEXT NOT NULL,
    claims_json       TEXT NOT NULL,
    pipeline_version  TEXT NOT NULL,
    llm_calls         INTEGER NOT NULL,
    PRIMARY KEY (job_key, example_id)
);

-- One row per example per job; a metric is NULL when the sweep lacks what it needs.
CREATE TABLE example_metrics (
    job_key      TEXT NOT NULL REFERENCES jobs(job_key),
    example_id   TEXT NOT NULL,
    run_id       TEXT NOT NULL,
    model        TEXT NOT NULL,
    dataset      TEXT NOT NULL,
    mode         TEXT NOT NULL,
    n_claims     INTEGER NOT NULL,
    jaccard_f1   REAL NOT NULL,
    semantic_f1  REAL,
    epr          REAL,
    avr          REAL,
    rr           REAL,
    verified     INTEGER,
    n_viol       INTEGER,
    PRIMARY KEY (job_key, example_id)
);
CREATE INDEX example_metrics_by_config ON example_metrics (run_id, model, dataset, mode);

CREATE TABLE generation_cache (
    model_fingerprint  TEXT NOT NULL,
    prompt_sha256      TEXT NOT NULL,
    params             TEXT NOT NULL,
    prompt             TEXT NOT NULL,
    completion         TEXT NOT NULL,
    created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (model_fingerprint, prompt_sha256, params)
);

CREATE TABLE embedding_cache (
    encoder_fingerprint  TEXT NOT NULL,
    text_sha256          TEXT NOT NULL,
    text                 TEXT NOT NULL,
    dim                  INTEGER NOT NULL,
    vector               BLOB NOT NULL,  -- dim little-endian f32
    PRIMARY KEY (encoder_fingerprint, text_sha256)
);

CREATE TABLE aggregates (
    run_id    TEXT NOT NULL,
    model     TEXT NOT NULL,
    dataset   TEXT NOT NULL,
    mode      TEXT NOT NULL,
    metric    TEXT NOT NULL,
    n         INTEGER NOT NULL,
    mean      REAL NOT NULL,
    ci_low    REAL,
    ci_high   REAL,
    p_value   REAL,
    PRIMARY KEY (run_id, model, dataset, mode, metric)
);

-- For people: one row per example and mode with its claims and metrics.
CREATE VIEW results AS
SELECT m.run_id, m.model, m.dataset, m.mode, m.example_id,
       e.text, p.claims_json AS claims, e.references_json AS "references",
       m.n_claims, m.jaccard_f1, m.semantic_f1, m.epr, m.avr, m.rr, m.verified,
       p.pipeline_version
FROM example_metrics m
JOIN predictions p ON p.job_key = m.job_key AND p.example_id = m.example_id
JOIN jobs j ON j.job_key = m.job_key
JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = m.example_id;

CREATE VIEW job_progress AS
SELECT run_id, model, dataset, mode,
       count(*) AS jobs,
       sum(state = 'done') AS done,
       sum(state = 'failed') AS failed,
       sum(state IN ('planned', 'queued', 'running')) AS pending
FROM jobs GROUP BY run_id, model, dataset, mode;
