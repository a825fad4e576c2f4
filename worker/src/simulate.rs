//! A simulated model server (`credence simulate-server`): an OpenAI-compatible chat
//! completions endpoint that answers the prompts credence sends with a deterministic
//! decomposition and takes the time a GPU server would, so that a whole sweep can be
//! rehearsed at full size on a machine without a GPU (issue 29).
//!
//! **Answers.** The conjunction oracle's claims ([`ConjunctionOracle`], the same split the
//! `conjunction-oracle` baseline makes), so every metric downstream is computed on real
//! claims:
//! - a chat with a system message (the CREDENCE prompt): the claims of the user message,
//!   one per line;
//! - the self-repair prompt (`Source sentence:` ... `Current claims:`): the claims of the
//!   source sentence, one per line;
//! - the FActScore prompt (`... independent facts: SENTENCE` last): `- ` bullets;
//! - anything else: the last user message, trimmed, as one line.
//!
//! **Time.** A token is 4 characters (prompt and answer alike, as `usage` reports them).
//! The server's [`ServerSpeed`] (the model of time `credence sweep plan --estimate`
//! takes its throughput from): a request waits for one of `batch_limit` decoding slots
//! (the queue of a server whose batch is full), then its first token after `ttft`, then
//! its answer's tokens, each at the step time of the batch it shares: a
//! continuous-batching server whose step time grows linearly with the batch (the shape
//! measured for credence's CUDA engine and transformers in issue 28). Each request's
//! speed is re-read every [`CHUNK`] tokens, as requests join and leave the batch.
//!
//! **Faults.** Each request draws one number from a generator seeded by `seed` and its
//! arrival index, so a run's faults repeat: a 429 with `Retry-After`, a 503, a stall of
//! `stall` before the answer (past a client's timeout), or a disconnect (headers sent, the
//! body broken off), at the given rates.

use crate::decompose::ConjunctionOracle;
use axum::body::Body;
use axum::extract::State;
use axum::http::{Response, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use credence_core::estimate::ServerSpeed;

/// Tokens decoded between two looks at how many requests share the batch.
pub const CHUNK: u64 = 8;

/// The FActScore prompt's request, before the sentence (its demonstrations repeat it; the
/// last one holds the target).
const FACTSCORE_ASK: &str = "Please breakdown the following sentence into independent facts: ";

/// Characters per simulated token.
const CHARS_PER_TOKEN: usize = 4;

/// How the simulated server answers and how long it takes.
#[derive(Debug, Clone)]
pub struct SimSettings {
    /// Its speed (time to first token, tokens/s alone and in a full batch, batch limit).
    pub speed: ServerSpeed,
    /// Fault rates.
    pub faults: Faults,
    /// Seeds the fault draws.
    pub seed: u64,
}

/// Fault rates, each a probability per request (their sum at most 1).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// 429 Too Many Requests with `Retry-After: retry_after` seconds.
    pub rate_429: f64,
    /// The `Retry-After` of a 429, in seconds.
    pub retry_after: u64,
    /// 503 Service Unavailable.
    pub rate_503: f64,
    /// A stall of `stall` before the request is served.
    pub rate_stall: f64,
    /// How long a stall lasts.
    pub stall: Duration,
    /// A 200 whose body breaks off after the headers.
    pub rate_disconnect: f64,
}

impl SimSettings {
    /// Checks the settings; the error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        self.speed.validate()?;
        let f = &self.faults;
        let rates = [f.rate_429, f.rate_503, f.rate_stall, f.rate_disconnect];
        if rates.iter().any(|r| !(0.0..=1.0).contains(r)) || rates.iter().sum::<f64>() > 1.0 {
            return Err(format!(
                "fault rates must be in [0, 1] and sum to at most 1: {rates:?}"
            ));
        }
        Ok(())
    }
}

/// What the server did so far.
#[derive(Debug, Default, Serialize)]
pub struct SimCounts {
    /// Requests received.
    pub requests: u64,
    /// Requests answered with a completion.
    pub answered: u64,
    /// Answers' tokens.
    pub completion_tokens: u64,
    /// 429s sent.
    pub throttled: u64,
    /// 503s sent.
    pub unavailable: u64,
    /// Stalls.
    pub stalled: u64,
    /// Bodies broken off.
    pub disconnected: u64,
    /// Most requests decoding at once.
    pub peak_decoding: u64,
    /// Requests decoding now: answers that may still go out after these counters were
    /// read (a rehearsal that kills the server right after reading them allows for it).
    pub decoding: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    answered: AtomicU64,
    completion_tokens: AtomicU64,
    throttled: AtomicU64,
    unavailable: AtomicU64,
    stalled: AtomicU64,
    disconnected: AtomicU64,
    peak_decoding: AtomicU64,
}

