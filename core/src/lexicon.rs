//! Word lists the paper fixes, spelled once for every crate: the verifier's modality
//! check (worker) and the benchmark builders and profiles (here) read the same list.

/// The 27 reporting verbs of Appendix B (`tab:verbs`): 18 core attribution forms, then 9
/// of extended coverage. Matched as whole words, case-insensitively, without
/// lemmatisation (the paper limits coverage to the listed forms).
pub const REPORTING_VERBS: [&str; 27] = [
    "announced",
    "said",
    "claimed",
    "denied",
    "confirmed",
    "reported",
    "warned",
    "estimated",
    "stated",
    "urged",
    "noted",
    "added",
    "saying",
    "explained",
    "argued",
    "cautioned",
    "called",
    "stating",
    "alleged",
    "suggested",
    "revealed",
    "disclosed",
    "indicated",
    "insisted",
    "acknowledged",
    "admitted",
    "expressed",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reporting_verbs_are_27_distinct_lower_case_forms() {
        let mut v = REPORTING_VERBS.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 27);
        assert!(REPORTING_VERBS
            .iter()
            .all(|w| w.chars().all(|c| c.is_ascii_lowercase())));
    }
}
