//! The generation seam: chat messages in, a completion out. [`Generator`] is the one
//! interface every LLM backend implements (one file per backend: [`openai`] for
//! OpenAI-compatible HTTP servers and APIs, [`local`] for GGUF and safetensors models run
//! with candle on CPU or CUDA).
//! The decomposers ([`crate::decompose::LlmDecomposer`]) and the LLM self-repair tier
//! are prompt templates ([`prompt`]) and parsers on top of it, and every call goes
//! through [`once::GenerateOnce`], which makes each generation happen once per sweep.

pub mod limit;
pub mod local;
pub mod nli;
pub mod once;
pub mod openai;
pub mod prompt;
pub mod redact;
pub mod retry;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use credence_core::sweep::PromptKind;
pub use once::{GenerateOnce, Generated};
pub use openai::OpenAiBackend;

/// Who speaks a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The request.
    User,
    /// A model's earlier answer.
    Assistant,
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: content.into(),
        }
    }
}

/// A generation request: the messages and how to decode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// The conversation, the last message being the one to answer.
    pub messages: Vec<ChatMessage>,
    /// Generation limit.
    pub max_new_tokens: u32,
}

/// A model's answer and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The generated text.
    pub text: String,
    /// Tokens in the prompt, when the backend reports them.
    pub prompt_tokens: Option<u32>,
    /// Tokens generated, when the backend reports them.
    pub completion_tokens: Option<u32>,
    /// Wall time of the call that produced it (retries included).
    pub elapsed: Duration,
    /// Attempts that failed before this answer (a remote backend's retries).
    pub retries: u32,
    /// Whether the generation stopped at `max_new_tokens` rather than ending by itself
    /// (the answer may be cut off; a small model that repeats itself ends this way).
    pub hit_limit: bool,
}

/// A generation that failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    /// The backend could not be reached or kept failing (connection refused, timeouts,
    /// 429 and 5xx after every retry): nothing is wrong with the example, so the job
    /// fails and is retried later rather than recording the example as failed.
    #[error("{endpoint}: {message}")]
    Unavailable {
        /// Where (base URL or model path; never a key).
        endpoint: String,
        /// What happened on the last attempt.
        message: String,
    },
    /// The backend answered, but with nothing usable (malformed JSON, no choices, empty
    /// content) on every attempt: recorded as this example's error.
    #[error("{endpoint}: {message}")]
    Malformed {
        /// Where.
        endpoint: String,
        /// What was wrong with the last answer.
        message: String,
    },
    /// The request itself is refused (4xx other than 429: bad model name, bad key,
    /// context too long); retrying cannot help.
    #[error("{endpoint}: {message}")]
    Rejected {
        /// Where.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// The status and the server's message.
        message: String,
    },
    /// The generation ran past its time limit (`generation_timeout_s`): recorded as this
    /// example's error, since the same prompt would run as long again.
    #[error("{endpoint}: {message}")]
    TimeLimit {
        /// Where.
        endpoint: String,
        /// The limit and how far the generation got.
        message: String,
    },
}

/// Something that answers chat requests: an HTTP endpoint or a local model.
#[async_trait]
pub trait Generator: Send + Sync {
    /// Fingerprint of the model and its decoding settings (weights, or endpoint URL,
    /// model name and settings), computed without loading the model; part of every job
    /// key and generation cache key.
    fn fingerprint(&self) -> &str;

    /// The decoding parameters as they enter the generation cache key.
    fn params(&self, request: &ChatRequest) -> String {
        format!("greedy;max_new_tokens={}", request.max_new_tokens)
    }

    /// How many requests a caller should keep in flight to keep the backend busy.
    fn max_in_flight(&self) -> usize {
        1
    }

    /// Answers one request.
    async fn generate(&self, request: &ChatRequest) -> Result<Completion, GenerateError>;
}

impl GenerateError {
    /// Whether the failure belongs to the example (an unusable answer, a request the
    /// server refuses for its content, such as a prompt over the context length) and is
    /// recorded as that example's error, rather than the backend's (down, overloaded,
    /// misconfigured), which fails the job so that it runs again later.
    pub fn is_example_error(&self) -> bool {
        match self {
            GenerateError::Malformed { .. } | GenerateError::TimeLimit { .. } => true,
            GenerateError::Rejected { status, .. } => matches!(status, 400 | 413 | 422),
            GenerateError::Unavailable { .. } => false,
        }
    }
}
