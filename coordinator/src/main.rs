//! The `credence` command line: parses arguments and calls the coordinator library.

mod commands;

use clap::{Parser, Subcommand};

/// credence runs the CREDENCE claim-decomposition sweep: decompose sentences into atomic
/// claims with each model, verify and repair them in each mode, and score them.
///
/// Start with `credence run examples/demo.toml`: the whole sweep in this process, results
/// in a SQLite file you can query with SQL.
#[derive(Parser)]
#[command(name = "credence", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a sweep on this machine (in-process queue + SQLite); resumes when run again.
    Run(commands::run::RunArgs),
    /// The pure-Rust spaCy en_core_web_sm: parse JSONL texts, or benchmark it.
    Nlp(commands::nlp::NlpArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    commands::init_tracing();
    let result = match cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Nlp(args) => commands::nlp::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
