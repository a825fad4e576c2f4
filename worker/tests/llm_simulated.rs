//! The simulated model server (`credence simulate-server`) behind the real OpenAI backend:
//! it answers credence's prompts with the conjunction oracle's claims, queues requests
//! beyond its batch limit and slows each request as the batch fills, and its faults reach
//! the client as the retry policy expects.

use credence_core::sweep::PromptKind;
use credence_worker::llm::openai::{OpenAiBackend, OpenAiSettings, DEFAULT_MAX_RESPONSE_BYTES};
use credence_worker::llm::retry::RetryPolicy;
use credence_worker::llm::{prompt, ChatRequest, GenerateError, Generator};
use credence_worker::simulate::{Faults, ServerSpeed, SimServer, SimSettings};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SENTENCE: &str = "The council approved the budget and the opposition voted against it.";

fn sim(batch_limit: usize, faults: Faults) -> SimSettings {
    SimSettings {
        speed: ServerSpeed {
            ttft_s: 0.02,
            decode_tps: 400.0,
            batch_tps: 400.0 * batch_limit as f64 * 0.75 + 100.0,
            batch_limit,
        },
        faults,
        seed: 1,
    }
}

/// Starts `settings` on a loopback port; the server stops when the test's runtime ends.
async fn start(settings: SimSettings) -> (Arc<SimServer>, OpenAiBackend) {
    let server = SimServer::new(settings).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let serving = server.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    let backend = OpenAiBackend::new(&OpenAiSettings {
        base_url,
        api_model: "qwen3-8b".into(),
        api_key_env: None,
        max_new_tokens: 256,
        request_timeout: Duration::from_secs(2),
        max_concurrency: 64,
        retry: RetryPolicy {
            max_attempts: 3,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(50),
            max_retry_after: Duration::from_secs(2),
            outage_patience: Duration::ZERO,
        },
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
    })
    .unwrap();
    (server, backend)
}

fn ask(kind: PromptKind) -> ChatRequest {
    ChatRequest {
        messages: prompt::messages(kind, SENTENCE),
        max_new_tokens: 256,
    }
}

#[tokio::test]
async fn both_prompts_get_the_oracles_claims_with_their_token_counts() {
    let (server, backend) = start(sim(4, Faults::default())).await;
    for kind in [PromptKind::Credence, PromptKind::Factscore] {
        let c = backend.generate(&ask(kind)).await.unwrap();
        let parsed = prompt::parse(kind, &c.text);
        assert_eq!(
            parsed.claims,
            [
                "The council approved the budget.",
                "The opposition voted against it."
            ],
            "{kind:?}: {}",
            c.text
        );
        assert_eq!(
            c.completion_tokens,
            Some(c.text.chars().count().div_ceil(4) as u32)
        );
        assert!(c.prompt_tokens.unwrap() > 10);
    }
    // At the request's token limit the answer stops there, and says so.
    let short = backend
        .generate(&ChatRequest {
            max_new_tokens: 3,
            ..ask(PromptKind::Credence)
        })
        .await
        .unwrap();
    assert_eq!(short.completion_tokens, Some(3));
    assert_eq!(short.text.trim_end(), "The council");
    assert!(short.hit_limit);
    let counts = server.counts();
    assert_eq!((counts.requests, counts.answered), (3, 3));
}

/// Eight requests at once on a batch of two: at most two decode together, the rest wait,
/// so the eight take at least four times one request's time alone; and two sharing the
/// batch each take longer than one alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_batch_limit_queue_and_a_fuller_batch_is_slower() {
    let settings = sim(2, Faults::default()).speed;
    let (server, backend) = start(sim(2, Faults::default())).await;
    let backend = Arc::new(backend);
    let start = Instant::now();
    let one = backend.generate(&ask(PromptKind::Credence)).await.unwrap();
    let alone = start.elapsed();
    let tokens = u64::from(one.completion_tokens.unwrap());
    assert!(alone.as_secs_f64() >= settings.alone_seconds(tokens) * 0.99);

    let start = Instant::now();
    let all = futures::future::join_all((0..8).map(|_| {
        let backend = backend.clone();
        async move { backend.generate(&ask(PromptKind::Credence)).await }
    }))
    .await;
    let eight = start.elapsed();
    assert!(all.iter().all(Result::is_ok));
    assert_eq!(server.counts().peak_decoding, 2);
    assert_eq!(
        server.counts().decoding,
        0,
        "every answered request left the batch"
    );
    // Four rounds of two, each at the two-in-flight step time.
    let round = settings.ttft_s + tokens as f64 * settings.step_seconds(2);
    assert!(settings.step_seconds(2) > settings.step_seconds(1));
    assert!(
        eight.as_secs_f64() >= 4.0 * round * 0.99,
        "8 requests in {eight:?}, one round {round} s"
    );
}

