//! How claims are matched to references and to each other, with no model: Python's
//! difflib ratio, word-set Jaccard, the greedy soft-F1 that both Jaccard-F1 and
//! Semantic-F1 are built on, the Semantic-F1 ablations and redundancy rate over embedding
//! cosines, and the Hungarian assignment. The metrics themselves (names, types, which
//! table shows them) are defined once in `domain::metrics`.

pub mod difflib;
pub mod hungarian;
pub mod semantic;
pub mod soft_f1;
