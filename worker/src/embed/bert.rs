//! The [`Encoder`] for BERT-family sentence encoders (BGE, MiniLM, e5): a local folder
//! with `config.json`, `model.safetensors` (or `pytorch_model.bin`) and `tokenizer.json`,
//! loaded with candle and run with a packed (unpadded) BERT forward pass: the native CPU
//! kernels of `embed::native` where the CPU has AVX2 and FMA, else candle's tensors
//! (`embed::packed`) on any device ([`Backend`]).
//!
//! The tokenizer's own padding and truncation are replaced: each input is truncated at
//! the resolved maximum length (special tokens included, as sentence-transformers does)
//! and never padded: a batch's sequences are packed end to end, and on the CPU attention
//! runs per sequence. So there a text's vector is bit-identical alone or in any batch
//! (`tests/embed_minilm.rs` checks it). That matters beyond tidiness: the embedding cache
//! shares vectors between jobs, and padded attention, which changes a vector's last bits
//! with its batch companions, made result rows depend on which job encoded a sentence
//! first (DESIGN.md invariant 4). On a GPU that holds to float rounding only: cuBLAS
//! chooses its kernels by a product's shape, which the batch sets, so attention runs
//! padded there (one product per layer for the whole batch instead of ~10 launches per
//! sequence, which left the GPU idle), and the fingerprint names the attention and the
//! precision. Inputs are sorted by length before batching and the vectors come back in
//! input order. Identical texts in one call are encoded once.

use super::config::BertConfig;
use super::native::{self, NativeBert};
use super::packed::{self, Attention, PackedBert};
use super::preset::{self, read_json, EncoderSettings, Pooling, Preset};
use super::{EmbedError, Encoder};
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use credence_core::device::ComputeDevice;
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// Version of the fingerprint recipe; bump it when what goes into a vector changes.
const FINGERPRINT_VERSION: &str = "credence-encoder-3";

/// Numeric precision of the weights and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// 32-bit floats.
    #[default]
    F32,
    /// 16-bit floats (CUDA).
    F16,
    /// bfloat16: on CUDA weights and activations; on a CPU with AVX-512 BF16 the native
    /// pass's dense products (inputs rounded to bfloat16, sums and all else in f32).
    Bf16,
}

impl Precision {
    fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::F16 => DType::F16,
            Precision::Bf16 => DType::BF16,
        }
    }

    /// `f32`, `f16` or `bf16`.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        }
    }
}

/// Which implementation runs the forward pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The native kernels where they run (CPU with AVX2 and FMA, f32), else candle.
    #[default]
    Auto,
    /// The native CPU kernels (`embed::native`); an error where they cannot run.
    Native,
    /// candle tensors on the chosen device.
    Candle,
}

impl Backend {
    /// `auto`, `native` or `candle`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Backend::Auto),
            "native" => Some(Backend::Native),
            "candle" => Some(Backend::Candle),
            _ => None,
        }
    }

    /// The name [`Backend::parse`] reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Native => "native",
            Backend::Candle => "candle",
        }
    }
}

/// How to run an encoder.
#[derive(Debug, Clone)]
pub struct EncoderOptions {
    /// Sentences per forward pass.
    pub batch_size: usize,
    /// Where the model runs.
    pub device: Device,
    /// Weight and activation precision; f16 needs CUDA, bf16 CUDA or a CPU with AVX-512
    /// BF16 (the native backend).
    pub precision: Precision,
    /// Which implementation runs the forward pass.
    pub backend: Backend,
    /// How the candle backend's attention runs over a batch.
    pub attention: Attention,
}

impl Default for EncoderOptions {
    fn default() -> Self {
        EncoderOptions {
            batch_size: 64,
            device: Device::Cpu,
            precision: Precision::F32,
            backend: Backend::Auto,
            attention: Attention::Auto,
        }
    }
}

