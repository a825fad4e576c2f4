//! The report as a plain-text table for people (`credence verify`); JSON is the report's
//! serde form.

use super::VerifierReport;
use credence_nlp::Doc;
use std::fmt::Write;

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

impl VerifierReport {
    /// The report as a readable table; `claims` are the parses it was computed from (for
    /// their texts and the words at boundary tokens).
    pub fn table(&self, claims: &[Doc]) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_table(&mut out, claims);
        out
    }

    fn write_table(&self, out: &mut String, claims: &[Doc]) -> std::fmt::Result {
        writeln!(
            out,
            "claims ({}): n_viol {}, AVR {:.3}",
            claims.len(),
            self.n_viol,
            self.avr
        )?;
        for (n, (claim, atom)) in claims.iter().zip(&self.atomicity).enumerate() {
            let hits: Vec<String> = atom
                .boundaries
                .iter()
                .map(|b| {
                    let word = claim.tokens.get(b.token_i).map_or("", |t| t.text.as_str());
                    format!("{} at {} ({word})", b.rule, b.token_i)
                })
                .collect();
            let hits = if hits.is_empty() {
                "atomic".to_string()
            } else {
                hits.join(", ")
            };
            writeln!(out, "  [{n}] {}\n      {hits}", claim.text)?;
        }
        let e = &self.entities;
        writeln!(
            out,
            "entities: EPR {:.3} (tier 1 {:.3}, tier 2 {:.3}), passes {}",
            e.epr,
            e.epr_tier1,
            e.epr_tier2,
            yes_no(e.passes)
        )?;
        for ent in &e.entities {
            let held: Vec<String> = ent.held_by.iter().map(|i| format!("[{i}]")).collect();
            let held = if held.is_empty() {
                "MISSING".to_string()
            } else {
                format!("kept in {}", held.join(" "))
            };
            writeln!(
                out,
                "  tier {} {:<8} {:<30} {held}",
                ent.tier, ent.label, ent.text
            )?;
        }
        match &self.repetition {
            None => writeln!(out, "repetition: not checked (no encoder)")?,
            Some(r) => {
                writeln!(out, "repetition: dup_count {}, RR {:.3}", r.dup_count, r.rr)?;
                for p in &r.pairs {
                    writeln!(out, "  [{}] ~ [{}] cos {:.4}", p.i, p.j, p.cos)?;
                }
            }
        }
        writeln!(
            out,
            "self-containment: {} flag(s)",
            self.self_containment.len()
        )?;
        for f in &self.self_containment {
            writeln!(
                out,
                "  [{}] {:?} (token {}) stands for {:?} ({})",
                f.claim, f.pronoun, f.token_i, f.antecedent, f.antecedent_label
            )?;
        }
        let m = &self.modality;
        writeln!(
            out,
            "modality: MC {:.3} (source verbs: {}; kept: {})",
            m.mc,
            if m.source_verbs.is_empty() {
                "none".to_string()
            } else {
                m.source_verbs.join(" ")
            },
            if m.kept.is_empty() {
                "none".to_string()
            } else {
                m.kept.join(" ")
            }
        )?;
        writeln!(
            out,
            "verify_ok: {}",
            self.verify_ok.map_or("not decided (no encoder)", yes_no)
        )
    }
}
