//! The sentence-splitter baseline as the paper runs it: en_core_web_sm's sentence
//! recognizer (`senter`, credence's port of it) finds the sentences, and each sentence's
//! own text is a claim, not rewritten (no capitalisation, no added full stop), only
//! trimmed of the whitespace spaCy's span keeps around it (a double space after a full
//! stop is a token of the sentence before). A whitespace-only sentence is not a claim.

use super::{DecomposeContext, DecomposeError, Decomposer, Decomposition};
use async_trait::async_trait;
use credence_nlp::{Nlp, NlpError};
use std::path::Path;
use std::sync::Arc;

/// The sentence-splitter decomposer.
#[derive(Clone)]
pub struct SentenceSplit {
    nlp: Arc<Nlp>,
}

impl SentenceSplit {
    /// Fingerprint: the algorithm and the senter weights it reads (their sha256 is
    /// checked at load).
    pub const FINGERPRINT: &'static str = "sentence-split/senter-v2";

    /// Loads the senter of the pipeline folder `dir` (`models/en_core_web_sm`).
    pub fn load(dir: &Path) -> Result<Self, NlpError> {
        Ok(SentenceSplit {
            nlp: Arc::new(Nlp::load_with_senter(dir)?),
        })
    }

    /// The sentences of `text`, each with its own text, trimmed.
    pub fn split(&self, text: &str) -> Result<Vec<String>, NlpError> {
        let mut sentences = self.nlp.senter_sentences(&[text])?;
        Ok(sentences
            .pop()
            .unwrap_or_default()
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect())
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
        let claims = self.split(sentence).map_err(|e| DecomposeError::Load {
            model: "sentence-split".into(),
            message: e.to_string(),
        })?;
        Ok(Decomposition {
            claims,
            ..Decomposition::default()
        })
    }
}
