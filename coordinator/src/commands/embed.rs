//! `credence embed --encoder DIR_OR_PRESET INPUT.jsonl`: sentence vectors for a JSONL
//! file of `{"id", "text"}` lines, written as `{"id", "embedding": [...]}` lines.

use anyhow::{bail, Context};
use clap::Args;
use credence_core::device::ComputeDevice;
use credence_worker::embed::{self, Attention, Backend, Encoder, EncoderOptions, Precision};
use serde::Deserialize;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Encode the `text` of every line of a JSONL file with a sentence encoder and write one
/// `{"id": ..., "embedding": [...]}` line per input line, in input order (unit vectors).
#[derive(Args)]
pub struct EmbedArgs {
    /// A preset (bge-large-en-v1.5, bge-base-en-v1.5, bge-small-en-v1.5, all-MiniLM-L6-v2,
    /// e5-base-v2; folder $CREDENCE_MODELS_DIR/<preset> or models/<preset>) or a model folder.
    #[arg(long)]
    encoder: String,
    /// JSONL input: one object per line with "id" (any JSON value) and "text".
    input: PathBuf,
    /// Write here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Sentences per forward pass.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    batch_size: u32,
    /// cpu, cuda or cuda:N (CUDA needs a build with `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: ComputeDevice,
    /// f32, f16 or bf16. f16 runs on CUDA only; bf16 on CUDA, or on a CPU with AVX-512
    /// BF16 as the native pass's products in bfloat16 (cosine >= 0.9999 to f32; a
    /// different encoder fingerprint).
    #[arg(long, default_value = "f32", value_parser = parse_precision)]
    precision: Precision,
    /// auto (native CPU kernels where the CPU has AVX2 and FMA, else candle), native or
    /// candle. The backend is part of the encoder fingerprint.
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    backend: Backend,
    /// How the candle backend attends over a batch: auto (per sequence on the CPU, which
    /// keeps a vector bit-identical in any batch; padded on a GPU, one masked product per
    /// layer for the whole batch), per-sequence or padded.
    #[arg(long, default_value = "auto", value_parser = parse_attention)]
    attention: Attention,
}

/// Parses `--backend`.
pub fn parse_backend(s: &str) -> Result<Backend, String> {
    Backend::parse(s)
        .ok_or_else(|| format!("unknown backend {s:?}; expected auto, native or candle"))
}

/// Parses `--attention`.
pub fn parse_attention(s: &str) -> Result<Attention, String> {
    Attention::parse(s)
        .ok_or_else(|| format!("unknown attention {s:?}; expected auto, per-sequence or padded"))
}

/// Parses `f32`, `f16` or `bf16`.
pub fn parse_precision(s: &str) -> Result<Precision, String> {
    match s {
        "f32" => Ok(Precision::F32),
        "f16" => Ok(Precision::F16),
        "bf16" => Ok(Precision::Bf16),
        other => Err(format!(
            "unknown precision {other:?}; expected f32, f16 or bf16"
        )),
    }
}

#[derive(Deserialize)]
struct InputLine {
    id: serde_json::Value,
    text: String,
}

/// Reads `{"id", "text"}` lines; errors name file:line.
pub fn read_inputs(path: &PathBuf) -> anyhow::Result<Vec<(serde_json::Value, String)>> {
    let content =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in content.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: InputLine = serde_json::from_str(line).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}: {e} (expected {{\"id\": ..., \"text\": \"...\"}})",
                path.display(),
                n + 1
            )
        })?;
        out.push((parsed.id, parsed.text));
    }
    if out.is_empty() {
        bail!("{}: no input lines", path.display());
    }
    Ok(out)
}

/// Runs the command.
pub fn run(args: EmbedArgs) -> anyhow::Result<ExitCode> {
    let inputs = read_inputs(&args.input)?;
    let options = EncoderOptions {
        batch_size: args.batch_size as usize,
        device: embed::device(args.device)?,
        precision: args.precision,
        backend: args.backend,
        attention: args.attention,
    };
    let encoder = embed::load_encoder(&args.encoder, None, options)
        .with_context(|| format!("loading encoder {:?}", args.encoder))?;
    let texts: Vec<&str> = inputs.iter().map(|(_, t)| t.as_str()).collect();
    let vectors = encoder.encode(&texts)?;
    let sink: Box<dyn Write> = match &args.out {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::new(sink);
    for ((id, _), v) in inputs.iter().zip(&vectors) {
        let line = serde_json::json!({ "id": id, "embedding": v });
        writeln!(w, "{line}").context("writing embeddings")?;
    }
    w.flush().context("writing embeddings")?;
    Ok(ExitCode::SUCCESS)
}
