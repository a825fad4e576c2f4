//! Everything in credence that needs a model: decomposers ([`decompose`]), sentence
//! encoders ([`embed`]), the LLM generation seam ([`llm`]), a pure-Rust spaCy
//! en_core_web_sm ([`nlp`]), the verifier ([`pipeline`]), the job handler
//! ([`handler`]), the consumer loop ([`job_loop`]) that both engines run, and the
//! distributed engine's worker process ([`serve`]).

pub mod decompose;
pub mod embed;
pub mod handler;
mod heartbeat;
pub mod job_loop;
pub mod llm;
pub mod nlp;
pub mod pipeline;
pub mod serve;
