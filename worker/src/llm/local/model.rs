//! The decoder-only transformer every local architecture is an instance of: token
//! embedding, pre-norm blocks of grouped-query attention and a gated MLP, a final norm and
//! the LM head. What differs between Llama, Qwen3, Phi-3 and Gemma 3 is data in
//! [`Config`] and which optional weights a block holds ([`Block`]), filled by the
//! architecture's own file ([`super::llama`], [`super::qwen3`], [`super::phi3`],
//! [`super::gemma3`]).
//!
//! Written on candle tensors so one code runs on CPU and CUDA. A prompt is prefilled into
//! its own KV cache ([`SeqCache`]); a decode step runs the matrix products of every
//! sequence in flight as one batch (each weight is read once per step, not once per
//! sequence). Its attention runs either per sequence over each one's own cache
//! ([`Transformer::forward`]) or, as the engine does on the tensor path (CUDA), for all of
//! them at once over one batched cache ([`Transformer::decode_batched`], [`BatchKv`]), so
//! sequences of different lengths join and leave the batch at any step.

use super::batch_kv::{BatchKv, StepMemory};
use super::plain::{Plain, PlainKv, PlainParts};
use super::step_graph::{self, GraphMode, StepGraphs, StepInputs, StepValues};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Result, Tensor, D};

/// The nonlinearity of the gated MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// SiLU (Llama, Qwen3, Phi-3).
    Silu,
    /// GELU with the tanh approximation (Gemma 3's `gelu_pytorch_tanh`).
    GeluTanh,
}

/// How rotary position embedding pairs the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs (2i, 2i+1): Llama weights as llama.cpp's converter permutes them.
    Interleaved,
    /// Halves (i, i + d/2): Hugging Face's `rotate_half` (Qwen3, Phi-3, Gemma 3, and
    /// Llama as published in safetensors).
    Halves,
}

/// Rotary embedding of one kind of layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    /// Base frequency.
    pub theta: f32,
    /// Dividers of each frequency (length head_dim / 2): Llama 3's and Phi-3's long-context
    /// factors, Gemma 3's linear scaling (all equal); empty for none.
    pub freq_factors: Vec<f32>,
    /// Multiplier of cos and sin (Phi-3 LongRoPE's attention factor; 1 otherwise).
    pub magnitude: f32,
}

impl Rope {
    /// Plain rotary embedding with base `theta`.
    pub fn plain(theta: f32) -> Self {
        Rope {
            theta,
            freq_factors: Vec::new(),
            magnitude: 1.0,
        }
    }
}

/// Everything about a model's shape and arithmetic that is not a weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Architecture name, as GGUF's `general.architecture` writes it.
    pub arch: &'static str,
    /// Rows of the embedding and the LM head.
    pub vocab: usize,
    /// Width of the residual stream.
    pub hidden: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f64,
    /// Rotary embedding of full-attention layers.
    pub rope: Rope,
    /// Rotary embedding of sliding-window layers, where it differs (Gemma 3's local base).
    pub rope_local: Option<Rope>,
    /// How rope pairs dimensions.
    pub rope_style: RopeStyle,
    /// Sliding window width and which layers use it (`layer_uses_window[i]`).
    pub sliding_window: Option<usize>,
    /// Per layer: whether it attends through the sliding window.
    pub layer_uses_window: Vec<bool>,
    /// MLP nonlinearity.
    pub activation: Activation,
    /// Factor applied to token embeddings (Gemma: sqrt(hidden)).
    pub embed_scale: Option<f32>,
    /// Softmax scale of attention scores (usually 1/sqrt(head_dim)).
    pub attn_scale: f32,
    /// Longest sequence (prompt + generation) the model was trained for.
    pub context_length: usize,
    /// Final logit soft-capping (`cap * tanh(logits / cap)`), where the model has one.
    pub final_logit_softcap: Option<f32>,
}

/// A weight matrix `[out, in]`: candle's (dense, or quantised on any device), or
/// credence's CPU Q8_0/Q4_1 kernels ([`super::qmatmul`]).
#[derive(Debug, Clone)]
pub enum Weight {
    /// candle.
    Candle(QMatMul),
    /// credence's batched CPU kernels.
    Cpu(std::sync::Arc<super::qmatmul::QMatrix>),
}

impl Weight {
    /// Output width (rows of the matrix).
    pub fn out_dim(&self) -> Result<usize> {
        match self {
            Weight::Candle(QMatMul::QTensor(q)) => q.shape().dims2().map(|(r, _)| r),
            Weight::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => t.dim(0),
            Weight::Cpu(q) => Ok(q.rows()),
        }
    }

    /// Input width (columns of the matrix).
    pub fn in_dim(&self) -> Result<usize> {
        match self {
            Weight::Candle(QMatMul::QTensor(q)) => q.shape().dims2().map(|(_, c)| c),
            Weight::Candle(QMatMul::Tensor(t) | QMatMul::TensorF16(t)) => t.dim(1),
            Weight::Cpu(q) => Ok(q.cols()),
        }
    }

