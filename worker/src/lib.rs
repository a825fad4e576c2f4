//! Everything in credence that needs a model: decomposers ([`decompose`]), the job
//! handler ([`handler`]), the consumer loop ([`job_loop`]) that both engines run, and a
//! pure-Rust spaCy en_core_web_sm ([`nlp`]).

pub mod decompose;
pub mod handler;
pub mod job_loop;
pub mod nlp;
