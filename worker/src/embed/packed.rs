//! The BERT forward pass the encoder runs: the sequences of a batch packed without
//! padding into one `[sum_tokens, hidden]` matrix (as text-embeddings-inference does on
//! CPU), so every dense layer is a single large matmul and no padding token is ever
//! computed; attention runs per sequence on its own tokens only.
//!
//! The weights are the checkpoint's, rearranged once at load: query, key and value are
//! fused into one `[hidden, 3·hidden]` matrix and every dense weight is stored
//! transposed and contiguous (`[in, out]`), so the matmuls need no copy per call.
//! Results equal candle-transformers' padded BERT up to float rounding.
//!
//! Attention runs one of two ways ([`Attention`]). Per sequence (the CPU's way): each
//! sequence's products over its own tokens, so a vector is the same bit for bit in any
//! batch; that costs about ten kernel launches per sequence per layer, which on a GPU
//! (30,000 launches for a batch of 128 through 24 layers) and not the arithmetic set the
//! pace. Padded (a GPU's way): the batch's queries, keys and values gathered once into
//! `[sequences, heads, longest, head_dim]`, the keys past each sequence's end masked out,
//! and one batched product each for the scores and the context, a fixed number of
//! launches per layer. The dense layers stay packed either way, so no padding token goes
//! through them. Masked keys add exact zeros, so the padded result differs from the per
//! sequence one only where the device's matrix kernels round differently for another
//! shape.

use super::config::{Activation, BertConfig};
use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::VarBuilder;

/// How a batch's attention runs (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Attention {
    /// Per sequence on the CPU, padded on other devices.
    #[default]
    Auto,
    /// Each sequence on its own: a vector is bit-identical in any batch on the CPU.
    PerSequence,
    /// All sequences in one padded, masked product per layer: what a GPU needs.
    Padded,
}

impl Attention {
    /// `auto`, `per-sequence` or `padded`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Attention::Auto),
            "per-sequence" => Some(Attention::PerSequence),
            "padded" => Some(Attention::Padded),
            _ => None,
        }
    }

    /// The name [`Attention::parse`] reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Attention::Auto => "auto",
            Attention::PerSequence => "per-sequence",
            Attention::Padded => "padded",
        }
    }

    /// Whether a batch on `device` runs padded.
    fn padded_on(self, device: &Device) -> bool {
        match self {
            Attention::Auto => !device.is_cpu(),
            Attention::PerSequence => false,
            Attention::Padded => true,
        }
    }
}

/// A dense layer with its weight stored as `[in, out]`.
pub(super) struct Dense {
    pub(super) weight_t: Tensor,
    pub(super) bias: Tensor,
}

impl Dense {
    /// `weight` is the checkpoint's `[out, in]`.
    fn new(weight: Tensor, bias: Tensor) -> Result<Self> {
        Ok(Dense {
            weight_t: weight.t()?.contiguous()?,
            bias,
        })
    }

    fn load(vb: VarBuilder, in_dim: usize, out_dim: usize) -> Result<Self> {
        Dense::new(
            vb.get((out_dim, in_dim), "weight")?,
            vb.get(out_dim, "bias")?,
        )
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        #[cfg(feature = "cuda")]
        if super::lt::fused_on(x.device()) && x.rank() == 2 {
            return super::lt::linear(&x.contiguous()?, &self.weight_t, &self.bias);
        }
        x.matmul(&self.weight_t)?.broadcast_add(&self.bias)
    }
}

/// Layer normalisation over the last dimension.
pub(super) struct Norm {
    pub(super) weight: Tensor,
    pub(super) bias: Tensor,
    pub(super) eps: f32,
}