/// The forward pass in use.
enum Forward {
    Native(NativeBert),
    Candle(PackedBert),
}

/// candle's device for `device`. CUDA needs the `cuda` cargo feature.
pub fn device(device: ComputeDevice) -> Result<Device, EmbedError> {
    let Some(cuda_ordinal) = device.cuda_ordinal() else {
        return Ok(Device::Cpu);
    };
    if !cfg!(feature = "cuda") {
        return Err(EmbedError::Device {
            message: format!(
                "device {:?} needs credence built with `--features cuda` (candle's CUDA backend)",
                device.to_string()
            ),
        });
    }
    Device::new_cuda(cuda_ordinal).map_err(|e| EmbedError::Device {
        message: format!("{device}: {e}"),
    })
}

/// A BERT-family sentence encoder loaded from a local folder.
pub struct BertEncoder {
    model: Forward,
    tokenizer: Tokenizer,
    settings: EncoderSettings,
    options: EncoderOptions,
    dim: usize,
    fingerprint: String,
    folder: PathBuf,
}

impl BertEncoder {
    /// Loads the encoder in `folder`. `preset` (if known) fixes pooling and prefix; see
    /// [`EncoderSettings::resolve`] for how the folder's files fill in the rest.
    pub fn load(
        folder: &Path,
        preset: Option<&Preset>,
        options: EncoderOptions,
    ) -> Result<Self, EmbedError> {
        if options.batch_size == 0 {
            return Err(EmbedError::Device {
                message: "batch size must be at least 1".into(),
            });
        }
        // bf16 on a CPU: the native pass's products only, where AVX-512 BF16 runs them.
        let cpu_bf16 = options.device.is_cpu() && options.precision == Precision::Bf16;
        let cpu_bf16_runs =
            native::supported() && native::supports_bf16() && options.backend != Backend::Candle;
        if options.precision != Precision::F32
            && !options.device.is_cuda()
            && !(cpu_bf16 && cpu_bf16_runs)
        {
            return Err(EmbedError::Device {
                message: format!(
                    "{} precision needs a CUDA device (bf16 also runs on a CPU with AVX-512 \
                     BF16, with the native or auto backend); this CPU runs f32",
                    options.precision.as_str()
                ),
            });
        }
        let config_path = folder.join("config.json");
        let config: BertConfig = read_json(&config_path)?;
        if let Some(t) = config.model_type.as_deref().filter(|t| *t != "bert") {
            return Err(EmbedError::Unsupported {
                path: config_path,
                message: format!(
                    "model_type {t:?}; only BERT-family encoders (\"bert\") load here"
                ),
            });
        }
        if config.position_embedding_type != "absolute" {
            return Err(EmbedError::Unsupported {
                path: config_path,
                message: format!(
                    "position_embedding_type {:?}; only \"absolute\" is implemented",
                    config.position_embedding_type
                ),
            });
        }
        let settings = EncoderSettings::resolve(preset, folder, config.max_position_embeddings)?;
        let tokenizer_path = folder.join("tokenizer.json");
        let tokenizer = load_tokenizer(&tokenizer_path, settings.max_len)?;

        // The native pass converts f32 weights itself.
        let dtype = if cpu_bf16 {
            DType::F32
        } else {
            options.precision.dtype()
        };
        let safetensors = folder.join("model.safetensors");
        let pth = folder.join("pytorch_model.bin");
        let (weights_sha, vb) = if safetensors.is_file() {
            let bytes = read_file(&safetensors)?;
            let sha = Sha256::digest(&bytes);
            let vb = VarBuilder::from_buffered_safetensors(bytes, dtype, &options.device).map_err(
                |source| EmbedError::Weights {
                    path: safetensors.clone(),
                    source,
                },
            )?;
            (sha, vb)
        } else if pth.is_file() {
            let sha = Sha256::digest(read_file(&pth)?);
            let vb = VarBuilder::from_pth(&pth, dtype, &options.device).map_err(|source| {
                EmbedError::Weights {
                    path: pth.clone(),
                    source,
                }
            })?;
            (sha, vb)
        } else {
            return Err(EmbedError::MissingFile {
                folder: folder.to_path_buf(),
                what: "model.safetensors or pytorch_model.bin",
            });
        };
        let weights_path = if safetensors.is_file() {
            safetensors
        } else {
            pth
        };
        let model = PackedBert::load(vb, &config, options.attention).map_err(|source| {
            EmbedError::Weights {
                path: weights_path.clone(),
                source,
            }
        })?;
        let native_fits = options.device.is_cpu()
            && native::supported()
            && (options.precision == Precision::F32 || cpu_bf16);
        let model = match options.backend {
            Backend::Candle => Forward::Candle(model),
            Backend::Auto if !native_fits => Forward::Candle(model),
            Backend::Native if !native_fits => {
                return Err(EmbedError::Device {
                    message: "the native backend runs on a CPU with AVX2 and FMA, in f32 \
                              (or bf16 with AVX-512 BF16); use --backend candle (or auto) \
                              here"
                        .into(),
                })
            }
            Backend::Auto | Backend::Native => {
                Forward::Native(NativeBert::from_candle(&model, cpu_bf16).map_err(|source| {
                    EmbedError::Weights {
                        path: weights_path,
                        source,
                    }
                })?)
            }
        };
        // What made a vector beyond the weights: the pass, and for candle its attention
        // and precision where they are not the CPU's (per sequence, f32).
        let backend = match &model {
            Forward::Native(_) if cpu_bf16 => "native-bf16-products".to_string(),
            Forward::Native(_) => "native-avx2-fma".to_string(),
            Forward::Candle(m) => {
                let mut name = "candle".to_string();
                if m.padded() {
                    name.push_str("-padded");
                }
                if options.precision != Precision::F32 {
                    name = format!("{name}-{}", options.precision.as_str());
                }
                name
            }
        };

        let config_bytes = read_file(&config_path)?;
        let tokenizer_bytes = read_file(&tokenizer_path)?;
        let max_len = settings.max_len.to_string();
        // The backend is part of what made a vector: the native and candle passes, the
        // per-sequence and padded attentions, f32 and half precision agree only to float
        // rounding.
        let parts: [&[u8]; 9] = [
            FINGERPRINT_VERSION.as_bytes(),
            backend.as_bytes(),
            &weights_sha[..],
            &config_bytes,
            &tokenizer_bytes,
            settings.pooling.as_str().as_bytes(),
            settings.prefix.as_bytes(),
            max_len.as_bytes(),
            b"l2",
        ];
        let mut h = Sha256::new();
        for part in parts {
            // Length-prefixed so that no two different part lists hash alike.
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        let fingerprint = hex::encode(h.finalize());
        tracing::info!(
            folder = %folder.display(),
            pooling = settings.pooling.as_str(),
            prefix = %settings.prefix,
            max_len = settings.max_len,
            backend = %backend,
            fingerprint = %&fingerprint[..12],
            "encoder loaded"
        );
        Ok(BertEncoder {
            model,
            tokenizer,
            settings,
            dim: config.hidden_size,
            options,
            fingerprint,
            folder: folder.to_path_buf(),
        })
    }

    /// Pooling, prefix and maximum length in use.
    pub fn settings(&self) -> &EncoderSettings {
        &self.settings
    }

    /// Sentences per forward pass.
    pub fn batch_size(&self) -> usize {
        self.options.batch_size
    }

    /// Changes the number of sentences per forward pass (at least 1).
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.options.batch_size = batch_size.max(1);
    }

