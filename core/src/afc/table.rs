//! The paper's AFC table (`credence report --table afc`): per decomposer x AFC dataset x
//! setting, accuracy, macro-F1 and ROC-AUC with 95% percentile intervals from the paired
//! bootstrap; Δ of each decomposition setting against `none` and Δ(CREDENCE − FActScore)
//! with two-sided p-values (PAPER.md "Metrics and statistics"); and the correlation,
//! across datasets, of the mean number of sub-claims with each metric (the paper's
//! AvgSubs analysis).
//!
//! Resampling is over claims, paired: the settings of one decomposer and dataset are
//! compared on the claims they all have, and each resample draws the same claim ids for
//! every setting from the dataset's one index matrix ([`IndexMatrix`], keyed by the AFC
//! dataset's id and the number of claims, as the decomposition tables are). Macro-F1 and
//! AUC are not means of per-claim values, so each resample recomputes them from its
//! claims with their multiplicities (AUC over average ranks, ties a half). Intervals are
//! percentile intervals whatever the sweep's `ci`: BCa's jackknife assumes a mean.

use super::{StoredAfc, Verdict};
use crate::afc::AfcSetting;
use crate::stats::ci::percentile_ci;
use crate::stats::correlation::pearson;
use crate::stats::paired::paired_test;
use crate::stats::{Bootstrap, IndexMatrix, LEVEL};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The three metrics, in the paper's order.
pub const METRICS: [AfcMetric; 3] = [AfcMetric::Accuracy, AfcMetric::MacroF1, AfcMetric::RocAuc];

/// One of the AFC table's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AfcMetric {
    /// Share of claims whose verdict is the gold label.
    Accuracy,
    /// Mean of the two labels' F1.
    MacroF1,
    /// ROC-AUC of the score against gold SUPPORT.
    RocAuc,
}

impl AfcMetric {
    /// `accuracy`, `macro_f1` or `roc_auc`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            AfcMetric::Accuracy => "accuracy",
            AfcMetric::MacroF1 => "macro_f1",
            AfcMetric::RocAuc => "roc_auc",
        }
    }

    /// The heading people read.
    #[must_use]
    pub fn heading(self) -> &'static str {
        match self {
            AfcMetric::Accuracy => "Acc",
            AfcMetric::MacroF1 => "Macro-F1",
            AfcMetric::RocAuc => "AUC",
        }
    }
}

/// A value with its 95% interval (`None` where it is undefined: AUC with one class).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Valued {
    /// The value on the claims themselves.
    pub value: f64,
    /// Lower end of the interval.
    pub ci_low: f64,
    /// Upper end of the interval.
    pub ci_high: f64,
}

/// One decomposer x dataset x setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AfcCell {
    /// The decomposer.
    pub model: String,
    /// The AFC dataset.
    pub dataset: String,
    /// The setting.
    pub setting: AfcSetting,
    /// Claims (those every setting of the decomposer and dataset has).
    pub n: usize,
    /// Accuracy, macro-F1 and AUC, in [`METRICS`] order.
    pub metrics: [Option<Valued>; 3],
    /// Mean sub-claims per claim (0 for `none`).
    pub mean_subclaims: f64,
    /// Claims judged whole after an empty decomposition.
    pub fell_back: usize,
    /// Judgements whose answer held no label (NEUTRAL, 0).
    pub unparsable: usize,
}

/// A paired difference a − b of one metric on one decomposer's dataset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AfcDelta {
    /// The decomposer.
    pub model: String,
    /// The AFC dataset.
    pub dataset: String,
    /// The setting compared.
    pub a: AfcSetting,
    /// The baseline.
    pub b: AfcSetting,
    /// The metric.
    pub metric: AfcMetric,
    /// Claims compared.
    pub n: usize,
    /// metric(a) − metric(b), with its interval.
    pub delta: Valued,
    /// Two-sided paired bootstrap p-value.
    pub p_value: f64,
}

/// The correlation across datasets of mean sub-claims with one metric (AvgSubs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AfcCorrelation {
    /// The decomposer.
    pub model: String,
    /// The decomposition setting.
    pub setting: AfcSetting,
    /// The metric.
    pub metric: AfcMetric,
    /// Datasets (points).
    pub n: usize,
    /// Pearson's r; `None` with fewer than two datasets or a constant side.
    pub r: Option<f64>,
}

