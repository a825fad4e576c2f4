//! Local LLMs on the generation seam: a GGUF file or a Hugging Face safetensors folder
//! run with candle on CPU or CUDA.
//!
//! - [`model`]: the one decoder-only transformer; [`llama`], [`qwen3`], [`phi3`] and
//!   [`gemma3`] fill its configuration from GGUF metadata or `config.json`.
//! - [`weights`]: reading tensors (GGUF Q4_1/Q5_x are requantised to Q8_0 on CPU, where
//!   candle's kernels for them are scalar).
//! - [`tokenizer`] and [`chat`]: the model's own tokenizer and chat template.
//! - [`batch_kv`] and [`step_graph`]: the batched decode's keys and values, and its steps
//!   replayed as CUDA graphs.
//! - [`engine`]: one thread per model that owns it and decodes every request in flight
//!   as one batch, greedily, until each reaches an end-of-turn token or its limit.

pub mod attend;
pub mod batch_kv;
pub mod chat;
pub mod engine;
pub mod gemma3;
pub mod hf;
pub mod limits;
pub mod llama;
pub mod model;
pub mod phi3;
pub mod plain;
pub mod pool;
pub mod qmatmul;
pub mod qwen3;
pub mod step_graph;
pub mod tokenizer;
pub mod weights;

use super::{ChatMessage, ChatRequest, Completion, GenerateError, Generator};
use async_trait::async_trait;
use candle_core::{DType, Device};
use chat::ChatTemplate;
use engine::{Engine, EngineRequest};
use model::{Config, Transformer};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokenizer::Tokenizer;
use weights::{LoadError, Meta, Source};

/// Bumped when a change here changes what a model generates (fingerprints change, so
/// sweeps re-run the jobs). 3: the tensor path (CUDA, half precision) decodes with
/// batched attention and one product per weight per step, whose sums round differently.
const VERSION: &str = "local-llm-3";

/// Which file format a model comes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One `.gguf` file.
    Gguf,
    /// A folder with `config.json`, `tokenizer.json` and `*.safetensors`.
    Safetensors,
}

/// How to load and run a local model.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSettings {
    /// The file or folder.
    pub path: PathBuf,
    /// Its format.
    pub format: Format,
    /// Weight dtype of a safetensors model; `None`: f32 on CPU and bf16 on CUDA. GGUF
    /// weights stay as quantised.
    pub dtype: Option<WeightDtype>,
    /// Where it runs.
    pub device: ComputeDevice,
    /// Generation limit.
    pub max_new_tokens: u32,
    /// Most sequences decoded together (on a GPU, fewer where its free memory after the
    /// load holds fewer: the backend's `max_in_flight` says how many).
    pub max_batch: usize,
    /// Longest one generation may take (`generation_timeout_s`).
    pub generation_timeout: Duration,
    /// The most bytes the batched keys and values of the sequences in flight, with their
    /// decode steps' headroom, may take ([`kv_memory_from_env`]); `None`: the device's
    /// free memory alone bounds them (nothing does on a CPU). Never part of a key: it
    /// decides how many sequences run at once, not what they say.
    pub kv_memory: Option<usize>,
}

/// The variable that limits a local model's batched keys and values, in GiB: for a GPU
/// shared with another process (a second worker, a vLLM server), or to bound the tensor
/// path on a CPU.
pub const KV_MEMORY_VAR: &str = "CREDENCE_KV_MEMORY_GIB";

/// [`KV_MEMORY_VAR`] in bytes, where it is set: a positive number of GiB (fractions
/// allowed), or an error that names the variable and the value.
pub fn kv_memory_from_env() -> Result<Option<usize>, String> {
    match std::env::var(KV_MEMORY_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(format!("{KV_MEMORY_VAR}={v:?}: not a number of GiB"))
        }
        Ok(v) => parse_gib(&v)
            .map(Some)
            .map_err(|e| format!("{KV_MEMORY_VAR}={v:?}: {e}")),
    }
}

/// A positive number of GiB, in bytes.
fn parse_gib(text: &str) -> Result<usize, String> {
    let gib: f64 = text
        .trim()
        .parse()
        .map_err(|_| "not a number of GiB (such as 40 or 0.5)".to_string())?;
    if !(gib.is_finite() && gib > 0.0 && gib < (1u64 << 33) as f64) {
        return Err("not a positive number of GiB".into());
    }
    Ok((gib * (1u64 << 30) as f64) as usize)
}

pub use credence_core::device::{ComputeDevice, WeightDtype};
pub use credence_core::sweep::default_max_batch;

