-- credence distributed store (PostgreSQL): the source of truth of a distributed run.
-- Mirrors migrations/sqlite so that result rows are identical in both engines; JSON is
-- kept as text (byte-identical to the embedded engine), the views cast it to jsonb.
-- Idempotency: every write is keyed so that replaying it changes nothing.

CREATE TABLE runs (
    run_id      text PRIMARY KEY,
    spec_json   text NOT NULL,
    state       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'cancelled')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE run_datasets (
    run_id        text NOT NULL REFERENCES runs(run_id),
    dataset_id    text NOT NULL,
    dataset_hash  text NOT NULL,
    path          text NOT NULL,
    n_examples    bigint NOT NULL,
    PRIMARY KEY (run_id, dataset_id, dataset_hash)
);

-- Examples are stored once per dataset content hash, in file order.
CREATE TABLE examples (
    dataset_hash     text NOT NULL,
    position         bigint NOT NULL,
    example_id       text NOT NULL,
    text             text NOT NULL,
    references_json  text NOT NULL,
    meta_json        text NOT NULL,
    PRIMARY KEY (dataset_hash, position),
    UNIQUE (dataset_hash, example_id)
);

-- One row per model x dataset x mode of a run. `jobs_left` counts its jobs not done;
-- the commit that newly finishes a job decrements it under the row's lock, and the one
-- that takes it to 0 moves the state from 'running' to 'aggregating', which is what
-- enqueues exactly one aggregation job; the aggregation job moves it to 'complete'.
CREATE TABLE configs (
    run_id         text NOT NULL REFERENCES runs(run_id),
    model          text NOT NULL,
    dataset        text NOT NULL,
    mode           text NOT NULL CHECK (mode IN ('base', 'repair', 'self_repair', 'all')),
    state          text NOT NULL DEFAULT 'running'
                   CHECK (state IN ('running', 'aggregating', 'complete')),
    jobs_left      bigint NOT NULL DEFAULT 0,
    aggregations   integer NOT NULL DEFAULT 0,  -- aggregation jobs run (1 unless a message was re-published)
    ready_at       timestamptz,
    completed_at   timestamptz,
    PRIMARY KEY (run_id, model, dataset, mode)
);

CREATE TABLE jobs (
    job_key            text PRIMARY KEY,
    run_id             text NOT NULL REFERENCES runs(run_id),
    model              text NOT NULL,
    model_fingerprint  text NOT NULL,
    dataset            text NOT NULL,
    dataset_hash       text NOT NULL,
    mode               text NOT NULL CHECK (mode IN ('base', 'repair', 'self_repair', 'all')),
    shard              bigint NOT NULL,
    start              bigint NOT NULL,
    len                bigint NOT NULL,
    config_version     text NOT NULL,
    plan_order         bigint NOT NULL,
    state              text NOT NULL DEFAULT 'planned'
                       CHECK (state IN ('planned', 'queued', 'running', 'done', 'failed', 'cancelled')),
    attempts           integer NOT NULL DEFAULT 0,
    publishes          integer NOT NULL DEFAULT 0,
    worker             text,
    heartbeat_at       timestamptz,
    error              text,
    queued_at          timestamptz,
    started_at         timestamptz,
    finished_at        timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (run_id, model, dataset, mode) REFERENCES configs (run_id, model, dataset, mode)
);
CREATE INDEX jobs_by_run_state ON jobs (run_id, state);
CREATE INDEX jobs_by_config ON jobs (run_id, model, dataset, mode);
-- The reaper's scan: running jobs by heartbeat age.
CREATE INDEX jobs_running_heartbeat ON jobs (heartbeat_at) WHERE state = 'running';

-- Claims per example per job. No timings here: result rows are deterministic.
CREATE TABLE predictions (
    job_key           text NOT NULL REFERENCES jobs(job_key),
    example_id        text NOT NULL,
    run_id            text NOT NULL,
    model             text NOT NULL,
    dataset           text NOT NULL,
    mode              text NOT NULL,
    base_claims_json  text NOT NULL,
    claims_json       text NOT NULL,
    pipeline_version  text NOT NULL,
    llm_calls         bigint NOT NULL,
    PRIMARY KEY (job_key, example_id)
);

