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
//! # precision = "bf16" # products in bfloat16 on a CPU with AVX-512 BF16 (default f32)
//!
//! [[models]]
//! name = "oracle"
//! backend = "conjunction-oracle"
//!
//! [[datasets]]
//! id = "sample"
//! path = "sample.jsonl"  # relative to the sweep file
//! ```

use crate::device::{ComputeDevice, UnknownDevice, UnknownDtype, WeightDtype};
use crate::domain::Mode;
use crate::stats::CiMethod;
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
        /// Limit of one HTTP request in seconds (default 120).
        #[serde(default)]
        request_timeout_s: Option<u32>,
        /// Most requests in flight at once per worker (default 256); the adaptive
        /// limit stays below it.
        #[serde(default)]
        max_concurrency: Option<u32>,
    },
}

/// A named OpenAI-compatible endpoint: what `preset = "NAME"` fills in a sweep's model
/// (fields the model gives win) and what `credence decompose --model NAME` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointPreset {
    /// The preset's name.
    pub name: &'static str,
    /// Base URL of the chat completions endpoint.
    pub base_url: &'static str,
    /// The model name the endpoint expects (`None`: the sweep must give `api_model`).
    pub api_model: Option<&'static str>,
    /// Environment variable holding the key.
    pub api_key_env: Option<&'static str>,
    /// Default ceiling of requests in flight.
    pub max_concurrency: u32,
    /// What it is.
    pub doc: &'static str,
}

/// The endpoint presets.
pub const PRESETS: &[EndpointPreset] = &[
    EndpointPreset {
        name: "gemini-2.5-flash",
        base_url: "https://generativelanguage.googleapis.com/v1beta/openai",
        api_model: Some("gemini-2.5-flash"),
        api_key_env: Some("GEMINI_API_KEY"),
        max_concurrency: 64,
        doc: "Gemini 2.5 Flash through Google's OpenAI-compatible endpoint (key in GEMINI_API_KEY)",
    },
    EndpointPreset {
        name: "openai",
        base_url: "http://127.0.0.1:8000/v1",
        api_model: None,
        api_key_env: None,
        max_concurrency: 256,
        doc: "any OpenAI-compatible server (vLLM's default address; give api_model, and base_url and api_key_env where they differ)",
    },
    EndpointPreset {
        name: "vllm",
        base_url: "http://127.0.0.1:8000/v1",
        api_model: None,
        api_key_env: None,
        max_concurrency: 256,
        doc: "a vLLM server (`vllm serve MODEL`, default port 8000) beside the worker; give api_model (the served name, e.g. Qwen/Qwen3-8B: thinking is turned off through chat_template_kwargs) and base_url where it differs",
    },
];

/// The preset of that name.
///
/// ```
/// let p = credence_core::sweep::preset("gemini-2.5-flash").unwrap();
/// assert_eq!(p.api_key_env, Some("GEMINI_API_KEY"));
/// ```
pub fn preset(name: &str) -> Option<&'static EndpointPreset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// A local model credence knows by name: what `preset = "NAME"` fills in a sweep's
/// model (fields the model gives win) and what `credence decompose --model NAME` runs.
/// Its weights are looked up under the models folder ([`models_dir`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalPreset {
    /// The preset's name.
    pub name: &'static str,
    /// `gguf` or `safetensors`.
    pub backend: &'static str,
    /// The file or folder, relative to the models folder.
    pub file: &'static str,
    /// Weight dtype of a safetensors model.
    pub dtype: Option<WeightDtype>,
    /// Default device.
    pub device: ComputeDevice,
    /// Default generation limit: the paper's 4,096 for the paper's models; 256 for the
    /// small ones, which repeat themselves to any limit (SmolLM2 took about 3 minutes on
    /// 4,096 tokens for one sentence on a CPU), while a decomposition is a few dozen tokens.
    pub max_new_tokens: u32,
    /// What it is.
    pub doc: &'static str,
}

/// The paper's generation limit (PAPER.md, decoding), a model's default.
pub const PAPER_MAX_NEW_TOKENS: u32 = 4096;