fn device_of(device: ComputeDevice) -> Result<Device, String> {
    match device.cuda_ordinal() {
        None => Ok(Device::Cpu),
        Some(n) => Device::new_cuda(n).map_err(|e| format!("{device}: {e}")),
    }
}

fn candle_dtype(dtype: WeightDtype) -> DType {
    match dtype {
        WeightDtype::F32 => DType::F32,
        WeightDtype::Bf16 => DType::BF16,
        WeightDtype::F16 => DType::F16,
    }
}

fn dtype_of(settings: &LocalSettings) -> DType {
    candle_dtype(
        settings
            .dtype
            .unwrap_or(WeightDtype::default_on(settings.device)),
    )
}

/// The environment variable that keeps the batched decode's keys and values in another
/// dtype than the activations' ([`model::Transformer::set_kv_dtype`]): `bf16` halves a
/// GGUF model's keys and values on a GPU. Unset: the activation dtype.
pub const KV_DTYPE_VAR: &str = "CREDENCE_LLM_KV_DTYPE";

/// The dtype [`KV_DTYPE_VAR`] asks for, if it is set.
fn kv_dtype_override() -> Result<Option<WeightDtype>, String> {
    match std::env::var(KV_DTYPE_VAR) {
        Err(_) => Ok(None),
        Ok(v) => v
            .parse()
            .map(Some)
            .map_err(|e| format!("{KV_DTYPE_VAR}: {e}")),
    }
}

/// sha256 of a file, remembered per process by path, size and modification time so that
/// planning and loading one model hash its weights once.
/// A file's size and modification time, and the sha256 they were seen with.
type Hashed = (u64, std::time::SystemTime, String);

