//! How an encoder turns word-piece states into a sentence vector: the presets the paper
//! names, the sentence-transformers files of a model folder (`modules.json`,
//! `1_Pooling/config.json`, `sentence_bert_config.json`), and the rules that combine them
//! into one [`EncoderSettings`].
//!
//! Rules: pooling and prefix come from a known preset, else from the folder's pooling
//! config; the maximum length is the folder's `max_seq_length`, else the preset's, else
//! the model's position limit, and never more than the position limit. Vectors are always
//! L2-normalised (the paper's "unit-normalised embeddings").

use super::EmbedError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// How the word-piece states of a sentence become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The state of the first token (`[CLS]`).
    Cls,
    /// The mean of the states of the real (unmasked) tokens.
    Mean,
}

impl Pooling {
    /// The name used in fingerprints and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Pooling::Cls => "cls",
            Pooling::Mean => "mean",
        }
    }
}

/// A named encoder the paper uses, with the settings sentence-transformers gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// Name, also the folder name under the models directory.
    pub name: &'static str,
    /// Pooling.
    pub pooling: Pooling,
    /// Text put before every input (e5 wants `query: `).
    pub prefix: &'static str,
    /// Truncation length in word pieces, special tokens included.
    pub max_len: usize,
}

/// Every preset, paper's encoder first.
pub const PRESETS: [Preset; 5] = [
    Preset {
        name: "bge-large-en-v1.5",
        pooling: Pooling::Cls,
        prefix: "",
        max_len: 512,
    },
    Preset {
        name: "bge-base-en-v1.5",
        pooling: Pooling::Cls,
        prefix: "",
        max_len: 512,
    },
    Preset {
        name: "bge-small-en-v1.5",
        pooling: Pooling::Cls,
        prefix: "",
        max_len: 512,
    },
    Preset {
        name: "all-MiniLM-L6-v2",
        pooling: Pooling::Mean,
        prefix: "",
        max_len: 256,
    },
    Preset {
        name: "e5-base-v2",
        pooling: Pooling::Mean,
        prefix: "query: ",
        max_len: 512,
    },
];

/// The preset of that name, if any.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// Names of all presets, for error messages.
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What an encoder does around the transformer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncoderSettings {
    /// Pooling.
    pub pooling: Pooling,
    /// Text put before every input.
    pub prefix: String,
    /// Truncation length in word pieces, special tokens included.
    pub max_len: usize,
}

impl EncoderSettings {
    /// Combines a preset (if the encoder has a known one) with the sentence-transformers
    /// files of `folder`; `position_limit` is the model's `max_position_embeddings`.
    pub fn resolve(
        preset: Option<&Preset>,
        folder: &Path,
        position_limit: usize,
    ) -> Result<Self, EmbedError> {
        let folder_pooling = read_folder_pooling(folder)?;
        let pooling = match (preset, folder_pooling) {
            (Some(p), Some((fp, path))) => {
                if p.pooling != fp {
                    tracing::warn!(
                        preset = p.name,
                        file = %path.display(),
                        "the folder's pooling is {}, the preset's {}; using the preset's",
                        fp.as_str(),
                        p.pooling.as_str()
                    );
                }
                p.pooling
            }
            (Some(p), None) => p.pooling,
            (None, Some((fp, _))) => fp,
            (None, None) => {
                return Err(EmbedError::NoPooling {
                    folder: folder.to_path_buf(),
                    presets: preset_names(),
                })
            }
        };
        let st_max = read_max_seq_length(folder)?;
        let wanted = st_max
            .or(preset.map(|p| p.max_len))
            .unwrap_or(position_limit);
        Ok(EncoderSettings {
            pooling,
            prefix: preset.map(|p| p.prefix.to_string()).unwrap_or_default(),
            max_len: wanted.min(position_limit),
        })
    }
}

#[derive(Deserialize)]
struct StModule {
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct StPooling {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
    #[serde(default)]
    pooling_mode_mean_sqrt_len_tokens: bool,
}

#[derive(Deserialize)]
struct StConfig {
    max_seq_length: Option<usize>,
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, EmbedError> {
    let text = std::fs::read_to_string(path).map_err(|source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| EmbedError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// The pooling config named by `modules.json` (or the usual `1_Pooling/config.json`).
fn read_folder_pooling(folder: &Path) -> Result<Option<(Pooling, PathBuf)>, EmbedError> {
    let modules = folder.join("modules.json");
    let mut path = folder.join("1_Pooling").join("config.json");
    if modules.is_file() {
        let list: Vec<StModule> = read_json(&modules)?;
        if let Some(m) = list.iter().find(|m| m.kind.ends_with(".Pooling")) {
            path = folder.join(&m.path).join("config.json");
        }
    }
    if !path.is_file() {
        return Ok(None);
    }
    let p: StPooling = read_json(&path)?;
    let pooling = match (
        p.pooling_mode_cls_token,
        p.pooling_mode_mean_tokens,
        p.pooling_mode_max_tokens,
        p.pooling_mode_mean_sqrt_len_tokens,
    ) {
        (true, false, false, false) => Pooling::Cls,
        (false, true, false, false) => Pooling::Mean,
        _ => {
            return Err(EmbedError::Unsupported {
                path,
                message: "only CLS or mean pooling (exactly one pooling_mode_* true) is supported"
                    .into(),
            })
        }
    };
    Ok(Some((pooling, path)))
}

fn read_max_seq_length(folder: &Path) -> Result<Option<usize>, EmbedError> {
    let path = folder.join("sentence_bert_config.json");
    if !path.is_file() {
        return Ok(None);
    }
    let c: StConfig = read_json(&path)?;
    Ok(c.max_seq_length.filter(|&n| n > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn preset_settings_and_position_limit() {
        let dir = tempfile::tempdir().unwrap();
        let e5 = EncoderSettings::resolve(preset("e5-base-v2"), dir.path(), 512).unwrap();
        assert_eq!(e5.pooling, Pooling::Mean);
        assert_eq!(e5.prefix, "query: ");
        assert_eq!(e5.max_len, 512);
        let bge = EncoderSettings::resolve(preset("bge-small-en-v1.5"), dir.path(), 64).unwrap();
        assert_eq!((bge.pooling, bge.max_len), (Pooling::Cls, 64));
    }

    #[test]
    fn folder_max_seq_length_wins_over_preset() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "sentence_bert_config.json",
            r#"{"max_seq_length": 256, "do_lower_case": false}"#,
        );
        let s = EncoderSettings::resolve(preset("bge-base-en-v1.5"), dir.path(), 512).unwrap();
        assert_eq!(s.max_len, 256);
    }

    #[test]
    fn folder_pooling_without_preset_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let err = EncoderSettings::resolve(None, dir.path(), 512).unwrap_err();
        assert!(err.to_string().contains("no pooling"), "{err}");
        write(
            dir.path(),
            "modules.json",
            r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
                {"idx":1,"name":"1","path":"pool","type":"sentence_transformers.models.Pooling"}]"#,
        );
        write(
            dir.path(),
            "pool/config.json",
            r#"{"pooling_mode_cls_token": true}"#,
        );
        let s = EncoderSettings::resolve(None, dir.path(), 512).unwrap();
        assert_eq!(
            (s.pooling, s.prefix.as_str(), s.max_len),
            (Pooling::Cls, "", 512)
        );
        write(
            dir.path(),
            "pool/config.json",
            r#"{"pooling_mode_max_tokens": true}"#,
        );
        let err = EncoderSettings::resolve(None, dir.path(), 512).unwrap_err();
        assert!(err.to_string().contains("pool/config.json"), "{err}");
    }
}