impl Norm {
    fn load(vb: VarBuilder, dim: usize, eps: f64) -> Result<Self> {
        Ok(Norm {
            weight: vb.get(dim, "weight")?,
            bias: vb.get(dim, "bias")?,
            eps: eps as f32,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        candle_nn::ops::layer_norm(x, &self.weight, &self.bias, self.eps)
    }
}

/// One transformer layer.
pub(super) struct Layer {
    pub(super) qkv: Dense,
    pub(super) attention_out: Dense,
    pub(super) attention_norm: Norm,
    pub(super) intermediate: Dense,
    pub(super) output: Dense,
    pub(super) output_norm: Norm,
}

impl Layer {
    fn load(vb: VarBuilder, config: &BertConfig) -> Result<Self> {
        let h = config.hidden_size;
        let attention = vb.pp("attention");
        let own = attention.pp("self");
        let (mut weights, mut biases) = (Vec::new(), Vec::new());
        for part in ["query", "key", "value"] {
            weights.push(own.pp(part).get((h, h), "weight")?);
            biases.push(own.pp(part).get(h, "bias")?);
        }
        let qkv = Dense::new(Tensor::cat(&weights, 0)?, Tensor::cat(&biases, 0)?)?;
        Ok(Layer {
            qkv,
            attention_out: Dense::load(attention.pp("output").pp("dense"), h, h)?,
            attention_norm: Norm::load(
                attention.pp("output").pp("LayerNorm"),
                h,
                config.layer_norm_eps,
            )?,
            intermediate: Dense::load(
                vb.pp("intermediate").pp("dense"),
                h,
                config.intermediate_size,
            )?,
            output: Dense::load(vb.pp("output").pp("dense"), config.intermediate_size, h)?,
            output_norm: Norm::load(vb.pp("output").pp("LayerNorm"), h, config.layer_norm_eps)?,
        })
    }
}

/// A BERT encoder over packed (unpadded) batches.
pub(crate) struct PackedBert {
    pub(super) word_embeddings: Tensor,
    pub(super) position_embeddings: Tensor,
    pub(super) token_type_row: Tensor,
    pub(super) embedding_norm: Norm,
    pub(super) layers: Vec<Layer>,
    pub(super) heads: usize,
    pub(super) head_dim: usize,
    pub(super) activation: Activation,
    device: Device,
    padded: bool,
}

impl PackedBert {
    /// Loads the weights of a BERT checkpoint (with or without a `bert.` prefix).
    pub(crate) fn load(vb: VarBuilder, config: &BertConfig, attention: Attention) -> Result<Self> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else {
            vb
        };
        let h = config.hidden_size;
        if config.num_attention_heads == 0 || !h.is_multiple_of(config.num_attention_heads) {
            candle_core::bail!(
                "hidden_size {h} is not a multiple of num_attention_heads {}",
                config.num_attention_heads
            );
        }
        let emb = vb.pp("embeddings");
        let token_types = emb
            .pp("token_type_embeddings")
            .get((config.type_vocab_size, h), "weight")?;
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(vb.pp(format!("encoder.layer.{i}")), config))
            .collect::<Result<Vec<_>>>()?;
        Ok(PackedBert {
            word_embeddings: emb
                .pp("word_embeddings")
                .get((config.vocab_size, h), "weight")?,
            position_embeddings: emb
                .pp("position_embeddings")
                .get((config.max_position_embeddings, h), "weight")?,
            // Sentence encoders see one segment: token type 0 everywhere.
            token_type_row: token_types.narrow(0, 0, 1)?,
            embedding_norm: Norm::load(emb.pp("LayerNorm"), h, config.layer_norm_eps)?,
            layers,
            heads: config.num_attention_heads,
            head_dim: h / config.num_attention_heads,
            activation: config.hidden_act,
            device: vb.device().clone(),
            padded: attention.padded_on(vb.device()),
        })
    }

    /// Whether a batch's attention runs padded (see [`Attention`]).
    pub(crate) fn padded(&self) -> bool {
        self.padded
    }

