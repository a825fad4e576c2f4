-- `credence view` reads one example's outputs in every mode (and a listed example's other
-- modes) by (run, model, dataset, example): without this index each such lookup scanned a
-- whole configuration's predictions. It carries job_key, so listing a mode's rows reads
-- the index alone, not the rows with their claims and reports.
CREATE INDEX predictions_by_example ON predictions (run_id, model, dataset, example_id, mode, job_key);
