//! A local OpenAI-compatible chat completions server for tests: real HTTP on a loopback
//! port (axum), a scripted behaviour per request (answers, 429 with Retry-After, 500s,
//! stalls past the client's timeout, malformed JSON, empty content), a fixed answer
//! delay, and counters: requests, requests per user message (to count the generations
//! of each example), requests in flight and their peak, every Authorization header
//! seen, and the bytes of streamed bodies the client took.

#![allow(dead_code)]

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Response, StatusCode};
use axum::routing::post;
use axum::Router;
use credence_worker::llm::openai::{OpenAiSettings, DEFAULT_MAX_RESPONSE_BYTES};
use credence_worker::llm::retry::RetryPolicy;
use futures::StreamExt;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A well-formed answer with this content.
    Answer(String),
    /// The decomposition of the user message: split at ", and " / " and " / " but ",
    /// one claim per line (a plausible model answer, deterministic).
    Decompose,
    /// This status and body, with a `Retry-After` header if given.
    Status(u16, String, Option<String>),
    /// A 200 with this raw body (malformed JSON, no choices, empty content).
    Raw(String),
    /// Wait, then reply.
    After(Duration, Box<Reply>),
    /// A 200 whose body of `chunks` chunks of `chunk` bytes is made as the client reads
    /// it (no Content-Length), each chunk counted in `streamed_bytes` when taken.
    Stream { chunk: usize, chunks: usize },
}

/// Decides the reply to the `n`-th request (from 0) carrying `user` as its last message.
pub type Script = dyn Fn(usize, &str) -> Reply + Send + Sync;

/// The server's shared state and counters.
pub struct ServerState {
    script: Box<Script>,
    /// Delay before every reply.
    pub delay: Duration,
    /// Requests received.
    pub requests: AtomicUsize,
    /// Requests being answered now.
    pub in_flight: AtomicUsize,
    /// Most requests answered at once.
    pub peak_in_flight: AtomicUsize,
    /// Requests per last user message.
    pub per_prompt: Mutex<HashMap<String, usize>>,
    /// Most requests answered at once before the rest get a 429 (0: no limit).
    pub capacity: AtomicUsize,
    /// Requests refused with a 429 for being over `capacity`.
    pub throttled: AtomicUsize,
    /// Authorization headers received.
    pub authorizations: Mutex<Vec<String>>,
    /// Request bodies received, as JSON.
    pub bodies: Mutex<Vec<serde_json::Value>>,
    /// Bytes of [`Reply::Stream`] bodies handed to the connection.
    pub streamed_bytes: AtomicUsize,
}

/// A running test server.
pub struct LlmServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its counters.
    pub state: Arc<ServerState>,
    task: tokio::task::JoinHandle<()>,
}

impl LlmServer {
    /// Starts a server that follows `script`, replying after `delay`.
    pub async fn start(
        delay: Duration,
        script: impl Fn(usize, &str) -> Reply + Send + Sync + 'static,
    ) -> LlmServer {
        let state = Arc::new(ServerState {
            script: Box::new(script),
            delay,
            requests: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
            capacity: AtomicUsize::new(0),
            throttled: AtomicUsize::new(0),
            per_prompt: Mutex::new(HashMap::new()),
            authorizations: Mutex::new(Vec::new()),
            bodies: Mutex::new(Vec::new()),
            streamed_bytes: AtomicUsize::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        LlmServer { addr, state, task }
    }

    /// Its base URL, as a sweep names it.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Requests per distinct last user message.
    pub fn per_prompt(&self) -> HashMap<String, usize> {
        self.state.per_prompt.lock().unwrap().clone()
    }

    /// Most requests answered at once.
    pub fn peak_in_flight(&self) -> usize {
        self.state.peak_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for LlmServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The plausible answer of [`Reply::Decompose`].
pub fn decompose_answer(user: &str) -> String {
    let s = user.trim().trim_end_matches('.');
    let mut parts = vec![s.to_string()];
    for sep in [", and ", " and ", ", but ", " but "] {
        parts = parts
            .iter()
            .flat_map(|p| p.split(sep).map(str::to_string).collect::<Vec<_>>())
            .collect();
    }
    parts
        .iter()
        .map(|p| {
            let p = p.trim();
            let mut c = p.chars();
            let first = c
                .next()
                .map(|f| f.to_uppercase().to_string())
                .unwrap_or_default();
            format!("{first}{}.", c.as_str())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The body of a well-formed answer with this content.
pub fn completion_body(content: &str) -> String {
    serde_json::json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": content.split_whitespace().count(),
                  "total_tokens": 100 + content.split_whitespace().count()}
    })
    .to_string()
}

struct InFlight<'a>(&'a ServerState);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn chat(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: String,
) -> Response<Body> {
    let n = state.requests.fetch_add(1, Ordering::SeqCst);
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.peak_in_flight.fetch_max(now, Ordering::SeqCst);
    let _guard = InFlight(&state);
    let capacity = state.capacity.load(Ordering::SeqCst);
    if capacity > 0 && now > capacity {
        state.throttled.fetch_add(1, Ordering::SeqCst);
        return respond(429, r#"{"error":"over capacity"}"#.into(), None);
    }
    if let Some(a) = headers.get("authorization") {
        state
            .authorizations
            .lock()
            .unwrap()
            .push(a.to_str().unwrap_or("").to_string());
    }
    let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let user = json["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    state.bodies.lock().unwrap().push(json);
    *state
        .per_prompt
        .lock()
        .unwrap()
        .entry(user.clone())
        .or_default() += 1;
    tokio::time::sleep(state.delay).await;
    let mut reply = (state.script)(n, &user);
    loop {
        match reply {
            Reply::After(wait, then) => {
                tokio::time::sleep(wait).await;
                reply = *then;
            }
            Reply::Answer(content) => return respond(200, completion_body(&content), None),
            Reply::Decompose => {
                return respond(200, completion_body(&decompose_answer(&user)), None)
            }
            Reply::Raw(body) => return respond(200, body, None),
            Reply::Status(code, body, retry_after) => return respond(code, body, retry_after),
            Reply::Stream { chunk, chunks } => {
                let state = state.clone();
                let body = futures::stream::iter(0..chunks).map(move |_| {
                    state.streamed_bytes.fetch_add(chunk, Ordering::SeqCst);
                    Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(vec![b'x'; chunk]))
                });
                return Response::builder()
                    .status(StatusCode::OK)
                    .header("content-type", "application/json")
                    .body(Body::from_stream(body))
                    .unwrap();
            }
        }
    }
}

fn respond(code: u16, body: String, retry_after: Option<String>) -> Response<Body> {
    let mut r = Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json");
    if let Some(v) = retry_after {
        r = r.header("retry-after", v);
    }
    r.body(Body::from(body)).unwrap()
}

/// The backend's settings for `server`: short timeouts and backoff, 4 attempts.
pub fn settings(server: &LlmServer) -> OpenAiSettings {
    OpenAiSettings {
        base_url: server.base_url(),
        api_model: "test-model".into(),
        api_key_env: None,
        max_new_tokens: 256,
        request_timeout: Duration::from_secs(5),
        max_concurrency: 64,
        retry: RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(20),
            cap: Duration::from_millis(100),
            max_retry_after: Duration::from_secs(5),
            outage_patience: Duration::ZERO,
        },
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
    }
}
