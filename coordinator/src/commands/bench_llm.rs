//! `credence bench-llm --model FILE_OR_FOLDER PROMPTS.jsonl`: prefill and decode speed of
//! a local LLM, one sequence at a time, and aggregate throughput with several in flight.
//! A benchmark, not a test; `bench/llm` runs it on one thread and on all cores next to
//! llama.cpp (llama-cpp-python) on the same prompts.

use super::embed::read_inputs;
use anyhow::Context;
use clap::Args;
use credence_core::device::{ComputeDevice, WeightDtype};
use credence_worker::llm::local::{Format, LocalBackend, LocalSettings};
use credence_worker::llm::ChatMessage;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Generate for each prompt of a JSONL file (`{"id", "text"}` lines; the text is the
/// user message of a chat rendered with the model's template) exactly --max-tokens
/// tokens, greedily, through end-of-turn tokens. Prints one JSON line per --in-flight
/// value: prefill tokens/s and decode tokens/s (one sequence at a time), or aggregate
/// generated tokens/s (several in flight), with how many times sequences were preempted.
/// Threads follow RAYON_NUM_THREADS; CREDENCE_KV_MEMORY_GIB limits the memory of the
/// batched keys and values (fewer in flight, or preemption).
#[derive(Args)]
pub struct BenchLlmArgs {
    /// A .gguf file or a safetensors model folder.
    #[arg(long)]
    model: PathBuf,
    /// JSONL prompts.
    input: PathBuf,
    /// Prompts to run (the first N).
    #[arg(long, default_value_t = 8)]
    prompts: usize,
    /// Tokens generated per prompt.
    #[arg(long, default_value_t = 128)]
    max_tokens: u32,
    /// Comma-separated numbers of sequences in flight (1 = one at a time), each run over
    /// the --prompts prompts, or over the first P of them when written N:P (`1:2,32:32`:
    /// two prompts one at a time, then 32 together).
    #[arg(long, default_value = "1,8", value_delimiter = ',', value_parser = parse_size)]
    in_flight: Vec<(usize, Option<usize>)>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: ComputeDevice,
    /// Weight dtype of a safetensors model: f32, bf16 or f16 (default f32 on cpu, bf16
    /// on cuda).
    #[arg(long)]
    dtype: Option<WeightDtype>,
    /// Report a prompt whose generation fails (one JSON line with its id and the error)
    /// and go on with the others, instead of stopping: shows that one failing prompt (too
    /// long for the GPU's memory, say) fails alone.
    #[arg(long)]
    keep_going: bool,
    /// Also write every generation's token ids to this JSONL file (`{"in_flight",
    /// "prompt", "ids"}` a line), to check that a change to the engine or its kernels
    /// keeps the outputs: compare the files of two builds.
    #[arg(long)]
    outputs: Option<PathBuf>,
}

/// `N` or `N:P` of --in-flight.
fn parse_size(text: &str) -> Result<(usize, Option<usize>), String> {
    let number = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("{t:?} is not a whole number (N or N:PROMPTS)"))
    };
    match text.split_once(':') {
        Some((n, p)) => Ok((number(n)?, Some(number(p)?))),
        None => Ok((number(text)?, None)),
    }
}

