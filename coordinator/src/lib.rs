//! The credence coordinator: plans sweeps into jobs, runs them on the embedded engine
//! ([`embedded`]) or launches them on the distributed one ([`distributed`]), shows progress ([`progress`]) and summarises results ([`summary`]).
//! The `credence` binary (`main.rs`) only parses arguments and calls into here.

pub mod distributed;
pub mod embedded;
pub mod planning;
pub mod progress;
pub mod summary;
