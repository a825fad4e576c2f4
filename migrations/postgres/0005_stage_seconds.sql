-- Seconds per example and stage (decompose, parse, embed, verify, repair, self_repair,
-- metrics), for the paper's timing table. A table of its own: the result rows stay
-- deterministic. Keyed like predictions; a job's rows are written with its results.
CREATE TABLE stage_seconds (
    job_key     text NOT NULL REFERENCES jobs(job_key),
    example_id  text NOT NULL,
    run_id      text NOT NULL,
    model       text NOT NULL,
    dataset     text NOT NULL,
    mode        text NOT NULL,
    stage       text NOT NULL,
    seconds     double precision NOT NULL,
    PRIMARY KEY (job_key, example_id, stage)
);
CREATE INDEX stage_seconds_by_run ON stage_seconds (run_id, model, mode);

-- Seconds the model took to generate each cached completion, so that every mode sharing
-- a base generation is timed with what the generation cost, not with a cache hit.
ALTER TABLE generation_cache ADD COLUMN seconds double precision;