    /// Word-piece ids of each text after prefix and truncation, special tokens included.
    pub fn token_ids(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, EmbedError> {
        let inputs: Vec<String> = texts
            .iter()
            .map(|t| format!("{}{t}", self.settings.prefix))
            .collect();
        let encodings =
            self.tokenizer
                .encode_batch(inputs, true)
                .map_err(|e| EmbedError::Tokenizer {
                    path: self.folder.join("tokenizer.json"),
                    message: e.to_string(),
                })?;
        Ok(encodings
            .into_iter()
            .map(|e| e.get_ids().to_vec())
            .collect())
    }

    /// One forward pass over a batch of sequences (packed, unpadded); one unit vector
    /// per sequence.
    fn encode_batch(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let lengths: Vec<usize> = batch.iter().map(|s| s.len()).collect();
        let cls = self.settings.pooling == Pooling::Cls;
        match &self.model {
            Forward::Native(model) => {
                let states = model.forward(batch)?;
                Ok(native::pool_normalised(&states, self.dim, &lengths, cls))
            }
            Forward::Candle(model) => {
                let states = model.forward(batch)?;
                let pooled = packed::pool(&states, &lengths, cls)?;
                packed::l2_normalise(&pooled)?.to_vec2::<f32>()
            }
        }
    }

    /// The backend running the forward pass: `native` or `candle`.
    pub fn backend(&self) -> Backend {
        match self.model {
            Forward::Native(_) => Backend::Native,
            Forward::Candle(_) => Backend::Candle,
        }
    }
}

impl Encoder for BertEncoder {
    fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Each distinct text once.
        let mut first: HashMap<&str, usize> = HashMap::with_capacity(texts.len());
        let mut distinct: Vec<&str> = Vec::new();
        let slot: Vec<usize> = texts
            .iter()
            .map(|t| {
                *first.entry(*t).or_insert_with(|| {
                    distinct.push(*t);
                    distinct.len() - 1
                })
            })
            .collect();
        let ids = self.token_ids(&distinct)?;
        // Longest first, ties in input order.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); ids.len()];
        let _span = tracing::debug_span!("encode", n = distinct.len()).entered();
        let chunks: Vec<&[usize]> = order.chunks(self.options.batch_size).collect();
        let run = |chunk: &&[usize]| {
            let batch: Vec<&[u32]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            self.encode_batch(&batch).map_err(EmbedError::Model)
        };
        // On CPU, batches run side by side on the rayon pool (candle's matmuls share the
        // same pool), so the per-sentence attention and the element-wise layers use
        // every core too; with one thread this is a plain loop.
        let outputs: Vec<Vec<Vec<f32>>> = if self.options.device.is_cpu() {
            chunks.par_iter().map(run).collect::<Result<_, _>>()?
        } else {
            chunks.iter().map(run).collect::<Result<_, _>>()?
        };
        for (chunk, out) in chunks.iter().zip(outputs) {
            for (&i, v) in chunk.iter().zip(out) {
                vectors[i] = v;
            }
        }
        Ok(slot.into_iter().map(|s| vectors[s].clone()).collect())
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|source| EmbedError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The folder's tokenizer with its padding removed (batches are packed, not padded) and its
/// truncation set to `max_len` (a MiniLM tokenizer.json says 128; sentence-transformers
/// uses 256).
fn load_tokenizer(path: &Path, max_len: usize) -> Result<Tokenizer, EmbedError> {
    if !path.is_file() {
        return Err(EmbedError::MissingFile {
            folder: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            what: "tokenizer.json",
        });
    }
    let tok_err = |e: tokenizers::Error| EmbedError::Tokenizer {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut tokenizer = Tokenizer::from_file(path).map_err(tok_err)?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            direction: TruncationDirection::Right,
            max_length: max_len,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
        }))
        .map_err(tok_err)?;
    Ok(tokenizer)
}

/// The preset named like the folder, if any (`models/all-MiniLM-L6-v2` is MiniLM).
pub fn preset_of_folder(folder: &Path) -> Option<&'static Preset> {
    folder
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(preset::preset)
}