    /// `x W^T` for `m` rows of `k` values on the CPU, as plain buffers: credence's
    /// kernels, or candle's through a tensor. Both forward paths multiply through here.
    pub fn matmul_rows(&self, x: &[f32], m: usize, k: usize) -> Result<Vec<f32>> {
        match self {
            Weight::Cpu(q) => {
                if k != q.cols() {
                    candle_core::bail!("matmul: {k} inputs for a matrix of {} columns", q.cols());
                }
                Ok(q.matmul(x, m))
            }
            Weight::Candle(w) => {
                let t = Tensor::from_slice(x, (m, k), &Device::Cpu)?;
                w.forward(&t)?
                    .to_dtype(DType::F32)?
                    .flatten_all()?
                    .to_vec1::<f32>()
            }
        }
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            // As one `[rows, k]` product: candle multiplies a 3-d input as a batch of
            // products against the broadcast weight, which reads the weight once per
            // sequence of a decode step instead of once per step.
            Weight::Candle(w) if x.rank() > 2 => {
                let mut dims = x.dims().to_vec();
                let k = *dims
                    .last()
                    .expect("a matrix product of a tensor with dimensions");
                let y = w.forward(&x.reshape((x.elem_count() / k, k))?)?;
                *dims.last_mut().expect("dims") = y.dim(1)?;
                y.reshape(dims)
            }
            Weight::Candle(w) => w.forward(x),
            Weight::Cpu(q) => {
                let mut dims = x.dims().to_vec();
                let k = *dims
                    .last()
                    .expect("a matrix product of a tensor with dimensions");
                let m = x.elem_count() / k;
                let flat = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
                let y = self.matmul_rows(&flat, m, k)?;
                *dims.last_mut().expect("dims") = q.rows();
                Tensor::from_vec(y, dims, x.device())
            }
        }
    }
}

impl Config {
    /// A Llama-style decoder: full attention in every layer, SiLU, rope over halves,
    /// 1/sqrt(head_dim) attention scale, no embedding scale or soft-cap. The
    /// architectures override what differs.
    #[allow(clippy::too_many_arguments)]
    pub fn standard(
        arch: &'static str,
        vocab: usize,
        hidden: usize,
        layers: usize,
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        rms_eps: f64,
        rope: Rope,
        context_length: usize,
    ) -> Self {
        Config {
            arch,
            vocab,
            hidden,
            layers,
            heads,
            kv_heads,
            head_dim,
            rms_eps,
            rope,
            rope_local: None,
            rope_style: RopeStyle::Halves,
            sliding_window: None,
            layer_uses_window: vec![false; layers],
            activation: Activation::Silu,
            embed_scale: None,
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            context_length,
            final_logit_softcap: None,
        }
    }
}

