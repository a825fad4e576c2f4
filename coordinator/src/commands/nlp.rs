//! `credence nlp parse`: the pure-Rust en_core_web_sm over a JSONL file, one golden-format
//! record per input line; `credence nlp bench`: its throughput on the same input.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use credence::jsonl::read_text_lines;
use credence::nlp_bench;
use credence_nlp::Nlp;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct NlpArgs {
    #[command(subcommand)]
    command: NlpCommand,
}

#[derive(Subcommand)]
enum NlpCommand {
    /// Tokenize, tag, parse and find entities in `{"id", "text"}` lines; writes one JSON
    /// record per line in the layout of the spaCy golden file (tokens, ents, sents).
    Parse(ParseArgs),
    /// Time the pipeline on the texts of a JSONL file (tokenizer alone, tokenizer +
    /// tagger, whole pipeline) and print tokens/s and words/s.
    Bench(BenchArgs),
}

#[derive(Args)]
struct ModelArgs {
    /// The en_core_web_sm 3.8.0 pipeline folder.
    #[arg(long, default_value = "models/en_core_web_sm")]
    model: PathBuf,
    /// Threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Args)]
struct ParseArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Input JSONL: one `{"id": ..., "text": "..."}` object per line.
    input: PathBuf,
    /// Output file (default: standard output).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Input JSONL with a `text` field per line.
    input: PathBuf,
    /// Repeat the texts until they hold at least this many whitespace-separated words.
    #[arg(long, default_value_t = 100_000)]
    min_words: usize,
}

fn pool(threads: Option<usize>) -> anyhow::Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = threads {
        if n == 0 {
            bail!("--threads must be at least 1");
        }
        b = b.num_threads(n);
    }
    b.build().context("starting the thread pool")
}

fn load(args: &ModelArgs) -> anyhow::Result<Nlp> {
    Nlp::load(&args.model).with_context(|| format!("loading the pipeline {}", args.model.display()))
}

pub fn run(args: NlpArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        NlpCommand::Parse(a) => parse(a),
        NlpCommand::Bench(a) => bench(a),
    }
}

/// Texts `nlp parse` analyses per thread before it writes their records (about four of
/// the parser's batches of ~2,048 tokens at the speed texts' ~13 words a text).
const PARSE_CHUNK_PER_THREAD: usize = 512;

fn parse(args: ParseArgs) -> anyhow::Result<ExitCode> {
    let requests = read_text_lines(&args.input)?;
    let nlp = load(&args.model)?;
    let pool = pool(args.model.threads)?;
    let sink: Box<dyn Write> = match &args.out {
        Some(p) => {
            Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let mut w = BufWriter::new(sink);
    let dest = args
        .out
        .as_ref()
        .map_or("standard output".to_string(), |p| p.display().to_string());
    // Texts run in chunks, each written before the next starts: the records of a large
    // input are never all in memory, and the memory of one chunk's docs serves the next.
    let chunk = PARSE_CHUNK_PER_THREAD * pool.current_num_threads();
    for requests in requests.chunks(chunk) {
        let texts: Vec<&str> = requests.iter().map(|r| r.text.as_str()).collect();
        let docs = pool.install(|| nlp.analyze_batch(&texts));
        for (req, doc) in requests.iter().zip(&docs) {
            serde_json::to_writer(&mut w, &doc.record(&req.id))
                .with_context(|| format!("writing {dest}"))?;
            w.write_all(b"\n")
                .with_context(|| format!("writing {dest}"))?;
        }
    }
    w.flush().with_context(|| format!("writing {dest}"))?;
    Ok(ExitCode::SUCCESS)
}

fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let requests = read_text_lines(&args.input)?;
    if requests.is_empty() {
        bail!("{}: no texts", args.input.display());
    }
    let texts: Vec<&str> = requests.iter().map(|r| r.text.as_str()).collect();
    let texts = nlp_bench::repeated(&texts, args.min_words);
    let t = Instant::now();
    let nlp = load(&args.model)?;
    let load_s = t.elapsed().as_secs_f64();
    let pool = pool(args.model.threads)?;
    let b = nlp_bench::run(&nlp, &texts, &pool)?;
    println!(
        "texts {} | words {} | tokens {} | threads {} | load {load_s:.2}s",
        b.texts, b.words, b.tokens, b.threads
    );
    for (stage, secs) in &b.stages {
        println!(
            "{stage:<17} {secs:>7.3}s  {:>9.0} tokens/s  {:>9.0} words/s",
            b.tokens as f64 / secs,
            b.words as f64 / secs
        );
    }
    Ok(ExitCode::SUCCESS)
}
