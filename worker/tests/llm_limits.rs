//! Limits on what one generation may do (issue 33, items 4, 6 and 9): a local model's
//! generation past its time limit fails that example and leaves the model serving; a
//! looping chat template runs out of fuel instead of holding the model's thread; a
//! generation that stops at `max_new_tokens` says so; a completion holding a NUL is stored
//! the same way by SQLite and PostgreSQL.

use crate::servers;
use crate::support::llm_server;
use crate::support::tiny_llm;

use credence_infra::cache::GenerationCache;
use credence_infra::store::postgres::PgStore;
use credence_infra::store::sqlite::SqliteStore;
use credence_worker::llm::local::LocalBackend;
use credence_worker::llm::openai::OpenAiBackend;
use credence_worker::llm::{ChatMessage, ChatRequest, GenerateError, GenerateOnce, Generator};
use llm_server::{LlmServer, Reply};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiny_llm::Arch;

fn chat() -> Vec<ChatMessage> {
    vec![ChatMessage::user("w5 w6 w7")]
}

/// A tiny model whose context is long enough that decoding only stops at its deadline.
fn long_context_model(dir: &std::path::Path) {
    let mut config = tiny_llm::config_json(Arch::Llama);
    config["max_position_embeddings"] = serde_json::json!(1 << 20);
    tiny_llm::write_model_with(dir, Arch::Llama, config);
}

#[tokio::test]
async fn a_generation_past_its_time_limit_fails_that_example_and_the_model_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    long_context_model(dir.path());
    let mut settings = tiny_llm::settings(dir.path(), "f32", 1_000_000);
    settings.generation_timeout = Duration::from_millis(300);
    let backend = LocalBackend::load(&settings).unwrap();
    let started = Instant::now();
    // Through end-of-turn tokens, a million tokens: only the deadline ends it.
    let err = backend.run(&chat(), 1_000_000, true).await.unwrap_err();
    let took = started.elapsed();
    match &err {
        GenerateError::TimeLimit { message, .. } => {
            assert!(message.contains("0.3 s"), "{message}");
            assert!(message.contains("generation_timeout_s"), "{message}");
        }
        other => panic!("expected a time limit, got {other:?}"),
    }
    assert!(err.is_example_error(), "the example fails, not the job");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The model's thread serves the next request.
    let next = backend.run(&chat(), 4, true).await.unwrap();
    assert_eq!(next.ids.len(), 4);
}

#[tokio::test]
async fn a_looping_chat_template_fails_the_request_instead_of_hanging_the_model() {
    let dir = tempfile::tempdir().unwrap();
    tiny_llm::write_model(dir.path(), Arch::Llama);
    std::fs::write(
        dir.path().join("tokenizer_config.json"),
        serde_json::json!({
            "chat_template": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "eos_token": "<|im_end|>", "add_bos_token": false
        })
        .to_string(),
    )
    .unwrap();
    let backend = LocalBackend::load(&tiny_llm::settings(dir.path(), "f32", 8)).unwrap();
    let started = Instant::now();
    let request = ChatRequest {
        messages: chat(),
        max_new_tokens: 8,
    };
    let err = backend.generate(&request).await.unwrap_err();
    assert!(err.to_string().contains("fuel"), "{err}");
    assert!(err.is_example_error());
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[tokio::test]
async fn a_local_generation_that_stops_at_its_limit_says_so() {
    let dir = tempfile::tempdir().unwrap();
    long_context_model(dir.path());
    let backend = LocalBackend::load(&tiny_llm::settings(dir.path(), "f32", 3)).unwrap();
    let request = |n| ChatRequest {
        messages: chat(),
        max_new_tokens: n,
    };
    let short = backend.generate(&request(3)).await.unwrap();
    let full = backend.run(&chat(), 3, false).await.unwrap();
    // Seeded weights: these three tokens hold no end-of-turn token (checked on the run
    // that goes through end-of-turn tokens too).
    let through = backend.run(&chat(), 3, true).await.unwrap();
    assert_eq!(full.ids, through.ids, "the tiny model ends its turn early");
    assert_eq!(short.completion_tokens, Some(3));
    assert!(short.hit_limit);
}

/// An answer with a NUL in its content, cut off at the server's token limit.
fn nul_answer() -> Reply {
    Reply::Raw(
        serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": "Alice was born.\u{0}\nBob"},
                         "finish_reason": "length"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 256}
        })
        .to_string(),
    )
}

async fn generate_through(cache: &dyn GenerationCache, server: &LlmServer) -> (String, bool) {
    let backend: Arc<dyn Generator> =
        Arc::new(OpenAiBackend::new(&llm_server::settings(server)).unwrap());
    let once = GenerateOnce::new(backend);
    let request = ChatRequest {
        messages: chat(),
        max_new_tokens: 256,
    };
    let fresh = once.generate(cache, "v1", &request).await.unwrap();
    let again = once.generate(cache, "v1", &request).await.unwrap();
    assert!(again.cached, "the second call is answered by the cache");
    assert_eq!(again.text, fresh.text, "the cache holds what was returned");
    (fresh.text, fresh.hit_limit)
}

#[tokio::test]
async fn a_completion_with_a_nul_is_stored_the_same_by_both_engines() {
    if !servers::servers_available("a_completion_with_a_nul_is_stored_the_same_by_both_engines") {
        return;
    }
    let server = LlmServer::start(Duration::ZERO, |_, _| nul_answer()).await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    let (on_sqlite, hit_sqlite) = generate_through(&sqlite, &server).await;
    let db = servers::TestDb::create();
    let pg = PgStore::connect(&db.url, 2).await.unwrap();
    let (on_pg, hit_pg) = generate_through(&pg, &server).await;
    assert_eq!(on_sqlite, "Alice was born.\u{fffd}\nBob");
    assert_eq!(on_pg, on_sqlite);
    assert!(
        hit_sqlite && hit_pg,
        "finish_reason length is a generation at its limit"
    );
    assert_eq!(server.requests(), 2, "one generation per store");
}