/// A simulated server's shared state: its settings, batch slots and counters.
pub struct SimServer {
    settings: SimSettings,
    slots: tokio::sync::Semaphore,
    decoding: AtomicUsize,
    counters: Counters,
}

impl SimServer {
    /// A server with `settings` (checked).
    pub fn new(settings: SimSettings) -> Result<Arc<SimServer>, String> {
        settings.validate()?;
        Ok(Arc::new(SimServer {
            slots: tokio::sync::Semaphore::new(settings.speed.batch_limit),
            settings,
            decoding: AtomicUsize::new(0),
            counters: Counters::default(),
        }))
    }

    /// The HTTP routes: `POST /v1/chat/completions`, `GET /v1/models` and `GET /stats`
    /// (the counters as JSON).
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/stats", get(stats))
            .with_state(self.clone())
    }

    /// Serves the routes on `listener` until `stop` completes; requests in flight then are
    /// dropped (their clients see the connection close, as when a server goes down).
    pub async fn serve(
        self: &Arc<Self>,
        listener: tokio::net::TcpListener,
        stop: impl std::future::Future<Output = ()>,
    ) -> std::io::Result<()> {
        tokio::select! {
            served = axum::serve(listener, self.router()) => served,
            () = stop => Ok(()),
        }
    }

    /// The counters now.
    pub fn counts(&self) -> SimCounts {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // `decoding` before `answered`: a request counts in `answered` before it leaves
        // `decoding`, so read in this order it is in at least one of them.
        let decoding = self.decoding.load(Ordering::SeqCst) as u64;
        SimCounts {
            requests: get(&c.requests),
            answered: c.answered.load(Ordering::SeqCst),
            completion_tokens: get(&c.completion_tokens),
            throttled: get(&c.throttled),
            unavailable: get(&c.unavailable),
            stalled: get(&c.stalled),
            disconnected: get(&c.disconnected),
            peak_decoding: get(&c.peak_decoding),
            decoding,
        }
    }

    /// Waits for a slot, then takes the time of the first token and of `tokens` more.
    /// The request counts as decoding until the returned guard drops, which the caller
    /// holds until its answer is counted, so that no reading of the counters finds it
    /// in neither `decoding` nor `answered`.
    async fn decode(&self, tokens: u64) -> Decoding<'_> {
        let _slot = self
            .slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let now = self.decoding.fetch_add(1, Ordering::SeqCst) + 1;
        self.counters
            .peak_decoding
            .fetch_max(now as u64, Ordering::Relaxed);
        let decoding = Decoding(&self.decoding);
        tokio::time::sleep(Duration::from_secs_f64(self.settings.speed.ttft_s)).await;
        let mut left = tokens;
        while left > 0 {
            let chunk = left.min(CHUNK);
            let n = self.decoding.load(Ordering::SeqCst);
            let secs = chunk as f64 * self.settings.speed.step_seconds(n);
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            left -= chunk;
        }
        decoding
    }
}

struct Decoding<'a>(&'a AtomicUsize);

impl Drop for Decoding<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The fault a request draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    TooMany,
    Unavailable,
    Stall,
    Disconnect,
}

fn draw(settings: &SimSettings, index: u64) -> Fault {
    let f = &settings.faults;
    let u = unit_draw(settings.seed, index);
    let mut edge = 0.0;
    for (rate, fault) in [
        (f.rate_429, Fault::TooMany),
        (f.rate_503, Fault::Unavailable),
        (f.rate_stall, Fault::Stall),
        (f.rate_disconnect, Fault::Disconnect),
    ] {
        edge += rate;
        if u < edge {
            return fault;
        }
    }
    Fault::None
}

