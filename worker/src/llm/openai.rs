//! The OpenAI-compatible chat completions backend: vLLM, TGI, llama.cpp's server, Ollama,
//! and APIs with such an endpoint (Gemini 2.5 Flash). Greedy decoding (temperature 0),
//! a timeout per request, retries with jittered backoff on 429, 5xx, timeouts, connection
//! errors and unusable answers, and adaptive concurrency ([`AdaptiveLimit`]) so a
//! server is kept busy without being flooded. An endpoint that has answered before and
//! then stays unreachable or overloaded past the retries is waited for, up to the
//! policy's `outage_patience` (a server restarted or down for minutes); one that never
//! answered fails the request after its retries (a wrong URL is said at once).
//!
//! The API key is read once from the environment variable the sweep names. It is sent
//! in the `Authorization` header and nowhere else: it is not in the fingerprint, in
//! `Debug` output, in logs or in errors (a server that echoes it back, whole, cut or
//! masked, has every piece of it cut from the message: [`Redactor`]). Sending it over
//! plain `http://` to a host other than this machine is warned about once.
//!
//! A server's answer is read up to [`OpenAiSettings::max_response_bytes`]: a larger one
//! fails the request rather than the worker's memory.

use super::limit::AdaptiveLimit;
use super::redact::Redactor;
use super::retry::{parse_retry_after, RetryPolicy};
use super::{ChatRequest, Completion, GenerateError, Generator};
use async_trait::async_trait;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

/// Settings of an OpenAI-compatible endpoint, as the sweep gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiSettings {
    /// e.g. `http://127.0.0.1:8000/v1`; `/chat/completions` is appended.
    pub base_url: String,
    /// The model name the endpoint expects.
    pub api_model: String,
    /// Environment variable holding the API key (none: no `Authorization` header).
    pub api_key_env: Option<String>,
    /// Generation limit sent as `max_tokens`.
    pub max_new_tokens: u32,
    /// Limit of one HTTP request.
    pub request_timeout: Duration,
    /// Most requests in flight at once (the adaptive limit's ceiling).
    pub max_concurrency: usize,
    /// Retries.
    pub retry: RetryPolicy,
    /// Largest answer body read ([`DEFAULT_MAX_RESPONSE_BYTES`] unless set); an
    /// answer past it fails the request.
    pub max_response_bytes: usize,
}

/// The default cap of an answer body: a chat completion of a few thousand tokens is a
/// few tens of KiB; 8 MiB leaves room for verbose servers and none for a runaway one.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 << 20;

/// How much of an error body is read: the message needs only its start.
const ERROR_BODY_BYTES: usize = 64 << 10;

/// Why an endpoint could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiSetupError {
    /// The sweep names a key variable that is not set.
    #[error("the API key variable {0} is not set (export it before starting the worker)")]
    MissingKey(String),
    /// The base URL is not an http(s) URL.
    #[error("base_url {0:?} is not an http:// or https:// URL")]
    BadUrl(String),
    /// The HTTP client could not be built.
    #[error("building the HTTP client: {0}")]
    Client(String),
}

