//! Reading a model's weights, GGUF or safetensors, into [`model::Parts`].
//!
//! Tensors are asked for by their GGUF base names (`blk.3.attn_q`); a safetensors model
//! maps them to its Hugging Face names through its architecture's table. The block layout
//! (fused projections, query/key norms, Gemma's extra norms) is read from which tensors
//! the file holds, so the architecture files only describe what the file cannot say.

use super::limits::{self, Limit};
use super::model::{Block, Config, Embedding, GateUp, Linear, Norm, Parts, Qkv, Weight};
use super::qmatmul::QMatrix;
use candle_core::quantized::{gguf_file, GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A weight that could not be read, naming the file and the tensor.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct LoadError {
    /// The file or folder.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

impl LoadError {
    /// An error about `path`.
    pub fn new(path: &Path, message: impl Into<String>) -> Self {
        LoadError {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// GGUF metadata of one architecture (`{arch}.{key}` lookups) and of the file.
pub struct Meta<'a> {
    /// The file's metadata.
    pub values: &'a HashMap<String, gguf_file::Value>,
    /// `general.architecture`.
    pub arch: &'a str,
    /// The file, for errors.
    pub path: &'a Path,
}

impl Meta<'_> {
    fn get(&self, key: &str) -> Option<&gguf_file::Value> {
        self.values
            .get(&format!("{}.{key}", self.arch))
            .or_else(|| self.values.get(key))
    }

    fn missing(&self, key: &str) -> LoadError {
        LoadError::new(
            self.path,
            format!("GGUF metadata has no {}.{key}", self.arch),
        )
    }

    /// An unsigned integer, if present.
    pub fn usize_opt(&self, key: &str) -> Result<Option<usize>, LoadError> {
        match self.u64_opt(key)? {
            None => Ok(None),
            Some(x) => usize::try_from(x).map(Some).map_err(|_| {
                LoadError::new(
                    self.path,
                    format!("{} = {x} does not fit usize", self.field(key)),
                )
            }),
        }
    }

    /// The key as the file spells it (`{arch}.{key}`, or `key` where only that is set).
    fn field(&self, key: &str) -> String {
        let full = format!("{}.{key}", self.arch);
        if self.values.contains_key(&full) || !self.values.contains_key(key) {
            full
        } else {
            key.to_string()
        }
    }

    fn u64_opt(&self, key: &str) -> Result<Option<u64>, LoadError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .to_u64()
                .or_else(|_| v.to_u32().map(u64::from))
                .or_else(|_| v.to_i32().map(|x| x.max(0) as u64))
                .or_else(|_| v.to_i64().map(|x| x.max(0) as u64))
                .map(Some)
                .map_err(|e| LoadError::new(self.path, format!("{}: {e}", self.field(key)))),
        }
    }

    /// A size under `{arch}.{key}` within `limit` (the error names the key and the limit).
    pub fn size(&self, key: &str, limit: &Limit) -> Result<usize, LoadError> {
        self.size_opt(key, limit)?.ok_or_else(|| self.missing(key))
    }

    /// A size within `limit`, if present.
    pub fn size_opt(&self, key: &str, limit: &Limit) -> Result<Option<usize>, LoadError> {
        match self.u64_opt(key)? {
            None => Ok(None),
            Some(x) => limit.check(self.path, &self.field(key), x).map(Some),
        }
    }

    /// The head width of a model that does not state it: `hidden / heads`, within
    /// [`limits::HEAD_DIM`].
    pub fn head_dim_of(&self, hidden: usize, heads: usize) -> Result<usize, LoadError> {
        let field = format!(
            "{} / {}",
            self.field("embedding_length"),
            self.field("attention.head_count")
        );
        limits::HEAD_DIM.check(self.path, &field, (hidden / heads.max(1)) as u64)
    }

    /// A float, if present.
    pub fn f32_opt(&self, key: &str) -> Result<Option<f32>, LoadError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .to_f32()
                .or_else(|_| v.to_f64().map(|x| x as f32))
                .map(Some)
                .map_err(|e| LoadError::new(self.path, format!("{}.{key}: {e}", self.arch))),
        }
    }

    /// A float under `{arch}.{key}`.
    pub fn f32(&self, key: &str) -> Result<f32, LoadError> {
        self.f32_opt(key)?.ok_or_else(|| self.missing(key))
    }
}