/// Every request throttled: the client retries after Retry-After and then reports the
/// server over capacity; every request broken off: the client sees a failed answer. The
/// counters say what the server did.
#[tokio::test]
async fn faults_reach_the_client_as_retries_and_errors() {
    let (server, backend) = start(sim(
        4,
        Faults {
            rate_429: 1.0,
            retry_after: 0,
            ..Faults::default()
        },
    ))
    .await;
    let err = backend
        .generate(&ask(PromptKind::Credence))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, GenerateError::Unavailable { message, .. } if message.contains("429")),
        "{err:?}"
    );
    assert_eq!(server.counts().throttled, 3, "one per attempt");

    let (server, backend) = start(sim(
        4,
        Faults {
            rate_disconnect: 1.0,
            ..Faults::default()
        },
    ))
    .await;
    assert!(backend.generate(&ask(PromptKind::Credence)).await.is_err());
    let counts = server.counts();
    assert_eq!(counts.disconnected, counts.requests);
    assert_eq!(counts.answered, 0);
}

/// A server that answered and then goes down for a while is waited for (the policy's
/// outage patience), not given up on after the retries: the request made while it is down
/// is answered once it is back. Past the patience, or at an endpoint that never answered,
/// the request fails as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_answered_before_is_waited_for_through_an_outage() {
    let server = SimServer::new(sim(4, Faults::default())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server.clone();
    let first_life = tokio::spawn(async move {
        serving
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await
    });
    let backend = |addr: std::net::SocketAddr, patience: Duration| {
        OpenAiBackend::new(&OpenAiSettings {
            base_url: format!("http://{addr}/v1"),
            api_model: "qwen3-8b".into(),
            api_key_env: None,
            max_new_tokens: 256,
            request_timeout: Duration::from_secs(2),
            max_concurrency: 4,
            retry: RetryPolicy {
                max_attempts: 2,
                base: Duration::from_millis(20),
                cap: Duration::from_millis(100),
                max_retry_after: Duration::from_secs(1),
                outage_patience: patience,
            },
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
        .unwrap()
    };
    let patient = backend(addr, Duration::from_secs(30));
    let impatient = backend(addr, Duration::from_millis(300));
    patient.generate(&ask(PromptKind::Credence)).await.unwrap();
    impatient
        .generate(&ask(PromptKind::Credence))
        .await
        .unwrap();
    stop.send(()).unwrap();
    first_life.await.unwrap().unwrap();

    // Down for 1.5 s: the impatient client gives up, the patient one is answered once the
    // server is back on the same address.
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        (
            patient.generate(&ask(PromptKind::Credence)).await,
            started.elapsed(),
        )
    });
    let gave_up = impatient.generate(&ask(PromptKind::Credence)).await;
    assert!(
        matches!(gave_up, Err(GenerateError::Unavailable { .. })),
        "{gave_up:?}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let serving = server.clone();
    tokio::spawn(async move { serving.serve(listener, std::future::pending()).await });
    let (answer, waited) = waiting.await.unwrap();
    assert!(answer.is_ok(), "{answer:?}");
    assert!(waited >= Duration::from_millis(1400), "{waited:?}");

    // An endpoint that never answered is not waited for.
    let nobody = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let unused = nobody.local_addr().unwrap();
    drop(nobody);
    let never = backend(unused, Duration::from_secs(30));
    let started = Instant::now();
    let refused = never.generate(&ask(PromptKind::Credence)).await;
    assert!(
        matches!(refused, Err(GenerateError::Unavailable { .. })),
        "{refused:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}
