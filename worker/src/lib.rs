//! Everything in credence that needs a model: decomposers ([`decompose`]), sentence
//! encoders ([`embed`]), the job handler ([`handler`]) and the consumer loop
//! ([`job_loop`]) that both engines run.

pub mod decompose;
pub mod embed;
pub mod handler;
pub mod job_loop;