-- One row per example per job; a metric is NULL when the sweep lacks what it needs.
CREATE TABLE example_metrics (
    job_key      text NOT NULL REFERENCES jobs(job_key),
    example_id   text NOT NULL,
    run_id       text NOT NULL,
    model        text NOT NULL,
    dataset      text NOT NULL,
    mode         text NOT NULL,
    n_claims     bigint NOT NULL,
    jaccard_f1   double precision NOT NULL,
    semantic_f1  double precision,
    epr          double precision,
    avr          double precision,
    rr           double precision,
    verified     boolean,
    n_viol       bigint,
    PRIMARY KEY (job_key, example_id)
);
CREATE INDEX example_metrics_by_config ON example_metrics (run_id, model, dataset, mode);

CREATE TABLE generation_cache (
    model_fingerprint  text NOT NULL,
    prompt_sha256      text NOT NULL,
    params             text NOT NULL,
    prompt             text NOT NULL,
    completion         text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model_fingerprint, prompt_sha256, params)
);

CREATE TABLE embedding_cache (
    encoder_fingerprint  text NOT NULL,
    text_sha256          text NOT NULL,
    text                 text NOT NULL,
    dim                  integer NOT NULL,
    vector               bytea NOT NULL,  -- dim little-endian f32
    PRIMARY KEY (encoder_fingerprint, text_sha256)
);

CREATE TABLE aggregates (
    run_id    text NOT NULL,
    model     text NOT NULL,
    dataset   text NOT NULL,
    mode      text NOT NULL,
    metric    text NOT NULL,
    n         bigint NOT NULL,
    mean      double precision NOT NULL,
    ci_low    double precision,
    ci_high   double precision,
    p_value   double precision,
    PRIMARY KEY (run_id, model, dataset, mode, metric)
);

-- Paired comparisons between two configurations (filled by the statistics issue).
CREATE TABLE comparisons (
    run_id     text NOT NULL,
    metric     text NOT NULL,
    a_model    text NOT NULL,
    a_mode     text NOT NULL,
    b_model    text NOT NULL,
    b_mode     text NOT NULL,
    dataset    text NOT NULL,
    n          bigint NOT NULL,
    delta      double precision NOT NULL,
    ci_low     double precision,
    ci_high    double precision,
    p_value    double precision,
    PRIMARY KEY (run_id, metric, dataset, a_model, a_mode, b_model, b_mode)
);

-- For people: one row per example and mode with its claims and metrics.
CREATE VIEW results AS
SELECT m.run_id, m.model, m.dataset, m.mode, m.example_id,
       e.text, p.claims_json::jsonb AS claims, e.references_json::jsonb AS "references",
       m.n_claims, m.jaccard_f1, m.semantic_f1, m.epr, m.avr, m.rr, m.verified,
       p.pipeline_version
FROM example_metrics m
JOIN predictions p ON p.job_key = m.job_key AND p.example_id = m.example_id
JOIN jobs j ON j.job_key = m.job_key
JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = m.example_id;

-- Mean of each metric per model x dataset x mode, with its configuration state.
CREATE VIEW config_summary AS
SELECT c.run_id, c.model, c.dataset, c.mode, c.state,
       count(m.example_id) AS n,
       avg(m.n_claims) AS claims,
       avg(m.jaccard_f1) AS jaccard_f1,
       avg(m.semantic_f1) AS semantic_f1,
       avg(m.epr) AS epr,
       avg(m.avr) AS avr,
       avg(m.rr) AS rr,
       avg(m.verified::int) AS verify
FROM configs c
LEFT JOIN example_metrics m
  ON m.run_id = c.run_id AND m.model = c.model AND m.dataset = c.dataset AND m.mode = c.mode
GROUP BY c.run_id, c.model, c.dataset, c.mode, c.state;

-- Jobs per state per model x dataset x mode.
CREATE VIEW job_progress AS
SELECT run_id, model, dataset, mode,
       count(*) AS jobs,
       count(*) FILTER (WHERE state = 'done') AS done,
       count(*) FILTER (WHERE state = 'running') AS running,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       count(*) FILTER (WHERE state IN ('planned', 'queued')) AS waiting,
       count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
       sum(len) AS examples,
       sum(len) FILTER (WHERE state = 'done') AS examples_done,
       min(started_at) AS first_started,
       max(finished_at) FILTER (WHERE state = 'done') AS last_finished
FROM jobs GROUP BY run_id, model, dataset, mode;

-- Jobs that failed their last delivery, with their error.
CREATE VIEW failures AS
SELECT run_id, model, dataset, mode, shard, job_key, attempts, worker, error, finished_at
FROM jobs WHERE state = 'failed';
