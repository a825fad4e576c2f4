//! The modes' control flow on the real parser and encoder, with the LLM tier answered by
//! a local OpenAI-compatible server (real HTTP): the gate keeps a passing base, the early
//! exit skips the LLM when the rule tier suffices, at most one LLM call per example, an
//! empty or unparseable answer keeps the previous claims, `keep_if_not_worse` rolls a
//! worse answer back, and the self-repair prompt lists the verifier's findings.

use crate::common;
use crate::support::llm_server;

use credence_core::domain::{Example, Mode};
use credence_core::sweep::{EncoderSpec, NlpSpec, PromptKind, VerifierSettings};
use credence_infra::observe::NoObserver;
use credence_infra::store::sqlite::SqliteStore;
use credence_worker::decompose::{Decomposer, LlmDecomposer};
use credence_worker::llm::openai::{OpenAiBackend, OpenAiSettings, DEFAULT_MAX_RESPONSE_BYTES};
use credence_worker::llm::retry::RetryPolicy;
use credence_worker::pipeline::modes::{Gate, ModeOutcome, ModeRunner, ModeTrace};
use credence_worker::pipeline::repair::llm::SelfRepairOutcome;
use credence_worker::pipeline::scoring::{Scorer, ScoringInput};
use llm_server::{LlmServer, Reply};
use std::sync::Arc;
use std::time::Duration;

const EINSTEIN: &str = "Albert Einstein published the theory of special relativity in 1905 \
                        and received the Nobel Prize in Physics in 1921.";

fn scorer(keep_if_not_worse: bool) -> Option<Scorer> {
    let nlp = common::model_dir()?;
    let minilm = common::require(
        common::models_dir().join("all-MiniLM-L6-v2"),
        "all-MiniLM-L6-v2",
    )?;
    let settings = VerifierSettings {
        keep_if_not_worse,
        ..VerifierSettings::default()
    };
    Some(
        Scorer::load(
            &NlpSpec { path: Some(nlp) },
            Some(&EncoderSpec {
                preset: "all-MiniLM-L6-v2".into(),
                path: Some(minilm),
                batch_size: 32,
                precision: None,
            }),
            &settings,
        )
        .expect("the scorer loads"),
    )
}

fn decomposer(server: &LlmServer) -> LlmDecomposer {
    decomposer_with(server, PromptKind::Credence)
}

fn decomposer_with(server: &LlmServer, prompt: PromptKind) -> LlmDecomposer {
    let backend = OpenAiBackend::new(&OpenAiSettings {
        base_url: server.base_url(),
        api_model: "test-model".into(),
        api_key_env: None,
        max_new_tokens: 256,
        request_timeout: Duration::from_secs(5),
        max_concurrency: 8,
        retry: RetryPolicy {
            max_attempts: 2,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(1),
            outage_patience: Duration::ZERO,
        },
        max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
    })
    .unwrap();
    LlmDecomposer::new(Arc::new(backend), prompt, 256)
}

fn example(id: &str, text: &str, references: &[&str]) -> Example {
    Example {
        id: id.into(),
        text: text.into(),
        references: references.iter().map(|r| r.to_string()).collect(),
        meta: Default::default(),
    }
}

/// Runs `mode` on `examples` with the given base claims.
async fn run(
    scorer: &Scorer,
    llm: Option<&LlmDecomposer>,
    mode: Mode,
    examples: &[Example],
    base: &[Vec<String>],
) -> ModeOutcome {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
    let scored = scorer
        .score(&store, &ScoringInput::of_examples(examples, base))
        .await
        .unwrap();
    let runner = ModeRunner {
        scorer,
        embeddings: &store,
        generations: &store,
        llm: llm.and_then(|d| d.llm()),
        observer: &NoObserver,
        model: "test",
    };
    runner.run(mode, examples, base, scored).await.unwrap()
}

