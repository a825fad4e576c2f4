//! The sentence-splitter baseline: one claim per sentence, no model. The paper's baseline
//! uses spaCy's senter; this uses the rule splitter of [`credence_shared::sentences`]
//! (terminal punctuation followed by space and a capital, digit or quote, with
//! abbreviations and initials kept whole).

use super::{as_claim, DecomposeContext, DecomposeError, Decomposer, Decomposition};
use async_trait::async_trait;
pub use credence_shared::sentences::split_sentences;

/// The sentence-splitter decomposer.
#[derive(Debug, Default, Clone)]
pub struct SentenceSplit;

impl SentenceSplit {
    /// Fingerprint: the algorithm's name and version (no weights).
    pub const FINGERPRINT: &'static str = "sentence-split/v1";

    /// A new splitter.
    pub fn new() -> Self {
        SentenceSplit
    }
}

#[async_trait]
impl Decomposer for SentenceSplit {
    fn fingerprint(&self) -> &str {
        Self::FINGERPRINT
    }

    async fn decompose(
        &self,
        sentence: &str,
        _context: &DecomposeContext<'_>,
    ) -> Result<Decomposition, DecomposeError> {
        Ok(Decomposition {
            claims: split_sentences(sentence)
                .into_iter()
                .filter_map(as_claim)
                .collect(),
            ..Decomposition::default()
        })
    }
}
