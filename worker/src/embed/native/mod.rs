//! The encoder's native CPU forward pass: the same packed (unpadded) BERT as
//! [`super::packed`], computed on plain `f32` buffers instead of candle tensors, with
//! the matrix kernel and fused float kernels of `credence_kernels` ([`gemm`], [`math`]).
//!
//! Why it exists: on CPU the candle path spends a third of its time outside the matrix
//! products (a fresh tensor per bias add, residual, activation and reshape; a scalar
//! libm `erf` per GELU input) and the rest in a general matmul that re-packs the weights
//! on every call. Here the weights are packed once at load, bias, residual and GELU are
//! applied to each output tile while it is in L1, and attention is a direct loop over
//! each sequence's own tokens. It runs where it is fastest and exact enough: a CPU with
//! AVX2 and FMA, f32, or, asked for bf16 on a CPU with AVX-512 BF16, with the dense
//! products' inputs in bfloat16 ([`gemm`]). Elsewhere (CUDA, half precision, other CPUs)
//! the candle path runs.
//!
//! Results agree with the candle path to float rounding (`tests/embed_minilm.rs`
//! compares them) and, like it, a sentence's vector is bit-identical in any batch.

use credence_kernels::{gemm, math};

use super::config::Activation;
use super::packed::{Norm as CandleNorm, PackedBert};
use candle_core::{Result, Tensor};
use gemm::{Epilogue, PackedWeights};
use rayon::prelude::*;

/// The exact GELU (Abramowitz-Stegun erf, absolute error below 1.5e-7) in place, on any
/// CPU: the candle pass uses it too, several times cheaper than candle's libm erf.
pub(crate) fn gelu_erf(xs: &mut [f32]) {
    math::gelu_erf(xs);
}

/// Whether this CPU can run the native forward pass (x86-64 with AVX2 and FMA).
pub(crate) fn supported() -> bool {
    gemm::supported()
}

/// Whether this CPU can run the native pass with bfloat16 products (AVX-512 BF16).
pub(crate) fn supports_bf16() -> bool {
    gemm::has_bf16()
}

/// Layer-norm parameters.
struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

impl Norm {
    fn from_candle(norm: &CandleNorm) -> Result<Self> {
        Ok(Norm {
            weight: norm.weight.to_vec1::<f32>()?,
            bias: norm.bias.to_vec1::<f32>()?,
            eps: norm.eps,
        })
    }

    /// Normalises every `hidden`-wide row of `x` in place.
    #[inline(always)]
    fn rows(&self, x: &mut [f32]) {
        for row in x.chunks_exact_mut(self.weight.len()) {
            math::layer_norm(row, &self.weight, &self.bias, self.eps);
        }
    }
}

struct Layer {
    qkv: PackedWeights,
    attention_out: PackedWeights,
    attention_norm: Norm,
    intermediate: PackedWeights,
    output: PackedWeights,
    output_norm: Norm,
}

fn pack(weight_t: &Tensor, bias: &Tensor, bf16: bool) -> Result<PackedWeights> {
    let (k, n) = weight_t.dims2()?;
    let values = weight_t.flatten_all()?.to_vec1::<f32>()?;
    let bias = bias.to_vec1::<f32>()?;
    Ok(if bf16 {
        PackedWeights::new_bf16(&values, k, n, bias)
    } else {
        PackedWeights::new(&values, k, n, bias)
    })
}

/// A BERT encoder whose forward pass runs on the native CPU kernels.
pub(crate) struct NativeBert {
    word_embeddings: Vec<f32>,
    position_embeddings: Vec<f32>,
    token_type_row: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    head_dim: usize,
    activation: Epilogue,
}

