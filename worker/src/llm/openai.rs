//! The OpenAI-compatible chat completions backend: vLLM, TGI, llama.cpp's server, Ollama,
//! and APIs with such an endpoint (Gemini 2.5 Flash). Greedy decoding (temperature 0),
//! a timeout per request, retries with jittered backoff on 429, 5xx, timeouts, connection
//! errors and unusable answers, and adaptive concurrency ([`AdaptiveLimit`]) so a
//! server is kept busy without being flooded.
//!
//! The API key is read once from the environment variable the sweep names. It is sent
//! in the `Authorization` header and nowhere else: it is not in the fingerprint, in
//! `Debug` output, in logs or in errors (a server that echoes it back has it cut from
//! the message).

use super::limit::AdaptiveLimit;
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
}

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
    max_new_tokens: u32,
    request_timeout: Duration,
    retry: RetryPolicy,
    limit: AdaptiveLimit,
    max_concurrency: usize,
    fingerprint: String,
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
    for field in [
        "openai-chat-v1",
        base_url.trim_end_matches('/'),
        api_model,
        "temperature=0",
        &format!("max_tokens={max_new_tokens}"),
    ] {
        h.update((field.len() as u64).to_le_bytes());
        h.update(field.as_bytes());
    }
    format!("openai:{}", &hex::encode(h.finalize())[..16])
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
            api_key,
            max_new_tokens: settings.max_new_tokens,
            request_timeout: settings.request_timeout,
            retry: settings.retry,
            limit: AdaptiveLimit::new(8.min(max_concurrency), max_concurrency),
            max_concurrency,
            fingerprint: fingerprint(base, &settings.api_model, settings.max_new_tokens),
        })
    }

    /// The adaptive limit (its current value and the peak of requests in flight).
    pub fn limit(&self) -> &AdaptiveLimit {
        &self.limit
    }

    /// Removes the key from a message that might quote it.
    fn redact(&self, message: &str) -> String {
        match &self.api_key {
            Some(key) if !key.is_empty() => message.replace(key.as_str(), "<api key>"),
            _ => message.to_string(),
        }
    }

    /// One HTTP attempt.
    async fn attempt(&self, request: &ChatRequest) -> Attempt {
        let body = serde_json::json!({
            "model": self.api_model,
            "messages": request.messages,
            "temperature": 0,
            "max_tokens": request.max_new_tokens.min(self.max_new_tokens),
            "stream": false,
        });
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
        let text = match response.text().await {
            Ok(t) => t,
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
                message: format!("HTTP {status}: {}", excerpt(&text)),
                retry_after,
            };
        }
        if status.is_server_error() || status == reqwest::StatusCode::REQUEST_TIMEOUT {
            return Attempt::Transient(format!("HTTP {status}: {}", excerpt(&text)));
        }
        if !status.is_success() {
            return Attempt::Rejected {
                status: status.as_u16(),
                message: format!("HTTP {status}: {}", excerpt(&text)),
            };
        }
        match parse_answer(&text) {
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
                    return Ok(Completion {
                        text: answer.text,
                        prompt_tokens: answer.prompt_tokens,
                        completion_tokens: answer.completion_tokens,
                        elapsed: started.elapsed(),
                        retries: attempt,
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
            if attempt >= self.retry.max_attempts {
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
fn parse_answer(body: &str) -> Result<Answer, String> {
    let parsed: ChatResponse = serde_json::from_str(body)
        .map_err(|e| format!("malformed answer ({e}): {}", excerpt(body)))?;
    let content = parsed
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| format!("answer without choices: {}", excerpt(body)))?
        .message
        .and_then(|m| m.content)
        .unwrap_or_default();
    if content.trim().is_empty() {
        return Err("answer with empty content".into());
    }
    let usage = parsed.usage;
    Ok(Answer {
        text: content,
        prompt_tokens: usage.as_ref().and_then(|u| u.prompt_tokens),
        completion_tokens: usage.as_ref().and_then(|u| u.completion_tokens),
    })
}

/// The start of a body, on one line, for an error message.
fn excerpt(body: &str) -> String {
    let one_line: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None if one_line.is_empty() => "(empty body)".into(),
        None => one_line,
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
    fn answers_are_parsed_or_refused() {
        let ok = r#"{"choices":[{"message":{"role":"assistant","content":"A.\nB."}}],
                    "usage":{"prompt_tokens":12,"completion_tokens":4}}"#;
        assert_eq!(
            parse_answer(ok).unwrap(),
            Answer {
                text: "A.\nB.".into(),
                prompt_tokens: Some(12),
                completion_tokens: Some(4)
            }
        );
        assert!(parse_answer("{not json").unwrap_err().contains("malformed"));
        assert!(parse_answer(r#"{"choices":[]}"#)
            .unwrap_err()
            .contains("without choices"));
        assert!(
            parse_answer(r#"{"choices":[{"message":{"content":"  "}}]}"#)
                .unwrap_err()
                .contains("empty")
        );
        assert!(parse_answer(r#"{"choices":[{"message":{"content":null}}]}"#).is_err());
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
}
