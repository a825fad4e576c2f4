-- `credence view` reads one example's outputs in every mode (and a listed example's other
-- modes) by (run, model, dataset, example): without this index each such lookup scanned a
-- whole configuration's predictions.
CREATE INDEX predictions_by_example ON predictions (run_id, model, dataset, example_id, mode);
