//! The vocabulary every credence process speaks.
//!
//! Domain types ([`domain`]), the sweep file format ([`sweep`]), the dataset format
//! ([`dataset`]), job planning and content keys ([`job`]), the [`queue::Queue`] and
//! [`store::Store`] traits with their engines, the caches ([`cache`]), the model-free math
//! that matches claims to references and to each other ([`matching`]: soft-F1, Jaccard,
//! Semantic-F1's ablations, RR, difflib, the Hungarian assignment), and the Prometheus endpoint of the distributed
//! engine's processes ([`telemetry`]). Text rules that need no model live here too: tier-1
//! entities ([`entities`]), sentence boundaries ([`sentences`]), the paper's word lists
//! ([`lexicon`]) and the benchmark builders ([`builders`]). Nothing in this crate loads a model.

pub mod aggregation;
pub mod audit;
pub mod builders;
pub mod cache;
pub mod dataset;
pub mod domain;
pub mod entities;
pub mod job;
pub mod lexicon;
pub mod matching;
pub mod observe;
pub mod queue;
pub mod sentences;
pub mod stats;
pub mod store;
pub mod sweep;
pub mod telemetry;
pub mod timing;

pub use domain::{Claim, Example, ExampleResult, Mode};