/// A model behind an OpenAI-compatible chat completions endpoint.
pub struct OpenAiBackend {
    client: reqwest::Client,
    url: String,
    endpoint: String,
    api_model: String,
    api_key: Option<String>,
    redactor: Redactor,
    max_new_tokens: u32,
    request_timeout: Duration,
    max_response_bytes: usize,
    retry: RetryPolicy,
    limit: AdaptiveLimit,
    max_concurrency: usize,
    fingerprint: String,
    /// Whether the endpoint has answered a request (an outage is then waited for).
    answered: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for OpenAiBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiBackend")
            .field("url", &self.url)
            .field("api_model", &self.api_model)
            .field(
                "api_key",
                &self.api_key.as_ref().map(|_| "<set, not shown>"),
            )
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// The fingerprint of an endpoint model: its URL, model name and decoding settings,
/// never the key. Serving different weights under the same name at the same URL is the
/// operator's business; a new name or URL is a new model.
pub fn fingerprint(base_url: &str, api_model: &str, max_new_tokens: u32) -> String {
    let mut h = Sha256::new();
    let fields = [
        "openai-chat-v1",
        base_url.trim_end_matches('/'),
        api_model,
        "temperature=0",
        &format!("max_tokens={max_new_tokens}"),
    ];
    // The switch changes what a Qwen3 model writes; other models' fingerprints stay as
    // they were.
    let thinking_off = thinks_unless_told(api_model).then_some("enable_thinking=false");
    for field in fields.into_iter().chain(thinking_off) {
        h.update((field.len() as u64).to_le_bytes());
        h.update(field.as_bytes());
    }
    format!("openai:{}", &hex::encode(h.finalize())[..16])
}

/// Whether `api_model` names a Qwen3-family model ("Qwen/Qwen3-8B", "qwen3-30b-a3b"),
/// whose chat template thinks before answering unless the request turns it off. PAPER.md
/// decides thinking off everywhere: such a model is sent vLLM's and SGLang's switch,
/// `chat_template_kwargs: {"enable_thinking": false}`, as the local backend renders its
/// template with `enable_thinking=False`. (Any `<think>` block an answer still holds is
/// removed before parsing: `prompt::parse`.)
pub fn thinks_unless_told(api_model: &str) -> bool {
    api_model
        .rsplit('/')
        .next()
        .is_some_and(|name| name.to_ascii_lowercase().contains("qwen3"))
}

impl OpenAiBackend {
    /// Sets up an endpoint: reads the key from its variable, builds the client. Nothing
    /// is sent until the first request.
    pub fn new(settings: &OpenAiSettings) -> Result<Self, OpenAiSetupError> {
        let base = settings.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(OpenAiSetupError::BadUrl(settings.base_url.clone()));
        }
        let api_key = match &settings.api_key_env {
            None => None,
            Some(var) => Some(
                std::env::var(var)
                    .ok()
                    .filter(|k| !k.trim().is_empty())
                    .ok_or_else(|| OpenAiSetupError::MissingKey(var.clone()))?,
            ),
        };
        if api_key.is_some() && sends_key_in_clear(base) {
            // Once per backend: a backend is built once per model and worker.
            tracing::warn!(
                endpoint = %base,
                "the API key is sent over plain http:// to a host other than this machine; \
                 anyone on the path can read it (use https://)"
            );
        }
        let max_concurrency = settings.max_concurrency.max(1);
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10).min(settings.request_timeout))
            .pool_max_idle_per_host(max_concurrency)
            .build()
            .map_err(|e| OpenAiSetupError::Client(e.to_string()))?;
        Ok(OpenAiBackend {
            client,
            url: format!("{base}/chat/completions"),
            endpoint: base.to_string(),
            api_model: settings.api_model.clone(),
            redactor: Redactor::new(api_key.as_deref()),
            api_key,
            max_new_tokens: settings.max_new_tokens,
            request_timeout: settings.request_timeout,
            max_response_bytes: settings.max_response_bytes.max(1),
            retry: settings.retry,
            limit: AdaptiveLimit::new(8.min(max_concurrency), max_concurrency),
            max_concurrency,
            answered: std::sync::atomic::AtomicBool::new(false),
            fingerprint: fingerprint(base, &settings.api_model, settings.max_new_tokens),
        })
    }

    /// The adaptive limit (its current value and the peak of requests in flight).
    pub fn limit(&self) -> &AdaptiveLimit {
        &self.limit
    }

    /// Removes every piece of the key from a message that might quote it.
    fn redact(&self, message: &str) -> String {
        self.redactor.redact(message)
    }

    /// The start of a body for an error message, the key hidden before the cut.
    fn excerpt(&self, body: &str) -> String {
        self.redactor.excerpt(body)
    }

    /// One HTTP attempt.
    async fn attempt(&self, request: &ChatRequest) -> Attempt {
        let mut body = serde_json::json!({
            "model": self.api_model,
            "messages": request.messages,
            "temperature": 0,
            "max_tokens": request.max_new_tokens.min(self.max_new_tokens),
            "stream": false,
        });
        if thinks_unless_told(&self.api_model) {
            body["chat_template_kwargs"] = serde_json::json!({"enable_thinking": false});
        }
        let mut req = self
            .client
            .post(&self.url)
            .timeout(self.request_timeout)
            .json(&body);
        if let Some(key) = &self.api_key {
            req = req.bearer_auth(key);
        }
        let response = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Attempt::Overloaded {
                    message: format!("no answer within {:?}", self.request_timeout),
                    retry_after: None,
                }
            }
            Err(e) => {
                return Attempt::Transient(format!("request failed: {}", error_chain(&e)));
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        // An error body is only quoted, so its start is enough; an answer must be whole.
        let limit = if status.is_success() {
            self.max_response_bytes
        } else {
            ERROR_BODY_BYTES.min(self.max_response_bytes)
        };
        let text = match read_body(response, limit).await {
            Ok(Body::Whole(t)) => t,
            Ok(Body::Cut(t)) if !status.is_success() => t,
            Ok(Body::Cut(_)) => {
                return Attempt::Malformed(format!(
                    "the answer from {} is larger than max_response_bytes = {} bytes",
                    self.endpoint, self.max_response_bytes
                ))
            }
            Err(e) if e.is_timeout() => {
                return Attempt::Overloaded {
                    message: format!("answer not complete within {:?}", self.request_timeout),
                    retry_after: None,
                }
            }
            Err(e) => return Attempt::Transient(format!("reading the answer: {e}")),
        };
        if status == reqwest::StatusCode::TOO_MANY_REQUESTS
            || status == reqwest::StatusCode::SERVICE_UNAVAILABLE
        {
            return Attempt::Overloaded {
                message: format!("HTTP {status}: {}", self.excerpt(&text)),
                retry_after,
            };
        }
        if status.is_server_error() || status == reqwest::StatusCode::REQUEST_TIMEOUT {
            return Attempt::Transient(format!("HTTP {status}: {}", self.excerpt(&text)));
        }
        if !status.is_success() {
            return Attempt::Rejected {
                status: status.as_u16(),
                message: format!("HTTP {status}: {}", self.excerpt(&text)),
            };
        }
        match parse_answer(&text, &self.redactor) {
            Ok(answer) => Attempt::Done(answer),
            Err(message) => Attempt::Malformed(message),
        }
    }
}

