//! The BERT forward pass the encoder runs: the sequences of a batch packed without
//! padding into one `[sum_tokens, hidden]` matrix (as text-embeddings-inference does on
//! CPU), so every dense layer is a single large matmul and no padding token is ever
//! computed; attention runs per sequence on its own tokens only.
//!
//! The weights are the checkpoint's, rearranged once at load: query, key and value are
//! fused into one `[hidden, 3·hidden]` matrix and every dense weight is stored
//! transposed and contiguous (`[in, out]`), so the matmuls need no copy per call.
//! Results equal candle-transformers' padded BERT up to float rounding.

use super::config::{Activation, BertConfig};
use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::VarBuilder;

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
}

impl PackedBert {
    /// Loads the weights of a BERT checkpoint (with or without a `bert.` prefix).
    pub(crate) fn load(vb: VarBuilder, config: &BertConfig) -> Result<Self> {
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
        })
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
        for layer in &self.layers {
            x = self.layer_forward(layer, &x, &lengths)?;
        }
        Ok(x)
    }

    fn layer_forward(&self, layer: &Layer, x: &Tensor, lengths: &[usize]) -> Result<Tensor> {
        let qkv = layer.qkv.forward(x)?;
        let context = self.attention(&qkv, lengths)?;
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
/// the mean of the sequence's tokens.
pub(crate) fn pool(states: &Tensor, lengths: &[usize], cls: bool) -> Result<Tensor> {
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
