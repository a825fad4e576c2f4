-- Seconds per example and stage (decompose, parse, embed, verify, repair, self_repair,
-- metrics), for the paper's timing table. A table of its own: the result rows stay
-- deterministic. Keyed like predictions; a job's rows are written with its results.
CREATE TABLE stage_seconds (
    job_key     TEXT NOT NULL REFERENCES jobs(job_key),
    example_id  TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    model       TEXT NOT NULL,
    dataset     TEXT NOT NULL,
    mode        TEXT NOT NULL,
    stage       TEXT NOT NULL,
    seconds     REAL NOT NULL,
    PRIMARY KEY (job_key, example_id, stage)
);
CREATE INDEX stage_seconds_by_run ON stage_seconds (run_id, model, mode);

-- Seconds the model took to generate each cached completion, so that every mode sharing
-- a base generation is timed with what the generation cost, not with a cache hit.
ALTER TABLE generation_cache ADD COLUMN seconds REAL;