fn claims(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn all_keeps_a_passing_base_and_exits_early_when_rules_suffice() {
    let Some(scorer) = scorer(false) else { return };
    let server = LlmServer::start(Duration::ZERO, |_, _| Reply::Answer("X.".into())).await;
    let llm = decomposer(&server);
    let examples = [
        example(
            "pass",
            "The museum opened in 1998.",
            &["The museum opened in 1998."],
        ),
        example(
            "split",
            "The bridge collapsed and the road was blocked.",
            &["The bridge collapsed.", "The road was blocked."],
        ),
    ];
    let base = [
        claims(&["The museum opened in 1998."]),
        claims(&["The bridge collapsed and the road was blocked."]),
    ];
    let out = run(&scorer, Some(&llm), Mode::All, &examples, &base).await;
    assert_eq!(out.pipeline_version, "gate+rule-1+self-repair-v1");
    assert_eq!(out.claims[0], base[0], "the gate keeps a passing base");
    assert_eq!(
        out.traces[0],
        Some(ModeTrace {
            gate: Some(Gate::Kept),
            ..ModeTrace::default()
        })
    );
    assert_eq!(
        out.claims[1],
        claims(&["The bridge collapsed.", "The road was blocked."])
    );
    let t = out.traces[1].as_ref().unwrap();
    assert_eq!(t.gate, Some(Gate::Opened));
    assert_eq!(t.early_exit, Some(true), "{t:?}");
    assert_eq!(t.llm, None);
    assert_eq!(out.tier_calls, [0, 0]);
    assert_eq!(server.requests(), 0, "no LLM call when the rules suffice");
    assert_eq!(out.scored.examples[1].report.avr, 0.0);
}

#[tokio::test]
async fn self_repair_calls_once_with_the_findings_and_takes_a_parsable_answer() {
    let Some(scorer) = scorer(false) else { return };
    let server = LlmServer::start(Duration::ZERO, |_, _| {
        Reply::Answer(
            "Here are the repaired claims:\n1. Albert Einstein published the theory of special \
             relativity in 1905.\n2. Albert Einstein received the Nobel Prize in Physics in 1921."
                .into(),
        )
    })
    .await;
    let llm = decomposer(&server);
    let examples = [
        example(
            "einstein",
            EINSTEIN,
            &[
                "Albert Einstein published the theory of special relativity in 1905.",
                "Albert Einstein received the Nobel Prize in Physics in 1921.",
            ],
        ),
        example(
            "ok",
            "The museum opened in 1998.",
            &["The museum opened in 1998."],
        ),
    ];
    let base = [
        claims(&[
            "Albert Einstein published the theory of special relativity.",
            "He received the Nobel Prize in Physics in 1921.",
        ]),
        claims(&["The museum opened in 1998."]),
    ];
    let out = run(&scorer, Some(&llm), Mode::SelfRepair, &examples, &base).await;
    assert_eq!(out.pipeline_version, "self-repair-v1");
    assert_eq!(
        server.requests(),
        1,
        "one call, for the failing example only"
    );
    assert_eq!(out.tier_calls, [1, 0]);
    assert_eq!(
        out.claims[0],
        claims(&[
            "Albert Einstein published the theory of special relativity in 1905.",
            "Albert Einstein received the Nobel Prize in Physics in 1921.",
        ])
    );
    assert_eq!(
        out.traces[0].as_ref().unwrap().llm,
        Some(SelfRepairOutcome::Replaced)
    );
    assert_eq!(out.traces[1], None, "a passing base is not sent");
    let report = &out.scored.examples[0].report;
    assert_eq!((report.entities.epr, report.avr), (1.0, 0.0));
    // The prompt: the decomposer's system prompt, then S, the claims and the findings.
    let body = server.state.bodies.lock().unwrap()[0].clone();
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are an expert claim decomposition assistant."));
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains(EINSTEIN), "{user}");
    assert!(
        user.contains("He received the Nobel Prize in Physics in 1921."),
        "{user}"
    );
    assert!(
        user.contains("\"1905\" of the source sentence is missing"),
        "{user}"
    );
    assert!(user.contains("\"He\" for \"Albert Einstein\""), "{user}");
}