/// A projection: a weight matrix and an optional bias.
#[derive(Debug, Clone)]
pub struct Linear {
    /// `[out, in]`.
    pub weight: Weight,
    /// `[out]`.
    pub bias: Option<Tensor>,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.weight.forward(x)?;
        match &self.bias {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

/// The attention input projections, separate or fused into one matrix (Phi-3).
#[derive(Debug, Clone)]
pub enum Qkv {
    /// `q`, `k`, `v`.
    Separate(Linear, Linear, Linear),
    /// One `[q; k; v]` matrix.
    Fused(Linear),
}

/// The gate and up projections of the MLP, separate or fused (`[gate; up]`, Phi-3).
#[derive(Debug, Clone)]
pub enum GateUp {
    /// `gate`, `up`.
    Separate(Linear, Linear),
    /// One `[gate; up]` matrix.
    Fused(Linear),
}

/// An RMSNorm weight, with any `1 + w` offset already folded in.
#[derive(Debug, Clone)]
pub struct Norm(pub Tensor);

impl Norm {
    fn forward(&self, x: &Tensor, eps: f64) -> Result<Tensor> {
        let x = x.contiguous()?;
        candle_nn::ops::rms_norm(&x, &self.0, eps as f32)
    }
}

/// One transformer block.
#[derive(Debug, Clone)]
pub struct Block {
    /// Norm before attention.
    pub attn_norm: Norm,
    /// Input projections.
    pub qkv: Qkv,
    /// Per-head RMSNorm of queries and keys (Qwen3, Gemma 3).
    pub qk_norm: Option<(Norm, Norm)>,
    /// Output projection.
    pub o: Linear,
    /// Norm of the attention output before the residual (Gemma 3).
    pub post_attn_norm: Option<Norm>,
    /// Norm before the MLP.
    pub ffn_norm: Norm,
    /// Gate and up projections.
    pub gate_up: GateUp,
    /// Down projection.
    pub down: Linear,
    /// Norm of the MLP output before the residual (Gemma 3).
    pub post_ffn_norm: Option<Norm>,
}

/// Token embedding: a quantised table (rows dequantised on lookup) or a dense one.
#[derive(Debug, Clone)]
pub enum Embedding {
    /// GGUF.
    Quantized(std::sync::Arc<candle_core::quantized::QTensor>),
    /// safetensors.
    Dense(Tensor),
}

/// A loaded model.
pub struct Transformer {
    /// Shape and arithmetic.
    pub config: Config,
    embedding: Embedding,
    blocks: Vec<Block>,
    final_norm: Norm,
    lm_head: Linear,
    device: Device,
    /// Activation dtype (f32 for GGUF; the weights' dtype for safetensors).
    dtype: DType,
    /// The dtype of the batched decode's keys and values ([`Transformer::batch_kv`]):
    /// the activation dtype unless [`Transformer::set_kv_dtype`] chose another.
    kv_dtype: DType,
    /// `[max_positions, head_dim / 2]` cos and sin of full-attention layers.
    rope_global: (Tensor, Tensor),
    /// The same for sliding-window layers.
    rope_local: (Tensor, Tensor),
    /// The plain-buffer form of a CPU model with f32 activations, which runs its forward
    /// passes unless [`Transformer::set_tensor_path`] turned it off.
    plain: Option<Plain>,
    use_plain: bool,
    /// How batched decode steps run.
    graph_mode: GraphMode,
}

/// One sequence's keys and values, per layer, in `[1, kv_heads, capacity, head_dim]`
/// buffers that grow by doubling.
pub struct SeqCache {
    k: Vec<Option<Tensor>>,
    v: Vec<Option<Tensor>>,
    /// The plain path's keys and values ([`super::plain`]).
    plain: PlainKv,
    len: usize,
}

impl SeqCache {
    /// An empty cache for a model with `layers` blocks.
    pub fn new(layers: usize) -> Self {
        SeqCache {
            k: vec![None; layers],
            v: vec![None; layers],
            plain: PlainKv::new(layers),
            len: 0,
        }
    }

    /// Tokens cached (the position of the next token).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room for `tokens` positions in all (the plain path's buffers; the tensor path's
    /// grow by doubling).
    pub fn reserve(&mut self, tokens: usize, config: &Config) {
        self.plain
            .reserve(tokens, config.kv_heads * config.head_dim);
    }

    /// Bytes the cached keys and values take (the buffers' whole capacity on the tensor
    /// path).
    pub fn bytes(&self) -> usize {
        let tensors: usize = self
            .k
            .iter()
            .chain(&self.v)
            .flatten()
            .map(|t| t.elem_count() * t.dtype().size_in_bytes())
            .sum();
        tensors + self.plain.bytes()
    }

    /// A new cache holding a copy of the first `len` positions of this one: the state
    /// after a prompt's first `len` tokens, which a prompt starting with the same tokens
    /// continues from (the engine's prefix reuse).
    pub fn prefix(&self, len: usize) -> Result<SeqCache> {
        if len > self.len {
            candle_core::bail!("prefix of {len} positions from a cache of {}", self.len);
        }
        let cut = |slots: &[Option<Tensor>]| -> Result<Vec<Option<Tensor>>> {
            slots
                .iter()
                .map(|slot| match slot {
                    // A copy of its own: appends write into a cache's buffers in place.
                    Some(t) if len > 0 => Ok(Some(t.narrow(2, 0, len)?.contiguous()?.copy()?)),
                    _ => Ok(None),
                })
                .collect()
        };
        Ok(SeqCache {
            k: cut(&self.k)?,
            v: cut(&self.v)?,
            plain: self.plain.prefix(len, self.len),
            len,
        })
    }

    /// The first `len` keys and values `[1, kv_heads, len, head_dim]` of `layer` (the
    /// tensor path's; for moving a prefilled sequence into a [`BatchKv`]).
    pub fn layer(&self, layer: usize, len: usize) -> Result<(Tensor, Tensor)> {
        match (&self.k[layer], &self.v[layer]) {
            (Some(k), Some(v)) if len <= self.len => {
                Ok((k.narrow(2, 0, len)?, v.narrow(2, 0, len)?))
            }
            _ => candle_core::bail!(
                "layer {layer} holds no {len} keys and values of the tensor path"
            ),
        }
    }

    /// Appends `t` new keys and values `[1, kv_heads, t, head_dim]` of `layer` and returns
    /// the whole cached keys and values of that layer.
    fn append(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        let t = k.dim(2)?;
        let start = self.len;
        let need = start + t;
        for (slot, new) in [(&mut self.k[layer], k), (&mut self.v[layer], v)] {
            let capacity = slot.as_ref().map_or(0, |b| b.dim(2).unwrap_or(0));
            if need > capacity {
                let (_, heads, _, dim) = new.dims4()?;
                let grown = need.max(capacity * 2).max(64);
                let buffer = Tensor::zeros((1, heads, grown, dim), new.dtype(), new.device())?;
                if let Some(old) = slot.as_ref() {
                    if start > 0 {
                        buffer.slice_set(&old.narrow(2, 0, start)?.contiguous()?, 2, 0)?;
                    }
                }
                *slot = Some(buffer);
            }
            let buffer = slot.as_ref().expect("allocated above");
            buffer.slice_set(&new.contiguous()?, 2, start)?;
        }
        let k = self.k[layer].as_ref().expect("set").narrow(2, 0, need)?;
        let v = self.v[layer].as_ref().expect("set").narrow(2, 0, need)?;
        Ok((k, v))
    }
}

/// cos and sin tables `[positions, head_dim / 2]` of one rotary embedding.
fn rope_tables(
    rope: &Rope,
    head_dim: usize,
    positions: usize,
    device: &Device,
    dtype: DType,
) -> Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    let inv_freq: Vec<f32> = (0..half)
        .map(|i| {
            let f = 1.0 / rope.theta.powf(2.0 * i as f32 / head_dim as f32);
            match rope.freq_factors.get(i) {
                Some(factor) => f / factor,
                None => f,
            }
        })
        .collect();
    let mut cos = Vec::with_capacity(positions * half);
    let mut sin = Vec::with_capacity(positions * half);
    for p in 0..positions {
        for &f in &inv_freq {
            // float32, as the reference implementations compute the angles.
            let angle = p as f32 * f;
            cos.push(angle.cos() * rope.magnitude);
            sin.push(angle.sin() * rope.magnitude);
        }
    }
    let cos = Tensor::from_vec(cos, (positions, half), device)?.to_dtype(dtype)?;
    let sin = Tensor::from_vec(sin, (positions, half), device)?.to_dtype(dtype)?;
    Ok((cos, sin))
}

/// Most positions the rotary tables hold: a prompt and 4096 generated tokens fit many
/// times over, and a 128k-context model does not spend 100 MB on tables it never reads.
/// [`Transformer::context_length`] is the smaller of this and the model's own.
pub const MAX_POSITIONS: usize = 16_384;

/// The weights an architecture file hands over.
pub struct Parts {
    /// Token embedding.
    pub embedding: Embedding,
    /// Blocks, in order.
    pub blocks: Vec<Block>,
    /// Norm after the last block.
    pub final_norm: Norm,
    /// LM head (the embedding's matrix when tied).
    pub lm_head: Linear,
}

impl Transformer {
    /// Assembles a model; `dtype` is the activation dtype.
    pub fn new(config: Config, parts: Parts, device: &Device, dtype: DType) -> Result<Self> {
        if parts.blocks.len() != config.layers {
            candle_core::bail!(
                "{} blocks loaded, config says {}",
                parts.blocks.len(),
                config.layers
            );
        }
        let positions = config.context_length.clamp(1, MAX_POSITIONS);
        let rope_global = rope_tables(&config.rope, config.head_dim, positions, device, dtype)?;
        let rope_local = match &config.rope_local {
            Some(r) => rope_tables(r, config.head_dim, positions, device, dtype)?,
            None => rope_global.clone(),
        };
        let plain = if device.is_cpu() && dtype == DType::F32 {
            Some(Plain::new(PlainParts {
                config: &config,
                embedding: &parts.embedding,
                blocks: &parts.blocks,
                final_norm: &parts.final_norm,
                lm_head: &parts.lm_head,
                ropes: [&rope_global, &rope_local],
            })?)
        } else {
            None
        };
        Ok(Transformer {
            config,
            embedding: parts.embedding,
            blocks: parts.blocks,
            final_norm: parts.final_norm,
            lm_head: parts.lm_head,
            device: device.clone(),
            dtype,
            kv_dtype: dtype,
            rope_global,
            rope_local,
            use_plain: plain.is_some(),
            plain,
            graph_mode: GraphMode::Off,
        })
    }