/// Where tensors come from.
pub enum Source {
    /// A GGUF file.
    Gguf {
        /// Its path.
        path: PathBuf,
        /// The open file.
        file: File,
        /// Its header.
        content: gguf_file::Content,
        /// Where the weights go.
        device: Device,
    },
    /// A safetensors folder.
    Safetensors {
        /// The folder.
        path: PathBuf,
        /// The memory-mapped tensors.
        vb: candle_nn::VarBuilder<'static>,
        /// Maps a GGUF base name to the folder's name (without `.weight`).
        names: fn(&str) -> String,
        /// Prefix of every name (`language_model.` for Gemma 3's multimodal checkpoints).
        prefix: String,
        /// Added to every norm weight (Gemma stores `w` and multiplies by `1 + w`).
        norm_offset: f64,
        /// Weight and activation dtype.
        dtype: DType,
        /// Where the weights go.
        device: Device,
    },
}

impl Source {
    /// Opens a GGUF file and reads its header.
    pub fn gguf(path: &Path, device: &Device) -> Result<Self, LoadError> {
        let mut file =
            File::open(path).map_err(|e| LoadError::new(path, format!("cannot open: {e}")))?;
        // candle's reader divides by the file's `general.alignment` (a panic when it is 0):
        // a bad header is this file's error, not the worker's end.
        let content = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            gguf_file::Content::read(&mut file)
        }))
        .map_err(|_| LoadError::new(path, "not a readable GGUF file: its header is malformed"))?
        .map_err(|e| LoadError::new(path, format!("not a readable GGUF file: {e}")))?;
        let file_len = file
            .metadata()
            .map_err(|e| LoadError::new(path, format!("cannot stat: {e}")))?
            .len();
        check_tensor_infos(path, &content, file_len)?;
        Ok(Source::Gguf {
            path: path.to_path_buf(),
            file,
            content,
            device: device.clone(),
        })
    }

    /// Memory-maps the `*.safetensors` files of a folder.
    pub fn safetensors(
        folder: &Path,
        names: fn(&str) -> String,
        norm_offset: f64,
        dtype: DType,
        device: &Device,
    ) -> Result<Self, LoadError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
            .map_err(|e| LoadError::new(folder, format!("cannot read the folder: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(LoadError::new(folder, "holds no *.safetensors file"));
        }
        if let Some(odd) = files.iter().find(|f| !f.is_file()) {
            return Err(LoadError::new(odd, "is not a regular file"));
        }
        // SAFETY: the files are mapped read-only; credence does not write them while the
        // model is loaded (the same contract as every safetensors loader).
        let vb = unsafe { candle_nn::VarBuilder::from_mmaped_safetensors(&files, dtype, device) }
            .map_err(|e| LoadError::new(folder, format!("cannot map the weights: {e}")))?;
        let prefix = if vb.contains_tensor("language_model.model.embed_tokens.weight") {
            "language_model.".to_string()
        } else {
            String::new()
        };
        Ok(Source::Safetensors {
            path: folder.to_path_buf(),
            vb,
            names,
            prefix,
            norm_offset,
            dtype,
            device: device.clone(),
        })
    }

    fn path(&self) -> &Path {
        match self {
            Source::Gguf { path, .. } | Source::Safetensors { path, .. } => path,
        }
    }

    /// The activation dtype of a model from this source.
    pub fn dtype(&self) -> DType {
        match self {
            Source::Gguf { .. } => DType::F32,
            Source::Safetensors { dtype, .. } => *dtype,
        }
    }

    /// The device.
    pub fn device(&self) -> &Device {
        match self {
            Source::Gguf { device, .. } | Source::Safetensors { device, .. } => device,
        }
    }

    fn hf_name(&self, base: &str, suffix: &str) -> String {
        match self {
            Source::Safetensors { names, prefix, .. } => {
                format!("{prefix}{}.{suffix}", names(base))
            }
            Source::Gguf { .. } => format!("{base}.{suffix}"),
        }
    }

    /// Whether the model has a tensor `{base}.weight`.
    pub fn has(&self, base: &str) -> bool {
        self.has_suffix(base, "weight")
    }

    fn has_suffix(&self, base: &str, suffix: &str) -> bool {
        match self {
            Source::Gguf { content, .. } => content
                .tensor_infos
                .contains_key(&format!("{base}.{suffix}")),
            Source::Safetensors { vb, .. } => vb.contains_tensor(&self.hf_name(base, suffix)),
        }
    }

    fn err(&self, name: &str, e: impl std::fmt::Display) -> LoadError {
        LoadError::new(self.path(), format!("tensor {name}: {e}"))
    }

    /// A GGUF tensor as stored.
    fn qtensor(&mut self, name: &str) -> Result<QTensor, LoadError> {
        let Source::Gguf {
            file,
            content,
            device,
            path,
        } = self
        else {
            unreachable!("qtensor is only called on GGUF sources");
        };
        content
            .tensor(file, name, device)
            .map_err(|e| LoadError::new(path, format!("tensor {name}: {e}")))
    }

    /// The matrix product of a GGUF weight. On CPU, Q8_0 and Q4_1 run on credence's
    /// batched kernels ([`QMatrix`]), and Q5_0/Q5_1 (scalar in candle) are requantised to
    /// Q8_0 for them; K-quants and floats, and every type on CUDA, run on candle's.
    fn weight(&self, q: QTensor, name: &str, device: &Device) -> Result<Weight, LoadError> {
        let ours = matches!(
            q.dtype(),
            GgmlDType::Q8_0 | GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1
        );
        if !device.is_cpu() || !ours {
            let w = QMatMul::from_arc(Arc::new(q)).map_err(|e| self.err(name, e))?;
            return Ok(Weight::Candle(w));
        }
        let (rows, cols) = q.shape().dims2().map_err(|e| self.err(name, e))?;
        let matrix = match q.dtype() {
            GgmlDType::Q8_0 => {
                QMatrix::from_q8_0(rows, cols, &q.data().map_err(|e| self.err(name, e))?)
            }
            GgmlDType::Q4_1 => {
                QMatrix::from_q4_1(rows, cols, &q.data().map_err(|e| self.err(name, e))?)
            }
            _ => {
                let dense = q.dequantize(device).map_err(|e| self.err(name, e))?;
                let q8 =
                    QTensor::quantize(&dense, GgmlDType::Q8_0).map_err(|e| self.err(name, e))?;
                QMatrix::from_q8_0(rows, cols, &q8.data().map_err(|e| self.err(name, e))?)
            }
        }
        .map_err(|e| self.err(name, e))?;
        Ok(Weight::Cpu(Arc::new(matrix)))
    }

    /// A dense tensor of the given shape, in the source's dtype.
    fn dense(&self, base: &str, suffix: &str, shape: &[usize]) -> Result<Tensor, LoadError> {
        let Source::Safetensors { vb, .. } = self else {
            unreachable!("dense is only called on safetensors sources");
        };
        let name = self.hf_name(base, suffix);
        vb.get(shape, &name).map_err(|e| self.err(&name, e))
    }

    /// A dense tensor whose shape the file decides.
    fn dense_any(&self, base: &str, suffix: &str) -> Result<Tensor, LoadError> {
        let Source::Safetensors { vb, .. } = self else {
            unreachable!("dense_any is only called on safetensors sources");
        };
        let name = self.hf_name(base, suffix);
        vb.get_unchecked(&name).map_err(|e| self.err(&name, e))
    }

    /// The dimensions of tensor `{base}.{suffix}` as the GGUF header states them (None
    /// for safetensors, whose shapes are known once a tensor is mapped).
    fn gguf_dims(&self, base: &str, suffix: &str) -> Option<Vec<usize>> {
        match self {
            Source::Gguf { content, .. } => content
                .tensor_infos
                .get(&format!("{base}.{suffix}"))
                .map(|t| t.shape.dims().to_vec()),
            Source::Safetensors { .. } => None,
        }
    }

    /// A projection `{base}.weight` of shape `[out, inp]` (and `{base}.bias` of `[out]`
    /// if present); the shape is checked before a GGUF tensor is read.
    pub fn linear(&mut self, base: &str, out: usize, inp: usize) -> Result<Linear, LoadError> {
        self.linear_shaped(base, &|d: &[usize]| limits::expect_shape(d, &[out, inp]))
    }

    /// A projection whose shape `expect` checks (an error says what is wrong with it).
    fn linear_shaped(
        &mut self,
        base: &str,
        expect: &dyn Fn(&[usize]) -> Result<(), String>,
    ) -> Result<Linear, LoadError> {
        let name = format!("{base}.weight");
        if let Some(dims) = self.gguf_dims(base, "weight") {
            expect(&dims).map_err(|e| self.err(&name, e))?;
        }
        let linear = self.linear_unchecked(base)?;
        let dims = match &linear.weight {
            Weight::Candle(QMatMul::QTensor(q)) => q.shape().dims().to_vec(),
            Weight::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => t.dims().to_vec(),
            Weight::Cpu(q) => vec![q.rows(), q.cols()],
        };
        expect(&dims).map_err(|e| self.err(&name, e))?;
        let out = dims[0];
        if let Some(b) = &linear.bias {
            limits::expect_shape(b.dims(), &[out])
                .map_err(|e| self.err(&format!("{base}.bias"), e))?;
        }
        Ok(linear)
    }

    fn linear_unchecked(&mut self, base: &str) -> Result<Linear, LoadError> {
        match self {
            Source::Gguf { device, .. } => {
                let device = device.clone();
                let name = format!("{base}.weight");
                let q = self.qtensor(&name)?;
                let weight = self.weight(q, &name, &device)?;
                let bias_name = format!("{base}.bias");
                let bias = match self {
                    Source::Gguf { content, .. }
                        if content.tensor_infos.contains_key(&bias_name) =>
                    {
                        let b = self.qtensor(&bias_name)?;
                        if b.shape().dims().len() != 1 {
                            return Err(self.err(&bias_name, "is not a vector"));
                        }
                        Some(b.dequantize(&device).map_err(|e| self.err(&bias_name, e))?)
                    }
                    _ => None,
                };
                Ok(Linear { weight, bias })
            }
            Source::Safetensors { .. } => {
                let w = self.dense_any(base, "weight")?;
                let bias = if self.has_suffix(base, "bias") {
                    Some(self.dense_any(base, "bias")?)
                } else {
                    None
                };
                Ok(Linear {
                    weight: Weight::Candle(QMatMul::Tensor(w)),
                    bias,
                })
            }
        }
    }

    /// An RMSNorm weight `{base}.weight` of length `dim`, with the source's offset added.
    pub fn norm(&mut self, base: &str, dim: usize) -> Result<Norm, LoadError> {
        let name = format!("{base}.weight");
        if let Some(dims) = self.gguf_dims(base, "weight") {
            limits::expect_shape(&dims, &[dim]).map_err(|e| self.err(&name, e))?;
        }
        let w = match self {
            Source::Gguf { device, .. } => {
                let device = device.clone();
                self.qtensor(&name)?
                    .dequantize(&device)
                    .map_err(|e| self.err(&name, e))?
            }
            Source::Safetensors { norm_offset, .. } => {
                let offset = *norm_offset;
                let w = self.dense(base, "weight", &[dim])?;
                if offset != 0.0 {
                    // In f32, then back: Gemma computes (1 + w) in float32.
                    let dtype = w.dtype();
                    (w.to_dtype(DType::F32).and_then(|w| w + offset))
                        .and_then(|w| w.to_dtype(dtype))
                        .map_err(|e| self.err(&name, e))?
                } else {
                    w
                }
            }
        };
        if w.elem_count() != dim {
            return Err(self.err(
                &name,
                format!("has {} values, expected {dim}", w.elem_count()),
            ));
        }
        let w = w
            .reshape(dim)
            .and_then(|w| w.to_dtype(self.dtype()))
            .map_err(|e| self.err(&name, e))?;
        Ok(Norm(w))
    }

    /// The token embedding, and the LM head (tied to it when `output` is absent).
    fn embedding_and_head(
        &mut self,
        vocab: usize,
        hidden: usize,
    ) -> Result<(Embedding, Linear), LoadError> {
        match self {
            Source::Gguf { device, .. } => {
                let device = device.clone();
                if let Some(dims) = self.gguf_dims("token_embd", "weight") {
                    limits::expect_shape(&dims, &[vocab, hidden])
                        .map_err(|e| self.err("token_embd.weight", e))?;
                }
                let table = Arc::new(self.qtensor("token_embd.weight")?);
                let head = if self.has("output") {
                    self.linear("output", vocab, hidden)?
                } else {
                    // Tied: the embedding table again, as the LM head's matrix.
                    let again = self.qtensor("token_embd.weight")?;
                    Linear {
                        weight: self.weight(again, "token_embd.weight", &device)?,
                        bias: None,
                    }
                };
                Ok((Embedding::Quantized(table), head))
            }
            Source::Safetensors { .. } => {
                let table = self.dense("token_embd", "weight", &[vocab, hidden])?;
                let head = if self.has("output") {
                    self.linear("output", vocab, hidden)?
                } else {
                    Linear {
                        weight: Weight::Candle(QMatMul::Tensor(table.clone())),
                        bias: None,
                    }
                };
                Ok((Embedding::Dense(table), head))
            }
        }
    }

    /// Every weight of a model of configuration `c`, each tensor's shape checked
    /// against what `c` implies before it is read (the MLP's width, which no
    /// configuration field states everywhere, is the down projection's input width).
    pub fn parts(&mut self, c: &Config) -> Result<Parts, LoadError> {
        let (vocab, hidden, head_dim) = (c.vocab, c.hidden, c.head_dim);
        let at = |e: String| LoadError::new(self.path(), e);
        let q_out = limits::mul(c.heads, head_dim, "heads x head_dim").map_err(at)?;
        let kv_out = limits::mul(c.kv_heads, head_dim, "kv_heads x head_dim").map_err(at)?;
        let qkv_out = limits::mul(kv_out, 2, "2 x kv_heads x head_dim")
            .and_then(|kv2| {
                q_out
                    .checked_add(kv2)
                    .ok_or_else(|| "qkv rows overflow".into())
            })
            .map_err(at)?;
        let (embedding, lm_head) = self.embedding_and_head(vocab, hidden)?;
        let mut blocks = Vec::with_capacity(c.layers);
        for i in 0..c.layers {
            let p = |s: &str| format!("blk.{i}.{s}");
            let qkv = if self.has(&p("attn_qkv")) {
                Qkv::Fused(self.linear(&p("attn_qkv"), qkv_out, hidden)?)
            } else {
                Qkv::Separate(
                    self.linear(&p("attn_q"), q_out, hidden)?,
                    self.linear(&p("attn_k"), kv_out, hidden)?,
                    self.linear(&p("attn_v"), kv_out, hidden)?,
                )
            };
            let qk_norm = if self.has(&p("attn_q_norm")) {
                Some((
                    self.norm(&p("attn_q_norm"), head_dim)?,
                    self.norm(&p("attn_k_norm"), head_dim)?,
                ))
            } else {
                None
            };
            let down = self.linear_shaped(&p("ffn_down"), &|d: &[usize]| match d {
                [rows, cols]
                    if *rows == hidden && (1..=limits::FFN.max as usize).contains(cols) =>
                {
                    Ok(())
                }
                _ => Err(format!(
                    "has shape {d:?}, expected [hidden = {hidden}, an MLP width of 1..={}]",
                    limits::FFN.max
                )),
            })?;
            let ffn = down
                .weight
                .in_dim()
                .map_err(|e| self.err(&p("ffn_down.weight"), e))?;
            let gate_up = if self.has(&p("ffn_gate")) {
                GateUp::Separate(
                    self.linear(&p("ffn_gate"), ffn, hidden)?,
                    self.linear(&p("ffn_up"), ffn, hidden)?,
                )
            } else {
                GateUp::Fused(self.linear(&p("ffn_up"), 2 * ffn, hidden)?)
            };
            let post_attn_norm = if self.has(&p("post_attention_norm")) {
                Some(self.norm(&p("post_attention_norm"), hidden)?)
            } else {
                None
            };
            let post_ffn_norm = if self.has(&p("post_ffw_norm")) {
                Some(self.norm(&p("post_ffw_norm"), hidden)?)
            } else {
                None
            };
            blocks.push(Block {
                attn_norm: self.norm(&p("attn_norm"), hidden)?,
                qkv,
                qk_norm,
                o: self.linear(&p("attn_output"), hidden, q_out)?,
                post_attn_norm,
                ffn_norm: self.norm(&p("ffn_norm"), hidden)?,
                gate_up,
                down,
                post_ffn_norm,
            });
        }
        let final_norm = self.norm("output_norm", hidden)?;
        Ok(Parts {
            embedding,
            blocks,
            final_norm,
            lm_head,
        })
    }

    /// A small 1-D f32 tensor from a GGUF file (rope frequency factors), if present.
    pub fn gguf_vector(&mut self, name: &str) -> Result<Option<Vec<f32>>, LoadError> {
        match self {
            Source::Gguf {
                content, device, ..
            } => {
                if !content.tensor_infos.contains_key(name) {
                    return Ok(None);
                }
                let device = device.clone();
                let t = self.qtensor(name)?;
                if t.shape().dims().len() != 1 {
                    return Err(self.err(
                        name,
                        format!("has shape {:?}, expected a vector", t.shape().dims()),
                    ));
                }
                let v = t
                    .dequantize(&device)
                    .and_then(|t| t.flatten_all())
                    .and_then(|t| t.to_vec1::<f32>())
                    .map_err(|e| self.err(name, e))?;
                Ok(Some(v))
            }
            Source::Safetensors { .. } => Ok(None),
        }
    }
}

