//! The CREDENCE verifier V (PAPER.md "Verifier" and "Decided here"): checks a claim list
//! C against its source sentence S and reports
//! - atomicity per claim on the claim's own dependency parse ([`atomicity`]): n_viol, AVR;
//! - entity preservation over regex and NER entities ([`entities`]): EPR, `min_epr`;
//! - repetition from the claims' cosine matrix ([`redundancy`]): duplicate pairs,
//!   dup_count, RR;
//! - two diagnostics outside verify%: unresolved pronoun subjects with their antecedents
//!   ([`self_containment`]) and modality consistency MC ([`modality`]);
//! - `verify_ok` = AVR = 0 and EPR ≥ `min_epr` and dup_count = 0, and never for an empty
//!   claim list (PAPER.md "Decided here", added 2026-11-26).
//!
//! The verifier does no I/O and loads no model: it takes parsed docs and cosines. Its
//! report serialises deterministically (lists, never maps, in documented orders).
//!
//! ```no_run
//! # fn main() -> Result<(), credence_nlp::NlpError> {
//! use credence_nlp::Nlp;
//! use credence_worker::pipeline::verify::{Verifier, VerifierConfig};
//! let nlp = Nlp::load("models/en_core_web_sm")?;
//! let source = nlp.analyze("The bridge collapsed and the road was blocked.");
//! let claims = [nlp.analyze("The bridge collapsed."), nlp.analyze("The road was blocked.")];
//! let report = Verifier::new(VerifierConfig::default()).verify(&source, &claims, None);
//! assert_eq!(report.avr, 0.0);
//! assert_eq!(report.verify_ok, None); // no cosines, no repetition check
//! # Ok(()) }
//! ```

pub mod atomicity;
pub mod entities;
pub mod modality;
pub mod redundancy;
pub mod self_containment;
mod table;
#[cfg(test)]
pub(crate) mod test_doc;

pub use atomicity::{
    atomicity_boundaries, AtomicityRecord, AtomicityRule, Boundary, ClaimAtomicity,
};
pub use entities::{EntityReport, SourceEntity};
pub use modality::{reporting_verbs, ModalityReport, REPORTING_VERBS};
pub use redundancy::{DuplicatePair, RepetitionReport};
pub use self_containment::PronounFlag;

use credence_core::matching::semantic::CosineMatrix;
use credence_nlp::Doc;
use serde::{Deserialize, Serialize};

/// The verifier's thresholds and switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifierConfig {
    /// Two claims at cosine ≥ this are duplicates (paper: 0.92).
    pub tau_dup: f64,
    /// The EPR an example needs to pass (paper: 1.0; 0.9 allowed).
    pub min_epr: f64,
    /// Count an `advcl` only when it has its own subject (default false: the formal
    /// definition, T 626, counts every `advcl`).
    pub advcl_requires_subject: bool,
    /// The NER labels of tier-2 entities (paper: PERSON, ORG, GPE, LOC).
    pub ner_labels: Vec<String>,
}

impl Default for VerifierConfig {
    fn default() -> Self {
        VerifierConfig {
            tau_dup: 0.92,
            min_epr: 1.0,
            advcl_requires_subject: false,
            ner_labels: ["PERSON", "ORG", "GPE", "LOC"]
                .into_iter()
                .map(String::from)
                .collect(),
        }
    }
}

/// Everything the verifier found for one source and claim list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifierReport {
    /// One entry per claim, in claim order.
    pub atomicity: Vec<ClaimAtomicity>,
    /// Boundary nodes over all claims.
    pub n_viol: u32,
    /// Share of claims with at least one boundary node; 0 for an empty list.
    pub avr: f64,
    /// Entity preservation.
    pub entities: EntityReport,
    /// Repetition; `None` when no cosines were given (a sweep without an encoder).
    pub repetition: Option<RepetitionReport>,
    /// Unresolved pronoun subjects, in claim order.
    pub self_containment: Vec<PronounFlag>,
    /// Modality consistency.
    pub modality: ModalityReport,
    /// AVR = 0 and EPR ≥ `min_epr` and dup_count = 0, false for an empty claim list;
    /// `None` without cosines.
    pub verify_ok: Option<bool>,
}

impl VerifierReport {
    /// Whether every claim is atomic (AVR = 0).
    pub fn atomic(&self) -> bool {
        self.n_viol == 0
    }

    /// Whether the claims pass the checks this report holds: atomic, entities preserved
    /// and, where there were cosines, no duplicate pair (`verify_ok`); without an encoder,
    /// atomicity and entities alone. An empty list (a parse failure, an empty answer)
    /// never passes, whatever its vacuous figures (EPR 1 without entities, AVR 0, RR 0).
    pub fn passes(&self) -> bool {
        !self.atomicity.is_empty()
            && self.atomic()
            && self.entities.passes
            && self.repetition.as_ref().is_none_or(|r| r.dup_count == 0)
    }
}

/// The verifier V with its configuration.
#[derive(Debug, Clone, Default)]
pub struct Verifier {
    config: VerifierConfig,
}

impl Verifier {
    /// A verifier with `config`.
    pub fn new(config: VerifierConfig) -> Self {
        Verifier { config }
    }

    /// Its configuration.
    pub fn config(&self) -> &VerifierConfig {
        &self.config
    }

    /// Verifies `claims` against `source`.
    ///
    /// `source` is the parsed input sentence S; `claims` holds each claim's own parse
    /// (`Doc::text` is the claim's text); `claim_cos` is the claims x claims cosine matrix,
    /// `None` when the sweep has no encoder (then `repetition` and `verify_ok` are `None`).
    #[must_use = "the report is the verifier's only output"]
    pub fn verify(
        &self,
        source: &Doc,
        claims: &[Doc],
        claim_cos: Option<&CosineMatrix>,
    ) -> VerifierReport {
        let cfg = &self.config;
        let atomicity = atomicity::check(claims, cfg.advcl_requires_subject);
        let n_viol: usize = atomicity.iter().map(|c| c.boundaries.len()).sum();
        let avr = atomicity::avr(&atomicity);
        let entities = entities::check(source, claims, &cfg.ner_labels, cfg.min_epr);
        let repetition = claim_cos.map(|cos| redundancy::check(claims.len(), cos, cfg.tau_dup));
        let mut report = VerifierReport {
            atomicity,
            n_viol: n_viol as u32,
            avr,
            entities,
            repetition,
            self_containment: self_containment::check(source, claims),
            modality: modality::check(source, claims),
            verify_ok: None,
        };
        report.verify_ok = report.repetition.is_some().then(|| report.passes());
        report
    }
}
