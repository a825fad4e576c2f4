//! A pure-Rust en_core_web_sm 3.8 (spaCy's small English pipeline) on its trained
//! weights, with spaCy's output: tokenizer, tagger, dependency parser, attribute ruler
//! and NER, as `../shared/nlp/SPEC.md` specifies.
//!
//! ```no_run
//! # fn main() -> Result<(), credence_nlp::NlpError> {
//! let nlp = credence_nlp::Nlp::load("models/en_core_web_sm")?;
//! let doc = nlp.analyze("Apple is buying a U.K. startup for $1 billion.");
//! for ent in &doc.ents {
//!     println!("{} {}", ent.text, ent.label);
//! }
//! # Ok(()) }
//! ```

mod affix;
mod annotate;
mod arc_eager;
mod attribute_ruler;
mod biluo;
mod doc;
mod hashing;
mod layers;
mod lexeme;
mod model_dir;
mod msgpack;
mod parser_model;
mod pychars_tables;
mod thinc;
mod tok2vec;
mod tokenizer;
mod tree;

pub use annotate::Nlp;
pub use doc::{Doc, DocRecord, Entity, FeatureIds, Token};
pub use hashing::string_id;
pub use model_dir::MODEL_FILES;
pub use msgpack::DecodeError;
pub use tokenizer::{RawToken, Tokenizer};

use std::path::PathBuf;

/// Name of the pipeline folder under `models/`.
pub const PIPELINE_NAME: &str = "en_core_web_sm";

/// Fingerprint of the parser, known without loading it: the port's outputs are a function
/// of the model files, whose sha256 [`Nlp::load`] checks against [`MODEL_FILES`], so the
/// fingerprint hashes that table (and the port's recipe, bumped when its output changes).
pub fn fingerprint() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"credence-nlp-1\0");
    for (name, sha) in MODEL_FILES {
        h.update(name.as_bytes());
        h.update(b"\0");
        h.update(sha.as_bytes());
        h.update(b"\0");
    }
    format!("{PIPELINE_NAME}-3.8.0-{}", &hex::encode(h.finalize())[..16])
}

/// Why a pipeline folder cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum NlpError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: sha256 {found}, expected {expected} (not the en_core_web_sm 3.8.0 file the port was checked against)")]
    Hash {
        path: PathBuf,
        expected: &'static str,
        found: String,
    },
    #[error("{file}: not valid MessagePack: {source}")]
    Msgpack {
        file: String,
        #[source]
        source: DecodeError,
    },
    #[error("{file}: field {field}: {message}")]
    Format {
        file: String,
        field: String,
        message: String,
    },
}