    /// Runs later forward passes on candle tensors (`true`), as on CUDA, or on the plain
    /// buffers where the model has them (`false`, the default on CPU). For checking one
    /// path against the other; a cache must not cross from one path to the other.
    pub fn set_tensor_path(&mut self, tensors: bool) {
        self.use_plain = !tensors && self.plain.is_some();
    }

    /// Keeps the batched decode's keys and values ([`Transformer::batch_kv`]) in `dtype`
    /// instead of the activation dtype: bf16 for a GGUF model on a GPU halves what each
    /// sequence in flight holds (its activations stay f32), so twice as many fit. The
    /// step's queries meet the keys in that dtype and its attention output returns to
    /// the activations'; scores and their softmax stay f32. A per-sequence cache (a
    /// prefill, the CPU's paths) keeps the activation dtype.
    pub fn set_kv_dtype(&mut self, dtype: DType) {
        self.kv_dtype = dtype;
    }

    /// Whether forward passes run on the plain buffers (the CPU's default).
    pub fn uses_plain_path(&self) -> bool {
        self.plain().is_some()
    }

    fn plain(&self) -> Option<&Plain> {
        self.plain.as_ref().filter(|_| self.use_plain)
    }

    /// Longest sequence (prompt + generation) this model instance runs.
    pub fn context_length(&self) -> usize {
        self.config.context_length.min(MAX_POSITIONS)
    }