/// The local-model presets: the paper's three local models and the two that
/// `scripts/setup` fetches.
pub const LOCAL_PRESETS: &[LocalPreset] = &[
    LocalPreset {
        name: "phi-3-mini-128k",
        backend: "safetensors",
        file: "Phi-3-mini-128k-instruct",
        dtype: Some(WeightDtype::Bf16),
        device: ComputeDevice::Cuda(None),
        max_new_tokens: PAPER_MAX_NEW_TOKENS,
        doc: "Phi-3-mini-128k-instruct, bf16 (the paper's), a Hugging Face folder",
    },
    LocalPreset {
        name: "qwen3-8b",
        backend: "safetensors",
        file: "Qwen3-8B",
        dtype: Some(WeightDtype::Bf16),
        device: ComputeDevice::Cuda(None),
        max_new_tokens: PAPER_MAX_NEW_TOKENS,
        doc: "Qwen3-8B, bf16, thinking off (the paper's), a Hugging Face folder",
    },
    LocalPreset {
        name: "gemma-3-12b-it",
        backend: "gguf",
        file: "gemma-3-12b-it-Q4_K_M.gguf",
        dtype: None,
        device: ComputeDevice::Cuda(None),
        max_new_tokens: PAPER_MAX_NEW_TOKENS,
        doc: "Gemma-3-12b-it, Q4_K_M GGUF in place of the paper's bitsandbytes NF4",
    },
    LocalPreset {
        name: "smollm2-135m-instruct",
        backend: "gguf",
        file: "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf",
        dtype: None,
        device: ComputeDevice::Cpu,
        max_new_tokens: 256,
        doc: "SmolLM2-135M-Instruct, Q4_1 GGUF (fetched by scripts/setup; a weak decomposer)",
    },
    LocalPreset {
        name: "gemma-3-270m",
        backend: "gguf",
        file: "gemma-3-270m/gemma-3-270m-q4_k_m.gguf",
        dtype: None,
        device: ComputeDevice::Cpu,
        max_new_tokens: 256,
        doc: "Gemma-3-270m base, Q4_K_M GGUF (fetched by scripts/setup; no chat template)",
    },
];

/// Every preset's name, endpoints first, comma-separated (for error messages).
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .chain(LOCAL_PRESETS.iter().map(|p| p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The local preset of that name.
pub fn local_preset(name: &str) -> Option<&'static LocalPreset> {
    LOCAL_PRESETS.iter().find(|p| p.name == name)
}

/// The folder model weights are looked up in: `$CREDENCE_MODELS_DIR`, else the `models/`
/// of the checkout this binary was built from; always an absolute path. Never a folder
/// found from a sweep file's place (nor by walking up from it): a sweep in a shared folder
/// such as /tmp must not pick up weights planted beside or above it. A sweep that wants
/// other weights names them with a model's `path`, relative to the sweep's folder.
pub fn models_dir() -> PathBuf {
    models_dir_with(std::env::var_os("CREDENCE_MODELS_DIR"), &checkout_models())
}

/// The `models/` folder of the checkout this crate was compiled in (fixed at build time,
/// so neither the current folder nor a sweep's folder can move it).
fn checkout_models() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).join("models")
}

fn models_dir_with(env: Option<std::ffi::OsString>, checkout: &Path) -> PathBuf {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    match env.filter(|d| !d.is_empty()) {
        Some(dir) => absolute(Path::new(&dir)),
        None => absolute(checkout),
    }
}

impl LocalPreset {
    /// The backend, with the weights under `models`.
    pub fn model_backend(&self, models: &Path) -> ModelBackend {
        let path = models.join(self.file);
        if self.backend == "gguf" {
            ModelBackend::Gguf { path }
        } else {
            ModelBackend::Safetensors { path }
        }
    }
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
    /// Weight dtype of a safetensors model (its JSON is the name: `f32`, `bf16`, `f16`);
    /// `None`: the device's default ([`WeightDtype::default_on`]).
    pub dtype: Option<WeightDtype>,
    /// `cpu` or `cuda[:N]` (as its name in the sweep's JSON).
    pub device: ComputeDevice,
    /// Longest one generation of a local model may take, in seconds (default
    /// [`DEFAULT_GENERATION_TIMEOUT_S`]); past it that example fails with the reason.
    /// Not part of any key: it decides whether a generation finishes, never what it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_timeout_s: Option<u32>,
}

