//! The credence coordinator: plans sweeps into jobs, runs them on the embedded engine
//! ([`embedded`]), shows progress ([`progress`]) and summarises results ([`summary`]).
//! The `credence` binary (`main.rs`) only parses arguments and calls into here.

pub mod embedded;
pub mod planning;
pub mod progress;
pub mod summary;
