//! `credence stats` (hidden): tools for checking the bootstrap from outside. `indices`
//! writes a dataset's index matrix as a NumPy `.npy` file (B x n, little-endian u32) so
//! that another implementation can resample the very same example ids; `bench` times
//! the issue-14 workload (`credence_core::stats::benchmark`).

use anyhow::Context;
use clap::{Args, Subcommand};
use credence_core::stats::{benchmark, Bootstrap, IndexMatrix};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct StatsArgs {
    #[command(subcommand)]
    command: StatsCommand,
}

#[derive(Subcommand)]
enum StatsCommand {
    /// Write the index matrix of (seed, dataset, n) as a .npy file.
    Indices(IndicesArgs),
    /// Time 64 configurations x n = 1,000 x B = 10,000 intervals + 48 paired tests.
    Bench(BenchArgs),
}

#[derive(Args)]
struct IndicesArgs {
    /// Dataset id, as in the sweep.
    #[arg(long)]
    dataset: String,
    /// Examples in the dataset.
    #[arg(long)]
    n: usize,
    /// Resamples B.
    #[arg(long, default_value_t = 10_000)]
    resamples: usize,
    /// Seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The .npy file to write.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct BenchArgs {
    /// Repeats (the best is reported).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Thread counts to time (default: 1 and all cores).
    #[arg(long, value_delimiter = ',')]
    threads: Vec<usize>,
}

pub fn run(args: StatsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        StatsCommand::Indices(a) => {
            let boot = Bootstrap {
                resamples: a.resamples,
                seed: a.seed,
            };
            let m = IndexMatrix::new(&boot, &a.dataset, a.n);
            let mut header = format!(
                "{{'descr': '<u4', 'fortran_order': False, 'shape': ({}, {}), }}",
                a.resamples, a.n
            );
            // NPY 1.0: magic, version, header length; header padded to 64 bytes with '\n'.
            while (10 + header.len() + 1) % 64 != 0 {
                header.push(' ');
            }
            header.push('\n');
            let mut out = Vec::with_capacity(10 + header.len() + 4 * a.resamples * a.n);
            out.extend_from_slice(b"\x93NUMPY\x01\x00");
            out.extend_from_slice(&(header.len() as u16).to_le_bytes());
            out.extend_from_slice(header.as_bytes());
            for i in m.to_vec() {
                out.extend_from_slice(&i.to_le_bytes());
            }
            std::fs::File::create(&a.out)
                .and_then(|mut f| f.write_all(&out))
                .with_context(|| format!("writing {}", a.out.display()))?;
        }
        StatsCommand::Bench(a) => {
            let shape = benchmark::Shape::default();
            let threads = if a.threads.is_empty() {
                vec![1, rayon::current_num_threads()]
            } else {
                a.threads
            };
            let timings: Vec<benchmark::Timing> = threads
                .iter()
                .map(|&t| benchmark::time(&shape, t, a.repeats))
                .collect();
            println!(
                "{}",
                serde_json::to_string(&serde_json::json!({"shape": shape, "timings": timings}))?
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
