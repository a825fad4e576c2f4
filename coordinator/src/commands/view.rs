//! `credence view RUN`: serves the local web page on every example of a run.

use anyhow::Context;
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct ViewArgs {
    /// The run id (the sweep's name).
    run: String,
    #[command(flatten)]
    store: super::StoreArgs,
    /// Where to serve the page (a local address by default: the page shows every
    /// source sentence and completion of the run).
    #[arg(long, default_value = "127.0.0.1:8321")]
    addr: std::net::SocketAddr,
}

pub fn run(args: ViewArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let store = args.store.open_browser(&args.run).await?;
        let viewer = credence::view::Viewer::open(store, &args.run).await?;
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("listening on {}", args.addr))?;
        let addr = listener.local_addr().context("the listening address")?;
        eprintln!(
            "credence view: run {:?} at http://{addr}/ (Ctrl-C stops)",
            args.run
        );
        credence::view::serve(viewer, listener).await?;
        Ok(ExitCode::SUCCESS)
    })
}