/// What one attempt came to.
enum Attempt {
    Done(Answer),
    /// 429, 503 or a timeout: back off and lower the concurrency.
    Overloaded {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Connection errors, other 5xx: back off.
    Transient(String),
    /// A 2xx without a usable completion.
    Malformed(String),
    /// A 4xx other than 429: the request itself is wrong.
    Rejected {
        status: u16,
        message: String,
    },
}

#[async_trait]
impl Generator for OpenAiBackend {
    fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn params(&self, request: &ChatRequest) -> String {
        format!(
            "temperature=0;max_tokens={}",
            request.max_new_tokens.min(self.max_new_tokens)
        )
    }

    fn max_in_flight(&self) -> usize {
        self.max_concurrency
    }

    async fn generate(&self, request: &ChatRequest) -> Result<Completion, GenerateError> {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            let permit = self.limit.acquire().await;
            let outcome = self.attempt(request).await;
            let (last, retry_after) = match outcome {
                Attempt::Done(answer) => {
                    permit.succeeded();
                    self.answered
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    return Ok(Completion {
                        text: answer.text,
                        prompt_tokens: answer.prompt_tokens,
                        completion_tokens: answer.completion_tokens,
                        elapsed: started.elapsed(),
                        retries: attempt,
                        hit_limit: answer.hit_limit,
                    });
                }
                Attempt::Rejected { status, message } => {
                    drop(permit);
                    return Err(GenerateError::Rejected {
                        endpoint: self.endpoint.clone(),
                        status,
                        message: self.redact(&message),
                    });
                }
                Attempt::Overloaded {
                    message,
                    retry_after,
                } => {
                    permit.overloaded();
                    (LastFailure::Unavailable(message), retry_after)
                }
                Attempt::Transient(message) => {
                    drop(permit);
                    (LastFailure::Unavailable(message), None)
                }
                Attempt::Malformed(message) => {
                    drop(permit);
                    (LastFailure::Malformed(message), None)
                }
            };
            attempt += 1;
            // An endpoint that has answered before and is now unreachable or overloaded
            // is waited for (up to the policy's patience); one that never answered, or
            // that answers with something unusable, fails the request now.
            let outage = matches!(last, LastFailure::Unavailable(_))
                && self.answered.load(std::sync::atomic::Ordering::Relaxed)
                && started.elapsed() < self.retry.outage_patience;
            if attempt == self.retry.max_attempts && outage {
                tracing::warn!(
                    endpoint = %self.endpoint,
                    attempts = attempt,
                    patience_s = self.retry.outage_patience.as_secs(),
                    "the endpoint answered before and is unreachable now; waiting for it"
                );
            }
            if attempt >= self.retry.max_attempts && !outage {
                let endpoint = self.endpoint.clone();
                return Err(match last {
                    LastFailure::Unavailable(m) => GenerateError::Unavailable {
                        endpoint,
                        message: self.redact(&format!("{m} (after {attempt} attempts)")),
                    },
                    LastFailure::Malformed(m) => GenerateError::Malformed {
                        endpoint,
                        message: self.redact(&format!("{m} (after {attempt} attempts)")),
                    },
                });
            }
            let wait = self.retry.delay(attempt - 1, retry_after);
            tracing::debug!(
                endpoint = %self.endpoint,
                attempt,
                wait_ms = wait.as_millis() as u64,
                "retrying a generation"
            );
            tokio::time::sleep(wait).await;
        }
    }
}

