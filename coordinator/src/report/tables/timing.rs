//! The timing table: seconds an example takes per model and mode.

use super::*;

pub(super) fn timing(rows: &[TimingRow]) -> TableOutcome {
    let title = "Seconds per example by mode".to_string();
    if rows.is_empty() {
        return unavailable("timing", None, title, "the run has no stage timings".into());
    }
    TableOutcome::Table(Table {
        name: "timing",
        decomposer: None,
        dataset: None,
        title,
        columns: [
            "Model",
            "Mode",
            "n",
            "Mean s",
            "Std s",
            "P50 s",
            "Examples/min",
            "LLM calls/example",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    Cell::Text(r.model.clone()),
                    Cell::Text(r.mode.as_str().into()),
                    Cell::number(r.examples as f64, 0),
                    Cell::number(r.mean, 4),
                    Cell::number(r.std, 4),
                    Cell::number(r.p50, 4),
                    r.per_minute.map_or(Cell::Missing, |m| Cell::number(m, 1)),
                    r.llm_calls.map_or(Cell::Missing, |c| Cell::number(c, 3)),
                ]
            })
            .collect(),
        note: Some("Seconds each example spent in its mode's stages (verify: base plus parse, embed and verify, from the base jobs), over every dataset. LLM calls/example: the decomposer's call and the repair tiers' calls, so an LLM's self_repair and all above 1 are the rate at which the LLM tier was called.".into()),
    })
}
