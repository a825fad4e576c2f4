//! Everything in credence that needs a model: decomposers ([`decompose`]), sentence
//! encoders ([`embed`]), the LLM generation seam ([`llm`]), the verifier over the
//! spaCy port (`credence_nlp`) ([`pipeline`]), the job handler
//! ([`handler`]), the consumer loop ([`job_loop`]) that both engines run, and the
//! distributed engine's worker process ([`serve`]); and a simulated model server for
//! rehearsals without a GPU ([`simulate`]).

pub mod decompose;
pub mod embed;
pub mod handler;
mod heartbeat;
pub mod job_loop;
pub mod llm;
pub mod pipeline;
pub mod serve;
pub mod simulate;