    /// Hidden states of every token of every sequence, packed in order:
    /// `[sum of lengths, hidden]`. Sequences must be non-empty.
    pub(crate) fn forward(&self, batch: &[&[u32]]) -> Result<Tensor> {
        let lengths: Vec<usize> = batch.iter().map(|s| s.len()).collect();
        if lengths.contains(&0) {
            candle_core::bail!("empty token sequence");
        }
        let ids: Vec<u32> = batch.iter().flat_map(|s| s.iter().copied()).collect();
        let positions: Vec<u32> = lengths.iter().flat_map(|&l| 0..l as u32).collect();
        let total = ids.len();
        let ids = Tensor::from_vec(ids, total, &self.device)?;
        let positions = Tensor::from_vec(positions, total, &self.device)?;
        let x = self
            .word_embeddings
            .index_select(&ids, 0)?
            .add(&self.position_embeddings.index_select(&positions, 0)?)?
            .broadcast_add(&self.token_type_row)?;
        let mut x = self.embedding_norm.forward(&x)?;
        // The padded attention's index and mask tensors, copied to the device once for
        // all layers.
        let plan = if self.padded {
            Some(Padding::new(&lengths, self.heads, x.dtype(), &self.device)?)
        } else {
            None
        };
        for layer in &self.layers {
            x = self.layer_forward(layer, &x, &lengths, plan.as_ref())?;
        }
        Ok(x)
    }

    fn layer_forward(
        &self,
        layer: &Layer,
        x: &Tensor,
        lengths: &[usize],
        plan: Option<&Padding>,
    ) -> Result<Tensor> {
        let qkv = layer.qkv.forward(x)?;
        let context = match plan {
            Some(plan) => self.padded_attention(&qkv, plan)?,
            None => self.attention(&qkv, lengths)?,
        };
        let attended = layer
            .attention_norm
            .forward(&layer.attention_out.forward(&context)?.add(x)?)?;
        let inner = layer.intermediate.forward(&attended)?;
        let inner = match self.activation {
            Activation::Gelu => gelu_erf(&inner)?,
            Activation::GeluTanh => inner.gelu()?,
            Activation::Relu => inner.relu()?,
        };
        layer
            .output_norm
            .forward(&layer.output.forward(&inner)?.add(&attended)?)
    }

    /// Scaled dot-product attention of each sequence over its own tokens; `qkv` is
    /// `[total, 3·hidden]` (query, key, value), the result `[total, hidden]`.
    fn attention(&self, qkv: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let (heads, head_dim) = (self.heads, self.head_dim);
        let scale = 1.0 / (head_dim as f64).sqrt();
        let mut contexts = Vec::with_capacity(lengths.len());
        let mut offset = 0;
        for &len in lengths {
            // [len, 3·heads, head_dim] -> [3·heads, len, head_dim]
            let per_head = qkv
                .narrow(0, offset, len)?
                .reshape((len, 3 * heads, head_dim))?
                .transpose(0, 1)?
                .contiguous()?;
            offset += len;
            let q = per_head.narrow(0, 0, heads)?;
            let k = per_head.narrow(0, heads, heads)?;
            let v = per_head.narrow(0, 2 * heads, heads)?;
            let scores = (q.matmul(&k.t()?)? * scale)?;
            let probs = candle_nn::ops::softmax_last_dim(&scores)?;
            let context = probs
                .matmul(&v)?
                .transpose(0, 1)?
                .reshape((len, heads * head_dim))?;
            contexts.push(context);
        }
        Tensor::cat(&contexts, 0)
    }

    /// The same attention for all sequences at once, as `plan` lays them out: gathered
    /// into `[sequences, heads, longest, head_dim]`, keys past a sequence's end masked with
    /// -inf before the softmax (so they weigh exactly nothing), and the padding rows
    /// dropped at the end. Each head's slice of a token's row is moved by one gather each
    /// way (rows of `head_dim`), not a gather and a five-dimensional transposing copy.
    fn padded_attention(&self, qkv: &Tensor, plan: &Padding) -> Result<Tensor> {
        let (heads, head_dim) = (self.heads, self.head_dim);
        let scale = 1.0 / (head_dim as f64).sqrt();
        let (sequences, longest) = (plan.sequences, plan.longest);
        let total = qkv.dim(0)?;
        // [total, 3·heads·head_dim] as rows of head_dim -> [3, sequences, heads, longest,
        // head_dim]
        let parts = qkv
            .reshape((total * 3 * heads, head_dim))?
            .index_select(&plan.gather, 0)?
            .reshape((3, sequences, heads, longest, head_dim))?;
        let (q, k, v) = (parts.get(0)?, parts.get(1)?, parts.get(2)?);
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&plan.mask)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        probs
            .matmul(&v)?
            .reshape((sequences * heads * longest, head_dim))?
            .index_select(&plan.scatter, 0)?
            .reshape((total, heads * head_dim))
    }
}

