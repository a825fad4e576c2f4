//! The speed of a model server: a continuous-batching GPU server whose decode step grows
//! linearly with the requests in its batch, set from speeds measured on one GPU. The
//! simulated server (`credence simulate-server`) takes its time from it and the sweep's
//! estimate (`credence sweep plan --estimate`) its throughput, so the two agree.
//!
//! With `n` requests decoding, one decode step takes `(1 + (n - 1) k) / decode_tps`,
//! where the slowdown `k` is set so that `batch_limit` requests in flight give
//! `batch_tps` tokens/s in all. A request holds one of `batch_limit` slots (more wait in a
//! queue) for its time to first token and then its answer's tokens.

use serde::Serialize;

/// Requests in flight at which the measured aggregate speeds were taken.
pub const MEASURED_BATCH: usize = 32;

/// Time to first token when none is stated: a 300-token prompt at Qwen3-8B's measured
/// prefill of 2,348 tokens/s on the H200.
pub const DEFAULT_TTFT_S: f64 = 0.128;

/// A model whose decode speeds were measured on one NVIDIA H200 with credence's CUDA
/// engine (bf16, or Q4_K for Gemma; issue 28, stop 43).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measured {
    /// Qwen3-8B: 89.7 tokens/s alone, 1,890 with 32 in flight.
    Qwen3_8b,
    /// Phi-3-mini: 121.1 and 1,641.8.
    Phi3Mini,
    /// Gemma-3-12b (Q4_K): 72.3 and 1,077.3.
    Gemma3_12b,
}

impl Measured {
    /// Every measured model, with the name flags use.
    pub const EVERY: [(Measured, &'static str); 3] = [
        (Measured::Qwen3_8b, "qwen3-8b"),
        (Measured::Phi3Mini, "phi3-mini"),
        (Measured::Gemma3_12b, "gemma3-12b"),
    ];

    /// The name flags use.
    pub fn name(self) -> &'static str {
        Self::EVERY
            .iter()
            .find(|(m, _)| *m == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    /// The measured model of a flag's name.
    pub fn parse(name: &str) -> Option<Measured> {
        Self::EVERY
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(m, _)| *m)
    }

    /// The measured model a sweep's model name is one of (`qwen3-8b`, `Qwen3-8B-AWQ`,
    /// `phi-3-mini-128k`, `gemma-3-12b-it`), matched on its letters and digits.
    pub fn of_model_name(name: &str) -> Option<Measured> {
        let squashed: String = name
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        [
            ("qwen38b", Measured::Qwen3_8b),
            ("phi3mini", Measured::Phi3Mini),
            ("gemma312b", Measured::Gemma3_12b),
        ]
        .into_iter()
        .find(|(key, _)| squashed.contains(key))
        .map(|(_, m)| m)
    }

    /// (tokens/s of one request alone, tokens/s of all with [`MEASURED_BATCH`] in flight).
    pub fn speeds(self) -> (f64, f64) {
        match self {
            Measured::Qwen3_8b => (89.7, 1890.0),
            Measured::Phi3Mini => (121.1, 1641.8),
            Measured::Gemma3_12b => (72.3, 1077.3),
        }
    }

    /// The slowdown per extra request in the batch that the two speeds imply.
    pub fn slowdown(self) -> f64 {
        let (alone, full) = self.speeds();
        slowdown(alone, full, MEASURED_BATCH)
    }
}

/// `k` such that `n` requests decoding give `batch_tps` when one alone gives `decode_tps`.
fn slowdown(decode_tps: f64, batch_tps: f64, n: usize) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let n = n as f64;
    ((n * decode_tps / batch_tps - 1.0) / (n - 1.0)).max(0.0)
}

/// How fast a model server answers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ServerSpeed {
    /// Seconds to the first token of a request that has a slot.
    pub ttft_s: f64,
    /// Tokens/s of one request decoding alone.
    pub decode_tps: f64,
    /// Tokens/s of all requests together with `batch_limit` of them decoding.
    pub batch_tps: f64,
    /// Requests decoded at once; more wait in a queue.
    pub batch_limit: usize,
}

impl ServerSpeed {
    /// `measured`'s server as it was measured: its batch limit, decode speeds and the
    /// default time to first token.
    pub fn measured(measured: Measured) -> ServerSpeed {
        ServerSpeed::from_measured(measured, MEASURED_BATCH, None, None, DEFAULT_TTFT_S)
    }

