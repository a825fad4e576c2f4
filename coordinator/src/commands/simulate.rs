//! `credence simulate-server`: a simulated GPU model server for rehearsing a sweep without
//! a GPU (`credence_worker::simulate` has the model of time and answers).

use super::signals::stop_on_signals;
use anyhow::Context;
use clap::{Args, ValueEnum};
use credence_core::estimate::{Measured, ServerSpeed, DEFAULT_TTFT_S};
use credence_worker::simulate::{Faults, SimServer, SimSettings};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// The simulated server's settings.
#[derive(Args)]
pub struct SimulateServerArgs {
    /// Listen on this address.
    #[arg(long, default_value = "127.0.0.1:8000")]
    addr: SocketAddr,
    /// Decode speeds measured for a model on one NVIDIA H200 with credence's CUDA engine
    /// (bf16, or Q4_K for Gemma; issue 28, stop 43): qwen3-8b 89.7 tokens/s alone and
    /// 1,890 with 32 in flight; phi3-mini 121.1 and 1,641.8; gemma3-12b 72.3 and 1,077.3.
    /// --decode-tps and --batch-tps override it; what they leave keeps the model's
    /// measured slowdown per extra request in the batch (--decode-tps alone scales the
    /// full batch's speed with it; another --batch-limit moves the aggregate along the
    /// same line).
    #[arg(long, value_enum, default_value = "qwen3-8b")]
    like: Like,
    /// Tokens/s of one request decoding alone.
    #[arg(long)]
    decode_tps: Option<f64>,
    /// Tokens/s of all requests together with --batch-limit of them decoding.
    #[arg(long)]
    batch_tps: Option<f64>,
    /// Requests decoded at once; more wait in a queue.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    batch_limit: u32,
    /// Time to first token in milliseconds (default: a 300-token prompt at Qwen3-8B's
    /// measured prefill of 2,348 tokens/s).
    #[arg(long, default_value_t = DEFAULT_TTFT_S * 1000.0)]
    ttft_ms: f64,
    /// Share of requests answered 429 with Retry-After.
    #[arg(long, default_value_t = 0.0)]
    rate_429: f64,
    /// The Retry-After of a 429, in seconds.
    #[arg(long, default_value_t = 1)]
    retry_after: u64,
    /// Share of requests answered 503.
    #[arg(long, default_value_t = 0.0)]
    rate_503: f64,
    /// Share of requests that stall for --stall-secs before they are served.
    #[arg(long, default_value_t = 0.0)]
    rate_stall: f64,
    /// How long a stall lasts, in seconds (set it past the client's timeout).
    #[arg(long, default_value_t = 120.0)]
    stall_secs: f64,
    /// Share of requests whose answer breaks off after its headers.
    #[arg(long, default_value_t = 0.0)]
    rate_disconnect: f64,
    /// Seeds the fault draws (request i's fault is a function of the seed and i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// A model whose measured speeds the server takes.
#[derive(Clone, Copy, ValueEnum)]
enum Like {
    #[value(name = "qwen3-8b")]
    Qwen3,
    #[value(name = "phi3-mini")]
    Phi3,
    #[value(name = "gemma3-12b")]
    Gemma3,
}

impl Like {
    fn measured(self) -> Measured {
        match self {
            Like::Qwen3 => Measured::Qwen3_8b,
            Like::Phi3 => Measured::Phi3Mini,
            Like::Gemma3 => Measured::Gemma3_12b,
        }
    }
}

fn seconds(what: &str, s: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| anyhow::anyhow!("{what}: not a duration: {s}"))
}

/// Runs the command.
pub fn run(args: SimulateServerArgs) -> anyhow::Result<ExitCode> {
    let speed = ServerSpeed::from_measured(
        args.like.measured(),
        args.batch_limit as usize,
        args.decode_tps,
        args.batch_tps,
        seconds("--ttft-ms", args.ttft_ms / 1000.0)?.as_secs_f64(),
    );
    let settings = SimSettings {
        speed,
        faults: Faults {
            rate_429: args.rate_429,
            retry_after: args.retry_after,
            rate_503: args.rate_503,
            rate_stall: args.rate_stall,
            stall: seconds("--stall-secs", args.stall_secs)?,
            rate_disconnect: args.rate_disconnect,
        },
        seed: args.seed,
    };
    let server = SimServer::new(settings).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let mut stop = stop_on_signals()?;
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("listening on {}", args.addr))?;
        eprintln!(
            "simulated model server on http://{}/v1: {:.1} tokens/s alone, {:.1} with {} decoding",
            listener.local_addr()?,
            speed.decode_tps,
            speed.batch_tps,
            speed.batch_limit
        );
        server
            .serve(listener, async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            })
            .await
            .context("serving")?;
        eprintln!("{}", serde_json::to_string(&server.counts())?);
        Ok(ExitCode::SUCCESS)
    })
}
