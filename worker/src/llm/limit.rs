//! Adaptive concurrency for one model endpoint: how many requests a worker keeps in
//! flight. A model server (vLLM, TGI) is fastest when it holds many requests at once, an
//! API throttles with 429s; neither says its capacity up front. The limit starts small,
//! doubles per round of successes until the first sign of overload (slow start), then
//! grows by about one per round; a 429 (or a 503, or a timeout) halves it, once per
//! round, so a burst of rejections from requests sent together counts as one signal.

use std::sync::Mutex;
use tokio::sync::Notify;

/// The adaptive limit of one endpoint, shared by every request to it.
#[derive(Debug)]
pub struct AdaptiveLimit {
    state: Mutex<State>,
    freed: Notify,
    min: f64,
    max: f64,
}

#[derive(Debug)]
struct State {
    limit: f64,
    in_flight: usize,
    /// Bumped by every decrease: a permit taken before the last decrease reports an
    /// overload that has already been acted on.
    epoch: u64,
    /// Still doubling: no overload seen yet.
    slow_start: bool,
    peak_in_flight: usize,
}

/// One request's slot. Dropping it frees the slot; [`Permit::succeeded`] and
/// [`Permit::overloaded`] say how the request went.
#[derive(Debug)]
#[must_use = "a permit holds a slot until it is dropped"]
pub struct Permit<'a> {
    limit: &'a AdaptiveLimit,
    epoch: u64,
}

impl AdaptiveLimit {
    /// A limit starting at `initial`, kept within `1..=max`.
    ///
    /// ```
    /// # tokio_test_block_on(async {
    /// use credence_worker::llm::limit::AdaptiveLimit;
    /// let limit = AdaptiveLimit::new(4, 64);
    /// let permit = limit.acquire().await;
    /// permit.succeeded();
    /// assert_eq!(limit.current(), 5);
    /// # });
    /// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    /// # }
    /// ```
    pub fn new(initial: usize, max: usize) -> Self {
        let max = max.max(1) as f64;
        AdaptiveLimit {
            state: Mutex::new(State {
                limit: (initial.max(1) as f64).min(max),
                in_flight: 0,
                epoch: 0,
                slow_start: true,
                peak_in_flight: 0,
            }),
            freed: Notify::new(),
            min: 1.0,
            max,
        }
    }

    /// Waits for a free slot.
    pub async fn acquire(&self) -> Permit<'_> {
        loop {
            // Register for the wake-up before looking, so a slot freed in between is not
            // missed.
            let freed = self.freed.notified();
            {
                let mut s = self.lock();
                if (s.in_flight as f64) < s.limit.floor() {
                    s.in_flight += 1;
                    s.peak_in_flight = s.peak_in_flight.max(s.in_flight);
                    return Permit {
                        limit: self,
                        epoch: s.epoch,
                    };
                }
            }
            freed.await;
        }
    }

    /// The current limit (whole requests).
    pub fn current(&self) -> usize {
        self.lock().limit.floor() as usize
    }

    /// The most requests that were in flight at once.
    pub fn peak_in_flight(&self) -> usize {
        self.lock().peak_in_flight
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every critical section leaves the state consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Permit<'_> {
    /// The request succeeded: grow the limit (by one per success while in slow start,
    /// else by one per round of `limit` successes).
    pub fn succeeded(self) {
        let mut s = self.limit.lock();
        let step = if s.slow_start { 1.0 } else { 1.0 / s.limit };
        s.limit = (s.limit + step).min(self.limit.max);
        drop(s);
        // A larger limit may admit waiters beyond the one this permit's drop wakes.
        self.limit.freed.notify_waiters();
    }

    /// The endpoint pushed back (429, 503, a timeout): halve the limit, unless a request
    /// sent after the last halving already did.
    pub fn overloaded(self) {
        let mut s = self.limit.lock();
        if s.epoch == self.epoch {
            s.limit = (s.limit / 2.0).floor().max(self.limit.min);
            s.epoch += 1;
            s.slow_start = false;
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut s = self.limit.lock();
        s.in_flight -= 1;
        drop(s);
        self.limit.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn slow_start_doubles_then_overload_halves_once_per_round() {
        let limit = AdaptiveLimit::new(2, 100);
        for _ in 0..6 {
            limit.acquire().await.succeeded();
        }
        assert_eq!(limit.current(), 8);
        // Three requests in flight together all get a 429: one halving.
        let (a, b, c) = (
            limit.acquire().await,
            limit.acquire().await,
            limit.acquire().await,
        );
        a.overloaded();
        b.overloaded();
        c.overloaded();
        assert_eq!(limit.current(), 4);
        // After the overload, growth is about one per round of `limit` successes.
        for _ in 0..4 {
            limit.acquire().await.succeeded();
        }
        assert_eq!(
            limit.current(),
            4,
            "four successes at limit 4 add about one"
        );
        limit.acquire().await.succeeded();
        assert_eq!(limit.current(), 5);
    }

    #[tokio::test]
    async fn limit_stays_within_bounds() {
        let limit = AdaptiveLimit::new(1, 3);
        for _ in 0..10 {
            limit.acquire().await.succeeded();
        }
        assert_eq!(limit.current(), 3);
        for _ in 0..10 {
            limit.acquire().await.overloaded();
        }
        assert_eq!(limit.current(), 1);
    }

    #[tokio::test]
    async fn waiters_are_admitted_as_slots_free() {
        let limit = Arc::new(AdaptiveLimit::new(2, 2));
        let first = limit.acquire().await;
        let _second = limit.acquire().await;
        let l = limit.clone();
        let third = tokio::spawn(async move {
            let _p = l.acquire().await;
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!third.is_finished(), "a third request waits at limit 2");
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(5), third)
            .await
            .expect("the freed slot admits the waiter")
            .unwrap();
        assert_eq!(limit.peak_in_flight(), 2);
    }
}