/// A local model's per-generation time limit when the sweep gives none: half an hour,
/// several times what 4,096 tokens of an 8B model take in a full batch on one GPU.
pub const DEFAULT_GENERATION_TIMEOUT_S: u32 = 1800;

/// Most sequences in one decode batch of a local model on `device` (the sweep does not
/// set it): enough to read each weight once for many tokens on a CPU. On a GPU more pays
/// (Qwen3-8B's shape on an H200: 2,096 tokens/s at 32 in flight, 3,310 at 64, 4,118 at
/// 128), and the engine takes fewer where the GPU's free memory after the load holds the
/// keys and values of fewer sequences of typical length (it preempts the newest when
/// those in flight outgrow it).
pub fn default_max_batch(device: ComputeDevice) -> usize {
    if device.is_cuda() {
        128
    } else {
        8
    }
}

impl ModelSpec {
    /// The model credence knows by `name` outside a sweep (what `credence decompose
    /// --model NAME` runs): a baseline (`sentence-split`, `conjunction-oracle`), a local
    /// preset (weights under [`models_dir`]) or an endpoint preset, with the CREDENCE
    /// prompt and the preset's generation limit. `None` for a name that is none of these.
    pub fn named(name: &str) -> Option<ModelSpec> {
        let mut device = ComputeDevice::Cpu;
        let mut dtype = None;
        let mut max_new_tokens = PAPER_MAX_NEW_TOKENS;
        let backend = match (name, local_preset(name)) {
            ("sentence-split", _) => ModelBackend::SentenceSplit,
            ("conjunction-oracle", _) => ModelBackend::ConjunctionOracle,
            (_, Some(local)) => {
                device = local.device;
                dtype = local.dtype;
                max_new_tokens = local.max_new_tokens;
                local.model_backend(&models_dir())
            }
            (name, None) => {
                let p = preset(name)?;
                ModelBackend::Openai {
                    base_url: p.base_url.to_string(),
                    api_model: p.api_model.unwrap_or_default().to_string(),
                    api_key_env: p.api_key_env.map(str::to_string),
                    request_timeout_s: None,
                    max_concurrency: Some(p.max_concurrency),
                }
            }
        };
        Some(ModelSpec {
            name: name.to_string(),
            backend,
            prompt: PromptKind::Credence,
            max_new_tokens,
            dtype,
            device,
            generation_timeout_s: None,
        })
    }

    /// The per-generation time limit of a local model.
    pub fn generation_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(
            self.generation_timeout_s
                .unwrap_or(DEFAULT_GENERATION_TIMEOUT_S),
        ))
    }
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
    /// `bf16`: the encoder's dense products in bfloat16 (a CPU with AVX-512 BF16; a
    /// different encoder fingerprint). `None` is f32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<EncoderPrecision>,
}

/// A sweep encoder's reduced precision ([`EncoderSpec::precision`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncoderPrecision {
    /// bfloat16 products, f32 sums.
    Bf16,
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
    /// Count an `advcl` as an atomicity violation only when it has its own subject (the
    /// paper's later "subject-presence constraints"; default false, the formal rule).
    #[serde(default)]
    pub advcl_requires_subject: bool,
    /// Keep the claims the LLM self-repair tier was given when its answer fails more
    /// verifier checks than they did (PAPER.md "Decided here"; default false).
    #[serde(default)]
    pub keep_if_not_worse: bool,
    /// NER labels of tier-2 entities.
    #[serde(default = "default_ner_labels")]
    pub ner_labels: Vec<String>,
}

fn default_ner_labels() -> Vec<String> {
    ["PERSON", "ORG", "GPE", "LOC"].map(String::from).to_vec()
}

/// The dependency parser and NER of the verifier (a pure-Rust en_core_web_sm 3.8).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NlpSpec {
    /// The pipeline folder; `models/en_core_web_sm` when not given.
    pub path: Option<PathBuf>,
}

