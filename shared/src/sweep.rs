//! The sweep file: a TOML document naming models, datasets, modes, shard size, encoder,
//! verifier and bootstrap settings. It is validated once, here, into [`SweepSpec`]; every
//! error names the file, line, column and field, e.g.
//! `sweeps/x.toml:12:3: unknown mode "fix"; expected base, repair, self_repair, all`.
//!
//! ```toml
//! [sweep]
//! name = "demo"
//! modes = ["base", "repair", "self_repair", "all"]
//! shard_size = 10
//!
//! [encoder]            # optional: Semantic-F1 and RR need it
//! preset = "all-MiniLM-L6-v2"
//!
//! [[models]]
//! name = "oracle"
//! backend = "conjunction-oracle"
//!
//! [[datasets]]
//! id = "sample"
//! path = "sample.jsonl"  # relative to the sweep file
//! ```

use crate::domain::Mode;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A sweep file that failed to load or validate.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The file could not be read.
    // Not a `source`: the message already ends with the I/O error, and a chained source
    // would print it twice under `{:#}`.
    #[error("{path}: {reason}")]
    Io {
        /// The sweep file.
        path: PathBuf,
        /// The underlying error.
        reason: std::io::Error,
    },
    /// The file is not a valid sweep; the message names the field.
    #[error("{path}:{line}:{column}: {message}")]
    Invalid {
        /// The sweep file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What is wrong.
        message: String,
    },
}

/// How a model decomposes sentences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "kebab-case")]
pub enum ModelBackend {
    /// Baseline with no model: one claim per sentence.
    SentenceSplit,
    /// Baseline with no model: split at and / but / because / so / semicolons.
    ConjunctionOracle,
    /// A quantised GGUF model run with candle.
    Gguf {
        /// The .gguf file.
        path: PathBuf,
    },
    /// A Hugging Face safetensors folder run with candle.
    Safetensors {
        /// The model folder (config.json, tokenizer.json, *.safetensors).
        path: PathBuf,
    },
    /// A model behind an OpenAI-compatible chat completions endpoint.
    Openai {
        /// e.g. `http://127.0.0.1:8000/v1`.
        base_url: String,
        /// The model name the endpoint expects.
        api_model: String,
        /// Environment variable holding the API key (never the key itself).
        api_key_env: Option<String>,
    },
}

impl ModelBackend {
    /// The backend's name as written in sweep files.
    pub fn name(&self) -> &'static str {
        match self {
            ModelBackend::SentenceSplit => "sentence-split",
            ModelBackend::ConjunctionOracle => "conjunction-oracle",
            ModelBackend::Gguf { .. } => "gguf",
            ModelBackend::Safetensors { .. } => "safetensors",
            ModelBackend::Openai { .. } => "openai",
        }
    }
}

/// Which decomposition prompt an LLM gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptKind {
    /// The CREDENCE system prompt (Appendix A).
    Credence,
    /// The FActScore baseline prompt.
    Factscore,
}

/// A decomposer of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Unique name within the sweep; names the queue and the results.
    pub name: String,
    /// How it runs.
    pub backend: ModelBackend,
    /// Prompt for LLM backends.
    pub prompt: PromptKind,
    /// Generation limit for LLM backends.
    pub max_new_tokens: u32,
    /// Weight dtype for candle backends (`f32`, `bf16`, `f16`), if not the file's.
    pub dtype: Option<String>,
    /// `cpu` or `cuda[:N]`.
    pub device: String,
}

/// The sentence encoder for Semantic-F1, redundancy and entity responsibility.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderSpec {
    /// Preset name (e.g. `bge-large-en-v1.5`, `all-MiniLM-L6-v2`).
    pub preset: String,
    /// Model folder; defaults to `models/<preset>` beside the sweep's working directory.
    pub path: Option<PathBuf>,
    /// Encoding batch size.
    pub batch_size: u32,
}

