//! `credence dataset build|stats`: builds the benchmark and AFC datasets from their
//! public sources and prints a benchmark dataset's counts and marker profile.

use super::flags;
use anyhow::Context;
use clap::{Args, Subcommand};
use credence_core::builders::afc::{self, AfcOptions, Split};
use credence_core::builders::{self, profile, Benchmark, BuildOptions, Buildable};
use credence_worker::decompose::ConjunctionOracle;
use std::path::PathBuf;
use std::process::ExitCode;

/// Build benchmark and AFC datasets, or describe a dataset file.
#[derive(Args)]
#[command(after_help = Buildable::catalogue())]
pub struct DatasetArgs {
    #[command(subcommand)]
    command: DatasetCommand,
}

#[derive(Subcommand)]
enum DatasetCommand {
    /// Build a benchmark or an AFC dataset from its source into a JSONL file; prints how
    /// many source rows each filter kept and the sha256 of the file written. The same
    /// source, seed and options always give the same bytes.
    #[command(after_help = Buildable::catalogue())]
    Build(BuildArgs),
    /// Print a dataset's counts, references, sentences, words and entities per example,
    /// categories and marker profile (share of examples containing and / but / because /
    /// so / ...), beside the paper's figures for the same benchmark.
    Stats(StatsArgs),
}

#[derive(Args)]
struct BuildArgs {
    /// A benchmark (wikisplit-bench-100, wikisplit-bench-1000, claimdecomp-bench-1000,
    /// socialclaimsplit-100, socialclaimsplit-1000, propsegment-dev) or an AFC dataset
    /// (afc-covidfact, afc-liar-plus, afc-pubhealth, afc-scifact, afc-fever).
    #[arg(value_parser = parse_buildable)]
    name: Buildable,
    /// The source corpus file, or its folder: WikiSplit test.tsv, AG News test.csv,
    /// PropSegmEnt propositions.dev.json (with document_clusters.dev.json beside it); for
    /// socialclaimsplit-100/1000 and every afc-* dataset the data folder (holding fever/,
    /// scifact/, covidfact/, liar-plus/, ...).
    #[arg(long)]
    source: PathBuf,
    /// The JSONL file to write.
    #[arg(long)]
    out: PathBuf,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// WikiSplit only: drop rows whose optional score column is below this.
    #[arg(long, default_value_t = 0.90, value_parser = flags::fraction)]
    min_entailment: f64,
    /// AFC datasets only: keep a seeded sample of this many claims (in source order); by
    /// default every claim that passes the label protocol and has evidence text.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// afc-scifact (train, dev, test; default dev) and afc-liar-plus (val2, test2; default
    /// test2) only: the split to build.
    #[arg(long, value_parser = parse_split)]
    split: Option<Split>,
}

#[derive(Args)]
struct StatsArgs {
    /// A JSONL dataset file.
    file: PathBuf,
    /// The benchmark whose paper figures to print beside the file's; by default the one
    /// the file is named after (datasets/socialclaimsplit-100.jsonl), if any.
    #[arg(long, value_parser = parse_benchmark)]
    benchmark: Option<Benchmark>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_benchmark(s: &str) -> Result<Benchmark, String> {
    s.parse::<Benchmark>().map_err(|e| e.to_string())
}

fn parse_buildable(s: &str) -> Result<Buildable, String> {
    s.parse::<Buildable>().map_err(|e| e.to_string())
}

fn parse_split(s: &str) -> Result<Split, String> {
    s.parse::<Split>().map_err(|e| e.to_string())
}

/// Runs the command.
pub fn run(args: DatasetArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        DatasetCommand::Build(a) => build(a),
        DatasetCommand::Stats(a) => stats(a),
    }
}

fn build(a: BuildArgs) -> anyhow::Result<ExitCode> {
    let context = || format!("building {} from {}", a.name, a.source.display());
    let (funnel, count, sha256) = match a.name {
        Buildable::Benchmark(benchmark) => {
            anyhow::ensure!(
                a.limit.is_none() && a.split.is_none(),
                "--limit and --split apply to the afc-* datasets only, not {benchmark}"
            );
            let options = BuildOptions {
                seed: a.seed,
                min_entailment: a.min_entailment,
            };
            let built = builders::build(benchmark, &a.source, &options, &ConjunctionOracle::new())
                .with_context(context)?;
            let sha256 = builders::write_jsonl(&a.out, &built.examples)
                .with_context(|| format!("writing {}", a.out.display()))?;
            (built.funnel, built.examples.len(), sha256)
        }
        Buildable::Afc(dataset) => {
            let options = AfcOptions {
                seed: a.seed,
                limit: a.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                split: a.split,
            };
            let built = afc::build(dataset, &a.source, &options).with_context(context)?;
            let sha256 = builders::write_jsonl(&a.out, &built.examples)
                .with_context(|| format!("writing {}", a.out.display()))?;
            (built.funnel, built.examples.len(), sha256)
        }
    };
    eprint!("{}", builders::render_funnel(&funnel));
    println!(
        "{}: {count} examples written to {}",
        a.name,
        a.out.display()
    );
    println!("sha256 {sha256}");
    Ok(ExitCode::SUCCESS)
}

fn stats(a: StatsArgs) -> anyhow::Result<ExitCode> {
    let dataset = credence_core::dataset::load(&a.file)?;
    let stats = profile::profile(&dataset.examples);
    let benchmark = a.benchmark.or_else(|| {
        a.file
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse().ok())
    });
    let paper = benchmark.and_then(profile::paper_figures);
    if a.json {
        let mut value = serde_json::to_value(&stats)?;
        if let Some(obj) = value.as_object_mut() {
            obj.insert("file".into(), a.file.display().to_string().into());
            obj.insert("sha256".into(), dataset.hash.clone().into());
            obj.insert("paper".into(), serde_json::to_value(&paper)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{}", a.file.display());
        println!("sha256        {}", dataset.hash);
        print!("{}", profile::render(&stats, paper.as_ref()));
    }
    Ok(ExitCode::SUCCESS)
}