#[tokio::test]
async fn an_unusable_or_worse_answer_keeps_the_claims() {
    let Some(scorer) = scorer(false) else { return };
    let examples = [example(
        "einstein",
        EINSTEIN,
        &["Albert Einstein published the theory of special relativity in 1905."],
    )];
    let base = [claims(&[
        "Albert Einstein published the theory of special relativity.",
    ])];
    // Only chatter: unparseable.
    let chatter = LlmServer::start(Duration::ZERO, |_, _| {
        Reply::Answer("Here are the claims:\n".into())
    })
    .await;
    let out = run(
        &scorer,
        Some(&decomposer(&chatter)),
        Mode::SelfRepair,
        &examples,
        &base,
    )
    .await;
    assert_eq!(out.claims[0], base[0]);
    assert_eq!(
        out.traces[0].as_ref().unwrap().llm,
        Some(SelfRepairOutcome::KeptUnparseable)
    );
    // Malformed after every retry: kept, with the error.
    let broken = LlmServer::start(Duration::ZERO, |_, _| Reply::Raw("{oops".into())).await;
    let out = run(
        &scorer,
        Some(&decomposer(&broken)),
        Mode::SelfRepair,
        &examples,
        &base,
    )
    .await;
    assert_eq!(out.claims[0], base[0]);
    assert!(matches!(
        out.traces[0].as_ref().unwrap().llm,
        Some(SelfRepairOutcome::KeptError { .. })
    ));
    assert_eq!(out.tier_calls, [1]);
    // A worse answer (a compound claim that also loses the entities): taken by default,
    // rolled back with keep_if_not_worse.
    let worse = || async {
        LlmServer::start(Duration::ZERO, |_, _| {
            Reply::Answer("He wrote it and the committee gave him a prize.".into())
        })
        .await
    };
    let server = worse().await;
    let taken = run(
        &scorer,
        Some(&decomposer(&server)),
        Mode::SelfRepair,
        &examples,
        &base,
    )
    .await;
    assert_eq!(
        taken.claims[0],
        claims(&["He wrote it and the committee gave him a prize."])
    );
    let Some(careful) = scorer_keeping() else {
        return;
    };
    let server = worse().await;
    let kept = run(
        &careful,
        Some(&decomposer(&server)),
        Mode::SelfRepair,
        &examples,
        &base,
    )
    .await;
    assert_eq!(kept.claims[0], base[0]);
    assert_eq!(
        kept.traces[0].as_ref().unwrap().llm,
        Some(SelfRepairOutcome::KeptWorse)
    );
    assert_eq!(
        kept.scored.examples[0].report.avr, 0.0,
        "the scores are the kept claims'"
    );
}

fn scorer_keeping() -> Option<Scorer> {
    scorer(true)
}

#[tokio::test]
async fn a_baseline_has_no_llm_tier() {
    let Some(scorer) = scorer(false) else { return };
    let examples = [example(
        "split",
        "The bridge collapsed and the road was blocked.",
        &["The bridge collapsed.", "The road was blocked."],
    )];
    let base = [claims(&["The bridge collapsed and the road was blocked."])];
    let out = run(&scorer, None, Mode::SelfRepair, &examples, &base).await;
    assert_eq!(out.pipeline_version, "none");
    assert_eq!(out.claims[0], base[0]);
    let out = run(&scorer, None, Mode::All, &examples, &base).await;
    assert_eq!(out.pipeline_version, "gate+rule-1");
    assert_eq!(out.claims[0].len(), 2);
    let out = run(&scorer, None, Mode::Repair, &examples, &base).await;
    assert_eq!(out.pipeline_version, "rule-1");
    assert!(out.traces[0].as_ref().unwrap().rule.is_some());
}