/// Checks every tensor a GGUF header lists before any is read: its dimensions multiply
/// without overflow into whole blocks of its type, and its bytes lie inside the file.
/// candle's own check computes the element count in unchecked arithmetic (it wraps in a
/// release build, and a wrapped count passed the file-size check).
fn check_tensor_infos(
    path: &Path,
    content: &gguf_file::Content,
    file_len: u64,
) -> Result<(), LoadError> {
    for (name, info) in &content.tensor_infos {
        let err = |m: String| LoadError::new(path, format!("tensor {name}: {m}"));
        let dtype = info.ggml_dtype;
        let bytes = limits::tensor_bytes(info.shape.dims(), dtype.block_size(), dtype.type_size())
            .map_err(err)?;
        let end = content
            .tensor_data_offset
            .checked_add(info.offset)
            .and_then(|start| start.checked_add(bytes as u64));
        match end {
            Some(end) if end <= file_len => {}
            _ => {
                return Err(err(format!(
                    "{bytes} bytes at offset {} + {} do not fit the file's {file_len} bytes",
                    content.tensor_data_offset, info.offset
                )))
            }
        }
    }
    Ok(())
}

/// The Hugging Face name of a GGUF base name in the Llama family's layout
/// (`model.layers.N.self_attn.q_proj`), which Qwen3 and Phi-3 share; Gemma 3 renames its
/// norms and Phi-3 its fused projections on top of it.
pub fn hf_llama_name(base: &str) -> String {
    match base {
        "token_embd" => return "model.embed_tokens".into(),
        "output_norm" => return "model.norm".into(),
        "output" => return "lm_head".into(),
        _ => {}
    }
    let Some(rest) = base.strip_prefix("blk.") else {
        return base.to_string();
    };
    let (layer, part) = rest.split_once('.').unwrap_or((rest, ""));
    let hf = match part {
        "attn_norm" => "input_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_qkv" => "self_attn.qkv_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_norm" => "post_attention_layernorm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        other => other,
    };
    format!("model.layers.{layer}.{hf}")
}