/// Where a packed batch's rows go in the padded attention, on the device.
struct Padding {
    sequences: usize,
    longest: usize,
    /// For each (part of q/k/v, sequence, head, padded position), the row of `head_dim`
    /// values it reads from the packed `[tokens·3·heads, head_dim]` projections (a short
    /// sequence's padding repeats its last token).
    gather: Tensor,
    /// For each (packed token, head), its row in the padded `[sequences·heads·longest,
    /// head_dim]` context.
    scatter: Tensor,
    /// `[sequences, 1, 1, longest]`: 0 over a sequence's keys, -inf past its end.
    mask: Tensor,
}

impl Padding {
    fn new(lengths: &[usize], heads: usize, dtype: DType, device: &Device) -> Result<Self> {
        let sequences = lengths.len();
        let longest = lengths.iter().copied().max().unwrap_or(0);
        let total: usize = lengths.iter().sum();
        let mut gather = Vec::with_capacity(3 * sequences * heads * longest);
        let mut scatter = Vec::with_capacity(total * heads);
        let mut mask = Vec::with_capacity(sequences * longest);
        let mut offsets = Vec::with_capacity(sequences);
        let mut offset = 0;
        for (s, &len) in lengths.iter().enumerate() {
            offsets.push(offset);
            for t in 0..longest {
                mask.push(if t < len { 0f32 } else { f32::NEG_INFINITY });
            }
            for t in 0..len {
                scatter.extend((0..heads).map(|h| ((s * heads + h) * longest + t) as u32));
            }
            offset += len;
        }
        for part in 0..3 {
            for (&len, &first) in lengths.iter().zip(&offsets) {
                for h in 0..heads {
                    for t in 0..longest {
                        let token = first + t.min(len - 1);
                        gather.push(((token * 3 + part) * heads + h) as u32);
                    }
                }
            }
        }
        let (gathered, scattered) = (gather.len(), scatter.len());
        Ok(Padding {
            sequences,
            longest,
            gather: Tensor::from_vec(gather, gathered, device)?,
            scatter: Tensor::from_vec(scatter, scattered, device)?,
            mask: Tensor::from_vec(mask, (sequences, 1, 1, longest), device)?.to_dtype(dtype)?,
        })
    }
}

/// Exact (erf) GELU. On CPU f32 it uses the Abramowitz-Stegun 7.1.26 erf (absolute
/// error below 1.5e-7, far under the encoder's 1e-5 tolerance), several times cheaper
/// than the libm erf candle calls per element; elsewhere candle's kernel.
fn gelu_erf(x: &Tensor) -> Result<Tensor> {
    if !x.device().is_cpu() || x.dtype() != DType::F32 {
        return x.gelu_erf();
    }
    let mut values = x.flatten_all()?.to_vec1::<f32>()?;
    super::native::gelu_erf(&mut values);
    Tensor::from_vec(values, x.shape(), x.device())
}

/// One pooled vector per sequence from packed hidden states: the first token (CLS) or
/// the mean of the sequence's tokens. Per sequence on the CPU; in one operation for the
/// whole batch elsewhere ([`pool_batched`]).
pub(crate) fn pool(states: &Tensor, lengths: &[usize], cls: bool) -> Result<Tensor> {
    if !states.device().is_cpu() {
        return pool_batched(states, lengths, cls);
    }
    let mut rows = Vec::with_capacity(lengths.len());
    let mut offset = 0;
    for &len in lengths {
        let row = if cls {
            states.narrow(0, offset, 1)?
        } else {
            states
                .narrow(0, offset, len)?
                .to_dtype(DType::F32)?
                .mean_keepdim(0)?
        };
        rows.push(row.to_dtype(DType::F32)?);
        offset += len;
    }
    Tensor::cat(&rows, 0)
}

