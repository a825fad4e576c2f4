//! When to try a request again: jittered exponential backoff ("full jitter": a uniform
//! delay up to `base * 2^attempt`, capped), and never sooner than a server's
//! `Retry-After`. Jitter spreads the retries of many requests rejected together, so they
//! do not come back as one burst.

use rand::Rng;
use std::time::{Duration, SystemTime};

/// How many times and how long apart a request is tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Backoff scale: the delay after attempt `k` (from 0) is at most `base * 2^k`.
    pub base: Duration,
    /// Longest delay between two attempts (a `Retry-After` may ask for more, up to
    /// `max_retry_after`).
    pub cap: Duration,
    /// Longest `Retry-After` honoured; a server asking for more is waited on this long.
    pub max_retry_after: Duration,
    /// How long a request keeps trying past `max_attempts` while an endpoint that has
    /// answered before is unreachable or overloaded: an outage or a restart, not a
    /// misconfiguration, so the job waits for the server (its heartbeat kept) instead of
    /// failing and spending its deliveries. Zero: never past `max_attempts`.
    pub outage_patience: Duration,
}

/// The default [`RetryPolicy::outage_patience`]: a model server restarted or down for
/// minutes (issue 29's rehearsal takes one down for five) costs time, not dead letters.
pub const DEFAULT_OUTAGE_PATIENCE: Duration = Duration::from_secs(15 * 60);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
            outage_patience: DEFAULT_OUTAGE_PATIENCE,
        }
    }
}

impl RetryPolicy {
    /// The delay before the attempt after `attempt` (0 = the first) failed, given the
    /// server's `Retry-After`, if any.
    ///
    /// ```
    /// use credence_worker::llm::retry::RetryPolicy;
    /// use std::time::Duration;
    /// let policy = RetryPolicy::default();
    /// assert!(policy.delay(0, None) <= Duration::from_millis(500));
    /// assert!(policy.delay(0, Some(Duration::from_secs(2))) >= Duration::from_secs(2));
    /// ```
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1u32.checked_shl(attempt.min(30)).unwrap_or(u32::MAX))
            .min(self.cap);
        let jittered = ceiling.mul_f64(rand::rng().random::<f64>());
        match retry_after {
            Some(wait) => wait.min(self.max_retry_after).max(jittered),
            None => jittered,
        }
    }
}

/// A `Retry-After` header value: delta-seconds or an HTTP date. The value comes from a
/// server, so it is never trusted to be small: a wait too long for a `Duration` (`1e20`,
/// `inf`, twenty digits) saturates to `Duration::MAX`, which [`RetryPolicy::delay`] then
/// caps at `max_retry_after`; what is not a wait (`NaN`, negative, words) is ignored.
///
/// ```
/// use credence_worker::llm::retry::parse_retry_after;
/// use std::time::Duration;
/// assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
/// assert_eq!(parse_retry_after("1e20"), Some(Duration::MAX));
/// assert_eq!(parse_retry_after("soon"), None);
/// ```
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        if secs.is_nan() || secs < 0.0 {
            return None;
        }
        // `from_secs_f64` panics past u64::MAX seconds; a header must not stop a worker.
        return Some(Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(5),
            outage_patience: Duration::ZERO,
        };
        for _ in 0..200 {
            assert!(p.delay(0, None) <= Duration::from_millis(100));
            assert!(p.delay(2, None) <= Duration::from_millis(400));
            assert!(p.delay(20, None) <= Duration::from_secs(1));
            let honoured = p.delay(0, Some(Duration::from_secs(2)));
            assert!(honoured >= Duration::from_secs(2) && honoured <= Duration::from_secs(2));
            assert_eq!(
                p.delay(0, Some(Duration::from_secs(3600))),
                Duration::from_secs(5)
            );
        }
        // Jitter: the delays are not all the same.
        let seen: std::collections::HashSet<_> = (0..50).map(|_| p.delay(3, None)).collect();
        assert!(seen.len() > 10);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1"), None);
        assert_eq!(parse_retry_after("-0.5"), None);
        assert_eq!(parse_retry_after("NaN"), None);
        assert_eq!(parse_retry_after("-inf"), None);
        for huge in [
            "1e20",
            "inf",
            "+Infinity",
            "99999999999999999999999",
            "1.8e308",
        ] {
            assert_eq!(parse_retry_after(huge), Some(Duration::MAX), "{huge}");
        }
        // However long the server asks for, the policy waits at most `max_retry_after`.
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, parse_retry_after("1e20")), p.max_retry_after);
        assert_eq!(p.delay(29, parse_retry_after("inf")), p.max_retry_after);
        let later = SystemTime::now() + Duration::from_secs(90);
        let got = parse_retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(got > Duration::from_secs(80) && got <= Duration::from_secs(90));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
    }
}
