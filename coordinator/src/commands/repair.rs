//! `credence repair`: the rule tier (the `repair` mode) on one source and its claims:
//! the verifier's findings before and after, and each step the tier took. Nothing is
//! cached or stored.

use super::decompose::load_scorer;
use anyhow::Context;
use clap::Args;
use credence_core::domain::Mode;
use credence_worker::pipeline::modes;
use credence_worker::pipeline::verify::VerifierReport;
use std::path::PathBuf;
use std::process::ExitCode;

/// Repair the claims of a source sentence with the rule tier (split, pronoun, inject,
/// dedup), as the `repair` mode does in a sweep.
#[derive(Args)]
pub struct RepairArgs {
    /// The source sentence S.
    #[arg(long)]
    source: String,
    /// A claim of S's decomposition (repeat for each claim, in order).
    #[arg(long = "claim", value_name = "TEXT", required = true)]
    claim: Vec<String>,
    /// Sweep file whose `[verifier]` settings to use (tau_dup, min_epr, max_iterations).
    #[arg(long, value_name = "FILE")]
    sweep: Option<PathBuf>,
    /// Sentence encoder for the repetition check and the choice of the claim an entity is
    /// injected into: a preset (folder under models/).
    #[arg(long, value_name = "PRESET", default_value = "all-MiniLM-L6-v2")]
    encoder: String,
    /// No encoder: no repetition check, and the steps that need cosines (injecting a
    /// missing entity, deduplication) are skipped.
    #[arg(long)]
    no_encoder: bool,
    /// Print `{"source", "claims", "before", "repaired", "after", "actions"}` as JSON
    /// (`before` and `after` are the verifier's reports).
    #[arg(long)]
    json: bool,
}

/// Runs the command.
pub fn run(args: RepairArgs) -> anyhow::Result<ExitCode> {
    let scorer = load_scorer(args.sweep.as_deref(), &args.encoder, args.no_encoder)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let (before, outcome) = runtime.block_on(modes::one_sentence(
        &scorer,
        None,
        Mode::Repair,
        &args.source,
        args.claim.clone(),
    ))?;
    let after = &outcome.scored.examples[0].report;
    let actions = outcome.traces[0]
        .as_ref()
        .and_then(|t| t.rule.clone())
        .unwrap_or_default();
    if args.json {
        let value = serde_json::json!({
            "source": args.source,
            "claims": args.claim,
            "before": before,
            "repaired": outcome.claims[0],
            "after": after,
            "actions": actions,
            "pipeline_version": outcome.pipeline_version,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_claims("claims", &args.claim, &before);
    println!();
    if actions.is_empty() {
        println!("the rule tier changed nothing");
    } else {
        println!("steps ({}):", outcome.pipeline_version);
        for a in &actions {
            println!("  {}", serde_json::to_string(a)?);
        }
    }
    println!();
    print_claims("repaired", &outcome.claims[0], after);
    Ok(ExitCode::SUCCESS)
}

fn print_claims(title: &str, claims: &[String], report: &VerifierReport) {
    println!("{title}:");
    for (i, c) in claims.iter().enumerate() {
        println!("{:>3}. {c}", i + 1);
    }
    println!(
        "AVR {:.3}  EPR {:.3}  n_viol {}  verify_ok {}  unresolved pronouns {}",
        report.avr,
        report.entities.epr,
        report.n_viol,
        report.verify_ok.map_or("-".to_string(), |b| b.to_string()),
        report.self_containment.len()
    );
}
