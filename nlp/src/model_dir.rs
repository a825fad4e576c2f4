//! The files of an en_core_web_sm 3.8.0 pipeline folder that the port reads, with the
//! sha256 each must have (SPEC §0): a different file means unchecked behaviour.

use super::NlpError;
use sha2::{Digest, Sha256};
use std::path::Path;

/// `(path inside the pipeline folder, sha256)` of every file the port depends on.
pub const MODEL_FILES: [(&str, &str); 12] = [
    (
        "tokenizer",
        "b014e8bba4958b120af2d0c1c63eabb7c00379f2bacaf10df7c5325efd2ea467",
    ),
    (
        "tok2vec/model",
        "e84fc06eb319c94d28e460fc334e292120b01f18baa5dc8b50c977459820a090",
    ),
    (
        "tagger/model",
        "1ec3d93f38cebe172f2b5c89d84be72856ce42c8f1a64f1699f1d98a771f36b7",
    ),
    (
        "parser/model",
        "e0098910535a863d430082ece57455d5fa071cd4ca3a0054e80582076c752b1e",
    ),
    (
        "ner/model",
        "cd93e9ca9126c69f1d10a1039ef67c3d9ec1223b44d079856705970f0f19ff4e",
    ),
    (
        "parser/moves",
        "ec41318c32eb7f9e4d8f050b2e8466ee67954d2d3455c1aec73abf46c82dd67f",
    ),
    (
        "ner/moves",
        "d82b13473ebd33e0396004dd22f00c71fe3c1251742bf1f7c4554f23fd3b0af4",
    ),
    (
        "vocab/lookups.bin",
        "fce9c883c56165f29573cc938c2a1c9d417ac61bd8f56b671dd5f7996de70682",
    ),
    (
        "attribute_ruler/patterns",
        "f8b97f7ebef9b8536bba5f0fc1e73af6183563e96e2325bcbb021b8c6dbc6683",
    ),
    (
        "tagger/cfg",
        "d484c3d9391f37bf9c727aa2eb4c477a24cb103020f95e52dc37842818b50118",
    ),
    (
        "config.cfg",
        "65c545ca2da5bd4b87b22d4917318605360b37dee6ed6b18516a036f87319f79",
    ),
    (
        "meta.json",
        "c053e71762854703ae92714e6b1ce8cd4f83cdf3b1ca94d1525c10120ccf3d61",
    ),
];

/// The sentence recognizer (`senter`), disabled in the shipped pipeline: read only by
/// the sentence-splitter baseline, so it is not part of [`MODEL_FILES`] (nor of the
/// parser's fingerprint).
pub const SENTER_FILE: (&str, &str) = (
    "senter/model",
    "b69e7174a0b6307739adec3c8053ac45fdbad7171c4d3d8bfcd9713ecbc01f8c",
);

/// The bytes of `dir/name`, whose sha256 must be `expected`.
pub fn read_checked(dir: &Path, name: &str, expected: &'static str) -> Result<Vec<u8>, NlpError> {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).map_err(|source| NlpError::Io {
        path: path.clone(),
        source,
    })?;
    let found = hex::encode(Sha256::digest(&bytes));
    if found != expected {
        return Err(NlpError::Hash {
            path,
            expected,
            found,
        });
    }
    Ok(bytes)
}

/// The verified bytes of every file in [`MODEL_FILES`].
pub struct ModelFiles {
    files: Vec<(&'static str, Vec<u8>)>,
}

impl ModelFiles {
    /// Reads every file and checks its sha256.
    pub fn read(dir: &Path) -> Result<Self, NlpError> {
        let mut files = Vec::with_capacity(MODEL_FILES.len());
        for (name, expected) in MODEL_FILES {
            files.push((name, read_checked(dir, name, expected)?));
        }
        Ok(ModelFiles { files })
    }

    /// The bytes of one of the [`MODEL_FILES`].
    pub fn bytes(&self, name: &str) -> &[u8] {
        self.files
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[][..], |(_, b)| b.as_slice())
    }
}
