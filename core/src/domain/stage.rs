//! The stages of a job's pipeline and the seconds an example spends in each: what the
//! job path times, stores beside its results and reports.

/// A stage of a job. Stages that no code runs yet (`self_repair`) have their metric
/// families already, so dashboards need no change when they land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The decomposer (an LLM or a baseline) turning an example into claims.
    Decompose,
    /// Parsing sources and claims.
    Parse,
    /// Embedding claims and references.
    Embed,
    /// The verifier.
    Verify,
    /// The rule repair tier.
    Repair,
    /// The LLM self-repair tier.
    SelfRepair,
    /// Per-example metrics.
    Metrics,
    /// Writing the job's results.
    Store,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const EVERY: [Stage; 8] = [
        Stage::Decompose,
        Stage::Parse,
        Stage::Embed,
        Stage::Verify,
        Stage::Repair,
        Stage::SelfRepair,
        Stage::Metrics,
        Stage::Store,
    ];

    /// The stage named `name` (its label).
    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::EVERY.into_iter().find(|s| s.name() == name)
    }

    /// The `stage` label.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Decompose => "decompose",
            Stage::Parse => "parse",
            Stage::Embed => "embed",
            Stage::Verify => "verify",
            Stage::Repair => "repair",
            Stage::SelfRepair => "self_repair",
            Stage::Metrics => "metrics",
            Stage::Store => "store",
        }
    }
}

/// Seconds one example spent in each stage of one mode (stored beside the results, never
/// in them: result rows stay deterministic). A stage that runs on a whole shard at once
/// (parsing, embedding) gives each of the shard's examples an even share.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageTimes([f64; Stage::EVERY.len()]);

impl StageTimes {
    /// Adds `seconds` to `stage`.
    pub fn add(&mut self, stage: Stage, seconds: f64) {
        self.0[stage as usize] += seconds;
    }

    /// Seconds in `stage`.
    pub fn get(&self, stage: Stage) -> f64 {
        self.0[stage as usize]
    }

    /// Adds every stage of `other`.
    pub fn add_all(&mut self, other: &StageTimes) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    /// `(stage, seconds)` of every stage that took any time, in pipeline order.
    pub fn spent(&self) -> impl Iterator<Item = (Stage, f64)> + '_ {
        Stage::EVERY
            .into_iter()
            .map(|s| (s, self.get(s)))
            .filter(|&(_, t)| t > 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `StageTimes` indexes its array by the enum's discriminant: it must be the stage's
    /// place in `Stage::EVERY`, and every name must read back.
    #[test]
    fn stage_times_index_by_pipeline_order() {
        for (i, stage) in Stage::EVERY.into_iter().enumerate() {
            assert_eq!(stage as usize, i, "{stage:?}");
            assert_eq!(Stage::from_name(stage.name()), Some(stage));
        }
        let mut t = StageTimes::default();
        t.add(Stage::Embed, 0.5);
        t.add(Stage::Embed, 0.25);
        t.add(Stage::Decompose, 1.0);
        let mut u = StageTimes::default();
        u.add(Stage::Store, 2.0);
        t.add_all(&u);
        assert_eq!(
            t.spent().collect::<Vec<_>>(),
            [
                (Stage::Decompose, 1.0),
                (Stage::Embed, 0.75),
                (Stage::Store, 2.0)
            ]
        );
        assert_eq!(Stage::from_name("nap"), None);
    }
}