    /// The device the weights live on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn embed(&self, ids: &Tensor) -> Result<Tensor> {
        let x = match &self.embedding {
            Embedding::Quantized(q) => q.embedding(ids)?,
            Embedding::Dense(w) => {
                let (b, t) = ids.dims2()?;
                w.index_select(&ids.flatten_all()?, 0)?
                    .reshape((b, t, self.config.hidden))?
            }
        };
        let x = x.to_dtype(self.dtype)?;
        match self.config.embed_scale {
            Some(s) => x * f64::from(s),
            None => Ok(x),
        }
    }

    /// Runs `tokens` through the model and returns the logits of each sequence's last
    /// token, `[n, vocab]` in f32. Either one sequence with any number of new tokens
    /// (a prefill), or several sequences with one new token each (a decode step); each
    /// sequence's cache grows by its new tokens.
    pub fn forward(&self, tokens: &[Vec<u32>], caches: &mut [&mut SeqCache]) -> Result<Tensor> {
        if let Some(plain) = self.plain() {
            let starts = self.check(tokens, caches)?;
            let (n, t) = (tokens.len(), tokens[0].len());
            let x = self.plain_forward(plain, tokens, caches, &starts)?;
            let hidden = self.config.hidden;
            // Each sequence's last row.
            let last: Vec<f32> = (0..n)
                .flat_map(|i| {
                    let r = i * t + t - 1;
                    x[r * hidden..(r + 1) * hidden].iter().copied()
                })
                .collect();
            return plain.head(&last, n);
        }
        let x = self.blocks_forward(tokens, caches)?;
        let t = x.dim(1)?;
        self.head(&x.narrow(1, t - 1, 1)?.squeeze(1)?)
    }