impl Default for VerifierSettings {
    fn default() -> Self {
        VerifierSettings {
            tau_dup: 0.92,
            min_epr: 1.0,
            max_iterations: 1,
            max_llm_calls: 1,
            advcl_requires_subject: false,
            keep_if_not_worse: false,
            ner_labels: default_ner_labels(),
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
    /// How intervals are computed (`ci = "percentile"`, the default, or `"bca"`).
    #[serde(default)]
    pub ci: CiMethod,
}

impl BootstrapSettings {
    /// The settings as the statistics take them.
    pub fn stats(&self) -> crate::stats::Bootstrap {
        crate::stats::Bootstrap {
            resamples: self.resamples as usize,
            seed: self.seed,
        }
    }
}

impl Default for BootstrapSettings {
    fn default() -> Self {
        BootstrapSettings {
            resamples: 10_000,
            seed: 42,
            ci: CiMethod::Percentile,
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
    /// The parser of the verifier (`[nlp]`).
    #[serde(default)]
    pub nlp: NlpSpec,
    /// Verifier settings.
    pub verifier: VerifierSettings,
    /// Bootstrap settings.
    pub bootstrap: BootstrapSettings,
    /// Decomposers.
    pub models: Vec<ModelSpec>,
    /// Datasets.
    pub datasets: Vec<DatasetSpec>,
    /// Comparisons beyond the automatic ones (`[[comparisons]]`).
    #[serde(default)]
    pub comparisons: Vec<ComparisonSpec>,
    /// Downstream fact-checking (`[afc]`), if the sweep runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afc: Option<AfcSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    sweep: Option<Spanned<RawHeader>>,
    encoder: Option<Spanned<RawEncoder>>,
    nlp: Option<RawNlp>,
    verifier: Option<RawVerifier>,
    bootstrap: Option<RawBootstrap>,
    models: Option<Spanned<Vec<Spanned<RawModel>>>>,
    datasets: Option<Spanned<Vec<Spanned<RawDataset>>>>,
    comparisons: Option<Vec<Spanned<comparisons::RawComparison>>>,
    afc: Option<Spanned<afc::RawAfc>>,
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
    precision: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNlp {
    path: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVerifier {
    tau_dup: Option<Spanned<f64>>,
    min_epr: Option<Spanned<f64>>,
    max_iterations: Option<Spanned<i64>>,
    max_llm_calls: Option<Spanned<i64>>,
    advcl_requires_subject: Option<bool>,
    keep_if_not_worse: Option<bool>,
    ner_labels: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBootstrap {
    resamples: Option<Spanned<i64>>,
    seed: Option<Spanned<i64>>,
    ci: Option<Spanned<String>>,
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
    preset: Option<Spanned<String>>,
    request_timeout_s: Option<Spanned<i64>>,
    max_concurrency: Option<Spanned<i64>>,
    prompt: Option<Spanned<String>>,
    max_new_tokens: Option<Spanned<i64>>,
    generation_timeout_s: Option<Spanned<i64>>,
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
/// let sweep = credence_core::sweep::load(std::path::Path::new("examples/demo.toml"))?;
/// assert!(!sweep.models.is_empty());
/// # Ok::<(), credence_core::sweep::SweepError>(())
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
        None => Mode::PAPER.to_vec(),
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
                precision: match enc.precision {
                    None => None,
                    Some(p) => match p.get_ref().as_str() {
                        "f32" => None,
                        "bf16" => Some(EncoderPrecision::Bf16),
                        other => {
                            return Err(v.err(
                                p.span(),
                                format!("unknown encoder precision {other:?}; expected f32, bf16"),
                            ))
                        }
                    },
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
        if let Some(b) = r.keep_if_not_worse {
            verifier.keep_if_not_worse = b;
        }
        if let Some(b) = r.advcl_requires_subject {
            verifier.advcl_requires_subject = b;
        }
        if let Some(labels) = r.ner_labels {
            const KNOWN: [&str; 18] = [
                "CARDINAL",
                "DATE",
                "EVENT",
                "FAC",
                "GPE",
                "LANGUAGE",
                "LAW",
                "LOC",
                "MONEY",
                "NORP",
                "ORDINAL",
                "ORG",
                "PERCENT",
                "PERSON",
                "PRODUCT",
                "QUANTITY",
                "TIME",
                "WORK_OF_ART",
            ];
            let mut out = Vec::new();
            for l in labels.into_inner() {
                if !KNOWN.contains(&l.get_ref().as_str()) {
                    return Err(v.err(
                        l.span(),
                        format!(
                            "unknown NER label {:?}; en_core_web_sm has {}",
                            l.get_ref(),
                            KNOWN.join(", ")
                        ),
                    ));
                }
                if !out.contains(l.get_ref()) {
                    out.push(l.into_inner());
                }
            }
            verifier.ner_labels = out;
        }
    }
    let nlp = NlpSpec {
        path: raw
            .nlp
            .and_then(|n| n.path)
            .map(|p| base.join(p.into_inner())),
    };
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
        if let Some(m) = r.ci {
            bootstrap.ci = match m.get_ref().as_str() {
                "percentile" => CiMethod::Percentile,
                "bca" => CiMethod::Bca,
                other => {
                    return Err(v.err(
                        m.span(),
                        format!("unknown ci {other:?}; expected percentile or bca"),
                    ))
                }
            };
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
    // A sweep that runs downstream fact-checking alone needs no decomposition dataset.
    let datasets_raw = match raw.datasets {
        Some(d) => d,
        None if raw.afc.is_some() => Spanned::new(0..0, Vec::new()),
        None => {
            return Err(v.err(
                0..0,
                "no [[datasets]]; a sweep needs at least one dataset (or an [afc] section)",
            ))
        }
    };
    if datasets_raw.get_ref().is_empty() && raw.afc.is_none() {
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
    let comparisons = v.comparisons(raw.comparisons, &models, &modes, &datasets)?;
    let afc = match raw.afc {
        None => None,
        Some(a) => Some(v.afc(a, &models, &datasets, base)?),
    };
    Ok(SweepSpec {
        afc,
        name: name.into_inner(),
        comparisons,
        modes,
        shard_size,
        encoder,
        nlp,
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

    /// A local preset becomes the model's backend, path, dtype and device, except
    /// where the model gives them.
    fn fill_local_preset(&self, m: &mut RawModel) -> Result<(), SweepError> {
        let Some(p) = m.preset.as_ref() else {
            return Ok(());
        };
        let Some(local) = local_preset(p.get_ref()) else {
            return Ok(());
        };
        let span = p.span();
        if let Some(b) = &m.backend {
            if b.get_ref() != local.backend {
                return Err(self.err(
                    b.span(),
                    format!(
                        "preset {:?} is a {} model; it does not apply to backend {:?}",
                        local.name,
                        local.backend,
                        b.get_ref()
                    ),
                ));
            }
        }
        let at = |v: &str| Spanned::new(span.clone(), v.to_string());
        m.backend = Some(at(local.backend));
        if m.path.is_none() {
            let path = models_dir().join(local.file);
            m.path = Some(at(&path.to_string_lossy()));
        }
        if m.dtype.is_none() {
            m.dtype = local.dtype.map(|d| at(d.name()));
        }
        if m.device.is_none() {
            m.device = Some(at(&local.device.to_string()));
        }
        if m.max_new_tokens.is_none() {
            m.max_new_tokens = Some(Spanned::new(span.clone(), i64::from(local.max_new_tokens)));
        }
        m.preset = None;
        Ok(())
    }

    fn model(
        &self,
        m: Spanned<RawModel>,
        base: &Path,
    ) -> Result<(ModelSpec, Range<usize>), SweepError> {
        let span = m.span();
        let mut m = m.into_inner();
        self.fill_local_preset(&mut m)?;
        let name = m
            .name
            .ok_or_else(|| self.err(span.clone(), "model is missing field \"name\""))?;
        self.identifier(&name, "model name")?;
        let preset = match &m.preset {
            None => None,
            Some(p) => Some(preset(p.get_ref()).ok_or_else(|| {
                self.err(
                    p.span(),
                    format!(
                        "unknown preset {:?}; expected one of {}",
                        p.get_ref(),
                        preset_names()
                    ),
                )
            })?),
        };
        // A preset names an endpoint, so its backend is openai unless the model says
        // otherwise (and then it is refused below).
        let backend_name = match (m.backend, &m.preset) {
            (None, Some(p)) => Some(Spanned::new(p.span(), "openai".to_string())),
            (b, _) => b,
        };
        if let (Some(p), Some(b)) = (&m.preset, &backend_name) {
            if b.get_ref() != "openai" {
                return Err(self.err(
                    p.span(),
                    format!(
                        "preset {:?} is an OpenAI-compatible endpoint; it does not apply to backend {:?}",
                        p.get_ref(),
                        b.get_ref()
                    ),
                ));
            }
        }
        let backend_name = backend_name.ok_or_else(|| {
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
            "openai" => {
                let from_preset =
                    |field: Option<Spanned<String>>, default: Option<&'static str>| {
                        field.or_else(|| {
                            default.map(|d| Spanned::new(backend_name.span(), d.to_string()))
                        })
                    };
                let max_concurrency = match &m.max_concurrency {
                    Some(n) => Some(self.positive(n, "max_concurrency", 4096)?),
                    None => preset.map(|p| p.max_concurrency),
                };
                let request_timeout_s = match &m.request_timeout_s {
                    Some(n) => Some(self.positive(n, "request_timeout_s", 86_400)?),
                    None => None,
                };
                let base_url = require(
                    from_preset(m.base_url.clone(), preset.map(|p| p.base_url)),
                    "base_url",
                )?;
                if !(base_url.get_ref().starts_with("http://")
                    || base_url.get_ref().starts_with("https://"))
                {
                    return Err(self.err(
                        base_url.span(),
                        format!(
                            "base_url {:?} must start with http:// or https://",
                            base_url.get_ref()
                        ),
                    ));
                }
                ModelBackend::Openai {
                    base_url: base_url.into_inner(),
                    api_model: require(
                        from_preset(m.api_model.clone(), preset.and_then(|p| p.api_model)),
                        "api_model",
                    )?
                    .into_inner(),
                    api_key_env: from_preset(
                        m.api_key_env.clone(),
                        preset.and_then(|p| p.api_key_env),
                    )
                    .map(Spanned::into_inner),
                    request_timeout_s,
                    max_concurrency,
                }
            }
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
                ("api_key_env", &m.api_key_env),
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
        if !matches!(
            backend,
            ModelBackend::Gguf { .. } | ModelBackend::Safetensors { .. }
        ) {
            if let Some(v) = &m.generation_timeout_s {
                return Err(self.err(
                    v.span(),
                    format!(
                        "field \"generation_timeout_s\" only applies to local models \
                         (gguf, safetensors), not {:?}",
                        backend_name.get_ref()
                    ),
                ));
            }
        }
        let generation_timeout_s = match &m.generation_timeout_s {
            Some(n) => Some(self.positive(n, "generation_timeout_s", 7 * 86_400)?),
            None => None,
        };
        if backend_name.get_ref() != "openai" {
            for (field, value) in [
                ("request_timeout_s", &m.request_timeout_s),
                ("max_concurrency", &m.max_concurrency),
            ] {
                if let Some(v) = value {
                    return Err(self.err(
                        v.span(),
                        format!(
                            "field \"{field}\" only applies to backend \"openai\", not {:?}",
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
            None => PAPER_MAX_NEW_TOKENS,
            Some(n) => self.positive(n, "max_new_tokens", 131_072)?,
        };
        let dtype = match &m.dtype {
            None => None,
            Some(d) => Some(
                d.get_ref()
                    .parse()
                    .map_err(|e: UnknownDtype| self.err(d.span(), e.to_string()))?,
            ),
        };
        let device = match &m.device {
            None => ComputeDevice::Cpu,
            Some(d) => d
                .get_ref()
                .parse()
                .map_err(|e: UnknownDevice| self.err(d.span(), e.to_string()))?,
        };
        Ok((
            ModelSpec {
                name: name.get_ref().clone(),
                backend,
                prompt,
                max_new_tokens,
                dtype,
                device,
                generation_timeout_s,
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

mod afc;
mod comparisons;
pub use afc::{AfcSpec, DEFAULT_JUDGE_MAX_NEW_TOKENS};
pub use comparisons::{ComparisonSpec, ModelMode};

#[cfg(test)]
mod tests;
