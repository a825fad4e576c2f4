//! The paper's timing table: per model and mode, the seconds an example takes through the
//! mode's pipeline (mean, standard deviation, median) and examples per minute, from the
//! `stage_seconds` rows a run's jobs write beside their results; and the LLM calls an
//! example took in each mode ([`with_llm_calls`]), the rate PAPER.md asks to report so
//! that `self_repair`'s trigger can be checked against its time.
//!
//! Which stages a mode's pipeline counts (metrics and storing the results never count:
//! they are the evaluation, not the method):
//! - `base`: decompose;
//! - `verify`: decompose, parse, embed, verify, from the `base` jobs' rows (they run the
//!   verifier for the metrics, so the paper's base + verifier line needs no job of its
//!   own);
//! - `repair`, `self_repair`, `all`: decompose, parse, embed, verify, plus repair and
//!   self_repair where they ran.
//!
//! Decompose is the model's generation time also when the mode's job found the base in
//! the generation cache (the modes share one base generation): every mode is timed as
//! if it had made the call. Parsing and embedding run for a whole shard at once; each
//! example is given an even share.

use crate::domain::{Mode, Stage};
use std::collections::BTreeMap;

/// One `stage_seconds` row.
#[derive(Debug, Clone, PartialEq)]
pub struct StageRow {
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
    /// Example id.
    pub example_id: String,
    /// Stage.
    pub stage: Stage,
    /// Seconds.
    pub seconds: f64,
}

/// One line of the timing table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TimingRow {
    /// Model name.
    pub model: String,
    /// Mode.
    pub mode: Mode,
    /// Examples timed (over every dataset of the run).
    pub examples: usize,
    /// Mean seconds per example.
    pub mean: f64,
    /// Sample standard deviation (n - 1) of the seconds per example; 0 for one example.
    pub std: f64,
    /// Median seconds per example (the mean of the middle two for an even count).
    pub p50: f64,
    /// Examples per minute at the mean: 60 / mean; `None` when the mean is under
    /// [`MIN_TIMED_SECONDS`] (a stage with next to no work, whose rate would be a
    /// meaningless huge number).
    pub per_minute: Option<f64>,
    /// Mean LLM calls per example (the base decomposition's call included, so an LLM's
    /// `base` is 1 and its `self_repair` 1 plus the share of examples the LLM tier was
    /// called on); `None` until [`with_llm_calls`] fills it from the stored outputs.
    pub llm_calls: Option<f64>,
}

/// A span of seconds as people read it: `42s`, `7m05s`, `3h02m`, `2d04h`.
pub fn span(secs: f64) -> String {
    let s = if secs.is_finite() {
        secs.max(0.0).round() as u64
    } else {
        u64::MAX
    };
    if s >= 86_400 {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    } else if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// `table` with each line's mean LLM calls per example, from the `calls` of its model and
/// mode over the run's stored outputs (`verify` has the calls of `base`, whose jobs it is
/// timed from).
pub fn with_llm_calls(mut table: Vec<TimingRow>, calls: &[LlmCalls]) -> Vec<TimingRow> {
    let calls: BTreeMap<(&str, Mode), &LlmCalls> = calls
        .iter()
        .map(|c| ((c.model.as_str(), c.mode), c))
        .collect();
    for row in &mut table {
        let mode = if row.mode == Mode::Verify {
            Mode::Base
        } else {
            row.mode
        };
        row.llm_calls = calls
            .get(&(row.model.as_str(), mode))
            .filter(|c| c.outputs > 0)
            .map(|c| c.calls as f64 / c.outputs as f64);
    }
    table
}

/// The shortest mean seconds per example given a rate: the tables print means to 0.1 ms,
/// so a mean under 0.05 ms reads as 0 and its rate (millions of examples a minute) says
/// nothing.
pub const MIN_TIMED_SECONDS: f64 = 5e-5;

/// The LLM calls of one model and mode over a run's stored outputs (every dataset): what
/// the store sums for [`with_llm_calls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmCalls {
    /// Model name.
    pub model: String,
    /// Mode.
    pub mode: Mode,
    /// Calls, summed over the outputs.
    pub calls: u64,
    /// Stored outputs.
    pub outputs: u64,
}

/// Whether `stage` counts towards `mode`'s pipeline time.
pub fn counts(mode: Mode, stage: Stage) -> bool {
    match stage {
        Stage::Decompose => true,
        Stage::Parse | Stage::Embed | Stage::Verify => mode != Mode::Base,
        Stage::Repair | Stage::SelfRepair => !matches!(mode, Mode::Base | Mode::Verify),
        Stage::Metrics | Stage::Store => false,
    }
}