/// A dataset of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSpec {
    /// Unique id within the sweep.
    pub id: String,
    /// The JSONL file, resolved against the sweep file's folder.
    pub path: PathBuf,
}

/// Verifier and repairer settings (PAPER.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifierSettings {
    /// Cosine at or above which two claims are duplicates.
    pub tau_dup: f64,
    /// Minimum entity preservation rate to pass.
    pub min_epr: f64,
    /// Rule-repair passes.
    pub max_iterations: u32,
    /// LLM self-repair calls.
    pub max_llm_calls: u32,
}

impl Default for VerifierSettings {
    fn default() -> Self {
        VerifierSettings {
            tau_dup: 0.92,
            min_epr: 1.0,
            max_iterations: 1,
            max_llm_calls: 1,
        }
    }
}

/// Paired bootstrap settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BootstrapSettings {
    /// Number of resamples B.
    pub resamples: u32,
    /// RNG seed.
    pub seed: u64,
}

impl Default for BootstrapSettings {
    fn default() -> Self {
        BootstrapSettings {
            resamples: 10_000,
            seed: 42,
        }
    }
}

/// A validated sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSpec {
    /// The run's name: jobs, results and resume are keyed by it.
    pub name: String,
    /// Modes, in the order given.
    pub modes: Vec<Mode>,
    /// Examples per job.
    pub shard_size: u32,
    /// The encoder, if the sweep computes embedding metrics.
    pub encoder: Option<EncoderSpec>,
    /// Verifier settings.
    pub verifier: VerifierSettings,
    /// Bootstrap settings.
    pub bootstrap: BootstrapSettings,
    /// Decomposers.
    pub models: Vec<ModelSpec>,
    /// Datasets.
    pub datasets: Vec<DatasetSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    sweep: Option<Spanned<RawHeader>>,
    encoder: Option<Spanned<RawEncoder>>,
    verifier: Option<RawVerifier>,
    bootstrap: Option<RawBootstrap>,
    models: Option<Spanned<Vec<Spanned<RawModel>>>>,
    datasets: Option<Spanned<Vec<Spanned<RawDataset>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeader {
    name: Option<Spanned<String>>,
    modes: Option<Spanned<Vec<Spanned<String>>>>,
    shard_size: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEncoder {
    preset: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    batch_size: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerifier {
    tau_dup: Option<Spanned<f64>>,
    min_epr: Option<Spanned<f64>>,
    max_iterations: Option<Spanned<i64>>,
    max_llm_calls: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBootstrap {
    resamples: Option<Spanned<i64>>,
    seed: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: Option<Spanned<String>>,
    backend: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    base_url: Option<Spanned<String>>,
    api_model: Option<Spanned<String>>,
    api_key_env: Option<Spanned<String>>,
    prompt: Option<Spanned<String>>,
    max_new_tokens: Option<Spanned<i64>>,
    dtype: Option<Spanned<String>>,
    device: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDataset {
    id: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
}

const BACKENDS: &str = "sentence-split, conjunction-oracle, gguf, safetensors, openai";

/// Reads and validates a sweep file. Relative paths inside it are resolved against the
/// file's folder.
///
/// ```no_run
/// let sweep = credence_shared::sweep::load(std::path::Path::new("examples/demo.toml"))?;
/// assert!(!sweep.models.is_empty());
/// # Ok::<(), credence_shared::sweep::SweepError>(())
/// ```
pub fn load(path: &Path) -> Result<SweepSpec, SweepError> {
    let text = std::fs::read_to_string(path).map_err(|reason| SweepError::Io {
        path: path.to_path_buf(),
        reason,
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, path, base)
}

/// Validates sweep text; `path` is used in messages, `base` resolves relative paths.
pub fn parse(text: &str, path: &Path, base: &Path) -> Result<SweepSpec, SweepError> {
    let v = Validator { text, path };
    let raw: RawSweep = toml::from_str(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        v.err(span, e.message().trim_end().replace('\n', " "))
    })?;
    let header = raw
        .sweep
        .ok_or_else(|| v.err(0..0, "missing table [sweep] (with name, modes, shard_size)"))?;
    let header_span = header.span();
    let header = header.into_inner();
    let name = header
        .name
        .ok_or_else(|| v.err(header_span.clone(), "[sweep] is missing field \"name\""))?;
    if name.get_ref().trim().is_empty()
        || !name
            .get_ref()
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(v.err(
            name.span(),
            format!(
                "sweep name {:?} must be non-empty and use only letters, digits, '-', '_', '.'",
                name.get_ref()
            ),
        ));
    }
    let modes = match header.modes {
        None => Mode::ALL.to_vec(),
        Some(list) => {
            if list.get_ref().is_empty() {
                return Err(v.err(
                    list.span(),
                    "modes is empty; expected some of base, repair, self_repair, all",
                ));
            }
            let mut modes = Vec::new();
            for m in list.into_inner() {
                let mode: Mode = m
                    .get_ref()
                    .parse()
                    .map_err(|e: crate::domain::UnknownMode| v.err(m.span(), e.to_string()))?;
                if modes.contains(&mode) {
                    return Err(v.err(
                        m.span(),
                        format!("mode {mode:?} listed twice", mode = mode.as_str()),
                    ));
                }
                modes.push(mode);
            }
            modes
        }
    };
    let shard_size = match header.shard_size {
        None => 25,
        Some(s) => v.positive(&s, "shard_size", 1_000_000)?,
    };
    let encoder = match raw.encoder {
        None => None,
        Some(enc) => {
            let span = enc.span();
            let enc = enc.into_inner();
            let preset = enc
                .preset
                .ok_or_else(|| v.err(span, "[encoder] is missing field \"preset\""))?;
            if preset.get_ref().trim().is_empty() {
                return Err(v.err(preset.span(), "encoder preset is empty"));
            }
            Some(EncoderSpec {
                preset: preset.into_inner(),
                path: enc.path.map(|p| base.join(p.into_inner())),
                batch_size: match enc.batch_size {
                    None => 64,
                    Some(b) => v.positive(&b, "batch_size", 4096)?,
                },
            })
        }
    };
    let mut verifier = VerifierSettings::default();
    if let Some(r) = raw.verifier {
        if let Some(t) = r.tau_dup {
            verifier.tau_dup = v.unit_interval(&t, "tau_dup")?;
        }
        if let Some(t) = r.min_epr {
            verifier.min_epr = v.unit_interval(&t, "min_epr")?;
        }
        if let Some(n) = r.max_iterations {
            verifier.max_iterations = v.count(&n, "max_iterations", 100)?;
        }
        if let Some(n) = r.max_llm_calls {
            verifier.max_llm_calls = v.count(&n, "max_llm_calls", 100)?;
        }
    }
    let mut bootstrap = BootstrapSettings::default();
    if let Some(r) = raw.bootstrap {
        if let Some(n) = r.resamples {
            bootstrap.resamples = v.positive(&n, "resamples", 10_000_000)?;
        }
        if let Some(s) = r.seed {
            if *s.get_ref() < 0 {
                return Err(v.err(s.span(), format!("seed must be >= 0, got {}", s.get_ref())));
            }
            bootstrap.seed = *s.get_ref() as u64;
        }
    }
    let models_raw = raw
        .models
        .ok_or_else(|| v.err(0..0, "no [[models]]; a sweep needs at least one model"))?;
    if models_raw.get_ref().is_empty() {
        return Err(v.err(
            models_raw.span(),
            "models is empty; a sweep needs at least one model",
        ));
    }
    let mut models = Vec::new();
    let mut model_names: HashMap<String, ()> = HashMap::new();
    for m in models_raw.into_inner() {
        let spec = v.model(m, base)?;
        if model_names.insert(spec.0.name.clone(), ()).is_some() {
            return Err(v.err(spec.1, format!("model name {:?} used twice", spec.0.name)));
        }
        models.push(spec.0);
    }
    let datasets_raw = raw
        .datasets
        .ok_or_else(|| v.err(0..0, "no [[datasets]]; a sweep needs at least one dataset"))?;
    if datasets_raw.get_ref().is_empty() {
        return Err(v.err(
            datasets_raw.span(),
            "datasets is empty; a sweep needs at least one dataset",
        ));
    }
    let mut datasets = Vec::new();
    for d in datasets_raw.into_inner() {
        let span = d.span();
        let d = d.into_inner();
        let id =
            d.id.ok_or_else(|| v.err(span.clone(), "dataset is missing field \"id\""))?;
        v.identifier(&id, "dataset id")?;
        if datasets.iter().any(|x: &DatasetSpec| &x.id == id.get_ref()) {
            return Err(v.err(
                id.span(),
                format!("dataset id {:?} used twice", id.get_ref()),
            ));
        }
        let p = d.path.ok_or_else(|| {
            v.err(
                span,
                format!("dataset {:?} is missing field \"path\"", id.get_ref()),
            )
        })?;
        if p.get_ref().trim().is_empty() {
            return Err(v.err(p.span(), "dataset path is empty"));
        }
        datasets.push(DatasetSpec {
            id: id.into_inner(),
            path: base.join(p.into_inner()),
        });
    }
    Ok(SweepSpec {
        name: name.into_inner(),
        modes,
        shard_size,
        encoder,
        verifier,
        bootstrap,
        models,
        datasets,
    })
}

struct Validator<'a> {
    text: &'a str,
    path: &'a Path,
}

impl Validator<'_> {
    fn err(&self, span: Range<usize>, message: impl Into<String>) -> SweepError {
        let (line, column) = line_col(self.text, span.start);
        SweepError::Invalid {
            path: self.path.to_path_buf(),
            line,
            column,
            message: message.into(),
        }
    }

    fn positive(&self, n: &Spanned<i64>, field: &str, max: i64) -> Result<u32, SweepError> {
        let x = *n.get_ref();
        if x < 1 || x > max {
            return Err(self.err(
                n.span(),
                format!("{field} must be between 1 and {max}, got {x}"),
            ));
        }
        Ok(x as u32)
    }

    fn count(&self, n: &Spanned<i64>, field: &str, max: i64) -> Result<u32, SweepError> {
        let x = *n.get_ref();
        if !(0..=max).contains(&x) {
            return Err(self.err(
                n.span(),
                format!("{field} must be between 0 and {max}, got {x}"),
            ));
        }
        Ok(x as u32)
    }

    fn unit_interval(&self, x: &Spanned<f64>, field: &str) -> Result<f64, SweepError> {
        let v = *x.get_ref();
        if !(0.0..=1.0).contains(&v) {
            return Err(self.err(
                x.span(),
                format!("{field} must be between 0 and 1, got {v}"),
            ));
        }
        Ok(v)
    }

    fn identifier(&self, s: &Spanned<String>, what: &str) -> Result<(), SweepError> {
        let ok = !s.get_ref().is_empty()
            && s.get_ref()
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !ok {
            return Err(self.err(
                s.span(),
                format!(
                    "{what} {:?} must be non-empty and use only letters, digits, '-', '_', '.'",
                    s.get_ref()
                ),
            ));
        }
        Ok(())
    }

    fn model(
        &self,
        m: Spanned<RawModel>,
        base: &Path,
    ) -> Result<(ModelSpec, Range<usize>), SweepError> {
        let span = m.span();
        let m = m.into_inner();
        let name = m
            .name
            .ok_or_else(|| self.err(span.clone(), "model is missing field \"name\""))?;
        self.identifier(&name, "model name")?;
        let backend_name = m.backend.ok_or_else(|| {
            self.err(
                span.clone(),
                format!(
                    "model {:?} is missing field \"backend\"; expected one of {BACKENDS}",
                    name.get_ref()
                ),
            )
        })?;
        let require = |field: Option<Spanned<String>>, fname: &str| {
            field
                .filter(|f| !f.get_ref().trim().is_empty())
                .ok_or_else(|| {
                    self.err(
                        backend_name.span(),
                        format!(
                            "backend {:?} of model {:?} needs field \"{fname}\"",
                            backend_name.get_ref(),
                            name.get_ref()
                        ),
                    )
                })
        };
        let is_llm = !matches!(
            backend_name.get_ref().as_str(),
            "sentence-split" | "conjunction-oracle"
        );
        let backend = match backend_name.get_ref().as_str() {
            "sentence-split" => ModelBackend::SentenceSplit,
            "conjunction-oracle" => ModelBackend::ConjunctionOracle,
            "gguf" => ModelBackend::Gguf {
                path: base.join(require(m.path.clone(), "path")?.into_inner()),
            },
            "safetensors" => ModelBackend::Safetensors {
                path: base.join(require(m.path.clone(), "path")?.into_inner()),
            },
            "openai" => ModelBackend::Openai {
                base_url: require(m.base_url.clone(), "base_url")?.into_inner(),
                api_model: require(m.api_model.clone(), "api_model")?.into_inner(),
                api_key_env: m.api_key_env.clone().map(Spanned::into_inner),
            },
            other => {
                return Err(self.err(
                    backend_name.span(),
                    format!("unknown backend {other:?}; expected one of {BACKENDS}"),
                ))
            }
        };
        // Options that only make sense for an LLM are refused on the baselines, so a
        // typo'd backend does not silently ignore them.
        if !is_llm {
            for (field, value) in [
                ("path", &m.path),
                ("base_url", &m.base_url),
                ("api_model", &m.api_model),
                ("prompt", &m.prompt),
                ("dtype", &m.dtype),
            ] {
                if let Some(v) = value {
                    return Err(self.err(
                        v.span(),
                        format!(
                            "field \"{field}\" does not apply to backend {:?}",
                            backend_name.get_ref()
                        ),
                    ));
                }
            }
        }
        let prompt = match &m.prompt {
            None => PromptKind::Credence,
            Some(p) => match p.get_ref().as_str() {
                "credence" => PromptKind::Credence,
                "factscore" => PromptKind::Factscore,
                other => {
                    return Err(self.err(
                        p.span(),
                        format!("unknown prompt {other:?}; expected credence, factscore"),
                    ))
                }
            },
        };
        let max_new_tokens = match &m.max_new_tokens {
            None => 4096,
            Some(n) => self.positive(n, "max_new_tokens", 131_072)?,
        };
        if let Some(d) = &m.dtype {
            if !["f32", "bf16", "f16"].contains(&d.get_ref().as_str()) {
                return Err(self.err(
                    d.span(),
                    format!("unknown dtype {:?}; expected f32, bf16, f16", d.get_ref()),
                ));
            }
        }
        let device = match &m.device {
            None => "cpu".to_string(),
            Some(d) => {
                let s = d.get_ref();
                let ok = s == "cpu"
                    || s == "cuda"
                    || s.strip_prefix("cuda:")
                        .is_some_and(|n| n.parse::<u32>().is_ok());
                if !ok {
                    return Err(self.err(
                        d.span(),
                        format!("unknown device {s:?}; expected cpu, cuda or cuda:N"),
                    ));
                }
                s.clone()
            }
        };
        Ok((
            ModelSpec {
                name: name.get_ref().clone(),
                backend,
                prompt,
                max_new_tokens,
                dtype: m.dtype.map(Spanned::into_inner),
                device,
            },
            name.span(),
        ))
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

#[cfg(test)]
mod tests;
