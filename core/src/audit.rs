//! The audits of a finished run, as arithmetic over figures already computed: the
//! convergence audit of PAPER.md "Convergence" (Theorems T1-T4 and the paper's
//! multi-pass table, "P2 better") over each example's verifier figures after k rule
//! passes, and the gating false negatives of the paper's appendix (T 2327-2331) over the
//! stored `base` and `repair` outputs. The passes themselves are run by the worker's rule
//! tier (`credence audit convergence`); nothing here needs a model.

use crate::domain::Mode;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One example's stored output in one mode, with what the audits read.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredOutput {
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
    /// Example id.
    pub example_id: String,
    /// The source sentence S.
    pub text: String,
    /// The reference claims.
    pub references: Vec<String>,
    /// The mode's final claims.
    pub claims: Vec<String>,
    /// LLM calls spent on the example in this mode: the base decomposition's (1 for an
    /// LLM, 0 for a rule baseline) and the repair tiers'.
    pub llm_calls: u32,
    /// AVR (NULL when the sweep has no parser).
    pub avr: Option<f64>,
    /// EPR.
    pub epr: Option<f64>,
    /// RR (NULL without an encoder).
    pub rr: Option<f64>,
    /// n_viol.
    pub n_viol: Option<f64>,
    /// verify_ok.
    pub verify_ok: Option<bool>,
    /// Each claim's highest cosine to a later claim, from the stored verifier report
    /// (`None` without an encoder or a report); the last claim's is `None`.
    pub later_cos: Option<Vec<Option<f64>>>,
    /// Semantic-F1 (NULL without an encoder).
    pub semantic_f1: Option<f64>,
}

/// Differences smaller than this are read as equal (the figures are means of a few
/// claims, so a real change is far larger).
const EPS: f64 = 1e-9;

/// An example's verifier figures after some number of rule passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassPoint {
    /// Number of claims.
    pub n_claims: usize,
    /// Atomicity violation rate.
    pub avr: f64,
    /// Compound-boundary nodes over all claims.
    pub n_viol: u32,
    /// Entity preservation rate.
    pub epr: f64,
    /// Redundancy rate (`None` without an encoder).
    pub rr: Option<f64>,
    /// Duplicate pairs (cos >= tau_dup; `None` without an encoder): the base's count is
    /// Theorem T2's d0.
    pub dup_pairs: Option<u32>,
    /// Semantic-F1 against the references (`None` without an encoder).
    pub semantic_f1: Option<f64>,
    /// This pass changed the claims (false for the base, pass 0).
    pub changed: bool,
    /// The tier undid this pass because it made a T1 quantity worse.
    pub rolled_back: bool,
}

impl PassPoint {
    /// Theorem T4's interference: AVR 0 while EPR is below 1.
    pub fn interferes(&self) -> bool {
        self.avr.abs() < EPS && self.epr < 1.0 - EPS
    }
}

/// Means over a model x dataset's examples after one number of passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassMeans {
    /// Passes run (0: the base claims).
    pub pass: u32,
    /// Mean AVR.
    pub avr: f64,
    /// Mean RR (`None` without an encoder).
    pub rr: Option<f64>,
    /// Mean EPR.
    pub epr: f64,
    /// Mean Semantic-F1 (`None` without an encoder).
    pub semantic_f1: Option<f64>,
    /// Mean number of claims.
    pub n_claims: f64,
    /// Share of examples with AVR 0 and EPR < 1 (T4).
    pub interference: f64,
    /// Examples whose claims this pass changed.
    pub changed: usize,
    /// Examples whose pass the tier rolled back.
    pub rolled_back: usize,
}

/// Examples where one pass made a Theorem T1 quantity worse than the pass before.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct T1Breaks {
    /// n_viol rose after some pass.
    pub n_viol_rose: usize,
    /// RR rose after some pass.
    pub rr_rose: usize,
    /// EPR fell after some pass.
    pub epr_fell: usize,
    /// Any of the three.
    pub any: usize,
}

