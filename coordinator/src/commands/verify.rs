//! `credence verify`: the CREDENCE verifier on one source and its claims (a table, or the
//! report as JSON), or atomicity alone over a JSONL file of single claims.

use super::flags;
use anyhow::{bail, Context};
use clap::{ArgGroup, Args};
use credence::jsonl::read_text_lines;
use credence_core::matching::semantic::CosineMatrix;
use credence_nlp::Nlp;
use credence_worker::embed::{self, Encoder, EncoderOptions};
use credence_worker::pipeline::verify::{AtomicityRecord, Verifier, VerifierConfig};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Verify claims against a source sentence (`--source TEXT --claim TEXT ...`), or check
/// the atomicity of each claim of a JSONL file (`--claims FILE.jsonl`): one output line
/// `{"id", "atomic", "n_viol", "boundaries": [{"rule", "token_i"}]}` per input line.
#[derive(Args)]
#[command(group(ArgGroup::new("input").required(true).args(["source", "claims"])))]
pub struct VerifyArgs {
    /// The source sentence S.
    #[arg(long, requires = "claim")]
    source: Option<String>,
    /// A claim of S's decomposition (repeat for each claim, in order).
    #[arg(long = "claim", value_name = "TEXT", requires = "source")]
    claim: Vec<String>,
    /// JSONL of single claims, one `{"id": ..., "text": "..."}` per line: atomicity only.
    #[arg(long, value_name = "FILE.jsonl", conflicts_with_all = ["source", "json", "encoder", "no_encoder"])]
    claims: Option<PathBuf>,
    /// With --claims: write here instead of standard output.
    #[arg(long, requires = "claims")]
    out: Option<PathBuf>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The en_core_web_sm 3.8.0 pipeline folder (default: en_core_web_sm under
    /// $CREDENCE_MODELS_DIR, else under the checkout's models/).
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Sentence encoder for the repetition check: a preset or a model folder.
    #[arg(long, value_name = "PRESET", default_value = "all-MiniLM-L6-v2")]
    encoder: String,
    /// Skip the repetition check (then verify_ok is not decided).
    #[arg(long)]
    no_encoder: bool,
    /// Cosine at or above which two claims are duplicates.
    #[arg(long, default_value_t = VerifierConfig::default().tau_dup, value_parser = flags::fraction)]
    tau_dup: f64,
    /// The EPR an example needs to pass.
    #[arg(long, default_value_t = VerifierConfig::default().min_epr, value_parser = flags::fraction)]
    min_epr: f64,
    /// Count an advcl only when it has its own subject.
    #[arg(long)]
    advcl_requires_subject: bool,
}

/// Runs the command.
pub fn run(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| embed::locate("en_core_web_sm", None));
    let load =
        || Nlp::load(&model).with_context(|| format!("loading the pipeline {}", model.display()));
    if let Some(path) = &args.claims {
        let lines = read_text_lines(path)?;
        let nlp = load()?;
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        let docs = nlp.analyze_batch(&texts);
        let records = lines
            .into_iter()
            .zip(&docs)
            .map(|(line, doc)| AtomicityRecord::new(line.id, doc, args.advcl_requires_subject));
        return write_records(records, args.out.as_ref());
    }
    let Some(source) = &args.source else {
        bail!("give --source with --claim, or --claims FILE.jsonl");
    };
    let config = VerifierConfig {
        tau_dup: args.tau_dup,
        min_epr: args.min_epr,
        advcl_requires_subject: args.advcl_requires_subject,
        ..VerifierConfig::default()
    };
    let nlp = load()?;
    let source = nlp.analyze(source);
    let texts: Vec<&str> = args.claim.iter().map(String::as_str).collect();
    let claims = nlp.analyze_batch(&texts);
    let cos = if args.no_encoder {
        None
    } else {
        let encoder = embed::load_encoder(&args.encoder, None, EncoderOptions::default())
            .with_context(|| {
                format!("loading encoder {:?} (or pass --no-encoder)", args.encoder)
            })?;
        let vectors = encoder.encode(&texts).context("encoding the claims")?;
        Some(CosineMatrix::new(&vectors, &vectors))
    };
    let report = Verifier::new(config).verify(&source, &claims, cos.as_ref());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table(&claims));
    }
    Ok(ExitCode::SUCCESS)
}

fn write_records(
    records: impl Iterator<Item = AtomicityRecord>,
    out: Option<&PathBuf>,
) -> anyhow::Result<ExitCode> {
    let sink: Box<dyn Write> = match out {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let dest = out.map_or("standard output".to_string(), |p| p.display().to_string());
    let mut w = BufWriter::new(sink);
    for record in records {
        serde_json::to_writer(&mut w, &record).with_context(|| format!("writing {dest}"))?;
        w.write_all(b"\n")
            .with_context(|| format!("writing {dest}"))?;
    }
    w.flush().with_context(|| format!("writing {dest}"))?;
    Ok(ExitCode::SUCCESS)
}