#[tokio::test]
async fn all_calls_the_llm_once_when_the_rules_do_not_suffice() {
    let Some(scorer) = scorer(false) else { return };
    let server = LlmServer::start(Duration::ZERO, |_, _| {
        Reply::Answer("The game was cancelled.\nThe storm arrived.".into())
    })
    .await;
    let llm = decomposer(&server);
    // The rule tier does not split a "when" clause (an advcl): the LLM tier runs.
    let text = "The game was cancelled when the storm arrived.";
    let examples = [example(
        "x",
        text,
        &["The game was cancelled.", "The storm arrived."],
    )];
    let base = [claims(&[text])];
    let out = run(&scorer, Some(&llm), Mode::All, &examples, &base).await;
    let t = out.traces[0].as_ref().unwrap();
    assert_eq!(t.gate, Some(Gate::Opened));
    assert_eq!(t.rule.as_deref(), Some(&[][..]));
    assert_eq!(t.early_exit, Some(false));
    assert_eq!(t.llm, Some(SelfRepairOutcome::Replaced));
    assert_eq!(
        out.claims[0],
        claims(&["The game was cancelled.", "The storm arrived."])
    );
    assert_eq!(out.tier_calls, [1]);
    assert_eq!(server.requests(), 1, "max_llm_calls = 1");
    let body = server.state.bodies.lock().unwrap()[0].clone();
    let user = body["messages"][1]["content"].as_str().unwrap().to_string();
    assert!(
        user.contains("is not atomic (an adverbial clause at"),
        "{user}"
    );
}

/// PAPER.md "Decided here" (added 2026-11-26): the FActScore-prompt model is a baseline.
/// Its `repair` and `all` run the rule tier and its `self_repair` keeps the base; its
/// model is never asked to self-repair under CREDENCE's prompt.
#[tokio::test]
async fn a_factscore_model_gets_no_llm_tier_in_any_mode() {
    let Some(scorer) = scorer(false) else { return };
    let server = LlmServer::start(Duration::ZERO, |_, _| Reply::Answer("- X.".into())).await;
    let llm = decomposer_with(&server, PromptKind::Factscore);
    assert!(llm.llm().is_none());
    let examples = [example(
        "split",
        "The bridge collapsed and the road was blocked.",
        &["The bridge collapsed.", "The road was blocked."],
    )];
    let base = [claims(&["The bridge collapsed and the road was blocked."])];
    let mut versions = Vec::new();
    for mode in [Mode::Base, Mode::Repair, Mode::SelfRepair, Mode::All] {
        let out = run(&scorer, Some(&llm), mode, &examples, &base).await;
        assert_eq!(out.tier_calls, [0], "{mode:?}");
        versions.push(out.pipeline_version.clone());
        match mode {
            Mode::Base | Mode::SelfRepair => assert_eq!(out.claims[0], base[0], "{mode:?}"),
            _ => assert_eq!(
                out.claims[0],
                claims(&["The bridge collapsed.", "The road was blocked."]),
                "{mode:?}"
            ),
        }
    }
    assert_eq!(versions, ["base", "rule-1", "none", "gate+rule-1"]);
    assert_eq!(server.requests(), 0, "no LLM tier call in any mode");
}

/// A base that passes every check but has an unresolved pronoun is flagged: `all` opens
/// its gate (and the rule tier resolves the pronoun, so the LLM is not called) and
/// `self_repair` calls the LLM tier.
#[tokio::test]
async fn a_passing_but_flagged_base_opens_the_gate_and_triggers_self_repair() {
    let Some(scorer) = scorer(false) else { return };
    let server = LlmServer::start(Duration::ZERO, |_, _| {
        Reply::Answer(
            "Albert Einstein published the theory of special relativity in 1905.\n\
             Albert Einstein received the Nobel Prize in Physics in 1921."
                .into(),
        )
    })
    .await;
    let llm = decomposer(&server);
    let examples = [example("einstein", EINSTEIN, &[])];
    let base = [claims(&[
        "Albert Einstein published the theory of special relativity in 1905.",
        "He received the Nobel Prize in Physics in 1921.",
    ])];
    let out = run(&scorer, Some(&llm), Mode::Base, &examples, &base).await;
    let report = &out.scored.examples[0].report;
    assert_eq!(report.verify_ok, Some(true), "the base passes every check");
    assert_eq!(report.self_containment.len(), 1, "and is flagged");

    let out = run(&scorer, Some(&llm), Mode::All, &examples, &base).await;
    let t = out.traces[0].as_ref().unwrap();
    assert_eq!(t.gate, Some(Gate::Opened));
    assert_eq!(t.early_exit, Some(true), "{t:?}");
    assert_eq!(
        out.claims[0][1],
        "Albert Einstein received the Nobel Prize in Physics in 1921."
    );
    assert_eq!(server.requests(), 0);

    let out = run(&scorer, Some(&llm), Mode::SelfRepair, &examples, &base).await;
    assert_eq!(out.tier_calls, [1]);
    assert_eq!(server.requests(), 1);
    assert_eq!(
        out.traces[0].as_ref().unwrap().llm,
        Some(SelfRepairOutcome::Replaced)
    );
}

