//! Work with a periodic side task beside it: a job with its heartbeat, a generation with
//! the renewals of its lease.

use std::future::Future;
use std::time::Duration;

/// Runs `work` with `beat` called every `every` beside it. Beside, not instead: both are
/// polled whenever the task wakes, so a heartbeat waiting for one of the store's pooled
/// connections never stops the work that holds them from finishing with them. (Awaiting
/// the beat in a `select!` arm did: with every connection held by the job's requests in
/// flight, the beat waited out its pool timeout while nothing released one.)
pub(crate) async fn with_heartbeat<T, B, F>(
    work: impl Future<Output = T>,
    every: Duration,
    beat: B,
) -> T
where
    B: FnMut() -> F,
    F: Future<Output = ()>,
{
    tokio::select! {
        done = work => done,
        never = beat_forever(every, beat) => match never {},
    }
}

/// Calls `beat` every `every`, the first time one period from now, forever.
async fn beat_forever<B, F>(every: Duration, mut beat: B) -> std::convert::Infallible
where
    B: FnMut() -> F,
    F: Future<Output = ()>,
{
    let mut tick = tokio::time::interval(every);
    // A beat that took longer than a period is not made up for with a burst.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        beat().await;
    }
}
