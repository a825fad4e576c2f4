//! The tables computed from the stored claims and verifier reports rather than the
//! aggregates: tau_dup sensitivity, the rule-repair passes (the convergence audit) and
//! the gating false negatives.

use super::*;

pub(super) fn tau_dup(spec: &SweepSpec, outputs: &[StoredOutput], dataset: &str) -> TableOutcome {
    let title = format!("RR at each tau_dup on {dataset} (base outputs)");
    let mut rows = Vec::new();
    for model in &spec.models {
        let lists: Vec<&Vec<Option<f64>>> = outputs
            .iter()
            .filter(|o| o.model == model.name && o.dataset == dataset && o.mode == Mode::Base)
            .filter_map(|o| o.later_cos.as_ref())
            .collect();
        if lists.is_empty() {
            continue;
        }
        let mut row = vec![
            Cell::Text(model.name.clone()),
            Cell::Number {
                value: lists.len() as f64,
                digits: 0,
            },
        ];
        for tau in TAU_DUP {
            let mean = lists
                .iter()
                .map(|l| redundancy_rate_at(l, tau))
                .sum::<f64>()
                / lists.len() as f64;
            row.push(Cell::Number {
                value: mean,
                digits: 4,
            });
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return unavailable(
            "tau_dup",
            Some(dataset),
            title,
            "the run stored no claim similarities (its sweep has no [encoder], or no base mode)"
                .into(),
        );
    }
    let mut columns = vec!["Model".to_string(), "n".to_string()];
    columns.extend(TAU_DUP.iter().map(|t| format!("RR@{t:.2}")));
    TableOutcome::Table(Table {
        name: "tau_dup",
        decomposer: None,
        dataset: Some(dataset.into()),
        title,
        columns,
        rows,
        note: Some("RR recomputed at each threshold from the stored cosine of each claim to its closest later claim (no re-embedding); mean over examples.".into()),
    })
}

pub(super) const REPAIR_PASSES_TITLE: &str = "Rule repair passes over the base claims";

/// The paper's multi-pass table from the convergence audit: per dataset and model, AVR,
/// RR and Semantic-F1 of the base claims and after one pass, and the examples a second
/// pass still improved ("P2 better").
pub(super) fn repair_passes(rows: &[audit::ConvergenceRow]) -> TableOutcome {
    if rows.is_empty() {
        return unavailable(
            "repair_passes",
            None,
            REPAIR_PASSES_TITLE.into(),
            "the run has no base outputs".into(),
        );
    }
    let opt = |v: Option<f64>, digits: usize| v.map_or(Cell::Missing, |v| Cell::number(v, digits));
    let diff = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
    let passes = rows.iter().map(|r| r.passes).max().unwrap_or(0);
    TableOutcome::Table(Table {
        name: "repair_passes",
        decomposer: None,
        dataset: None,
        title: format!("{REPAIR_PASSES_TITLE} ({passes} passes)"),
        columns: [
            "Dataset",
            "Model",
            "n",
            "Base AVR",
            "Pass-1 AVR",
            "ΔAVR",
            "Base RR",
            "Pass-1 RR",
            "ΔRR",
            "ΔSemantic-F1",
            "P2 better",
            "T1 breaks",
            "Fixed point (mean passes)",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .filter_map(|r| {
                let (base, one) = (r.per_pass.first()?, r.per_pass.get(1)?);
                Some(vec![
                    Cell::Text(r.dataset.clone()),
                    Cell::Text(r.model.clone()),
                    Cell::number(r.n as f64, 0),
                    Cell::number(base.avr, 4),
                    Cell::number(one.avr, 4),
                    Cell::number(one.avr - base.avr, 4),
                    opt(base.rr, 4),
                    opt(one.rr, 4),
                    opt(diff(one.rr, base.rr), 4),
                    opt(diff(one.semantic_f1, base.semantic_f1), 4),
                    r.p2_better.map_or(Cell::Missing, |p| {
                        Cell::Text(format!("{p}/{}", r.n))
                    }),
                    Cell::Text(format!("{}/{}", r.t1.any, r.n)),
                    r.fixed_points.mean.map_or(Cell::Missing, |m| Cell::number(m, 2)),
                ])
            })
            .collect(),
        note: Some("The rule tier run again, one pass at a time, over the stored base claims with the run's parser, encoder and settings (credence audit convergence has every figure). Δ: pass 1 minus base. P2 better: examples whose second pass lowered AVR or RR below the first's. T1 breaks: examples where a pass raised n_viol or RR or lowered EPR.".into()),
    })
}

pub(super) fn gating(outputs: &[StoredOutput]) -> TableOutcome {
    let title = "Gating false negatives".to_string();
    let rows = audit::gating(outputs);
    if rows.is_empty() {
        return unavailable(
            "gating",
            None,
            title,
            "the run has no example with both a base and a repair output".into(),
        );
    }
    TableOutcome::Table(Table {
        name: "gating",
        decomposer: None,
        dataset: None,
        title,
        columns: [
            "Model",
            "Dataset",
            "n",
            "Gated %",
            "FN %",
            "Mean FN AVR",
            "Base verify%",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    Cell::Text(r.model.clone().unwrap_or_else(|| "Overall".into())),
                    Cell::Text(r.dataset.clone().unwrap_or_else(|| "all".into())),
                    Cell::number(r.n as f64, 0),
                    Cell::number(100.0 * r.gated, 1),
                    Cell::number(100.0 * r.false_negative, 1),
                    r.mean_fn_avr.map_or(Cell::Missing, |a| Cell::number(a, 3)),
                    r.base_verify_ok
                        .map_or(Cell::Missing, |v| Cell::number(100.0 * v, 1)),
                ]
            })
            .collect(),
        note: Some(format!(
            "Gated: the repair claims equal the base claims. FN: gated with base AVR > {}.",
            audit::FN_AVR
        )),
    })
}
