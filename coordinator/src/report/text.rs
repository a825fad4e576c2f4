//! The reports that `credence audit` and `credence report --timing` print as
//! aligned text for a terminal: the convergence audit, the gating table and the timing
//! table. The figures come from `credence_core::audit` and `credence_core::timing`;
//! how they look is decided here, beside the report's other formats.

use credence_core::audit::{ConvergenceRow, GatingRow};
use credence_core::timing::TimingRow;

fn opt(v: Option<f64>, width: usize) -> String {
    v.map_or_else(|| format!("{:>width$}", "-"), |x| format!("{x:>width$.4}"))
}

/// The convergence audit as text: per model x dataset the means after each pass and the
/// T1-T4 counts, then the paper's multi-pass table (base AVR, pass-1 AVR, P2 better).
pub fn convergence(rows: &[ConvergenceRow]) -> String {
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!(
            "{} / {}: {} examples, {} rule passes over the base claims\n",
            r.model, r.dataset, r.n, r.passes
        ));
        out.push_str(&format!(
            "  {:>4} {:>8} {:>8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8}\n",
            "pass", "AVR", "RR", "EPR", "Sem-F1", "claims", "interf", "changed", "undone"
        ));
        for p in &r.per_pass {
            out.push_str(&format!(
                "  {:>4} {:>8.4} {} {:>8.4} {} {:>7.2} {:>8.3} {:>8} {:>8}\n",
                p.pass,
                p.avr,
                opt(p.rr, 8),
                p.epr,
                opt(p.semantic_f1, 8),
                p.n_claims,
                p.interference,
                p.changed,
                p.rolled_back
            ));
        }
        out.push_str(&format!(
            "  T1, examples a pass made worse: n_viol rose {}, RR rose {}, EPR fell {} (any: {} of {})\n",
            r.t1.n_viol_rose, r.t1.rr_rose, r.t1.epr_fell, r.t1.any, r.n
        ));
        out.push_str(&format!(
            "  AVR rose after a pass: {}; rose and fell: {}\n",
            r.avr_rose, r.avr_fluctuated
        ));
        let histogram: Vec<String> = r
            .fixed_points
            .examples
            .iter()
            .enumerate()
            .map(|(p, n)| format!("{p}: {n}"))
            .collect();
        out.push_str(&format!(
            "  T2, changing passes before a fixed point: {}; not reached in {}: {}; mean {}, max {}\n",
            histogram.join(", "),
            r.passes,
            r.fixed_points.not_reached,
            r.fixed_points.mean.map_or("-".into(), |m| format!("{m:.2}")),
            r.fixed_points.max.map_or("-".into(), |m| m.to_string()),
        ));
        out.push_str(&format!(
            "  T2 bound k0 + d0 (base boundary nodes + duplicate pairs, at most {}): exceeded by {} of {}\n",
            r.fixed_points.max_bound, r.fixed_points.over_bound, r.n
        ));
        if let Some(p2) = r.p2_better {
            out.push_str(&format!("  P2 better: {p2}/{}\n", r.n));
        }
        let t3: Vec<String> = r
            .self_repair
            .iter()
            .map(|c| format!("{} {}/{}", c.mode.as_str(), c.raised_avr, c.calls))
            .collect();
        if !t3.is_empty() {
            out.push_str(&format!(
                "  T3, LLM self-repair calls that raised AVR: {}\n",
                t3.join(", ")
            ));
        }
        let t4: Vec<String> = r
            .interference
            .iter()
            .map(|m| format!("{} {:.3}", m.mode.as_str(), m.rate))
            .collect();
        out.push_str(&format!(
            "  T4, interference (AVR 0, EPR < 1) of the stored modes: {}\n\n",
            t4.join(", ")
        ));
    }
    out.push_str(&format!(
        "{:<24} {:<28} {:>6} {:>9} {:>11} {:>9} {:>11}\n",
        "dataset", "model", "n", "base AVR", "pass-1 AVR", "ΔAVR", "P2 better"
    ));
    let (mut better, mut total) = (0, 0);
    for r in rows {
        let (Some(base), Some(one)) = (r.per_pass.first(), r.per_pass.get(1)) else {
            continue;
        };
        total += r.n;
        better += r.p2_better.unwrap_or(0);
        out.push_str(&format!(
            "{:<24} {:<28} {:>6} {:>9.4} {:>11.4} {:>+9.4} {:>11}\n",
            r.dataset,
            r.model,
            r.n,
            base.avr,
            one.avr,
            one.avr - base.avr,
            r.p2_better.map_or("-".into(), |p| format!("{p}/{}", r.n))
        ));
    }
    out.push_str(&format!("overall P2 better: {better}/{total}\n"));
    out
}