impl NativeBert {
    /// Copies and packs the weights of a loaded candle model (f32, any device); with
    /// `bf16` the dense layers' products round their inputs to bfloat16 (AVX-512 BF16),
    /// all else stays f32.
    pub(crate) fn from_candle(model: &PackedBert, bf16: bool) -> Result<Self> {
        if !supported() {
            candle_core::bail!("the native encoder needs an x86-64 CPU with AVX2 and FMA");
        }
        if bf16 && !supports_bf16() {
            candle_core::bail!("bfloat16 products need an x86-64 CPU with AVX-512 BF16");
        }
        let layers = model
            .layers
            .iter()
            .map(|l| {
                Ok(Layer {
                    qkv: pack(&l.qkv.weight_t, &l.qkv.bias, bf16)?,
                    attention_out: pack(&l.attention_out.weight_t, &l.attention_out.bias, bf16)?,
                    attention_norm: Norm::from_candle(&l.attention_norm)?,
                    intermediate: pack(&l.intermediate.weight_t, &l.intermediate.bias, bf16)?,
                    output: pack(&l.output.weight_t, &l.output.bias, bf16)?,
                    output_norm: Norm::from_candle(&l.output_norm)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let hidden = model.heads * model.head_dim;
        Ok(NativeBert {
            word_embeddings: model.word_embeddings.flatten_all()?.to_vec1::<f32>()?,
            position_embeddings: model.position_embeddings.flatten_all()?.to_vec1::<f32>()?,
            token_type_row: model.token_type_row.flatten_all()?.to_vec1::<f32>()?,
            embedding_norm: Norm::from_candle(&model.embedding_norm)?,
            layers,
            hidden,
            heads: model.heads,
            head_dim: model.head_dim,
            activation: match model.activation {
                Activation::Gelu => Epilogue::Gelu,
                Activation::GeluTanh => Epilogue::GeluTanh,
                Activation::Relu => Epilogue::Relu,
            },
        })
    }

    /// Hidden states of every token of every sequence, packed in order:
    /// `sum of lengths` rows of `hidden` values. Sequences must be non-empty, their ids
    /// in the vocabulary and their lengths within the position table.
    pub(crate) fn forward(&self, batch: &[&[u32]]) -> Result<Vec<f32>> {
        let h = self.hidden;
        let vocab = self.word_embeddings.len() / h;
        let max_len = self.position_embeddings.len() / h;
        for seq in batch {
            if seq.is_empty() {
                candle_core::bail!("empty token sequence");
            }
            if seq.len() > max_len {
                candle_core::bail!(
                    "sequence of {} tokens; the model holds {max_len}",
                    seq.len()
                );
            }
            if let Some(id) = seq.iter().find(|&&id| id as usize >= vocab) {
                candle_core::bail!("token id {id} is outside the vocabulary of {vocab}");
            }
        }
        // SAFETY: `supported()` was checked when the model was built.
        Ok(unsafe { self.forward_avx2(batch) })
    }

    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
    unsafe fn forward_avx2(&self, batch: &[&[u32]]) -> Vec<f32> {
        let h = self.hidden;
        let lengths: Vec<usize> = batch.iter().map(|s| s.len()).collect();
        let total: usize = lengths.iter().sum();
        let mut x = vec![0.0f32; total * h];
        let mut rows = x.chunks_exact_mut(h);
        for seq in batch {
            for (pos, &id) in seq.iter().enumerate() {
                let row = rows.next().expect("one row per token");
                let word = &self.word_embeddings[id as usize * h..(id as usize + 1) * h];
                let position = &self.position_embeddings[pos * h..(pos + 1) * h];
                for (((v, w), p), t) in row
                    .iter_mut()
                    .zip(word)
                    .zip(position)
                    .zip(&self.token_type_row)
                {
                    *v = w + p + t;
                }
            }
        }
        self.embedding_norm.rows(&mut x);

        let inner = self.layers.first().map_or(0, |l| l.intermediate.n());
        let mut qkv = vec![0.0f32; total * 3 * h];
        let mut context = vec![0.0f32; total * h];
        let mut attended = vec![0.0f32; total * h];
        let mut intermediate = vec![0.0f32; total * inner];
        for layer in &self.layers {
            gemm::matmul(&x, total, &layer.qkv, None, Epilogue::None, &mut qkv);
            self.attention(&qkv, &lengths, &mut context);
            gemm::matmul(
                &context,
                total,
                &layer.attention_out,
                Some(&x),
                Epilogue::None,
                &mut attended,
            );
            layer.attention_norm.rows(&mut attended);
            gemm::matmul(
                &attended,
                total,
                &layer.intermediate,
                None,
                self.activation,
                &mut intermediate,
            );
            gemm::matmul(
                &intermediate,
                total,
                &layer.output,
                Some(&attended),
                Epilogue::None,
                &mut x,
            );
            layer.output_norm.rows(&mut x);
        }
        x
    }

    /// Scaled dot-product attention of each sequence over its own tokens, sequences in
    /// parallel; `qkv` rows are query, key and value side by side, `context` gets
    /// `hidden` values per token.
    fn attention(&self, qkv: &[f32], lengths: &[usize], context: &mut [f32]) {
        let h = self.hidden;
        let mut jobs = Vec::with_capacity(lengths.len());
        let mut rest = context;
        let mut offset = 0;
        for &len in lengths {
            let (mine, tail) = rest.split_at_mut(len * h);
            jobs.push((offset, len, mine));
            rest = tail;
            offset += len;
        }
        jobs.into_par_iter()
            .with_min_len(4)
            .for_each(|(offset, len, out)| {
                let rows = &qkv[offset * 3 * h..(offset + len) * 3 * h];
                // SAFETY: this model exists only where `supported()` holds.
                unsafe { attend_sequence(rows, len, self.heads, self.head_dim, out) };
            });
    }
}

/// Attention of one sequence: `qkv` holds its `len` rows of `3·heads·head_dim` values,
/// `out` receives `len` rows of `heads·head_dim`.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
unsafe fn attend_sequence(qkv: &[f32], len: usize, heads: usize, head_dim: usize, out: &mut [f32]) {
    let h = heads * head_dim;
    let scale = 1.0 / (head_dim as f32).sqrt();
    let mut scores = vec![0.0f32; len];
    for head in 0..heads {
        let col = head * head_dim;
        for i in 0..len {
            let q = &qkv[i * 3 * h + col..i * 3 * h + col + head_dim];
            for (j, s) in scores.iter_mut().enumerate() {
                let k = &qkv[j * 3 * h + h + col..j * 3 * h + h + col + head_dim];
                *s = math::dot(q, k) * scale;
            }
            math::softmax(&mut scores);
            let dst = &mut out[i * h + col..i * h + col + head_dim];
            dst.fill(0.0);
            for (j, &p) in scores.iter().enumerate() {
                let v = &qkv[j * 3 * h + 2 * h + col..j * 3 * h + 2 * h + col + head_dim];
                for (d, &vv) in dst.iter_mut().zip(v) {
                    *d += p * vv;
                }
            }
        }
    }
}

/// One pooled, unit-length vector per sequence from packed hidden states: the first
/// token (CLS) or the mean of the sequence's tokens.
pub(crate) fn pool_normalised(
    states: &[f32],
    hidden: usize,
    lengths: &[usize],
    cls: bool,
) -> Vec<Vec<f32>> {
    let mut offset = 0;
    lengths
        .iter()
        .map(|&len| {
            let rows = &states[offset * hidden..(offset + len) * hidden];
            offset += len;
            let mut v = if cls {
                rows[..hidden].to_vec()
            } else {
                let mut sum = vec![0.0f32; hidden];
                for row in rows.chunks_exact(hidden) {
                    for (s, x) in sum.iter_mut().zip(row) {
                        *s += x;
                    }
                }
                let n = len as f32;
                sum.iter_mut().for_each(|s| *s /= n);
                sum
            };
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|x| *x /= norm);
            v
        })
        .collect()
}
