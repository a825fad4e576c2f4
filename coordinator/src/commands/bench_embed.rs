//! `credence bench-embed --encoder DIR_OR_PRESET SENTENCES.jsonl`: encoding throughput
//! (sentences/s) at several batch sizes. A benchmark, not a test; `bench/embed` runs it
//! single-threaded and on all cores next to sentence-transformers.

use super::embed::{parse_attention, parse_backend, parse_precision, read_inputs};
use anyhow::Context;
use clap::Args;
use credence_core::device::ComputeDevice;
use credence_worker::embed::{self, Attention, Backend, Encoder, EncoderOptions, Precision};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Encode the texts of a JSONL file (`{"id", "text"}` lines) once per batch size after one
/// warm-up batch, and print one JSON line per batch size with sentences/s. Threads follow
/// RAYON_NUM_THREADS (all cores when unset).
#[derive(Args)]
pub struct BenchEmbedArgs {
    /// A preset or a model folder (as for `credence embed`).
    #[arg(long)]
    encoder: String,
    /// JSONL input: one object per line with "id" and "text".
    input: PathBuf,
    /// Comma-separated batch sizes.
    #[arg(long, default_value = "32,128", value_delimiter = ',')]
    batch_sizes: Vec<usize>,
    /// Use only the first N texts.
    #[arg(long)]
    limit: Option<usize>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: ComputeDevice,
    /// f32, f16 or bf16. f16 runs on CUDA only; bf16 on CUDA, or on a CPU with AVX-512
    /// BF16 as the native pass's products in bfloat16 (cosine >= 0.9999 to f32; a
    /// different encoder fingerprint).
    #[arg(long, default_value = "f32", value_parser = parse_precision)]
    precision: Precision,
    /// auto, native or candle (as for `credence embed`).
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    backend: Backend,
    /// auto, per-sequence or padded (as for `credence embed`).
    #[arg(long, default_value = "auto", value_parser = parse_attention)]
    attention: Attention,
}

/// Runs the benchmark.
pub fn run(args: BenchEmbedArgs) -> anyhow::Result<ExitCode> {
    let mut inputs = read_inputs(&args.input)?;
    if let Some(n) = args.limit {
        inputs.truncate(n);
    }
    let texts: Vec<&str> = inputs.iter().map(|(_, t)| t.as_str()).collect();
    let options = EncoderOptions {
        device: embed::device(args.device)?,
        precision: args.precision,
        backend: args.backend,
        attention: args.attention,
        ..EncoderOptions::default()
    };
    let mut encoder = embed::load_encoder(&args.encoder, None, options)
        .with_context(|| format!("loading encoder {:?}", args.encoder))?;
    let threads = embed::cpu_threads();
    for &batch_size in &args.batch_sizes {
        encoder.set_batch_size(batch_size);
        encoder.encode(&texts[..texts.len().min(batch_size)])?;
        let start = Instant::now();
        let vectors = encoder.encode(&texts)?;
        let seconds = start.elapsed().as_secs_f64();
        anyhow::ensure!(
            vectors.len() == texts.len(),
            "encoder returned too few vectors"
        );
        let line = serde_json::json!({
            "impl": format!("credence-{}", encoder.backend().as_str()),
            "encoder": args.encoder,
            "device": args.device,
            "precision": args.precision.as_str(),
            "attention": args.attention.as_str(),
            "sentences": texts.len(),
            "batch_size": batch_size,
            "threads": threads,
            "seconds": seconds,
            "sentences_per_s": texts.len() as f64 / seconds,
        });
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