/// A number in [0, 1) that depends only on `seed` and `index`: SplitMix64's output
/// function on their mix, written out so that a seed gives the same faults with any
/// version of any crate.
fn unit_draw(seed: u64, index: u64) -> f64 {
    let mut z = seed ^ index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The simulated model's answer to a chat (see the module docs).
pub fn answer(messages: &[serde_json::Value]) -> String {
    let text = |m: &serde_json::Value| m["content"].as_str().unwrap_or("").to_string();
    let user = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(text)
        .unwrap_or_default();
    let oracle = ConjunctionOracle::new();
    let claims = |sentence: &str| {
        let claims = oracle.split(sentence);
        if claims.is_empty() {
            vec![sentence.trim().to_string()]
        } else {
            claims
        }
    };
    if let Some(source) = self_repair_source(&user) {
        return claims(source).join("\n");
    }
    if let Some(sentence) = user.rsplit_once(FACTSCORE_ASK).map(|(_, s)| s) {
        return claims(sentence)
            .iter()
            .map(|c| format!("- {c}"))
            .collect::<Vec<_>>()
            .join("\n");
    }
    if messages.iter().any(|m| m["role"] == "system") {
        return claims(&user).join("\n");
    }
    user.trim().to_string()
}

/// The source sentence of a self-repair prompt.
fn self_repair_source(user: &str) -> Option<&str> {
    let rest = user.strip_prefix("Source sentence:")?;
    let (source, _) = rest.split_once("\nCurrent claims:")?;
    Some(source.trim())
}

fn tokens(text: &str) -> u64 {
    text.chars().count().div_ceil(CHARS_PER_TOKEN).max(1) as u64
}

async fn models(State(_server): State<Arc<SimServer>>) -> Response<Body> {
    json(
        StatusCode::OK,
        serde_json::json!({"object": "list", "data": [{"id": "simulated", "object": "model"}]}),
    )
}

async fn stats(State(server): State<Arc<SimServer>>) -> Response<Body> {
    json(
        StatusCode::OK,
        serde_json::to_value(server.counts()).unwrap_or_default(),
    )
}

async fn chat(State(server): State<Arc<SimServer>>, body: String) -> Response<Body> {
    let index = server.counters.requests.fetch_add(1, Ordering::Relaxed);
    let request: serde_json::Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => {
            return json(
                StatusCode::BAD_REQUEST,
                serde_json::json!({"error": {"message": format!("the body is not JSON: {e}")}}),
            )
        }
    };
    let Some(messages) = request["messages"].as_array() else {
        return json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": {"message": "the body has no \"messages\" list"}}),
        );
    };
    let counters = &server.counters;
    let fault = draw(&server.settings, index);
    match fault {
        Fault::TooMany => {
            counters.throttled.fetch_add(1, Ordering::Relaxed);
            let mut r = json(
                StatusCode::TOO_MANY_REQUESTS,
                serde_json::json!({"error": {"message": "simulated: over capacity"}}),
            );
            r.headers_mut().insert(
                "retry-after",
                server
                    .settings
                    .faults
                    .retry_after
                    .to_string()
                    .parse()
                    .expect("digits"),
            );
            return r;
        }
        Fault::Unavailable => {
            counters.unavailable.fetch_add(1, Ordering::Relaxed);
            return json(
                StatusCode::SERVICE_UNAVAILABLE,
                serde_json::json!({"error": {"message": "simulated: unavailable"}}),
            );
        }
        Fault::Stall => {
            counters.stalled.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(server.settings.faults.stall).await;
        }
        Fault::None | Fault::Disconnect => {}
    }
    let mut content = answer(messages);
    let prompt_chars: String = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    let completion = tokens(&content);
    let max = request["max_tokens"]
        .as_u64()
        .or_else(|| request["max_completion_tokens"].as_u64());
    let decoded = max.map_or(completion, |m| completion.min(m.max(1)));
    if decoded < completion {
        // Stopped at the limit: the answer is cut where its tokens end.
        content = content
            .chars()
            .take(decoded as usize * CHARS_PER_TOKEN)
            .collect();
    }
    let decoding = server.decode(decoded).await;
    if fault == Fault::Disconnect {
        counters.disconnected.fetch_add(1, Ordering::Relaxed);
        let broken = futures::stream::iter([
            Ok(axum::body::Bytes::from_static(b"{\"id\": \"chatcmpl-sim")),
            Err(std::io::Error::other("simulated disconnect")),
        ]);
        return Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Body::from_stream(broken))
            .expect("a valid response");
    }
    counters.answered.fetch_add(1, Ordering::SeqCst);
    drop(decoding);
    counters
        .completion_tokens
        .fetch_add(decoded, Ordering::Relaxed);
    let prompt_tokens = tokens(&prompt_chars);
    json(
        StatusCode::OK,
        serde_json::json!({
            "id": format!("chatcmpl-sim-{index}"),
            "object": "chat.completion",
            "model": request["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": if decoded < completion { "length" } else { "stop" }}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": decoded,
                      "total_tokens": prompt_tokens + decoded},
        }),
    )
}

