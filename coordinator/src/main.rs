//! The `credence` command line: parses arguments and calls the coordinator library.

mod commands;

use clap::{Parser, Subcommand};

/// Every credence process allocates with mimalloc. With glibc's malloc a worker's peak
/// memory grew with the length of a run (its per-thread arenas fragment): 306-331 MiB at
/// 1/10 of the paper's sweep and 403-415 MiB at full size (+25%); with mimalloc 349-364
/// and 390-395 MiB (+8.6%), lower at full size, on the same machine in one session
/// (`bench/rehearse-paper.sh`, ARCHITECTURE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// A sweep on the distributed engine: launch, status, resume, cancel.
    Sweep(commands::sweep::SweepArgs),
    /// A worker of the distributed engine: runs the jobs of the given models.
    Worker(commands::worker::WorkerArgs),
    /// The distributed engine's coordinator service (the reaper).
    Coordinator(commands::coordinator::CoordinatorArgs),
    /// The dead-letter queue: list and replay.
    Dlq(commands::dlq::DlqArgs),
    /// Build the benchmark and AFC datasets from their sources; print a benchmark dataset's
    /// marker profile.
    Dataset(commands::dataset::DatasetArgs),
    /// Decompose one sentence with an LLM endpoint, a sweep's model or a baseline; print
    /// the raw completion and the parsed claims.
    Decompose(commands::decompose::DecomposeArgs),
    /// Encode a JSONL file of texts with a sentence encoder; JSONL vectors out.
    Embed(commands::embed::EmbedArgs),
    /// Measure sentence-encoder throughput (sentences/s) per batch size.
    BenchEmbed(commands::bench_embed::BenchEmbedArgs),
    /// Measure a local LLM's prefill and decode speed (tokens/s), one sequence at a time
    /// and several in flight.
    BenchLlm(commands::bench_llm::BenchLlmArgs),
    /// Measure verification plus every per-example metric on real examples (examples/s).
    BenchPipeline(commands::bench_pipeline::BenchPipelineArgs),
    /// The pure-Rust spaCy en_core_web_sm: parse JSONL texts, or benchmark it.
    Nlp(commands::nlp::NlpArgs),
    /// The CREDENCE verifier: atomicity, entities, repetition, self-containment and
    /// modality of claims against their source; or atomicity of a JSONL file of claims.
    Verify(commands::verify::VerifyArgs),
    /// The rule repair tier on one source and its claims: the steps it takes and the
    /// verifier's findings before and after.
    Repair(commands::repair::RepairArgs),
    /// A run's tables (means with 95% intervals, paired comparisons, baselines, ablations,
    /// timing) as Markdown, LaTeX, CSV, JSON or an HTML page with plots.
    Report(commands::report::ReportArgs),
    /// A local web page on every example of a run: a list to filter and sort (dataset,
    /// model, mode, a failing check, "worse than base"), and each example's source,
    /// references and claims in every mode side by side with the verifier's findings, the
    /// rule tier's steps and the raw completions.
    ///
    /// It serves http://ADDR/ (127.0.0.1:8321 by default) from the run's store, reading
    /// one page of examples or one example per request, so a run of any size opens at
    /// once. The list's filters and sort live in the URL (share it; the back button
    /// works); on an example page j or → goes to the next example of the list, k or ← to
    /// the previous one, u back to the list. Nothing is fetched from elsewhere: it works
    /// offline. `credence report --format html --view-addr http://ADDR` links the
    /// report's tables to it.
    View(commands::view::ViewArgs),
    /// Audits of a finished run: the rule tier's convergence over k passes (T1-T4, "P2
    /// better"), and the gating false negatives.
    Audit(commands::audit::AuditArgs),
    /// A simulated GPU model server (OpenAI-compatible) for rehearsing a sweep without a
    /// GPU: deterministic decompositions, a continuous-batching model of time, faults.
    ///
    /// It serves POST /v1/chat/completions, answers credence's prompts (CREDENCE,
    /// FActScore, self-repair) with the conjunction oracle's claims, and takes the time a
    /// GPU server would: a time to first token, then the answer's tokens (4 characters
    /// each) at a speed per request that falls as more requests share the batch, up to
    /// --batch-limit requests decoding at once; more wait in a queue. Faults (429, 503,
    /// stalls, broken bodies) come at the given rates, drawn from --seed. A sweep names it
    /// as a model with `preset = "openai"` and `base_url = "http://ADDR/v1"`. GET /stats
    /// gives the counters as JSON; on SIGINT or SIGTERM they are printed to standard error
    /// and the server exits.
    SimulateServer(commands::simulate::SimulateServerArgs),
    /// Bootstrap checks: export an index matrix, time the bootstrap.
    #[command(hide = true)]
    Stats(commands::stats::StatsArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    commands::init_tracing();
    let result = match cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Sweep(args) => commands::sweep::run(args),
        Command::Worker(args) => commands::worker::run(args),
        Command::Coordinator(args) => commands::coordinator::run(args),
        Command::Dlq(args) => commands::dlq::run(args),
        Command::Dataset(args) => commands::dataset::run(args),
        Command::Decompose(args) => commands::decompose::run(args),
        Command::Embed(args) => commands::embed::run(args),
        Command::BenchEmbed(args) => commands::bench_embed::run(args),
        Command::BenchLlm(args) => commands::bench_llm::run(args),
        Command::Nlp(args) => commands::nlp::run(args),
        Command::BenchPipeline(args) => commands::bench_pipeline::run(args),
        Command::Verify(args) => commands::verify::run(args),
        Command::Repair(args) => commands::repair::run(args),
        Command::Report(args) => commands::report::run(args),
        Command::View(args) => commands::view::run(args),
        Command::Audit(args) => commands::audit::run(args),
        Command::SimulateServer(args) => commands::simulate::run(args),
        Command::Stats(args) => commands::stats::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, joined by ": ". A cause whose text its parent
/// already shows (an error type that prints its source and also returns it) is not
/// repeated: "loading the parser: f: cannot read: No such file", not that followed by
/// "f: cannot read: No such file: No such file".
fn error_chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// An error that prints its source and also returns it, as `thiserror`'s
    /// `#[error("{path}: cannot read: {source}")]` does.
    #[derive(Debug)]
    struct Unreadable {
        path: String,
        source: std::io::Error,
    }

    impl std::fmt::Display for Unreadable {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: cannot read: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Unreadable {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_its_parent_already_shows_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let e = anyhow::Error::new(Unreadable {
            path: "models/x".into(),
            source: io,
        })
        .context("loading the parser");
        assert_eq!(
            error_chain(&e),
            "loading the parser: models/x: cannot read: No such file"
        );
        let plain = anyhow::anyhow!("disk full").context("writing results.db");
        assert_eq!(error_chain(&plain), "writing results.db: disk full");
    }
}