fn file_sha256(path: &Path) -> Result<String, LoadError> {
    static MEMO: OnceLock<Mutex<HashMap<PathBuf, Hashed>>> = OnceLock::new();
    let meta = std::fs::metadata(path).map_err(|e| LoadError::new(path, format!("{e}")))?;
    let modified = meta
        .modified()
        .map_err(|e| LoadError::new(path, format!("{e}")))?;
    let memo = MEMO.get_or_init(Default::default);
    if let Some((len, when, sha)) = memo.lock().expect("memo").get(path) {
        if *len == meta.len() && *when == modified {
            return Ok(sha.clone());
        }
    }
    // A symlink to a device (`/dev/zero`) or a FIFO never ends: only a regular file (after
    // symlinks) is hashed, and never past the length its metadata stated.
    if !meta.is_file() {
        return Err(LoadError::new(
            path,
            "is not a regular file (a device, FIFO or folder cannot be a model file)",
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| LoadError::new(path, format!("{e}")))?;
    let mut h = Sha256::new();
    let hashed = std::io::copy(&mut std::io::Read::take(file, meta.len()), &mut h)
        .map_err(|e| LoadError::new(path, format!("{e}")))?;
    if hashed != meta.len() {
        return Err(LoadError::new(
            path,
            format!(
                "changed while hashed: {hashed} bytes read of {}",
                meta.len()
            ),
        ));
    }
    let sha = hex::encode(h.finalize());
    memo.lock()
        .expect("memo")
        .insert(path.to_path_buf(), (meta.len(), modified, sha.clone()));
    Ok(sha)
}

/// The files whose bytes decide what a model generates.
fn model_files(settings: &LocalSettings) -> Result<Vec<PathBuf>, LoadError> {
    match settings.format {
        Format::Gguf => {
            if !settings.path.is_file() {
                return Err(LoadError::new(&settings.path, "no such GGUF file"));
            }
            Ok(vec![settings.path.clone()])
        }
        Format::Safetensors => {
            let folder = &settings.path;
            let entries = std::fs::read_dir(folder).map_err(|e| {
                LoadError::new(folder, format!("cannot read the model folder: {e}"))
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    name.ends_with(".safetensors")
                        || matches!(
                            name,
                            "config.json"
                                | "tokenizer.json"
                                | "tokenizer_config.json"
                                | "generation_config.json"
                                | "chat_template.jinja"
                        )
                })
                .collect();
            files.sort();
            for needed in ["config.json", "tokenizer.json"] {
                if !files.iter().any(|f| f.ends_with(needed)) {
                    return Err(LoadError::new(folder, format!("has no {needed}")));
                }
            }
            Ok(files)
        }
    }
}

/// The fingerprint of a local model with these settings: the bytes of its weights,
/// tokenizer and templates, the dtype, the device kind and the generation limit. Computed
/// without loading the model (it hashes the files).
pub fn fingerprint(settings: &LocalSettings) -> Result<String, LoadError> {
    let mut h = Sha256::new();
    let dtype = dtype_of(settings);
    let device_kind = if settings.device.is_cuda() {
        "cuda"
    } else {
        "cpu"
    };
    let mut part = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part(VERSION.as_bytes());
    part(format!("{:?}", settings.format).as_bytes());
    part(format!("{dtype:?}").as_bytes());
    part(device_kind.as_bytes());
    part(settings.max_new_tokens.to_string().as_bytes());
    // Keys and values in another dtype change what a batched decode says; the default
    // leaves every earlier fingerprint as it was.
    if let Some(kv) = kv_dtype_override().map_err(|e| LoadError::new(&settings.path, e))? {
        part(format!("kv {kv}").as_bytes());
    }
    // So do attention spans rounded up for kept step shapes (CUDA graphs, captured or
    // not: the two give the same bits); the CPU's engine never runs them.
    let graphs =
        step_graph::GraphMode::from_env().map_err(|e| LoadError::new(&settings.path, e))?;
    if settings.device.is_cuda() && graphs.keeps_shapes() {
        part(b"kept step shapes");
    }
    for file in model_files(settings)? {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        part(name.as_bytes());
        part(file_sha256(&file)?.as_bytes());
    }
    Ok(format!("local:{}", &hex::encode(h.finalize())[..32]))
}

/// A loaded model with its tokenizer and prompt format: what the engine thread owns.
pub struct LocalModel {
    /// The network.
    pub model: Transformer,
    /// Its tokenizer.
    pub tokenizer: Tokenizer,
    template: Option<ChatTemplate>,
    /// BOS id, prepended when the model wants one and the template does not write it.
    bos: Option<u32>,
    add_bos: bool,
    /// Ids that end a generation (end of turn, end of text).
    pub stops: Vec<u32>,
}

/// End-of-turn tokens of the chat formats credence knows, stopped on when the vocabulary
/// has them.
const END_OF_TURN: &[&str] = &[
    "<|im_end|>",
    "<end_of_turn>",
    "<|end|>",
    "<|eot_id|>",
    "<|endoftext|>",
    "<|end_of_text|>",
];

impl LocalModel {
    /// Loads a model as the settings say.
    pub fn load(settings: &LocalSettings) -> Result<Self, LoadError> {
        let started = Instant::now();
        let at = |m: String| LoadError::new(&settings.path, m);
        let device = device_of(settings.device).map_err(at)?;
        let kv_dtype = kv_dtype_override().map_err(at)?;
        let graph_mode = step_graph::GraphMode::from_env().map_err(at)?;
        let mut loaded = match settings.format {
            Format::Gguf => Self::load_gguf(&settings.path, &device)?,
            Format::Safetensors => {
                Self::load_safetensors(&settings.path, dtype_of(settings), &device)?
            }
        };
        if let Some(kv) = kv_dtype {
            loaded.model.set_kv_dtype(candle_dtype(kv));
        }
        loaded.model.set_graph_mode(graph_mode);
        tracing::info!(
            path = %settings.path.display(),
            arch = loaded.model.config.arch,
            layers = loaded.model.config.layers,
            seconds = started.elapsed().as_secs_f64(),
            "local model loaded"
        );
        Ok(loaded)
    }

    fn load_gguf(path: &Path, device: &Device) -> Result<Self, LoadError> {
        let mut source = Source::gguf(path, device)?;
        let Source::Gguf { content, .. } = &source else {
            unreachable!("a GGUF source");
        };
        let md = content.metadata.clone();
        let arch = md
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .ok_or_else(|| LoadError::new(path, "GGUF metadata has no general.architecture"))?;
        let tokenizer = Tokenizer::from_gguf(path, &md)?;
        let vocab = match md
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.to_vec().ok())
        {
            Some(t) => t.len(),
            None => tokenizer.vocab_size(),
        };
        let vocab = limits::VOCAB.check(path, "tokenizer.ggml.tokens (count)", vocab as u64)?;
        let meta = Meta {
            values: &md,
            arch: &arch,
            path,
        };
        let config = match arch.as_str() {
            llama::ARCH => llama::from_gguf(&meta, &mut source, vocab)?,
            qwen3::ARCH => qwen3::from_gguf(&meta, &mut source, vocab)?,
            phi3::ARCH => phi3::from_gguf(&meta, &mut source, vocab)?,
            gemma3::ARCH => gemma3::from_gguf(&meta, &mut source, vocab)?,
            other => {
                return Err(LoadError::new(
                    path,
                    format!(
                    "architecture {other:?} is not supported (llama, qwen3, phi3 and gemma3 are)"
                ),
                ))
            }
        };
        limits::validate(&config, path, &limits::Fields::gguf(&arch))?;
        let model = build(config, &mut source)?;
        let id = |key: &str| {
            md.get(key).and_then(|v| {
                v.to_u32()
                    .ok()
                    .or_else(|| v.to_i32().ok().map(|x| x as u32))
            })
        };
        let text = |id: Option<u32>| id.and_then(|i| tokenizer.token(i)).unwrap_or_default();
        let bos = id("tokenizer.ggml.bos_token_id");
        let eos = id("tokenizer.ggml.eos_token_id");
        let template = match md
            .get("tokenizer.chat_template")
            .and_then(|v| v.to_string().ok())
        {
            Some(source) => Some(
                ChatTemplate::new(source, &text(bos), &text(eos))
                    .map_err(|e| LoadError::new(path, format!("tokenizer.chat_template: {e}")))?,
            ),
            None => None,
        };
        let add_bos = md
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.to_bool().ok())
            .unwrap_or(arch == gemma3::ARCH);
        let mut stops: Vec<u32> = [eos, id("tokenizer.ggml.eot_token_id")]
            .into_iter()
            .flatten()
            .collect();
        stops.extend(END_OF_TURN.iter().filter_map(|t| tokenizer.token_id(t)));
        stops.sort_unstable();
        stops.dedup();
        Ok(LocalModel {
            model,
            tokenizer,
            template,
            bos,
            add_bos,
            stops,
        })
    }

    fn load_safetensors(folder: &Path, dtype: DType, device: &Device) -> Result<Self, LoadError> {
        let cfg = hf::HfConfig::read(folder)?;
        let model_type = cfg.model_type().to_string();
        let (names, offset): (fn(&str) -> String, f64) = match model_type.as_str() {
            "llama" | "mistral" => (llama::hf_name, llama::NORM_OFFSET),
            "qwen3" => (qwen3::hf_name, qwen3::NORM_OFFSET),
            "phi3" => (phi3::hf_name, phi3::NORM_OFFSET),
            "gemma3" | "gemma3_text" => (gemma3::hf_name, gemma3::NORM_OFFSET),
            other => {
                return Err(LoadError::new(
                    &cfg.path,
                    format!(
                        "model_type {other:?} is not supported (llama, qwen3, phi3, gemma3 and gemma3_text are)"
                    ),
                ))
            }
        };
        let config = match model_type.as_str() {
            "qwen3" => qwen3::from_hf(&cfg)?,
            "phi3" => phi3::from_hf(&cfg)?,
            "gemma3" | "gemma3_text" => gemma3::from_hf(&cfg)?,
            _ => llama::from_hf(&cfg)?,
        };
        limits::validate(&config, &cfg.path, &limits::Fields::hf())?;
        let mut source = Source::safetensors(folder, names, offset, dtype, device)?;
        let model = build(config, &mut source)?;
        let tokenizer = Tokenizer::from_file(&folder.join("tokenizer.json"))?;
        let tc_path = folder.join("tokenizer_config.json");
        let tc: serde_json::Value = match std::fs::read_to_string(&tc_path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| LoadError::new(&tc_path, format!("not valid JSON: {e}")))?,
            Err(_) => serde_json::Value::Null,
        };
        let token_text = |key: &str| -> Option<String> {
            match tc.get(key)? {
                serde_json::Value::String(s) => Some(s.clone()),
                other => other.get("content")?.as_str().map(str::to_string),
            }
        };
        let bos_text = token_text("bos_token");
        let eos_text = token_text("eos_token");
        let template_source = match std::fs::read_to_string(folder.join("chat_template.jinja")) {
            Ok(t) => Some(t),
            Err(_) => tc
                .get("chat_template")
                .and_then(|v| v.as_str())
                .map(str::to_string),
        };
        let template = match template_source {
            Some(s) => Some(
                ChatTemplate::new(
                    &s,
                    bos_text.as_deref().unwrap_or(""),
                    eos_text.as_deref().unwrap_or(""),
                )
                .map_err(|e| LoadError::new(&tc_path, format!("chat_template: {e}")))?,
            ),
            None => None,
        };
        let bos = bos_text.as_deref().and_then(|t| tokenizer.token_id(t));
        let add_bos = tc
            .get("add_bos_token")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let mut stops: Vec<u32> = eos_text
            .as_deref()
            .and_then(|t| tokenizer.token_id(t))
            .into_iter()
            .collect();
        // generation_config.json's eos_token_id: one id or a list.
        if let Ok(text) = std::fs::read_to_string(folder.join("generation_config.json")) {
            if let Ok(gc) = serde_json::from_str::<serde_json::Value>(&text) {
                match gc.get("eos_token_id") {
                    Some(serde_json::Value::Array(ids)) => {
                        stops.extend(ids.iter().filter_map(|i| i.as_u64()).map(|i| i as u32))
                    }
                    Some(v) => stops.extend(v.as_u64().map(|i| i as u32)),
                    None => {}
                }
            }
        }
        stops.extend(END_OF_TURN.iter().filter_map(|t| tokenizer.token_id(t)));
        stops.sort_unstable();
        stops.dedup();
        Ok(LocalModel {
            model,
            tokenizer,
            template,
            bos,
            add_bos,
            stops,
        })
    }

    /// The prompt text of a chat: the model's template, or the messages as plain text
    /// for a model that has none (a base model).
    pub fn prompt_text(&self, messages: &[ChatMessage]) -> Result<String, String> {
        match &self.template {
            Some(t) => t.render(messages),
            None => Ok(chat::plain(messages)),
        }
    }

    /// The prompt's token ids, BOS first where the model wants one and the template did
    /// not write it.
    pub fn prompt_ids(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, String> {
        let text = self.prompt_text(messages)?;
        let mut ids = self.tokenizer.encode(&text)?;
        if let (true, Some(bos)) = (self.add_bos, self.bos) {
            if ids.first() != Some(&bos) {
                ids.insert(0, bos);
            }
        }
        Ok(ids)
    }
}

