//! Sentence embeddings: the [`Encoder`] trait, its candle BERT implementation
//! ([`bert::BertEncoder`]), the presets and folder settings ([`preset`]), and the
//! embedding cache in front of an encoder ([`cached::CachedEncoder`]).
//!
//! Semantic-F1, the redundancy check and entity responsibility all run on these vectors;
//! the metric math itself lives in `credence_core::matching::semantic`.
//!
//! ```no_run
//! use credence_worker::embed::{load_encoder, Encoder, EncoderOptions};
//! let encoder = load_encoder("all-MiniLM-L6-v2", None, EncoderOptions::default())?;
//! let v = encoder.encode(&["The bridge collapsed.", "The road was blocked."])?;
//! assert_eq!(v[0].len(), encoder.dim());
//! # Ok::<(), credence_worker::embed::EmbedError>(())
//! ```

pub mod bert;
pub mod cached;
mod config;
#[cfg(feature = "cuda")]
mod lt;
mod native;
mod packed;
pub mod preset;

pub use bert::{device, Backend, BertEncoder, EncoderOptions, Precision};
pub use cached::{CacheCounts, CachedEncoder};
pub use packed::Attention;
pub use preset::{EncoderSettings, Pooling, Preset, PRESETS};

use std::path::{Path, PathBuf};

/// Environment variable naming the folder that holds model folders (`<dir>/<preset>`).
pub const MODELS_DIR_ENV: &str = "CREDENCE_MODELS_DIR";

/// Turns sentences into unit vectors.
pub trait Encoder: Send + Sync {
    /// sha256 over weights, config, tokenizer, pooling, prefix and maximum length: two
    /// encoders with the same fingerprint give the same vectors.
    fn fingerprint(&self) -> &str;

    /// Length of every vector.
    fn dim(&self) -> usize;

    /// One L2-normalised vector per text, in input order. The result does not depend on
    /// the order of `texts` or on how they are batched (beyond float rounding, ≤ 1e-5).
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Why an encoder could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A JSON file is malformed or lacks a field (the message names line and column).
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The folder lacks a file the encoder needs.
    #[error("{folder}: no {what}")]
    MissingFile {
        /// The model folder.
        folder: PathBuf,
        /// The file(s) looked for.
        what: &'static str,
    },
    /// Neither a preset nor a folder that exists.
    #[error("encoder {name:?} is neither a model folder nor a preset with a folder at {looked_at} (presets: {presets})")]
    NotFound {
        /// What the user asked for.
        name: String,
        /// Where its folder was looked for.
        looked_at: PathBuf,
        /// Known presets.
        presets: String,
    },
    /// No preset and no sentence-transformers pooling config: the pooling is unknown.
    #[error("{folder}: no pooling: name a preset ({presets}) or add 1_Pooling/config.json")]
    NoPooling {
        /// The model folder.
        folder: PathBuf,
        /// Known presets.
        presets: String,
    },
    /// The folder holds something this encoder cannot run.
    #[error("{path}: unsupported: {message}")]
    Unsupported {
        /// The file that says so.
        path: PathBuf,
        /// What is unsupported.
        message: String,
    },
    /// The tokenizer could not be loaded or failed on an input.
    #[error("{path}: tokenizer: {message}")]
    Tokenizer {
        /// tokenizer.json.
        path: PathBuf,
        /// The tokenizer's message.
        message: String,
    },
    /// The weights do not fit the config (missing tensor, wrong shape).
    #[error("{path}: {source}")]
    Weights {
        /// The weights file.
        path: PathBuf,
        /// candle's error.
        source: candle_core::Error,
    },
    /// The device or precision cannot be used.
    #[error("{message}")]
    Device {
        /// What is wrong.
        message: String,
    },
    /// The forward pass failed.
    #[error("encoder forward pass: {0}")]
    Model(candle_core::Error),
    /// The embedding cache failed.
    #[error("embedding cache: {0}")]
    Cache(#[from] credence_infra::store::StoreError),
    /// The encoding task panicked or was cancelled.
    #[error("encoder task: {0}")]
    Task(String),
}

/// The model folder of an encoder: `path` if given; else `name` itself when it is a
/// folder; else `<models>/<name>`, the models folder of
/// [`credence_core::sweep::models_dir`] (`$CREDENCE_MODELS_DIR`, else the checkout's
/// `models/`; never a folder found by walking up from the current one).
pub fn locate(name: &str, path: Option<&Path>) -> PathBuf {
    if let Some(p) = path {
        return p.to_path_buf();
    }
    let as_path = Path::new(name);
    if as_path.is_dir() {
        return as_path.to_path_buf();
    }
    credence_core::sweep::models_dir().join(name)
}

/// Loads an encoder named by a preset or a folder (see [`locate`]). The preset is the
/// name if it is one, else the folder's name if that is one.
pub fn load_encoder(
    name: &str,
    path: Option<&Path>,
    options: EncoderOptions,
) -> Result<BertEncoder, EmbedError> {
    let folder = locate(name, path);
    if !folder.is_dir() {
        return Err(EmbedError::NotFound {
            name: name.to_string(),
            looked_at: folder,
            presets: preset::preset_names(),
        });
    }
    let preset = preset::preset(name).or_else(|| bert::preset_of_folder(&folder));
    BertEncoder::load(&folder, preset, options)
}

/// Threads candle's CPU kernels use (RAYON_NUM_THREADS, else every core).
pub fn cpu_threads() -> usize {
    candle_core::utils::get_num_threads()
}