/// The whole AFC table of a run.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct AfcTable {
    /// Cells by decomposer, dataset (first seen order) and setting ([`AfcSetting::ALL`]).
    pub cells: Vec<AfcCell>,
    /// Δ vs `none` for each decomposition setting, and Δ(credence − factscore).
    pub deltas: Vec<AfcDelta>,
    /// AvgSubs correlations per decomposer and decomposition setting.
    pub correlations: Vec<AfcCorrelation>,
}

impl AfcTable {
    /// The cell of one decomposer, dataset and setting.
    #[must_use]
    pub fn cell(&self, model: &str, dataset: &str, setting: AfcSetting) -> Option<&AfcCell> {
        self.cells
            .iter()
            .find(|c| c.model == model && c.dataset == dataset && c.setting == setting)
    }

    /// The Δ of a against b on one metric.
    #[must_use]
    pub fn delta(
        &self,
        model: &str,
        dataset: &str,
        a: AfcSetting,
        b: AfcSetting,
        metric: AfcMetric,
    ) -> Option<&AfcDelta> {
        self.deltas.iter().find(|d| {
            d.model == model && d.dataset == dataset && d.a == a && d.b == b && d.metric == metric
        })
    }
}

/// One decomposer's dataset: its claims by setting.
type BySetting<'a> = BTreeMap<AfcSetting, Vec<&'a StoredAfc>>;

/// One setting's claims, aligned with the other settings' of its group.
struct Column {
    gold: Vec<bool>,
    verdict: Vec<bool>,
    /// Claim indices in ascending score order.
    by_score: Vec<usize>,
    score: Vec<f64>,
}

impl Column {
    fn new(rows: &[&StoredAfc]) -> Self {
        let score: Vec<f64> = rows.iter().map(|r| r.score).collect();
        let mut by_score: Vec<usize> = (0..rows.len()).collect();
        by_score.sort_by(|&a, &b| score[a].total_cmp(&score[b]));
        Column {
            gold: rows.iter().map(|r| r.gold == Verdict::Support).collect(),
            verdict: rows.iter().map(|r| r.verdict == Verdict::Support).collect(),
            by_score,
            score,
        }
    }

    /// Accuracy, macro-F1 and AUC with each claim counted `weight[i]` times.
    fn metrics(&self, weight: &[u32]) -> [Option<f64>; 3] {
        let (mut tp, mut fp, mut fn_, mut tn) = (0u64, 0u64, 0u64, 0u64);
        for (i, &w) in weight.iter().enumerate() {
            let w = u64::from(w);
            match (self.gold[i], self.verdict[i]) {
                (true, true) => tp += w,
                (false, true) => fp += w,
                (true, false) => fn_ += w,
                (false, false) => tn += w,
            }
        }
        let n = tp + fp + fn_ + tn;
        let f1 = |tp: u64, fp: u64, fn_: u64| {
            if tp == 0 {
                0.0
            } else {
                2.0 * tp as f64 / (2 * tp + fp + fn_) as f64
            }
        };
        let accuracy = (tp + tn) as f64 / n as f64;
        let macro_f1 = (f1(tp, fp, fn_) + f1(tn, fn_, fp)) / 2.0;
        [Some(accuracy), Some(macro_f1), self.auc(weight)]
    }