/// The timing table of `rows`, one line per model and mode, sorted by model, then in the
/// modes' order.
pub fn table(rows: &[StageRow]) -> Vec<TimingRow> {
    let mut per_example: BTreeMap<(&str, Mode, &str, &str), f64> = BTreeMap::new();
    for r in rows {
        let lines: &[Mode] = match r.mode {
            Mode::Base => &[Mode::Base, Mode::Verify],
            _ => std::slice::from_ref(&r.mode),
        };
        for &mode in lines.iter().filter(|&&m| counts(m, r.stage)) {
            *per_example
                .entry((&r.model, mode, &r.dataset, &r.example_id))
                .or_default() += r.seconds;
        }
    }
    let mut groups: BTreeMap<(&str, Mode), Vec<f64>> = BTreeMap::new();
    for ((model, mode, _, _), s) in per_example {
        groups.entry((model, mode)).or_default().push(s);
    }
    groups
        .into_iter()
        .map(|((model, mode), mut xs)| {
            xs.sort_by(f64::total_cmp);
            let n = xs.len();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let std = if n > 1 {
                (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
            } else {
                0.0
            };
            let p50 = if n % 2 == 1 {
                xs[n / 2]
            } else {
                (xs[n / 2 - 1] + xs[n / 2]) / 2.0
            };
            TimingRow {
                model: model.to_string(),
                mode,
                examples: n,
                mean,
                std,
                p50,
                per_minute: (mean >= MIN_TIMED_SECONDS).then(|| 60.0 / mean),
                llm_calls: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: Mode, example: &str, stage: Stage, seconds: f64) -> StageRow {
        StageRow {
            model: "m".into(),
            dataset: "d".into(),
            mode,
            example_id: example.into(),
            stage,
            seconds,
        }
    }

    #[test]
    fn spans_read_in_the_largest_two_units() {
        for (secs, text) in [
            (0.4, "0s"),
            (42.0, "42s"),
            (425.0, "7m05s"),
            (10_920.0, "3h02m"),
            (187_200.0, "2d04h"),
            (-3.0, "0s"),
        ] {
            assert_eq!(span(secs), text, "{secs}");
        }
    }

    #[test]
    fn each_mode_counts_its_own_stages() {
        let mut rows = Vec::new();
        for mode in [Mode::Base, Mode::Repair] {
            for (e, scale) in [("a", 1.0), ("b", 2.0), ("c", 6.0)] {
                rows.push(row(mode, e, Stage::Decompose, 1.0 * scale));
                rows.push(row(mode, e, Stage::Parse, 0.5 * scale));
                rows.push(row(mode, e, Stage::Verify, 0.25 * scale));
                rows.push(row(mode, e, Stage::Metrics, 100.0));
                if mode == Mode::Repair {
                    rows.push(row(mode, e, Stage::Repair, 0.25 * scale));
                }
            }
        }
        let t = table(&rows);
        assert_eq!(
            t.iter().map(|r| r.mode).collect::<Vec<_>>(),
            [Mode::Base, Mode::Verify, Mode::Repair]
        );
        // base: 1, 2, 6 -> mean 3, median 2, std sqrt(((-2)^2 + (-1)^2 + 3^2) / 2) = sqrt(7).
        assert_eq!((t[0].examples, t[0].mean, t[0].p50), (3, 3.0, 2.0));
        assert!((t[0].std - 7f64.sqrt()).abs() < 1e-12);
        assert_eq!(t[0].per_minute, Some(20.0));
        // A stage with next to no work (issue 35: "Examples/min 1578033.8") has no rate.
        let quick: Vec<StageRow> = ["a", "b"]
            .map(|e| row(Mode::Repair, e, Stage::Decompose, 3.8e-5))
            .into();
        assert_eq!(table(&quick)[0].per_minute, None);
        // verify, from base's rows: 1.75 per unit; repair: 2.0 per unit.
        assert!((t[1].mean - 1.75 * 3.0).abs() < 1e-12);
        assert!((t[2].p50 - 4.0).abs() < 1e-12);
    }

    #[test]
    fn an_even_count_has_the_middle_two_as_median() {
        let rows: Vec<StageRow> = [4.0, 1.0, 3.0, 2.0]
            .iter()
            .enumerate()
            .map(|(i, &s)| row(Mode::All, &i.to_string(), Stage::Decompose, s))
            .collect();
        let t = table(&rows);
        assert_eq!(t[0].p50, 2.5);
        assert_eq!(t[0].examples, 4);
    }

    #[test]
    fn each_line_gets_its_mean_llm_calls_and_verify_has_base_s() {
        let rows: Vec<StageRow> = [Mode::Base, Mode::SelfRepair, Mode::Repair]
            .into_iter()
            .flat_map(|m| ["a", "b"].map(|e| row(m, e, Stage::Decompose, 1.0)))
            .collect();
        // One of the two self_repair examples called the LLM tier.
        let calls = |mode, calls| LlmCalls {
            model: "m".into(),
            mode,
            calls,
            outputs: 2,
        };
        let outputs = [calls(Mode::Base, 2), calls(Mode::SelfRepair, 3)];
        let t = with_llm_calls(table(&rows), &outputs);
        let calls: Vec<(Mode, Option<f64>)> = t.iter().map(|r| (r.mode, r.llm_calls)).collect();
        assert_eq!(
            calls,
            [
                (Mode::Base, Some(1.0)),
                (Mode::Verify, Some(1.0)),
                (Mode::Repair, None),
                (Mode::SelfRepair, Some(1.5)),
            ]
        );
    }
}