/// PAPER.md "Decided here" (added 2026-11-26): an empty claim list never passes, even
/// for a source without entities (EPR 1, AVR 0, RR 0): `all`'s gate does not keep it
/// and `self_repair` sends it to the LLM tier.
#[tokio::test]
async fn an_empty_base_is_not_kept_by_the_gate() {
    let Some(scorer) = scorer(false) else { return };
    let server = LlmServer::start(Duration::ZERO, |_, _| {
        Reply::Answer("The bridge collapsed.".into())
    })
    .await;
    let llm = decomposer(&server);
    let examples = [example("empty", "The bridge collapsed.", &[])];
    let base = [Vec::new()];
    let out = run(&scorer, Some(&llm), Mode::All, &examples, &base).await;
    let t = out.traces[0].as_ref().unwrap();
    assert_eq!(t.gate, Some(Gate::Opened));
    assert_eq!(t.early_exit, Some(false));
    assert_eq!(out.claims[0], claims(&["The bridge collapsed."]));
    let out = run(&scorer, Some(&llm), Mode::SelfRepair, &examples, &base).await;
    assert_eq!(out.tier_calls, [1]);
    assert_eq!(server.requests(), 2);
}

/// The tiers reuse the shard's parses and add the texts they write
/// (`ScoredShard::docs`): the repaired claims score as a fresh scoring of them does, and
/// every source and final claim is among the shard's parses.
#[tokio::test]
async fn the_tiers_reuse_the_shard_s_parses_and_score_as_a_fresh_scoring() {
    let Some(scorer) = scorer(false) else { return };
    let examples = [
        example(
            "split",
            "The bridge collapsed and the road was blocked.",
            &["The bridge collapsed.", "The road was blocked."],
        ),
        example(
            "pronoun",
            "Marie Curie won the Nobel Prize in 1903, and she won it again in 1911.",
            &[
                "Marie Curie won the Nobel Prize in 1903.",
                "Marie Curie won the Nobel Prize in 1911.",
            ],
        ),
        example(
            "pass",
            "The museum opened in 1998.",
            &["The museum opened in 1998."],
        ),
    ];
    let base = [
        claims(&["The bridge collapsed and the road was blocked."]),
        claims(&[
            "Marie Curie won the Nobel Prize in 1903.",
            "She won it again in 1911.",
        ]),
        claims(&["The museum opened in 1998."]),
    ];
    for mode in [Mode::Repair, Mode::All] {
        let out = run(&scorer, None, mode, &examples, &base).await;
        assert_ne!(
            out.claims[0], base[0],
            "{mode:?}: the rule tier split the claim"
        );
        for (e, c) in examples.iter().zip(&out.claims) {
            for text in std::iter::once(&e.text).chain(c) {
                assert!(
                    out.scored.docs.contains_key(text),
                    "{mode:?}: {text:?} is not among the shard's parses"
                );
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("s.db")).await.unwrap();
        let fresh = scorer
            .score(&store, &ScoringInput::of_examples(&examples, &out.claims))
            .await
            .unwrap();
        assert_eq!(out.scored.examples, fresh.examples, "{mode:?}");
    }
}