fn json(status: StatusCode, value: serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(value.to_string()))
        .expect("a valid response")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::prompt;

    fn settings() -> SimSettings {
        SimSettings {
            speed: ServerSpeed {
                ttft_s: 0.05,
                decode_tps: 85.0,
                batch_tps: 1800.0,
                batch_limit: 32,
            },
            faults: Faults::default(),
            seed: 7,
        }
    }

    #[test]
    fn the_batch_limit_gives_the_stated_aggregate_throughput() {
        let s = settings().speed;
        let one = 1.0 / s.step_seconds(1);
        let full = 32.0 / s.step_seconds(32);
        assert!((one - 85.0).abs() < 1e-9, "{one}");
        assert!((full - 1800.0).abs() < 1e-6, "{full}");
        // Throughput grows with the batch, each request slows down.
        assert!(16.0 / s.step_seconds(16) > 8.0 / s.step_seconds(8));
        assert!(s.step_seconds(16) > s.step_seconds(8));
    }

    #[test]
    fn settings_that_cannot_hold_are_refused_by_name() {
        let mut s = settings();
        s.speed.batch_tps = 32.0 * 85.0 + 1.0;
        assert!(s.validate().unwrap_err().contains("cannot exceed"));
        let mut s = settings();
        s.faults.rate_429 = 0.7;
        s.faults.rate_503 = 0.5;
        assert!(s.validate().unwrap_err().contains("fault rates"));
        let mut s = settings();
        s.speed.batch_limit = 0;
        assert!(s.validate().unwrap_err().contains("batch limit"));
    }

    #[test]
    fn faults_come_at_their_rates_and_repeat_with_the_seed() {
        let mut s = settings();
        s.faults.rate_429 = 0.1;
        s.faults.rate_503 = 0.05;
        s.faults.rate_disconnect = 0.05;
        let faults: Vec<Fault> = (0..10_000).map(|i| draw(&s, i)).collect();
        let share = |f: Fault| faults.iter().filter(|&&x| x == f).count() as f64 / 1e4;
        assert!((share(Fault::TooMany) - 0.1).abs() < 0.015);
        assert!((share(Fault::Unavailable) - 0.05).abs() < 0.01);
        assert!((share(Fault::Disconnect) - 0.05).abs() < 0.01);
        assert_eq!(share(Fault::Stall), 0.0);
        assert_eq!(faults, (0..10_000).map(|i| draw(&s, i)).collect::<Vec<_>>());
        s.seed = 8;
        assert_ne!(faults, (0..10_000).map(|i| draw(&s, i)).collect::<Vec<_>>());
    }

    #[test]
    fn draws_are_in_the_unit_interval_and_spread() {
        let draws: Vec<f64> = (0..10_000).map(|i| unit_draw(3, i)).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let below_half = draws.iter().filter(|&&u| u < 0.5).count();
        assert!((4_800..5_200).contains(&below_half), "{below_half}");
        assert_ne!(unit_draw(3, 0), unit_draw(4, 0));
    }

    #[test]
    fn each_prompt_gets_the_oracles_claims_in_its_format() {
        let sentence = "The bridge collapsed and the road was blocked.";
        let chat = |kind| {
            prompt::messages(kind, sentence)
                .iter()
                .map(|m| serde_json::to_value(m).unwrap())
                .collect::<Vec<_>>()
        };
        let credence = answer(&chat(crate::llm::PromptKind::Credence));
        assert_eq!(credence, "The bridge collapsed.\nThe road was blocked.");
        let factscore = answer(&chat(crate::llm::PromptKind::Factscore));
        assert_eq!(
            factscore,
            "- The bridge collapsed.\n- The road was blocked."
        );
        let parsed = prompt::parse(crate::llm::PromptKind::Factscore, &factscore);
        assert_eq!(parsed.claims.len(), 2, "{parsed:?}");
        let repair = serde_json::json!([{"role": "user", "content":
            format!("Source sentence:\n{sentence}\n\nCurrent claims:\n{sentence}\n\nThe verifier found these problems:\n- x\n")}]);
        assert_eq!(
            answer(repair.as_array().unwrap()),
            "The bridge collapsed.\nThe road was blocked."
        );
    }
}