/// Theorem T2: how many passes changed the claims before one changed nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FixedPoints {
    /// `examples[p]`: examples whose first `p` passes changed the claims and whose pass
    /// `p + 1` changed nothing (`p` = 0: the base was already a fixed point).
    pub examples: Vec<usize>,
    /// Examples still changing at the last pass run.
    pub not_reached: usize,
    /// Mean changing passes over the examples that reached a fixed point.
    pub mean: Option<f64>,
    /// The most changing passes of an example that reached a fixed point.
    pub max: Option<u32>,
    /// Theorem T2's bound: examples that changed for more than k0 + d0 passes (k0 the
    /// base's boundary nodes, n_viol; d0 its duplicate pairs, 0 without an encoder),
    /// whether or not they then reached a fixed point. 0 when the theorem holds.
    pub over_bound: usize,
    /// The largest k0 + d0 over the examples.
    pub max_bound: u32,
}

/// Theorem T3: LLM self-repair calls in one mode and those that raised AVR.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfRepairCalls {
    /// `self_repair` (on the base claims) or `all` (on the rule tier's claims).
    pub mode: Mode,
    /// Examples where the LLM tier was called.
    pub calls: usize,
    /// Of those, the examples whose AVR after the call is above the AVR before it.
    pub raised_avr: usize,
}

/// The interference rate (T4) of a stored mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModeInterference {
    /// The mode.
    pub mode: Mode,
    /// Examples with AVR and EPR.
    pub n: usize,
    /// Share of them with AVR 0 and EPR < 1.
    pub rate: f64,
}

/// The convergence audit of one model x dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConvergenceRow {
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Examples audited.
    pub n: usize,
    /// Passes run over each example.
    pub passes: u32,
    /// Means after 0, 1, ..., `passes` passes.
    pub per_pass: Vec<PassMeans>,
    /// T1: examples where a pass made n_viol, RR or EPR worse.
    pub t1: T1Breaks,
    /// Examples whose AVR rose after some pass.
    pub avr_rose: usize,
    /// Examples whose AVR both rose and fell across the passes.
    pub avr_fluctuated: usize,
    /// T2: passes to a fixed point.
    pub fixed_points: FixedPoints,
    /// The paper's "P2 better": examples whose pass 2 lowered AVR or RR below pass 1's
    /// (`None` with fewer than 2 passes).
    pub p2_better: Option<usize>,
    /// T3, per stored mode with an LLM tier (empty for a model without one).
    pub self_repair: Vec<SelfRepairCalls>,
    /// T4 per stored mode.
    pub interference: Vec<ModeInterference>,
}