    /// The logits `[t, vocab]` of every position of one sequence's new tokens (for
    /// checking a model against a reference position by position).
    pub fn forward_all(&self, tokens: &[u32], cache: &mut SeqCache) -> Result<Tensor> {
        if let Some(plain) = self.plain() {
            let tokens = [tokens.to_vec()];
            let mut caches = [cache];
            let starts = self.check(&tokens, &caches)?;
            let x = self.plain_forward(plain, &tokens, &mut caches, &starts)?;
            return plain.head(&x, tokens[0].len());
        }
        let x = self.blocks_forward(&[tokens.to_vec()], &mut [cache])?;
        self.head(&x.squeeze(0)?)
    }

    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.final_norm.forward(x, self.config.rms_eps)?;
        let logits = self.lm_head.forward(&x)?.to_dtype(DType::F32)?;
        match self.config.final_logit_softcap {
            Some(cap) => (logits / f64::from(cap))?.tanh()? * f64::from(cap),
            None => Ok(logits),
        }
    }

    fn plain_forward(
        &self,
        plain: &Plain,
        tokens: &[Vec<u32>],
        caches: &mut [&mut SeqCache],
        starts: &[usize],
    ) -> Result<Vec<f32>> {
        let mut kv: Vec<&mut PlainKv> = caches.iter_mut().map(|c| &mut c.plain).collect();
        let x = plain.blocks_forward(tokens, &mut kv, starts)?;
        let t = tokens[0].len();
        for cache in caches.iter_mut() {
            cache.len += t;
        }
        Ok(x)
    }

    /// Checks the shape of a forward pass and returns each sequence's cached length.
    fn check(&self, tokens: &[Vec<u32>], caches: &[&mut SeqCache]) -> Result<Vec<usize>> {
        let n = tokens.len();
        if n == 0 || n != caches.len() {
            candle_core::bail!("forward: {n} token lists for {} caches", caches.len());
        }
        let t = tokens[0].len();
        if t == 0 || tokens.iter().any(|s| s.len() != t) || (n > 1 && t != 1) {
            candle_core::bail!("forward: one sequence of any length, or one token per sequence");
        }
        let starts: Vec<usize> = caches.iter().map(|c| c.len()).collect();
        if let Some(over) = starts.iter().find(|&&s| s + t > self.context_length()) {
            candle_core::bail!(
                "sequence of {} tokens exceeds the context length {}",
                over + t,
                self.context_length()
            );
        }
        Ok(starts)
    }

    /// The residual stream `[n, t, hidden]` after the last block.
    fn blocks_forward(&self, tokens: &[Vec<u32>], caches: &mut [&mut SeqCache]) -> Result<Tensor> {
        let starts = self.check(tokens, caches)?;
        let (n, t) = (tokens.len(), tokens[0].len());
        let flat: Vec<u32> = tokens.iter().flatten().copied().collect();
        let ids = Tensor::from_vec(flat, (n, t), &self.device)?;
        let x = self.embed(&ids)?;
        let ropes = [
            self.rope_slices(&self.rope_global, &starts, t)?,
            self.rope_slices(&self.rope_local, &starts, t)?,
        ];
        let x = self.run_blocks(x, &ropes, |layer, block, h, (cos, sin), windowed| {
            let (q, k, v) = self.qkv(block, h, cos, sin)?;
            self.attention(layer, &q, &k, &v, caches, &starts, windowed)
        })?;
        for cache in caches.iter_mut() {
            cache.len += t;
        }
        Ok(x)
    }

    /// The blocks over the residual stream `x`; `attend` gives a block's attention output
    /// for its normed input (layer, block, input, the layer's rope, whether windowed).
    fn run_blocks(
        &self,
        mut x: Tensor,
        ropes: &[(Tensor, Tensor); 2],
        mut attend: impl FnMut(usize, &Block, &Tensor, (&Tensor, &Tensor), bool) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let eps = self.config.rms_eps;
        for (layer, block) in self.blocks.iter().enumerate() {
            let windowed = self.config.layer_uses_window[layer];
            let (cos, sin) = &ropes[usize::from(windowed)];
            let h = block.attn_norm.forward(&x, eps)?;
            let h = attend(layer, block, &h, (cos, sin), windowed)?;
            let h = block.o.forward(&h)?;
            let h = match &block.post_attn_norm {
                Some(norm) => norm.forward(&h, eps)?,
                None => h,
            };
            x = (x + h)?;
            let h = block.ffn_norm.forward(&x, eps)?;
            let h = self.mlp(block, &h)?;
            let h = match &block.post_ffn_norm {
                Some(norm) => norm.forward(&h, eps)?,
                None => h,
            };
            x = (x + h)?;
        }
        Ok(x)
    }

    /// A [`BatchKv`] for this model's decode steps.
    pub fn batch_kv(&self) -> BatchKv {
        let c = &self.config;
        let quantised = self
            .weights()
            .any(|w| matches!(w, Weight::Candle(QMatMul::QTensor(_))));
        let capture_rows = if quantised {
            step_graph::QUANTISED_GRAPH_ROWS
        } else {
            usize::MAX
        };
        BatchKv::new(
            c.layers,
            c.kv_heads,
            c.head_dim,
            self.kv_dtype,
            &self.device,
            self.step_memory(),
        )
        .with_graphs(StepGraphs::new(self.graph_mode, capture_rows))
    }

    /// What one of its decode steps allocates beside the keys and values.
    pub fn step_memory(&self) -> StepMemory {
        let c = &self.config;
        let mlp = self
            .blocks
            .iter()
            .filter_map(|b| b.down.weight.in_dim().ok())
            .max()
            .unwrap_or(4 * c.hidden);
        let hidden = c.hidden.max(c.heads * c.head_dim);
        StepMemory::of(hidden, mlp, c.heads, c.vocab, self.dtype.size_in_bytes())
    }

    /// One decode step of every sequence a [`BatchKv`] holds (one new token each, in row
    /// order) on the tensor path: the logits `[n, vocab]` in f32. Attention runs for all
    /// sequences at once per layer, over their keys and values in the batch's buffers;
    /// as [`Transformer::set_graph_mode`] says, a step of a kept shape may run as a CUDA
    /// graph ([`super::step_graph`]).
    pub fn decode_batched(&self, tokens: &[u32], kv: &mut BatchKv) -> Result<Tensor> {
        let n = tokens.len();
        if n == 0 || n != kv.len() {
            candle_core::bail!("decode: {n} tokens for {} sequences", kv.len());
        }
        if let Some(over) = kv.lens().iter().find(|&&s| s + 1 > self.context_length()) {
            candle_core::bail!(
                "sequence of {} tokens exceeds the context length {}",
                over + 1,
                self.context_length()
            );
        }
        let total = kv.begin_step()?;
        let mut graphs = std::mem::take(&mut kv.graphs);
        let span = step_graph::span(graphs.mode(), total, kv.capacity());
        let values = StepValues::new(tokens, kv.lens(), span, self.config.sliding_window);
        let kv_ref = &*kv;
        let logits = graphs.run(
            &values,
            &self.device,
            |inputs| self.decode_step(inputs, kv_ref),
            || self.grow_quantised_scratch(),
        );
        kv.graphs = graphs;
        let logits = logits?;
        kv.end_step();
        Ok(logits)
    }

    /// A decode step's work on its device inputs: embedding, blocks, head.
    fn decode_step(&self, inputs: &StepInputs, kv: &BatchKv) -> Result<Tensor> {
        let c = &self.config;
        let n = inputs.ids.dim(0)?;
        let x = self.embed(&inputs.ids)?;
        let global = self.rope_rows(&self.rope_global, &inputs.positions)?;
        let ropes = [
            global.clone(),
            match c.rope_local {
                Some(_) => self.rope_rows(&self.rope_local, &inputs.positions)?,
                None => global,
            },
        ];
        let x = self.run_blocks(x, &ropes, |layer, block, h, (cos, sin), windowed| {
            let (q, k, v) = self.qkv(block, h, cos, sin)?;
            let (k_all, v_all) = kv.write(layer, &inputs.positions, &k, &v, inputs.span)?;
            // [n, heads, 1, d] -> [n, kv_heads, rep, d]: the query heads that share a key
            // head become rows of one product.
            let q = q
                .reshape((n, c.kv_heads, c.heads / c.kv_heads, c.head_dim))?
                .to_dtype(k_all.dtype())?;
            let scores = q.matmul(&k_all.t()?)?.to_dtype(DType::F32)?;
            let scores = scores.broadcast_add(inputs.mask(windowed))?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?.to_dtype(v_all.dtype())?;
            probs
                .matmul(&v_all)?
                .to_dtype(self.dtype)?
                .reshape((n, c.heads, 1, c.head_dim))?
                .transpose(1, 2)?
                .reshape((n, 1, c.heads * c.head_dim))
        })?;
        self.head(&x.squeeze(1)?)
    }

    /// cos and sin `[n, 1, d/2]` at each row's position (`[n]` on the device).
    fn rope_rows(&self, table: &(Tensor, Tensor), positions: &Tensor) -> Result<(Tensor, Tensor)> {
        let n = positions.dim(0)?;
        let half = self.config.head_dim / 2;
        Ok((
            table.0.index_select(positions, 0)?.reshape((n, 1, half))?,
            table.1.index_select(positions, 0)?.reshape((n, 1, half))?,
        ))
    }

    /// Grows candle's scratch buffer of quantised products of up to eight rows to its
    /// largest size (eight rows of the widest input), so that no later product frees it
    /// under a captured step.
    fn grow_quantised_scratch(&self) -> Result<()> {
        let widest = self
            .weights()
            .filter(|w| matches!(w, Weight::Candle(QMatMul::QTensor(_))))
            .max_by_key(|w| w.in_dim().unwrap_or(0));
        if let Some(w) = widest {
            let x = Tensor::zeros(
                (step_graph::QUANTISED_GRAPH_ROWS, w.in_dim()?),
                self.dtype,
                &self.device,
            )?;
            w.forward(&x)?;
        }
        Ok(())
    }

    /// Every weight matrix of the blocks and the head.
    fn weights(&self) -> impl Iterator<Item = &Weight> {
        self.blocks
            .iter()
            .flat_map(|b| {
                let mut ws: Vec<&Linear> = Vec::with_capacity(7);
                match &b.qkv {
                    Qkv::Separate(q, k, v) => ws.extend([q, k, v]),
                    Qkv::Fused(qkv) => ws.push(qkv),
                }
                ws.push(&b.o);
                match &b.gate_up {
                    GateUp::Separate(g, u) => ws.extend([g, u]),
                    GateUp::Fused(gu) => ws.push(gu),
                }
                ws.push(&b.down);
                ws
            })
            .chain(std::iter::once(&self.lm_head))
            .map(|l| &l.weight)
    }

    /// Runs later batched decode steps as `mode` says ([`super::step_graph`]); for the
    /// [`BatchKv`]s made after.
    pub fn set_graph_mode(&mut self, mode: GraphMode) {
        self.graph_mode = mode;
    }

    /// cos and sin for the new tokens: `[t, d/2]` for one sequence, `[n, 1, d/2]` for a
    /// decode step at each sequence's own position.
    fn rope_slices(
        &self,
        table: &(Tensor, Tensor),
        starts: &[usize],
        t: usize,
    ) -> Result<(Tensor, Tensor)> {
        if starts.len() == 1 {
            return Ok((
                table.0.narrow(0, starts[0], t)?,
                table.1.narrow(0, starts[0], t)?,
            ));
        }
        let positions: Vec<u32> = starts.iter().map(|&s| s as u32).collect();
        let n = positions.len();
        self.rope_rows(table, &Tensor::from_vec(positions, n, &self.device)?)
    }

    /// A block's queries `[n, heads, t, d]` (scaled), keys and values `[n, kv_heads, t, d]`
    /// of its normed input `x` `[n, t, hidden]`, rope applied.
    fn qkv(
        &self,
        block: &Block,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let c = &self.config;
        let (n, t, _) = x.dims3()?;
        let (q, k, v) = match &block.qkv {
            Qkv::Separate(q, k, v) => (q.forward(x)?, k.forward(x)?, v.forward(x)?),
            Qkv::Fused(qkv) => {
                let all = qkv.forward(x)?;
                let (qw, kw) = (c.heads * c.head_dim, c.kv_heads * c.head_dim);
                (
                    all.narrow(D::Minus1, 0, qw)?,
                    all.narrow(D::Minus1, qw, kw)?,
                    all.narrow(D::Minus1, qw + kw, kw)?,
                )
            }
        };
        let q = q.reshape((n, t, c.heads, c.head_dim))?;
        let k = k.reshape((n, t, c.kv_heads, c.head_dim))?;
        let v = v.reshape((n, t, c.kv_heads, c.head_dim))?;
        let (q, k) = match &block.qk_norm {
            Some((qn, kn)) => (qn.forward(&q, c.rms_eps)?, kn.forward(&k, c.rms_eps)?),
            None => (q, k),
        };
        let q = q.transpose(1, 2)?.contiguous()?;
        let k = k.transpose(1, 2)?.contiguous()?;
        let v = v.transpose(1, 2)?.contiguous()?;
        let (q, k) = match c.rope_style {
            RopeStyle::Interleaved => (
                candle_nn::rotary_emb::rope_i(&q, cos, sin)?,
                candle_nn::rotary_emb::rope_i(&k, cos, sin)?,
            ),
            RopeStyle::Halves => (
                candle_nn::rotary_emb::rope(&q, cos, sin)?,
                candle_nn::rotary_emb::rope(&k, cos, sin)?,
            ),
        };
        let q = (q * f64::from(c.attn_scale))?;
        Ok((q, k, v))
    }

    /// Attention of each sequence over its own cache (the prefill, and the per-sequence
    /// decode step); the output before the output projection, `[n, t, heads * d]`.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &self,
        layer: usize,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        caches: &mut [&mut SeqCache],
        starts: &[usize],
        windowed: bool,
    ) -> Result<Tensor> {
        let c = &self.config;
        let (n, _, t, _) = q.dims4()?;
        let rep = c.heads / c.kv_heads;
        let window = if windowed { c.sliding_window } else { None };
        let mut outs = Vec::with_capacity(n);
        for (i, cache) in caches.iter_mut().enumerate() {
            let (k_all, v_all) = cache.append(layer, &k.narrow(0, i, 1)?, &v.narrow(0, i, 1)?)?;
            let total = starts[i] + t;
            // Keys a query may see: at most `window` back (the query itself included).
            let first = match window {
                Some(w) if t == 1 && total > w => total - w,
                _ => 0,
            };
            let (k_all, v_all) = if first > 0 {
                (
                    k_all.narrow(2, first, total - first)?,
                    v_all.narrow(2, first, total - first)?,
                )
            } else {
                (k_all, v_all)
            };
            let keys = total - first;
            // [1, heads, t, d] -> [1, kv_heads, rep * t, d]: the query heads that share a
            // key head become rows of one product.
            let qi = q
                .narrow(0, i, 1)?
                .reshape((1, c.kv_heads, rep * t, c.head_dim))?;
            let scores = qi.matmul(&k_all.t()?.contiguous()?)?;
            let scores = if t > 1 {
                // (`first` is 0 here: a prompt attends from the start of its cache.)
                let mask = super::plain::prompt_mask(t, starts[i], keys, window);
                let mask =
                    Tensor::from_vec(mask, (t, keys), &self.device)?.to_dtype(scores.dtype())?;
                scores
                    .reshape((1, c.kv_heads, rep, t, keys))?
                    .broadcast_add(&mask)?
                    .reshape((1, c.kv_heads, rep * t, keys))?
            } else {
                scores
            };
            let probs = candle_nn::ops::softmax_last_dim(&scores.to_dtype(DType::F32)?)?
                .to_dtype(v_all.dtype())?;
            let out = probs.matmul(&v_all.contiguous()?)?;
            // [1, kv_heads, rep * t, d] -> [1, t, heads * d]
            let out = out
                .reshape((1, c.heads, t, c.head_dim))?
                .transpose(1, 2)?
                .reshape((1, t, c.heads * c.head_dim))?;
            outs.push(out);
        }
        if outs.len() == 1 {
            Ok(outs.pop().expect("one"))
        } else {
            Tensor::cat(&outs, 0)
        }
    }

    fn mlp(&self, block: &Block, x: &Tensor) -> Result<Tensor> {
        let (gate, up) = match &block.gate_up {
            GateUp::Separate(g, u) => (g.forward(x)?, u.forward(x)?),
            GateUp::Fused(gu) => {
                let both = gu.forward(x)?;
                let half = both.dim(D::Minus1)? / 2;
                (
                    both.narrow(D::Minus1, 0, half)?,
                    both.narrow(D::Minus1, half, half)?,
                )
            }
        };
        let gate = match self.config.activation {
            Activation::Silu => candle_nn::ops::silu(&gate)?,
            Activation::GeluTanh => gate.gelu()?,
        };
        block.down.forward(&(gate * up)?)
    }
}
