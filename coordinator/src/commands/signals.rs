//! SIGTERM and Ctrl-C as a watch channel that turns true, for the long-running
//! distributed commands.

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// A receiver that turns true on the first SIGTERM or SIGINT.
pub fn stop_on_signals() -> anyhow::Result<watch::Receiver<bool>> {
    let mut term = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: finishing the work in flight"),
            _ = int.recv() => tracing::info!("SIGINT: finishing the work in flight"),
        }
        let _ = tx.send(true);
    });
    Ok(rx)
}