    /// ROC-AUC with multiplicities: the Mann-Whitney statistic over average ranks.
    fn auc(&self, weight: &[u32]) -> Option<f64> {
        let (mut below, mut rank_sum, mut pos, mut all) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        let mut k = 0;
        while k < self.by_score.len() {
            let s = self.score[self.by_score[k]];
            let (mut w_group, mut p_group) = (0.0, 0.0);
            while k < self.by_score.len() && self.score[self.by_score[k]] == s {
                let i = self.by_score[k];
                let w = f64::from(weight[i]);
                w_group += w;
                if self.gold[i] {
                    p_group += w;
                }
                k += 1;
            }
            // The group takes ranks below+1 ..= below+w_group: their mean for each.
            rank_sum += p_group * (below + (w_group + 1.0) / 2.0);
            below += w_group;
            pos += p_group;
            all += w_group;
        }
        let neg = all - pos;
        (pos > 0.0 && neg > 0.0).then(|| (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
    }
}

/// The AFC table of a run's stored results.
///
/// ```
/// use credence_core::afc::{table::{afc_table, AfcMetric}, AfcSetting, StoredAfc, Verdict};
/// use credence_core::stats::Bootstrap;
/// let row = |setting, i: usize, verdict, score| StoredAfc {
///     model: "m".into(), dataset: "d".into(), setting, example_id: format!("c{i}"),
///     gold: if i % 2 == 0 { Verdict::Support } else { Verdict::Refute },
///     verdict, score, n_subclaims: 2, fell_back: false, unparsable: 0,
/// };
/// let mut rows = Vec::new();
/// for i in 0..20 {
///     rows.push(row(AfcSetting::None, i, Verdict::Support, 1.0));
///     let right = if i % 2 == 0 { Verdict::Support } else { Verdict::Refute };
///     rows.push(row(AfcSetting::Credence, i, right, if i % 2 == 0 { 0.5 } else { -0.5 }));
/// }
/// let t = afc_table(&rows, &Bootstrap { resamples: 500, seed: 1 });
/// let none = t.cell("m", "d", AfcSetting::None).unwrap();
/// assert_eq!(none.metrics[0].unwrap().value, 0.5);
/// let d = t.delta("m", "d", AfcSetting::Credence, AfcSetting::None, AfcMetric::Accuracy).unwrap();
/// assert_eq!(d.delta.value, 0.5);
/// assert!(d.p_value < 0.01);
/// ```
#[must_use]
pub fn afc_table(rows: &[StoredAfc], boot: &Bootstrap) -> AfcTable {
    // Groups: decomposer x dataset, in first-seen order; within, one map per setting.
    let mut groups: Vec<((&str, &str), BySetting<'_>)> = Vec::new();
    for r in rows {
        let key = (r.model.as_str(), r.dataset.as_str());
        let at = match groups.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                groups.push((key, BTreeMap::new()));
                groups.len() - 1
            }
        };
        groups[at].1.entry(r.setting).or_default().push(r);
    }
    let mut table = AfcTable::default();
    for ((model, dataset), by_setting) in &groups {
        group_table(model, dataset, by_setting, boot, &mut table);
    }
    table.correlations = correlations(&table);
    table
}

/// The cells and Δs of one decomposer's dataset.
fn group_table(
    model: &str,
    dataset: &str,
    by_setting: &BySetting<'_>,
    boot: &Bootstrap,
    table: &mut AfcTable,
) {
    // The claims every setting has, in the first setting's order.
    let sets: Vec<HashMap<&str, &StoredAfc>> = by_setting
        .values()
        .map(|rows| rows.iter().map(|r| (r.example_id.as_str(), *r)).collect())
        .collect();
    let Some(first) = by_setting.values().next() else {
        return;
    };
    let ids: Vec<&str> = first
        .iter()
        .map(|r| r.example_id.as_str())
        .filter(|id| sets.iter().all(|s| s.contains_key(id)))
        .collect();
    if ids.is_empty() {
        return;
    }
    let settings: Vec<AfcSetting> = AfcSetting::ALL
        .into_iter()
        .filter(|s| by_setting.contains_key(s))
        .collect();
    let aligned: Vec<Vec<&StoredAfc>> = settings
        .iter()
        .map(|s| {
            let rows: HashMap<&str, &StoredAfc> = by_setting[s]
                .iter()
                .map(|r| (r.example_id.as_str(), *r))
                .collect();
            ids.iter().map(|id| rows[id]).collect()
        })
        .collect();
    let columns: Vec<Column> = aligned.iter().map(|rows| Column::new(rows)).collect();
    let n = ids.len();
    let ones = vec![1u32; n];
    let point: Vec<[Option<f64>; 3]> = columns.iter().map(|c| c.metrics(&ones)).collect();
    // resampled[b][setting][metric]
    let matrix = IndexMatrix::new(boot, dataset, n);
    let resampled: Vec<Vec<[Option<f64>; 3]>> = (0..matrix.resamples())
        .into_par_iter()
        .map_init(
            || (vec![0u32; n], vec![0u32; n]),
            |(row, weight), b| {
                matrix.fill_row(b, row);
                weight.iter_mut().for_each(|w| *w = 0);
                for &i in row.iter() {
                    weight[i as usize] += 1;
                }
                columns.iter().map(|c| c.metrics(weight)).collect()
            },
        )
        .collect();
    for (k, setting) in settings.iter().enumerate() {
        let rows = &aligned[k];
        let mut metrics = [None; 3];
        for (m, slot) in metrics.iter_mut().enumerate() {
            let draws: Vec<f64> = resampled.iter().filter_map(|r| r[k][m]).collect();
            *slot = valued(point[k][m], &draws);
        }
        table.cells.push(AfcCell {
            model: model.to_string(),
            dataset: dataset.to_string(),
            setting: *setting,
            n,
            metrics,
            mean_subclaims: rows.iter().map(|r| f64::from(r.n_subclaims)).sum::<f64>() / n as f64,
            fell_back: rows.iter().filter(|r| r.fell_back).count(),
            unparsable: rows.iter().map(|r| r.unparsable as usize).sum(),
        });
    }
    let at = |s: AfcSetting| settings.iter().position(|x| *x == s);
    let pairs = [
        (AfcSetting::Credence, AfcSetting::None),
        (AfcSetting::Factscore, AfcSetting::None),
        (AfcSetting::Credence, AfcSetting::Factscore),
    ];
    for (a, b) in pairs {
        let (Some(ka), Some(kb)) = (at(a), at(b)) else {
            continue;
        };
        for (m, metric) in METRICS.into_iter().enumerate() {
            let (Some(pa), Some(pb)) = (point[ka][m], point[kb][m]) else {
                continue;
            };
            let draws: Vec<f64> = resampled
                .iter()
                .filter_map(|r| Some(r[ka][m]? - r[kb][m]?))
                .collect();
            let Some(delta) = valued(Some(pa - pb), &draws) else {
                continue;
            };
            table.deltas.push(AfcDelta {
                model: model.to_string(),
                dataset: dataset.to_string(),
                a,
                b,
                metric,
                n,
                delta,
                p_value: paired_test(&draws).p_value,
            });
        }
    }
}

/// A point value with the percentile interval of its defined resamples.
fn valued(point: Option<f64>, draws: &[f64]) -> Option<Valued> {
    let value = point?;
    if draws.is_empty() {
        return None;
    }
    let ci = percentile_ci(draws, LEVEL);
    Some(Valued {
        value,
        ci_low: ci.low,
        ci_high: ci.high,
    })
}

/// Pearson's r across datasets of mean sub-claims with each metric, per decomposer and
/// decomposition setting.
fn correlations(table: &AfcTable) -> Vec<AfcCorrelation> {
    let mut out = Vec::new();
    let mut models: Vec<&str> = Vec::new();
    for c in &table.cells {
        if !models.contains(&c.model.as_str()) {
            models.push(&c.model);
        }
    }
    for model in models {
        for setting in [AfcSetting::Credence, AfcSetting::Factscore] {
            let cells: Vec<&AfcCell> = table
                .cells
                .iter()
                .filter(|c| c.model == model && c.setting == setting)
                .collect();
            if cells.is_empty() {
                continue;
            }
            for (m, metric) in METRICS.into_iter().enumerate() {
                let (x, y): (Vec<f64>, Vec<f64>) = cells
                    .iter()
                    .filter_map(|c| Some((c.mean_subclaims, c.metrics[m]?.value)))
                    .unzip();
                out.push(AfcCorrelation {
                    model: model.to_string(),
                    setting,
                    metric,
                    n: x.len(),
                    r: pearson(&x, &y),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afc::{metrics, Compound};

    fn rows(setting: AfcSetting, gold: &[Verdict], pred: &[(Verdict, f64)]) -> Vec<StoredAfc> {
        gold.iter()
            .zip(pred)
            .enumerate()
            .map(|(i, (g, (v, s)))| StoredAfc {
                model: "m".into(),
                dataset: "d".into(),
                setting,
                example_id: format!("c{i}"),
                gold: *g,
                verdict: *v,
                score: *s,
                n_subclaims: if setting == AfcSetting::None {
                    0
                } else {
                    1 + (i % 3) as u32
                },
                fell_back: false,
                unparsable: 0,
            })
            .collect()
    }

    /// The weighted metrics equal the plain ones on the claims repeated by weight.
    #[test]
    fn weighted_metrics_equal_the_metrics_of_the_repeated_claims() {
        let mut state = 11u64;
        let mut next = || {
            state = crate::stats::rng::mix64(state);
            state
        };
        for _ in 0..40 {
            let n = 2 + (next() % 30) as usize;
            let gold: Vec<Verdict> = (0..n)
                .map(|_| {
                    if next() % 2 == 0 {
                        Verdict::Support
                    } else {
                        Verdict::Refute
                    }
                })
                .collect();
            let pred: Vec<(Verdict, f64)> = (0..n)
                .map(|_| {
                    let v = if next() % 3 == 0 {
                        Verdict::Support
                    } else {
                        Verdict::Refute
                    };
                    (v, (next() % 5) as f64 / 4.0 - 0.5)
                })
                .collect();
            let weight: Vec<u32> = (0..n).map(|_| (next() % 3) as u32).collect();
            let stored = rows(AfcSetting::Credence, &gold, &pred);
            let refs: Vec<&StoredAfc> = stored.iter().collect();
            let got = Column::new(&refs).metrics(&weight);
            let (mut g, mut p) = (Vec::new(), Vec::new());
            for i in 0..n {
                for _ in 0..weight[i] {
                    g.push(gold[i]);
                    p.push(Compound {
                        verdict: pred[i].0,
                        score: pred[i].1,
                    });
                }
            }
            if g.is_empty() {
                continue;
            }
            let want = metrics(&g, &p);
            assert!((got[0].unwrap() - want.accuracy).abs() < 1e-12);
            assert!((got[1].unwrap() - want.macro_f1).abs() < 1e-12);
            match (got[2], want.roc_auc) {
                (Some(a), Some(b)) => assert!((a - b).abs() < 1e-12),
                (a, b) => assert_eq!(a, b),
            }
        }
    }

    #[test]
    fn deltas_pair_the_same_claims_and_a_setting_against_itself_is_zero() {
        use Verdict::{Refute, Support};
        let gold = [
            Support, Refute, Support, Refute, Support, Refute, Support, Refute,
        ];
        let none: Vec<(Verdict, f64)> = gold.iter().map(|_| (Support, 1.0)).collect();
        let cred: Vec<(Verdict, f64)> = gold
            .iter()
            .map(|g| (*g, if *g == Support { 0.6 } else { -0.6 }))
            .collect();
        let mut all = rows(AfcSetting::None, &gold, &none);
        all.extend(rows(AfcSetting::Credence, &gold, &cred));
        all.extend(rows(AfcSetting::Factscore, &gold, &cred));
        let t = afc_table(
            &all,
            &Bootstrap {
                resamples: 400,
                seed: 3,
            },
        );
        assert_eq!(t.cells.len(), 3);
        let d = t
            .delta(
                "m",
                "d",
                AfcSetting::Credence,
                AfcSetting::Factscore,
                AfcMetric::Accuracy,
            )
            .unwrap();
        assert_eq!(
            (d.delta.value, d.delta.ci_low, d.delta.ci_high, d.p_value),
            (0.0, 0.0, 0.0, 1.0)
        );
        let d = t
            .delta(
                "m",
                "d",
                AfcSetting::Credence,
                AfcSetting::None,
                AfcMetric::RocAuc,
            )
            .unwrap();
        assert_eq!(d.delta.value, 0.5);
        let none_cell = t.cell("m", "d", AfcSetting::None).unwrap();
        assert_eq!(none_cell.metrics[2].unwrap().value, 0.5);
        assert_eq!(none_cell.mean_subclaims, 0.0);
    }

    #[test]
    fn claims_missing_from_a_setting_are_left_out_of_every_setting() {
        use Verdict::{Refute, Support};
        let gold = [Support, Refute, Support, Refute];
        let pred = [
            (Support, 1.0),
            (Refute, -1.0),
            (Refute, 0.0),
            (Refute, -1.0),
        ];
        let mut all = rows(AfcSetting::None, &gold, &pred);
        all.extend(rows(AfcSetting::Credence, &gold[..3], &pred[..3]));
        let t = afc_table(
            &all,
            &Bootstrap {
                resamples: 100,
                seed: 3,
            },
        );
        assert!(t.cells.iter().all(|c| c.n == 3));
        // On c0..c2: 2 of 3 right.
        let v = t.cell("m", "d", AfcSetting::None).unwrap().metrics[0]
            .unwrap()
            .value;
        assert!((v - 2.0 / 3.0).abs() < 1e-12);
    }
}