/// Runs the benchmark.
pub fn run(args: BenchLlmArgs) -> anyhow::Result<ExitCode> {
    let mut inputs = read_inputs(&args.input)?;
    inputs.truncate(args.prompts);
    anyhow::ensure!(!inputs.is_empty(), "{}: no prompts", args.input.display());
    let format = if args.model.is_dir() {
        Format::Safetensors
    } else {
        Format::Gguf
    };
    let max_batch = args.in_flight.iter().map(|s| s.0).max().unwrap_or(1).max(1);
    let settings = LocalSettings {
        path: args.model.clone(),
        format,
        dtype: args.dtype,
        device: args.device,
        max_new_tokens: args.max_tokens,
        max_batch,
        // A benchmark measures; it never gives up on a generation.
        generation_timeout: std::time::Duration::MAX,
        kv_memory: credence_worker::llm::local::kv_memory_from_env()
            .map_err(|e| anyhow::anyhow!(e))?,
    };
    let load_started = Instant::now();
    let backend = LocalBackend::load(&settings)
        .with_context(|| format!("loading {}", args.model.display()))?;
    let load_seconds = load_started.elapsed().as_secs_f64();
    let held = credence_worker::llm::Generator::max_in_flight(&backend);
    if held < max_batch {
        eprintln!(
            "bench-llm: the device's free memory after the load holds {held} sequences in \
             flight, not {max_batch}: larger --in-flight figures run {held} at a time"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let chats: Vec<Vec<ChatMessage>> = inputs
        .iter()
        .map(|(_, text)| vec![ChatMessage::user(text.clone())])
        .collect();
    let threads = credence_worker::embed::cpu_threads();
    let mut outputs = match &args.outputs {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    // Warm-up: a few tokens of the shortest prompt (first touch of the weights, kernel
    // packing), so that a prompt meant to fail (--keep-going) fails in its own turn.
    let shortest = chats
        .iter()
        .min_by_key(|c| c.iter().map(|m| m.content.len()).sum::<usize>())
        .expect("at least one prompt");
    runtime
        .block_on(backend.run(shortest, 4, true))
        .context("the warm-up generation")?;
    for &(in_flight, prompts) in &args.in_flight {
        let in_flight = in_flight.max(1);
        let chats = &chats[..prompts.unwrap_or(chats.len()).min(chats.len())];
        let started = Instant::now();
        let outcomes = runtime.block_on(async {
            let mut out = Vec::with_capacity(chats.len());
            for group in chats.chunks(in_flight) {
                let runs = group.iter().map(|c| backend.run(c, args.max_tokens, true));
                out.extend(futures::future::join_all(runs).await);
            }
            out
        });
        let mut results = Vec::with_capacity(outcomes.len());
        for ((id, _), outcome) in inputs.iter().zip(outcomes) {
            match outcome {
                Ok(g) => {
                    if let Some(out) = &mut outputs {
                        let line =
                            serde_json::json!({"in_flight": in_flight, "prompt": id, "ids": g.ids});
                        writeln!(out, "{line}").context("writing --outputs")?;
                    }
                    results.push(g)
                }
                Err(e) if args.keep_going => println!(
                    "{}",
                    serde_json::json!({"impl": "credence", "in_flight": in_flight, "prompt": id,
                                       "error": e.to_string()})
                ),
                Err(e) => anyhow::bail!("prompt {id}: {e}"),
            }
        }
        if results.is_empty() {
            continue;
        }
        let wall = started.elapsed().as_secs_f64();
        let prompt_tokens: usize = results.iter().map(|g| g.prompt_tokens).sum();
        // Prefill speed counts the tokens run, not those whose keys and values an earlier
        // prompt's prefix gave (the prompts share their chat template's system turn).
        let reused: usize = results.iter().map(|g| g.reused_tokens).sum();
        let generated: usize = results.iter().map(|g| g.ids.len()).sum();
        let prefill_s: f64 = results.iter().map(|g| g.prefill_seconds).sum();
        let decode_tokens: usize = results.iter().map(|g| g.ids.len().saturating_sub(1)).sum();
        let decode_s: f64 = results.iter().map(|g| g.decode_seconds).sum();
        let mut line = serde_json::json!({
            "impl": "credence",
            "model": args.model.file_name().and_then(|n| n.to_str()).unwrap_or(""),
            "device": args.device,
            "threads": threads,
            "in_flight": in_flight,
            "prompts": results.len(),
            "prompt_tokens": prompt_tokens,
            "reused_prompt_tokens": reused,
            "generated_tokens": generated,
            "preempted": results.iter().map(|g| g.preempted).sum::<usize>(),
            "aggregate_tok_s": generated as f64 / wall,
            "wall_s": wall,
            "load_s": load_seconds,
        });
        if in_flight == 1 {
            line["prefill_tok_s"] = ((prompt_tokens - reused) as f64 / prefill_s).into();
            line["decode_tok_s"] = (decode_tokens as f64 / decode_s).into();
        }
        println!("{line}");
    }
    if let Some(mut out) = outputs {
        out.flush().context("writing --outputs")?;
    }
    Ok(ExitCode::SUCCESS)
}