/// The convergence audit of one model x dataset from its examples' trajectories
/// (`trajectories[e][k]`: example e after k passes, all of the same length) and its
/// stored outputs in every mode (for T3 and T4). `all_rule_passes` is the sweep's
/// `max_iterations`: the pass whose claims the `all` mode handed to the LLM tier.
pub fn convergence(
    model: &str,
    dataset: &str,
    example_ids: &[String],
    trajectories: &[Vec<PassPoint>],
    outputs: &[StoredOutput],
    all_rule_passes: u32,
) -> ConvergenceRow {
    let n = trajectories.len();
    let passes = trajectories
        .first()
        .map_or(0, |t| t.len().saturating_sub(1)) as u32;
    let mean = |f: &dyn Fn(&PassPoint) -> f64, k: usize| {
        trajectories.iter().map(|t| f(&t[k])).sum::<f64>() / n.max(1) as f64
    };
    let mean_opt = |f: &dyn Fn(&PassPoint) -> Option<f64>, k: usize| {
        let v: Option<Vec<f64>> = trajectories.iter().map(|t| f(&t[k])).collect();
        v.filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    };
    let count =
        |f: &dyn Fn(&PassPoint) -> bool, k: usize| trajectories.iter().filter(|t| f(&t[k])).count();
    let per_pass = (0..=passes as usize)
        .map(|k| PassMeans {
            pass: k as u32,
            avr: mean(&|p| p.avr, k),
            rr: mean_opt(&|p| p.rr, k),
            epr: mean(&|p| p.epr, k),
            semantic_f1: mean_opt(&|p| p.semantic_f1, k),
            n_claims: mean(&|p| p.n_claims as f64, k),
            interference: count(&|p| p.interferes(), k) as f64 / n.max(1) as f64,
            changed: count(&|p| p.changed, k),
            rolled_back: count(&|p| p.rolled_back, k),
        })
        .collect();

    let mut t1 = T1Breaks::default();
    let (mut avr_rose, mut avr_fluctuated) = (0, 0);
    let mut fixed = FixedPoints {
        examples: vec![0; passes as usize],
        ..FixedPoints::default()
    };
    let mut reached = Vec::new();
    let mut p2_better = 0;
    for t in trajectories {
        let steps = || t.windows(2).map(|w| (&w[0], &w[1]));
        let n_viol = steps().any(|(a, b)| b.n_viol > a.n_viol);
        let rr = steps().any(|(a, b)| matches!((a.rr, b.rr), (Some(x), Some(y)) if y > x + EPS));
        let epr = steps().any(|(a, b)| b.epr < a.epr - EPS);
        t1.n_viol_rose += usize::from(n_viol);
        t1.rr_rose += usize::from(rr);
        t1.epr_fell += usize::from(epr);
        t1.any += usize::from(n_viol || rr || epr);
        let rose = steps().any(|(a, b)| b.avr > a.avr + EPS);
        let fell = steps().any(|(a, b)| b.avr < a.avr - EPS);
        avr_rose += usize::from(rose);
        avr_fluctuated += usize::from(rose && fell);
        let changing = match t.iter().skip(1).position(|p| !p.changed) {
            Some(p) => {
                fixed.examples[p] += 1;
                reached.push(p as u32);
                p as u32
            }
            None => {
                fixed.not_reached += 1;
                passes
            }
        };
        let bound = t
            .first()
            .map_or(0, |base| base.n_viol + base.dup_pairs.unwrap_or(0));
        fixed.max_bound = fixed.max_bound.max(bound);
        fixed.over_bound += usize::from(changing > bound);
        if let (Some(one), Some(two)) = (t.get(1), t.get(2)) {
            let rr_lower = matches!((one.rr, two.rr), (Some(x), Some(y)) if y < x - EPS);
            p2_better += usize::from(two.avr < one.avr - EPS || rr_lower);
        }
    }
    fixed.mean = (!reached.is_empty())
        .then(|| reached.iter().map(|&p| f64::from(p)).sum::<f64>() / reached.len() as f64);
    fixed.max = reached.iter().copied().max();

    // T3 and T4 from the stored outputs, by example id.
    let position: HashMap<&str, usize> = example_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let base_avr: HashMap<&str, f64> = outputs
        .iter()
        .filter(|o| o.mode == Mode::Base)
        .filter_map(|o| Some((o.example_id.as_str(), o.avr?)))
        .collect();
    let rule_pass = (all_rule_passes.max(1) as usize).min(passes as usize);
    // The base decomposition's calls of each example, which every mode's count includes:
    // the fewest calls any of its stored modes made (`base` and `repair` make no other).
    let mut base_calls: HashMap<&str, u32> = HashMap::new();
    for o in outputs {
        let calls = base_calls
            .entry(o.example_id.as_str())
            .or_insert(o.llm_calls);
        *calls = (*calls).min(o.llm_calls);
    }
    let mut self_repair = Vec::new();
    for mode in [Mode::SelfRepair, Mode::All] {
        if !outputs.iter().any(|o| o.mode == mode) {
            continue;
        }
        let called: Vec<&StoredOutput> = outputs
            .iter()
            .filter(|o| {
                o.mode == mode
                    && o.llm_calls > base_calls.get(o.example_id.as_str()).copied().unwrap_or(0)
            })
            .collect();
        let before = |o: &StoredOutput| match mode {
            Mode::All => position
                .get(o.example_id.as_str())
                .map(|&i| trajectories[i][rule_pass].avr),
            _ => base_avr.get(o.example_id.as_str()).copied(),
        };
        let raised_avr = called
            .iter()
            .filter(|o| matches!((before(o), o.avr), (Some(b), Some(a)) if a > b + EPS))
            .count();
        self_repair.push(SelfRepairCalls {
            mode,
            calls: called.len(),
            raised_avr,
        });
    }
    let interference = Mode::PAPER
        .into_iter()
        .filter_map(|mode| {
            let figures: Vec<(f64, f64)> = outputs
                .iter()
                .filter(|o| o.mode == mode)
                .filter_map(|o| Some((o.avr?, o.epr?)))
                .collect();
            (!figures.is_empty()).then(|| ModeInterference {
                mode,
                n: figures.len(),
                rate: figures
                    .iter()
                    .filter(|(avr, epr)| avr.abs() < EPS && *epr < 1.0 - EPS)
                    .count() as f64
                    / figures.len() as f64,
            })
        })
        .collect();

    ConvergenceRow {
        model: model.to_string(),
        dataset: dataset.to_string(),
        n,
        passes,
        per_pass,
        t1,
        avr_rose,
        avr_fluctuated,
        fixed_points: fixed,
        p2_better: (passes >= 2).then_some(p2_better),
        self_repair,
        interference,
    }
}