enum LastFailure {
    Unavailable(String),
    Malformed(String),
}

/// A usable answer.
#[derive(Debug, PartialEq)]
struct Answer {
    text: String,
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    /// `finish_reason` was `length`: the server stopped at `max_tokens`.
    hit_limit: bool,
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
}

/// The completion of a 2xx body, or what is wrong with it.
fn parse_answer(body: &str, redactor: &Redactor) -> Result<Answer, String> {
    let parsed: ChatResponse = serde_json::from_str(body)
        .map_err(|e| format!("malformed answer ({e}): {}", redactor.excerpt(body)))?;
    let choice = parsed
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| format!("answer without choices: {}", redactor.excerpt(body)))?;
    let hit_limit = choice.finish_reason.as_deref() == Some("length");
    let content = choice.message.and_then(|m| m.content).unwrap_or_default();
    if content.trim().is_empty() {
        return Err("answer with empty content".into());
    }
    let usage = parsed.usage;
    Ok(Answer {
        text: content,
        prompt_tokens: usage.as_ref().and_then(|u| u.prompt_tokens),
        completion_tokens: usage.as_ref().and_then(|u| u.completion_tokens),
        hit_limit,
    })
}

/// A body as read: whole, or its first `limit` bytes when it is longer.
enum Body {
    Whole(String),
    Cut(String),
}

/// Reads a body chunk by chunk, stopping past `limit` bytes, so a runaway server costs
/// at most `limit` bytes of memory (a declared length past it is refused unread).
async fn read_body(mut response: reqwest::Response, limit: usize) -> Result<Body, reqwest::Error> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        let mut bytes = Vec::new();
        if let Some(chunk) = response.chunk().await? {
            bytes.extend_from_slice(&chunk[..chunk.len().min(limit)]);
        }
        return Ok(Body::Cut(String::from_utf8_lossy(&bytes).into_owned()));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > limit {
            bytes.extend_from_slice(&chunk[..limit - bytes.len()]);
            return Ok(Body::Cut(String::from_utf8_lossy(&bytes).into_owned()));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Body::Whole(String::from_utf8_lossy(&bytes).into_owned()))
}

/// Whether a key sent to `base_url` crosses a network in clear text: plain `http://`
/// to a host that is not this machine (127.0.0.0/8, ::1, `localhost`). A URL that does
/// not parse is not judged here (`new` refuses what is not http(s)).
pub fn sends_key_in_clear(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    if url.scheme() != "http" {
        return false;
    }
    let Some(host) = url.host_str() else {
        return true;
    };
    // An IPv6 host keeps its brackets in the URL.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => !ip.is_loopback(),
        Ok(std::net::IpAddr::V6(ip)) => {
            !(ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
        }
        Err(_) => {
            let host = host.trim_end_matches('.').to_ascii_lowercase();
            !(host == "localhost" || host.ends_with(".localhost"))
        }
    }
}

