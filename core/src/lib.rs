//! The ground of credence, with no I/O beyond reading its own input files: the domain
//! types ([`domain`]), the sweep file format ([`sweep`]), the dataset format
//! ([`dataset`]), job planning and content keys ([`job`]), the model-free math that
//! matches claims to references and to each other ([`matching`]: soft-F1, Jaccard,
//! Semantic-F1's ablations, RR, difflib, the Hungarian assignment), the bootstrap
//! statistics ([`stats`]) and what an aggregation computes with them ([`aggregation`]),
//! the audits' and the timing table's arithmetic ([`audit`], [`timing`]), downstream
//! fact-checking's verdicts and metrics ([`afc`]), a sweep's job
//! counts and time estimate ([`estimate`]), text rules that need no model (tier-1
//! entities in [`entities`], sentence boundaries in [`sentences`], the paper's word lists
//! in [`lexicon`]) and the benchmark builders ([`builders`]). No database, queue, network or async runtime: those are
//! `credence-infra`'s. Nothing here loads a model.

pub mod afc;
pub mod aggregation;
pub mod audit;
pub mod builders;
pub mod dataset;
pub mod device;
pub mod domain;
pub mod entities;
pub mod estimate;
pub mod job;
pub mod lexicon;
pub mod matching;
pub mod sentences;
pub mod stats;
pub mod sweep;
pub mod timing;

pub use domain::{Claim, Example, ExampleResult, Mode};