/// [`pool`] as one operation: the first rows picked by one gather, or the means as one
/// product with a `[sequences, tokens]` matrix holding `1/length` over each sequence's
/// tokens (equal to the per-sequence mean up to float rounding).
fn pool_batched(states: &Tensor, lengths: &[usize], cls: bool) -> Result<Tensor> {
    let device = states.device();
    let total: usize = lengths.iter().sum();
    let states = states.to_dtype(DType::F32)?;
    if cls {
        let firsts: Vec<u32> = lengths
            .iter()
            .scan(0, |offset, &len| {
                let first = *offset;
                *offset += len;
                Some(first as u32)
            })
            .collect();
        return states.index_select(&Tensor::from_vec(firsts, lengths.len(), device)?, 0);
    }
    let mut weights = vec![0f32; lengths.len() * total];
    let mut offset = 0;
    for (s, &len) in lengths.iter().enumerate() {
        weights[s * total + offset..s * total + offset + len].fill(1.0 / len as f32);
        offset += len;
    }
    Tensor::from_vec(weights, (lengths.len(), total), device)?.matmul(&states)
}

/// Rows scaled to unit length.
pub(crate) fn l2_normalise(x: &Tensor) -> Result<Tensor> {
    let norms = x
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12f32, f32::MAX)?;
    x.broadcast_div(&norms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed_states() -> Tensor {
        // Two sequences, lengths 2 and 3, hidden size 2.
        let rows = [
            [1.0f32, 2.0],
            [3.0, 4.0],
            [0.0, 3.0],
            [6.0, 0.0],
            [3.0, 6.0],
        ];
        Tensor::from_iter(rows.into_iter().flatten(), &Device::Cpu)
            .and_then(|t| t.reshape((5, 2)))
            .expect("a 5x2 tensor")
    }

    #[test]
    fn mean_pooling_averages_each_sequence_over_its_own_tokens() {
        let pooled = pool(&packed_states(), &[2, 3], false)
            .and_then(|t| t.to_vec2::<f32>())
            .expect("pooling runs");
        assert_eq!(pooled, vec![vec![2.0, 3.0], vec![3.0, 3.0]]);
    }

    #[test]
    fn cls_pooling_takes_each_sequence_first_token() {
        let pooled = pool(&packed_states(), &[2, 3], true)
            .and_then(|t| t.to_vec2::<f32>())
            .expect("pooling runs");
        assert_eq!(pooled, vec![vec![1.0, 2.0], vec![0.0, 3.0]]);
    }

    #[test]
    fn batched_pooling_gives_the_per_sequence_pooling() {
        for cls in [false, true] {
            let one_by_one = pool(&packed_states(), &[2, 3], cls)
                .and_then(|t| t.to_vec2::<f32>())
                .expect("pooling runs");
            let batched = pool_batched(&packed_states(), &[2, 3], cls)
                .and_then(|t| t.to_vec2::<f32>())
                .expect("pooling runs");
            for (a, b) in one_by_one.iter().flatten().zip(batched.iter().flatten()) {
                assert!((a - b).abs() <= 1e-6, "cls {cls}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn attention_names_parse() {
        for a in [Attention::Auto, Attention::PerSequence, Attention::Padded] {
            assert_eq!(Attention::parse(a.as_str()), Some(a));
        }
        assert_eq!(Attention::parse("flash"), None);
        assert!(!Attention::Auto.padded_on(&Device::Cpu));
        assert!(Attention::Padded.padded_on(&Device::Cpu));
    }

    #[test]
    fn fast_gelu_matches_candles_libm_gelu_within_a_millionth() {
        let xs: Vec<f32> = (-4000..=4000).map(|i| i as f32 / 400.0).collect();
        let x = Tensor::from_vec(xs, 8001, &Device::Cpu).expect("a vector");
        let ours = gelu_erf(&x)
            .and_then(|t| t.to_vec1::<f32>())
            .expect("gelu runs");
        let candle = x
            .gelu_erf()
            .and_then(|t| t.to_vec1::<f32>())
            .expect("gelu runs");
        for (a, b) in ours.iter().zip(&candle) {
            assert!((a - b).abs() <= 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn rows_come_out_with_unit_length() {
        let unit = l2_normalise(&packed_states())
            .and_then(|t| t.to_vec2::<f32>())
            .expect("normalising runs");
        assert!((unit[0][0] - 1.0 / 5f32.sqrt()).abs() < 1e-7);
        for row in unit {
            let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-6, "norm {norm}");
        }
    }
}