/// An error with its causes ("connection refused" sits a few sources down).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen3_models_are_told_not_to_think_and_others_are_left_alone() {
        for m in [
            "Qwen/Qwen3-8B",
            "qwen3-8b",
            "Qwen3-30B-A3B-Instruct",
            "org/qwen3-ft",
        ] {
            assert!(thinks_unless_told(m), "{m}");
        }
        for m in [
            "Qwen/Qwen2.5-7B-Instruct",
            "gemini-2.5-flash",
            "qwen3/gemma-3-12b",
            "",
        ] {
            assert!(!thinks_unless_told(m), "{m}");
        }
        // The switch is part of a Qwen3 model's fingerprint only: another model keeps the
        // fingerprint it had before (sha256 of the length-prefixed fields, computed apart),
        // and a Qwen3 model's differs from the one its thinking generations were cached
        // under (openai:b40079ba3d435c58).
        assert_eq!(
            fingerprint("http://h/v1", "gemini-2.5-flash", 4096),
            "openai:94af63bfeea1d89b"
        );
        assert_eq!(
            fingerprint("http://h/v1", "Qwen/Qwen3-8B", 4096),
            "openai:93d5b26bd1fe801b"
        );
    }

    #[test]
    fn an_answer_cut_at_the_servers_token_limit_says_so() {
        let r = Redactor::default();
        let body = |reason: &str| {
            format!(r#"{{"choices":[{{"message":{{"content":"A."}},"finish_reason":{reason}}}]}}"#)
        };
        assert!(parse_answer(&body(r#""length""#), &r).unwrap().hit_limit);
        assert!(!parse_answer(&body(r#""stop""#), &r).unwrap().hit_limit);
        assert!(!parse_answer(&body("null"), &r).unwrap().hit_limit);
    }

    #[test]
    fn answers_are_parsed_or_refused() {
        let r = Redactor::default();
        let ok = r#"{"choices":[{"message":{"role":"assistant","content":"A.\nB."}}],
                    "usage":{"prompt_tokens":12,"completion_tokens":4}}"#;
        assert_eq!(
            parse_answer(ok, &r).unwrap(),
            Answer {
                text: "A.\nB.".into(),
                prompt_tokens: Some(12),
                completion_tokens: Some(4),
                hit_limit: false,
            }
        );
        assert!(parse_answer("{not json", &r)
            .unwrap_err()
            .contains("malformed"));
        assert!(parse_answer(r#"{"choices":[]}"#, &r)
            .unwrap_err()
            .contains("without choices"));
        assert!(
            parse_answer(r#"{"choices":[{"message":{"content":"  "}}]}"#, &r)
                .unwrap_err()
                .contains("empty")
        );
        assert!(parse_answer(r#"{"choices":[{"message":{"content":null}}]}"#, &r).is_err());
    }

    #[test]
    fn fingerprint_ignores_the_key_and_a_trailing_slash() {
        let a = fingerprint("http://h:8000/v1", "qwen3-8b", 4096);
        assert_eq!(a, fingerprint("http://h:8000/v1/", "qwen3-8b", 4096));
        assert_ne!(a, fingerprint("http://h:8000/v1", "qwen3-8b", 512));
        assert_ne!(a, fingerprint("http://h:8001/v1", "qwen3-8b", 4096));
        assert!(a.starts_with("openai:"));
    }

    #[test]
    fn a_missing_key_variable_is_named() {
        let settings = OpenAiSettings {
            base_url: "http://127.0.0.1:9/v1".into(),
            api_model: "m".into(),
            api_key_env: Some("CREDENCE_TEST_UNSET_KEY_VARIABLE".into()),
            max_new_tokens: 16,
            request_timeout: Duration::from_secs(1),
            max_concurrency: 4,
            retry: RetryPolicy::default(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        };
        let err = OpenAiBackend::new(&settings).unwrap_err().to_string();
        assert!(err.contains("CREDENCE_TEST_UNSET_KEY_VARIABLE"), "{err}");
        let bad = OpenAiSettings {
            base_url: "127.0.0.1:8000".into(),
            api_key_env: None,
            ..settings
        };
        assert!(matches!(
            OpenAiBackend::new(&bad),
            Err(OpenAiSetupError::BadUrl(_))
        ));
    }

    #[test]
    fn a_key_in_clear_text_is_told_from_a_local_one() {
        for local in [
            "http://127.0.0.1:8000/v1",
            "http://127.3.4.5/v1",
            "http://localhost:8000/v1",
            "http://LOCALHOST./v1",
            "http://vllm.localhost/v1",
            "http://[::1]:8000/v1",
            "http://[::ffff:127.0.0.1]/v1",
            "https://api.example.com/v1",
            "https://10.0.0.5/v1",
        ] {
            assert!(!sends_key_in_clear(local), "{local}");
        }
        for remote in [
            "http://10.0.0.5:8000/v1",
            "http://api.example.com/v1",
            "http://localhost.example.com/v1",
            "http://128.0.0.1/v1",
            "http://[2001:db8::1]/v1",
            "http://0.0.0.0:8000/v1",
        ] {
            assert!(sends_key_in_clear(remote), "{remote}");
        }
    }
}
