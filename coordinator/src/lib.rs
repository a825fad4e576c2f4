//! The credence coordinator: plans sweeps into jobs, runs them on the embedded engine
//! ([`embedded`]) or launches them on the distributed one ([`distributed`]), shows progress ([`progress`]) and summarises results ([`summary`]).
//! [`jsonl`] reads the `{"id", "text"}` inputs of `credence nlp parse` and `credence verify`.
//! [`sizing`] counts a sweep's jobs and estimates its time before a launch.
//! [`audit`] checks a finished run beyond its means; [`nlp_bench`] and [`scoring_bench`]
//! time the parser and the scoring pipeline.
//! The `credence` binary (`main.rs`) only parses arguments and calls into here.

pub mod audit;
pub mod distributed;
pub mod embedded;
pub mod jsonl;
pub mod nlp_bench;
pub mod planning;
pub mod progress;
pub mod report;
pub mod scoring_bench;
pub mod sizing;
pub mod summary;
pub mod view;
