//! `credence bench-pipeline DATA.jsonl...`: verification plus every per-example metric
//! over real examples, cold and warm embedding cache. A benchmark, not a test;
//! `bench/pipeline.sh` runs it on the wikisplit and claimdecomp benchmarks.

use clap::Args;
use credence::scoring_bench::{self, ScoringBenchOptions};
use credence_core::sweep::{EncoderPrecision, EncoderSpec, NlpSpec};
use std::path::PathBuf;
use std::process::ExitCode;

/// Decompose the examples of the given datasets with the conjunction oracle (texts seen
/// before are skipped), then score them shard by shard as a job does (parse each
/// distinct text, embed through the embedding cache, verify, compute every metric):
/// once with an empty cache (cold) and once warm. Prints one JSON object with
/// examples/s and the seconds per stage of each pass. Threads follow RAYON_NUM_THREADS.
#[derive(Args)]
pub struct BenchPipelineArgs {
    /// Dataset files (JSONL with "id", "text", "references").
    #[arg(required = true)]
    data: Vec<PathBuf>,
    /// Use only the first N distinct examples.
    #[arg(long)]
    limit: Option<usize>,
    /// Examples per shard, as a sweep's shard_size.
    #[arg(long, default_value_t = 25)]
    shard_size: usize,
    /// The encoder preset (folder models/<preset>) for Semantic-F1 and redundancy.
    #[arg(long, default_value = "all-MiniLM-L6-v2")]
    encoder: String,
    /// Skip the embedding metrics.
    #[arg(long)]
    no_encoder: bool,
    /// f32 or bf16 (the encoder's products in bfloat16, on a CPU with AVX-512 BF16), as
    /// a sweep's `[encoder] precision`.
    #[arg(long, default_value = "f32", value_parser = ["f32", "bf16"])]
    encoder_precision: String,
    /// The en_core_web_sm folder (default models/en_core_web_sm).
    #[arg(long)]
    nlp: Option<PathBuf>,
}

/// Runs the benchmark.
pub fn run(args: BenchPipelineArgs) -> anyhow::Result<ExitCode> {
    let opts = ScoringBenchOptions {
        data: args.data,
        limit: args.limit,
        shard_size: args.shard_size,
        encoder: (!args.no_encoder).then_some(EncoderSpec {
            preset: args.encoder,
            path: None,
            batch_size: 64,
            precision: (args.encoder_precision == "bf16").then_some(EncoderPrecision::Bf16),
        }),
        nlp: NlpSpec { path: args.nlp },
    };
    let report = tokio::runtime::Runtime::new()?.block_on(scoring_bench::run(&opts))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(ExitCode::SUCCESS)
}
