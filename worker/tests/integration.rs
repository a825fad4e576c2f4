//! The worker's integration tests, one test binary with each file a module: every test
//! binary links the whole dependency graph (candle, tokenizers, sqlx), so one binary
//! instead of eighteen saves most of their build time. Run one file's tests with a filter
//! on its module: `cargo test -p credence-worker --test integration llm_tiny::`.
//!
//! Tests of different files now share a process: none changes what another reads (the
//! environment variables a test sets are its own), and models loaded once behind a
//! `OnceLock` are shared.

mod common;
#[path = "../../infra/tests/support/mod.rs"]
mod servers;
mod support {
    pub mod llm_server;
    pub mod tiny_llm;
}

mod claimdecomp_bench;
mod embed_minilm;
mod embed_tiny_bert;
mod fuzz_model_headers;
mod llm_device;
mod llm_limits;
mod llm_local;
mod llm_openai;
mod llm_simulated;
mod llm_tiny;
mod model_file_limits;
mod modes;
mod nlp_doc_helpers;
mod nlp_golden;
mod nlp_robustness;
mod nlp_senter;
mod rule_repair;
mod rule_repair_property;
mod verifier;