fn build(config: Config, source: &mut Source) -> Result<Transformer, LoadError> {
    let parts = source.parts(&config)?;
    let (device, dtype) = (source.device().clone(), source.dtype());
    let path = match source {
        Source::Gguf { path, .. } | Source::Safetensors { path, .. } => path.clone(),
    };
    Transformer::new(config, parts, &device, dtype)
        .map_err(|e| LoadError::new(&path, format!("assembling the model: {e}")))
}

/// A local model behind the generation seam.
pub struct LocalBackend {
    engine: Engine,
    fingerprint: String,
    endpoint: String,
    max_batch: usize,
    time_limit: Duration,
}

impl LocalBackend {
    /// Loads the model (on the engine's own thread) and starts serving it.
    pub fn load(settings: &LocalSettings) -> Result<Self, LoadError> {
        let fingerprint = fingerprint(settings)?;
        let engine = Engine::start(settings.clone(), settings.max_batch)?;
        Ok(LocalBackend {
            max_batch: engine.max_batch(),
            engine,
            fingerprint,
            endpoint: settings.path.display().to_string(),
            time_limit: settings.generation_timeout,
        })
    }

    /// Generates for `messages`, returning the completion and its timing; `ignore_eos`
    /// generates exactly `max_new_tokens` (for benchmarks).
    pub async fn run(
        &self,
        messages: &[ChatMessage],
        max_new_tokens: u32,
        ignore_eos: bool,
    ) -> Result<engine::Generation, GenerateError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.engine
            .submit(EngineRequest {
                messages: messages.to_vec(),
                max_new_tokens: max_new_tokens as usize,
                ignore_eos,
                time_limit: self.time_limit,
                reply,
            })
            .map_err(|message| GenerateError::Unavailable {
                endpoint: self.endpoint.clone(),
                message,
            })?;
        match answer.await {
            Ok(result) => result.map_err(|e| e.into_generate_error(&self.endpoint)),
            Err(_) => Err(GenerateError::Unavailable {
                endpoint: self.endpoint.clone(),
                message: "the model's thread stopped".into(),
            }),
        }
    }
}

#[async_trait]
impl Generator for LocalBackend {
    fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn max_in_flight(&self) -> usize {
        self.max_batch
    }

    async fn generate(&self, request: &ChatRequest) -> Result<Completion, GenerateError> {
        let started = Instant::now();
        let g = self
            .run(&request.messages, request.max_new_tokens, false)
            .await?;
        Ok(Completion {
            text: g.text,
            prompt_tokens: Some(g.prompt_tokens as u32),
            completion_tokens: Some(g.ids.len() as u32),
            elapsed: started.elapsed(),
            retries: 0,
            hit_limit: g.finish == engine::Finish::Length,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::parse_gib;

    #[test]
    fn a_kv_memory_limit_is_a_positive_number_of_gib() {
        assert_eq!(parse_gib("40"), Ok(40 << 30));
        assert_eq!(parse_gib(" 0.5 "), Ok(1 << 29));
        for bad in ["0", "-2", "", "lots", "NaN", "inf", "1e12"] {
            assert!(parse_gib(bad).is_err(), "{bad:?}");
        }
    }
}