/// The gating table as text.
pub fn gating(rows: &[GatingRow]) -> String {
    let mut out = format!(
        "{:<28} {:<24} {:>6} {:>8} {:>7} {:>12} {:>13}\n",
        "model", "dataset", "n", "gated %", "FN %", "mean FN AVR", "base verify%"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<28} {:<24} {:>6} {:>8.1} {:>7.1} {:>12} {:>13}\n",
            r.model.as_deref().unwrap_or("overall"),
            r.dataset.as_deref().unwrap_or("all"),
            r.n,
            100.0 * r.gated,
            100.0 * r.false_negative,
            r.mean_fn_avr.map_or("-".into(), |a| format!("{a:.3}")),
            r.base_verify_ok
                .map_or("-".into(), |v| format!("{:.1}", 100.0 * v)),
        ));
    }
    out
}

/// The timing table as aligned text.
pub fn timing(table: &[TimingRow]) -> String {
    let mut out = format!(
        "{:<28} {:<12} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "model", "mode", "examples", "mean s", "std s", "p50 s", "ex/min", "LLM calls"
    );
    for r in table {
        out.push_str(&format!(
            "{:<28} {:<12} {:>8} {:>10.4} {:>10.4} {:>10.4} {:>10} {:>10}\n",
            r.model,
            r.mode.as_str(),
            r.examples,
            r.mean,
            r.std,
            r.p50,
            // A stage that took no measurable time has no rate (issue 35: not 60/0).
            r.per_minute.map_or("—".into(), |m| format!("{m:.1}")),
            r.llm_calls.map_or("—".into(), |c| format!("{c:.3}")),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use credence_core::domain::Mode;

    #[test]
    fn the_gating_table_names_the_overall_rows_and_shows_missing_figures_as_dashes() {
        let rows = [
            GatingRow {
                model: Some("m".into()),
                dataset: Some("d".into()),
                n: 40,
                gated: 0.25,
                false_negative: 0.05,
                mean_fn_avr: Some(0.125),
                base_verify_ok: Some(0.5),
            },
            GatingRow {
                model: None,
                dataset: None,
                n: 40,
                gated: 0.25,
                false_negative: 0.0,
                mean_fn_avr: None,
                base_verify_ok: None,
            },
        ];
        let text = gating(&rows);
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0][..4], ["model", "dataset", "n", "gated"]);
        assert_eq!(lines[1], ["m", "d", "40", "25.0", "5.0", "0.125", "50.0"]);
        assert_eq!(lines[2], ["overall", "all", "40", "25.0", "0.0", "-", "-"]);
    }

    #[test]
    fn the_timing_table_has_a_line_per_model_and_mode() {
        let row = |mode, mean: f64| TimingRow {
            model: "smollm2".into(),
            mode,
            examples: 16,
            mean,
            std: 0.5,
            p50: mean,
            per_minute: (mean > 0.0).then(|| 60.0 / mean),
            llm_calls: (mode != Mode::Repair).then_some(1.25),
        };
        let text = timing(&[
            row(Mode::Base, 2.0),
            row(Mode::Repair, 3.0),
            row(Mode::Verify, 0.0),
        ]);
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert_eq!(lines[0][0], "model");
        assert_eq!(
            lines[1],
            ["smollm2", "base", "16", "2.0000", "0.5000", "2.0000", "30.0", "1.250"]
        );
        assert_eq!(lines[2][1], "repair");
        assert_eq!(lines[2][6], "20.0");
        assert_eq!(lines[2][7], "—");
        // A mode that took no time has no rate.
        assert_eq!(lines[3][6], "—");
    }
}