    /// A measured model's speeds at another batch limit and, where given, another speed
    /// alone or in a full batch. The measured slowdown per extra request is kept for what
    /// is not given: with only `decode_tps`, the full batch is `decode_tps` slowed as the
    /// measured model's was; with neither, the measured aggregate at 32 in flight moves
    /// along the same line to `batch_limit`.
    pub fn from_measured(
        measured: Measured,
        batch_limit: usize,
        decode_tps: Option<f64>,
        batch_tps: Option<f64>,
        ttft_s: f64,
    ) -> ServerSpeed {
        let decode_tps = decode_tps.unwrap_or(measured.speeds().0);
        let batch_tps = batch_tps.unwrap_or_else(|| {
            let n = batch_limit.max(1) as f64;
            n * decode_tps / (1.0 + (n - 1.0) * measured.slowdown())
        });
        ServerSpeed {
            ttft_s,
            decode_tps,
            batch_tps,
            batch_limit,
        }
    }

    /// Parses a flag's speed: a measured model's name (`qwen3-8b`) or
    /// `ALONE:FULL[:LIMIT]`, tokens/s of one request alone and of LIMIT (default 32) in
    /// flight. The error says what was expected.
    pub fn parse(text: &str) -> Result<ServerSpeed, String> {
        if let Some(m) = Measured::parse(text) {
            return Ok(ServerSpeed::measured(m));
        }
        let parts: Vec<&str> = text.split(':').collect();
        let number = |s: &str| s.trim().parse::<f64>().ok().filter(|x| x.is_finite());
        let speed = match parts.as_slice() {
            [alone, full] | [alone, full, _] => {
                let limit = match parts.get(2) {
                    Some(l) => l.trim().parse::<usize>().ok(),
                    None => Some(MEASURED_BATCH),
                };
                match (number(alone), number(full), limit) {
                    (Some(decode_tps), Some(batch_tps), Some(batch_limit)) => Some(ServerSpeed {
                        ttft_s: DEFAULT_TTFT_S,
                        decode_tps,
                        batch_tps,
                        batch_limit,
                    }),
                    _ => None,
                }
            }
            _ => None,
        };
        let names: Vec<&str> = Measured::EVERY.iter().map(|(_, n)| *n).collect();
        let speed = speed.ok_or_else(|| {
            format!(
                "expected a measured model ({}) or ALONE:FULL[:LIMIT] tokens/s, got {text:?}",
                names.join(", ")
            )
        })?;
        speed.validate()?;
        Ok(speed)
    }

    /// Checks the speeds; the error names the one that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.decode_tps.is_finite() && self.decode_tps > 0.0) {
            return Err(format!(
                "decode tokens/s must be > 0, got {}",
                self.decode_tps
            ));
        }
        if self.batch_limit == 0 {
            return Err("the batch limit must be at least 1".into());
        }
        if !(self.batch_tps.is_finite() && self.batch_tps >= self.decode_tps) {
            return Err(format!(
                "batch tokens/s ({}) must be at least the decode tokens/s ({})",
                self.batch_tps, self.decode_tps
            ));
        }
        let max = self.batch_limit as f64 * self.decode_tps;
        if self.batch_tps > max * (1.0 + 1e-12) {
            return Err(format!(
                "batch tokens/s ({}) cannot exceed batch limit x decode tokens/s ({max})",
                self.batch_tps
            ));
        }
        if !(self.ttft_s.is_finite() && self.ttft_s >= 0.0) {
            return Err(format!(
                "time to first token must be >= 0 s, got {}",
                self.ttft_s
            ));
        }
        Ok(())
    }

    /// The slowdown per extra request in the batch (`k`).
    pub fn slowdown(&self) -> f64 {
        slowdown(self.decode_tps, self.batch_tps, self.batch_limit)
    }

    /// Seconds of one decode step with `n` requests decoding.
    pub fn step_seconds(&self, n: usize) -> f64 {
        (1.0 + (n.max(1) - 1) as f64 * self.slowdown()) / self.decode_tps
    }

    /// Seconds a request of `tokens` answer tokens takes alone on the server.
    pub fn alone_seconds(&self, tokens: u64) -> f64 {
        self.ttft_s + tokens as f64 * self.step_seconds(1)
    }

    /// Seconds to answer `calls` requests of `tokens` answer tokens each when the clients
    /// keep `in_flight` of them at the server: the batch holds `min(in_flight,
    /// batch_limit, calls)` at a time, each for its time to first token and its tokens at
    /// that batch's step time.
    pub fn seconds_for(&self, calls: f64, tokens: f64, in_flight: usize) -> f64 {
        if calls <= 0.0 {
            return 0.0;
        }
        let batch = in_flight
            .clamp(1, self.batch_limit)
            .min(calls.ceil() as usize)
            .max(1);
        let latency = self.ttft_s + tokens * self.step_seconds(batch);
        calls * latency / batch as f64
    }
}
