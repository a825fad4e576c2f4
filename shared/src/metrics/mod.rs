//! Metric math that needs no model: Python's difflib ratio, word-set Jaccard, and the
//! greedy soft-F1 that both Jaccard-F1 and Semantic-F1 are built on.

pub mod difflib;
pub mod soft_f1;