/// The gating figures of one model (and dataset, or all of them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatingRow {
    /// Model name (`None`: every model).
    pub model: Option<String>,
    /// Dataset id (`None`: every dataset).
    pub dataset: Option<String>,
    /// Examples with both a `base` and a `repair` output.
    pub n: usize,
    /// Share of them whose `repair` claims equal their `base` claims.
    pub gated: f64,
    /// Share of them gated with base AVR > 0.01 (the false negatives).
    pub false_negative: f64,
    /// Mean base AVR of the false negatives.
    pub mean_fn_avr: Option<f64>,
    /// Share whose base passed the verifier (verify_ok), for comparison with gated %.
    pub base_verify_ok: Option<f64>,
}

/// The AVR above which a gated example is a false negative (T 2327-2331).
pub const FN_AVR: f64 = 0.01;

/// Gating false negatives from a run's stored outputs: an example is gated when its
/// `repair` claims equal its `base` claims, and a false negative when gated with base
/// AVR > 0.01. Rows per model x dataset, then per model, then every model (`model` and
/// `dataset` `None`); empty when the run has no `repair` outputs.
pub fn gating(outputs: &[StoredOutput]) -> Vec<GatingRow> {
    struct Pair<'a> {
        model: &'a str,
        dataset: &'a str,
        gated: bool,
        base_avr: Option<f64>,
        verify_ok: Option<bool>,
    }
    let repaired: HashMap<(&str, &str, &str), &StoredOutput> = outputs
        .iter()
        .filter(|o| o.mode == Mode::Repair)
        .map(|o| {
            (
                (o.model.as_str(), o.dataset.as_str(), o.example_id.as_str()),
                o,
            )
        })
        .collect();
    let pairs: Vec<Pair> = outputs
        .iter()
        .filter(|o| o.mode == Mode::Base)
        .filter_map(|base| {
            let repair = repaired.get(&(
                base.model.as_str(),
                base.dataset.as_str(),
                base.example_id.as_str(),
            ))?;
            Some(Pair {
                model: &base.model,
                dataset: &base.dataset,
                gated: repair.claims == base.claims,
                base_avr: base.avr,
                verify_ok: base.verify_ok,
            })
        })
        .collect();
    let row = |model: Option<&str>, dataset: Option<&str>| {
        let group: Vec<&Pair> = pairs
            .iter()
            .filter(|p| model.is_none_or(|m| p.model == m))
            .filter(|p| dataset.is_none_or(|d| p.dataset == d))
            .collect();
        let n = group.len();
        let share = |k: usize| k as f64 / n.max(1) as f64;
        let fns: Vec<f64> = group
            .iter()
            .filter(|p| p.gated)
            .filter_map(|p| p.base_avr.filter(|&a| a > FN_AVR))
            .collect();
        let verified: Option<Vec<bool>> = group.iter().map(|p| p.verify_ok).collect();
        GatingRow {
            model: model.map(str::to_string),
            dataset: dataset.map(str::to_string),
            n,
            gated: share(group.iter().filter(|p| p.gated).count()),
            false_negative: share(fns.len()),
            mean_fn_avr: (!fns.is_empty()).then(|| fns.iter().sum::<f64>() / fns.len() as f64),
            base_verify_ok: verified
                .filter(|v| !v.is_empty())
                .map(|v| share(v.iter().filter(|&&ok| ok).count())),
        }
    };
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for p in &pairs {
        if !keys.contains(&(p.model, p.dataset)) {
            keys.push((p.model, p.dataset));
        }
    }
    if keys.is_empty() {
        return Vec::new();
    }
    let mut models: Vec<&str> = Vec::new();
    for (m, _) in &keys {
        if !models.contains(m) {
            models.push(m);
        }
    }
    let mut out: Vec<GatingRow> = keys.iter().map(|(m, d)| row(Some(m), Some(d))).collect();
    out.extend(models.iter().map(|m| row(Some(m), None)));
    out.push(row(None, None));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(avr: f64, n_viol: u32, epr: f64, rr: f64, changed: bool) -> PassPoint {
        PassPoint {
            dup_pairs: Some(u32::from(rr > 0.0)),
            n_claims: 2,
            avr,
            n_viol,
            epr,
            rr: Some(rr),
            semantic_f1: Some(0.5),
            changed,
            rolled_back: false,
        }
    }

    fn output(
        mode: Mode,
        id: &str,
        claims: &[&str],
        avr: f64,
        epr: f64,
        calls: u32,
    ) -> StoredOutput {
        StoredOutput {
            model: "m".into(),
            dataset: "d".into(),
            mode,
            example_id: id.into(),
            text: "S.".into(),
            references: Vec::new(),
            claims: claims.iter().map(|c| c.to_string()).collect(),
            llm_calls: calls,
            avr: Some(avr),
            epr: Some(epr),
            rr: Some(0.0),
            n_viol: Some(0.0),
            verify_ok: Some(avr == 0.0 && epr == 1.0),
            later_cos: None,
            semantic_f1: None,
        }
    }

    #[test]
    fn counts_t1_breaks_fixed_points_and_pass_two_gains() {
        let ids: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let trajectories = vec![
            // a: one pass fixes it, then nothing changes.
            vec![
                point(0.5, 1, 1.0, 0.0, false),
                point(0.0, 0, 1.0, 0.0, true),
                point(0.0, 0, 1.0, 0.0, false),
                point(0.0, 0, 1.0, 0.0, false),
            ],
            // b: already a fixed point.
            vec![point(0.0, 0, 0.5, 0.0, false); 4],
            // c: pass 2 lowers AVR again, pass 3 raises n_viol and AVR, loses an entity.
            vec![
                point(1.0, 2, 1.0, 0.5, false),
                point(0.5, 1, 1.0, 0.5, true),
                point(0.0, 0, 1.0, 0.0, true),
                point(0.5, 1, 0.5, 0.0, true),
            ],
        ];
        let outputs = vec![
            // An LLM's outputs: one base call each, and a second where the tier was called.
            output(Mode::Base, "a", &["x"], 0.5, 1.0, 1),
            output(Mode::Base, "b", &["y"], 0.0, 0.5, 1),
            output(Mode::Base, "c", &["z"], 1.0, 1.0, 1),
            output(Mode::SelfRepair, "a", &["x"], 1.0, 1.0, 2),
            output(Mode::SelfRepair, "c", &["z"], 0.0, 1.0, 2),
            output(Mode::SelfRepair, "b", &["y"], 0.0, 0.5, 1),
        ];
        let row = convergence("m", "d", &ids, &trajectories, &outputs, 1);
        assert_eq!((row.n, row.passes), (3, 3));
        assert_eq!(
            row.t1,
            T1Breaks {
                n_viol_rose: 1,
                rr_rose: 0,
                epr_fell: 1,
                any: 1
            }
        );
        assert_eq!((row.avr_rose, row.avr_fluctuated), (1, 1));
        assert_eq!(row.fixed_points.examples, vec![1, 1, 0]);
        assert_eq!(row.fixed_points.not_reached, 1);
        assert_eq!(row.fixed_points.mean, Some(0.5));
        assert_eq!(row.fixed_points.max, Some(1));
        // a: k0 1, one changing pass; c: k0 2 + d0 1, still changing after 3 passes.
        assert_eq!(row.fixed_points.over_bound, 0);
        assert_eq!(row.fixed_points.max_bound, 3);
        assert_eq!(row.p2_better, Some(1));
        assert!((row.per_pass[0].avr - 0.5).abs() < 1e-12);
        assert_eq!(row.per_pass[1].changed, 2);
        // b interferes at every pass (AVR 0, EPR 0.5); a and c do not at pass 2.
        assert!((row.per_pass[2].interference - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(
            row.self_repair,
            vec![SelfRepairCalls {
                mode: Mode::SelfRepair,
                calls: 2,
                raised_avr: 1
            }]
        );
        assert_eq!(row.interference[0].mode, Mode::Base);
        assert!((row.interference[0].rate - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn t2_counts_the_examples_that_change_past_k0_plus_d0() {
        let ids: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let trajectories = vec![
            // a: no boundary node, no duplicate, yet two passes change it: over.
            vec![
                point(0.0, 0, 0.5, 0.0, false),
                point(0.0, 0, 1.0, 0.0, true),
                point(0.0, 0, 1.0, 0.0, true),
            ],
            // b: k0 1 and one changing pass: within.
            vec![
                point(1.0, 1, 1.0, 0.0, false),
                point(0.0, 0, 1.0, 0.0, true),
                point(0.0, 0, 1.0, 0.0, false),
            ],
            // c: k0 0 + d0 1 (RR 0.5) and two changing passes: over.
            vec![
                point(0.0, 0, 1.0, 0.5, false),
                point(0.0, 0, 1.0, 0.0, true),
                point(0.0, 0, 1.0, 0.0, true),
            ],
        ];
        let row = convergence("m", "d", &ids, &trajectories, &[], 1);
        assert_eq!(row.fixed_points.over_bound, 2);
        assert_eq!(row.fixed_points.max_bound, 1);
        assert_eq!(row.fixed_points.not_reached, 2);
    }

    #[test]
    fn a_gated_example_with_a_violation_is_a_false_negative() {
        let outputs = vec![
            output(Mode::Base, "a", &["x y"], 0.5, 1.0, 0),
            output(Mode::Repair, "a", &["x y"], 0.5, 1.0, 0),
            output(Mode::Base, "b", &["p", "q"], 0.0, 1.0, 0),
            output(Mode::Repair, "b", &["p", "q"], 0.0, 1.0, 0),
            output(Mode::Base, "c", &["r s"], 1.0, 1.0, 0),
            output(Mode::Repair, "c", &["r", "s"], 0.0, 1.0, 0),
            output(Mode::Base, "d", &["t"], 0.0, 1.0, 0),
        ];
        let rows = gating(&outputs);
        assert_eq!(rows.len(), 3, "{rows:?}");
        let all = rows.last().unwrap();
        assert_eq!((all.model.as_deref(), all.dataset.as_deref()), (None, None));
        assert_eq!(all.n, 3);
        assert!((all.gated - 2.0 / 3.0).abs() < 1e-12);
        assert!((all.false_negative - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(all.mean_fn_avr, Some(0.5));
        assert!((all.base_verify_ok.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!(gating(&outputs[..1]).is_empty());
    }
}
