//! The same decoder as [`super::model`], for CPU models with f32 activations, on plain
//! `Vec<f32>` buffers instead of candle tensors.
//!
//! A 135M-parameter model makes about 750 tensor operations per decode step, each of a
//! few hundred values: on candle's CPU backend every one allocates, dispatches and
//! copies, which cost as much as the matrix products themselves. Here a step is the
//! products ([`super::qmatmul`], or candle's kernel for other weight types) and a few
//! loops over each row; attention over the cache ([`super::attend`], AVX2 when the CPU
//! has it) runs for every (query row, key-value group) pair on the thread pool, a
//! prompt's rows reading only the keys up to their own position.
//!
//! The arithmetic is the tensor path's, operation for operation, and the tests hold the
//! two to the same references (`worker/tests/llm_tiny.rs` runs both).

use super::attend;
use super::model::{Activation, Config, Embedding, GateUp, Linear, Norm, Qkv, RopeStyle, Weight};
use candle_core::{DType, Device, Result, Tensor};

/// One sequence's keys and values of every layer: `[position][kv_heads * head_dim]`.
#[derive(Debug, Default)]
pub struct PlainKv {
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

impl PlainKv {
    /// An empty cache for `layers` blocks.
    pub fn new(layers: usize) -> Self {
        PlainKv {
            k: vec![Vec::new(); layers],
            v: vec![Vec::new(); layers],
        }
    }

    /// Room for `tokens` positions of `width` keys (and values) a layer, so that a
    /// sequence's cache grows in place instead of being copied (and its new pages
    /// faulted in) each time it doubles.
    pub(crate) fn reserve(&mut self, tokens: usize, width: usize) {
        let want = tokens.saturating_mul(width);
        for layer in self.k.iter_mut().chain(self.v.iter_mut()) {
            layer.reserve_exact(want.saturating_sub(layer.len()));
        }
    }

    /// Bytes the keys and values take.
    pub(crate) fn bytes(&self) -> usize {
        self.k.iter().chain(&self.v).map(Vec::len).sum::<usize>() * std::mem::size_of::<f32>()
    }

    /// The first `len` of the `total` positions cached, in every layer (nothing when the
    /// plain path is not the one in use).
    pub(crate) fn prefix(&self, len: usize, total: usize) -> PlainKv {
        let cut = |layers: &[Vec<f32>]| -> Vec<Vec<f32>> {
            layers
                .iter()
                .map(|l| match l.len().checked_div(total) {
                    Some(width) => l[..len * width].to_vec(),
                    None => Vec::new(),
                })
                .collect()
        };
        PlainKv {
            k: cut(&self.k),
            v: cut(&self.v),
        }
    }
}

/// A projection's weight and bias, read out of the tensor model.
struct Proj {
    weight: Weight,
    bias: Option<Vec<f32>>,
    out: usize,
}

impl Proj {
    fn new(linear: &Linear) -> Result<Self> {
        let bias = match &linear.bias {
            Some(b) => Some(b.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?),
            None => None,
        };
        Ok(Proj {
            weight: linear.weight.clone(),
            bias,
            out: linear.weight.out_dim()?,
        })
    }

    /// `x W^T + b` for `m` rows of `k` values.
    fn forward(&self, x: &[f32], m: usize, k: usize) -> Result<Vec<f32>> {
        let mut y = self.weight.matmul_rows(x, m, k)?;
        if y.len() != m * self.out {
            candle_core::bail!("matmul: {} outputs, expected {m} x {}", y.len(), self.out);
        }
        if let Some(b) = &self.bias {
            for row in y.chunks_exact_mut(self.out) {
                for (v, &b) in row.iter_mut().zip(b) {
                    *v += b;
                }
            }
        }
        Ok(y)
    }
}

fn norm_weights(norm: &Norm) -> Result<Vec<f32>> {
    norm.0.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()
}

/// One block's weights.
struct PlainBlock {
    attn_norm: Vec<f32>,
    /// `[q; k; v]` in one product, or three.
    qkv: Vec<Proj>,
    qk_norm: Option<(Vec<f32>, Vec<f32>)>,
    o: Proj,
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    /// `[gate; up]` in one product, or two.
    gate_up: Vec<Proj>,
    down: Proj,
    post_ffn_norm: Option<Vec<f32>>,
}

/// A model's weights and tables for the plain path.
pub struct Plain {
    config: Config,
    embedding: Embedding,
    blocks: Vec<PlainBlock>,
    final_norm: Vec<f32>,
    lm_head: Proj,
    /// `[positions][head_dim / 2]` cos and sin of full-attention layers.
    rope_global: (Vec<f32>, Vec<f32>),
    /// The same for sliding-window layers.
    rope_local: (Vec<f32>, Vec<f32>),
    positions: usize,
}

/// What [`Plain::new`] reads from the tensor model.
pub struct PlainParts<'a> {
    /// Shape and arithmetic.
    pub config: &'a Config,
    /// Token embedding.
    pub embedding: &'a Embedding,
    /// Blocks, in order.
    pub blocks: &'a [super::model::Block],
    /// Norm after the last block.
    pub final_norm: &'a Norm,
    /// LM head.
    pub lm_head: &'a Linear,
    /// cos and sin tables `[positions, head_dim / 2]`, global then local.
    pub ropes: [&'a (Tensor, Tensor); 2],
}

fn table(t: &(Tensor, Tensor)) -> Result<(Vec<f32>, Vec<f32>)> {
    Ok((
        t.0.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?,
        t.1.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?,
    ))
}

impl Plain {
    /// The plain form of a model (weights are shared, not copied; norms, biases and rope
    /// tables are read out as f32).
    pub fn new(parts: PlainParts<'_>) -> Result<Self> {
        let c = parts.config;
        // `attend` writes each key/value head's group of query heads through a raw
        // pointer: the groups must tile the heads exactly.
        if c.kv_heads == 0 || !c.heads.is_multiple_of(c.kv_heads) {
            candle_core::bail!(
                "{} query heads do not divide into {} key/value heads",
                c.heads,
                c.kv_heads
            );
        }
        let mut blocks = Vec::with_capacity(parts.blocks.len());
        for b in parts.blocks {
            let qkv = match &b.qkv {
                Qkv::Separate(q, k, v) => vec![Proj::new(q)?, Proj::new(k)?, Proj::new(v)?],
                Qkv::Fused(all) => vec![Proj::new(all)?],
            };
            let gate_up = match &b.gate_up {
                GateUp::Separate(g, u) => vec![Proj::new(g)?, Proj::new(u)?],
                GateUp::Fused(both) => vec![Proj::new(both)?],
            };
            let qk_norm = match &b.qk_norm {
                Some((qn, kn)) => Some((norm_weights(qn)?, norm_weights(kn)?)),
                None => None,
            };
            blocks.push(PlainBlock {
                attn_norm: norm_weights(&b.attn_norm)?,
                qkv,
                qk_norm,
                o: Proj::new(&b.o)?,
                post_attn_norm: b.post_attn_norm.as_ref().map(norm_weights).transpose()?,
                ffn_norm: norm_weights(&b.ffn_norm)?,
                gate_up,
                down: Proj::new(&b.down)?,
                post_ffn_norm: b.post_ffn_norm.as_ref().map(norm_weights).transpose()?,
            });
        }
        let rope_global = table(parts.ropes[0])?;
        let rope_local = table(parts.ropes[1])?;
        let positions = parts.ropes[0].0.dim(0)?;
        Ok(Plain {
            config: c.clone(),
            embedding: parts.embedding.clone(),
            blocks,
            final_norm: norm_weights(parts.final_norm)?,
            lm_head: Proj::new(parts.lm_head)?,
            rope_global,
            rope_local,
            positions,
        })
    }

    /// The residual stream `[n * t, hidden]` after the last block, for either one
    /// sequence of `t` new tokens or `n` sequences of one (checked by the caller);
    /// `starts[i]` is sequence i's cached length, and each `kv` grows by its new tokens.
    pub fn blocks_forward(
        &self,
        tokens: &[Vec<u32>],
        kv: &mut [&mut PlainKv],
        starts: &[usize],
    ) -> Result<Vec<f32>> {
        let c = &self.config;
        let n = tokens.len();
        let t = tokens[0].len();
        if starts.iter().any(|&s| s + t > self.positions) {
            candle_core::bail!("a position beyond the rope tables ({})", self.positions);
        }
        let rows = n * t;
        let hidden = c.hidden;
        let mut x = self.embed(tokens)?;
        let (qw, kw) = (c.heads * c.head_dim, c.kv_heads * c.head_dim);
        let eps = c.rms_eps as f32;
        // Query row r: sequence r / t at position starts[r / t] + r % t.
        let queries: Vec<(usize, usize)> =
            (0..rows).map(|r| (r / t, starts[r / t] + r % t)).collect();
        for (layer, block) in self.blocks.iter().enumerate() {
            let windowed = c.layer_uses_window[layer];
            let h = rms_norm_rows(&x, &block.attn_norm, hidden, eps);
            let (mut q, mut k, v) = if block.qkv.len() == 1 {
                let all = block.qkv[0].forward(&h, rows, hidden)?;
                split_columns(&all, rows, &[qw, kw, kw])
            } else {
                (
                    block.qkv[0].forward(&h, rows, hidden)?,
                    block.qkv[1].forward(&h, rows, hidden)?,
                    block.qkv[2].forward(&h, rows, hidden)?,
                )
            };
            if let Some((qn, kn)) = &block.qk_norm {
                q = rms_norm_rows(&q, qn, c.head_dim, eps);
                k = rms_norm_rows(&k, kn, c.head_dim, eps);
            }
            let rope = if windowed {
                &self.rope_local
            } else {
                &self.rope_global
            };
            for r in 0..rows {
                let pos = starts[r / t] + r % t;
                self.rotate(&mut q[r * qw..(r + 1) * qw], rope, pos);
                self.rotate(&mut k[r * kw..(r + 1) * kw], rope, pos);
            }
            for (i, cache) in kv.iter_mut().enumerate() {
                cache.k[layer].extend_from_slice(&k[i * t * kw..(i + 1) * t * kw]);
                cache.v[layer].extend_from_slice(&v[i * t * kw..(i + 1) * t * kw]);
            }
            let window = if windowed { c.sliding_window } else { None };
            let att = self.attend(&q, kv, &queries, layer, window);
            let h = block.o.forward(&att, rows, qw)?;
            let h = match &block.post_attn_norm {
                Some(w) => rms_norm_rows(&h, w, hidden, eps),
                None => h,
            };
            add_into(&mut x, &h);
            let h = rms_norm_rows(&x, &block.ffn_norm, hidden, eps);
            let (gate, up) = if block.gate_up.len() == 1 {
                let both = block.gate_up[0].forward(&h, rows, hidden)?;
                let ffn = both.len() / rows / 2;
                let (g, u, _) = split_columns(&both, rows, &[ffn, ffn, 0]);
                (g, u)
            } else {
                (
                    block.gate_up[0].forward(&h, rows, hidden)?,
                    block.gate_up[1].forward(&h, rows, hidden)?,
                )
            };
            let ffn = gate.len() / rows;
            let mut act = gate;
            match c.activation {
                Activation::Silu => {
                    for (g, u) in act.iter_mut().zip(&up) {
                        *g = *g / (1.0 + (-*g).exp()) * u;
                    }
                }
                Activation::GeluTanh => {
                    for (g, u) in act.iter_mut().zip(&up) {
                        *g = gelu_tanh(*g) * u;
                    }
                }
            }
            let h = block.down.forward(&act, rows, ffn)?;
            let h = match &block.post_ffn_norm {
                Some(w) => rms_norm_rows(&h, w, hidden, eps),
                None => h,
            };
            add_into(&mut x, &h);
        }
        Ok(x)
    }

    /// Logits `[rows, vocab]` of residual rows (final norm, LM head, soft-cap).
    pub fn head(&self, x: &[f32], rows: usize) -> Result<Tensor> {
        let c = &self.config;
        let h = rms_norm_rows(x, &self.final_norm, c.hidden, c.rms_eps as f32);
        let mut logits = self.lm_head.forward(&h, rows, c.hidden)?;
        if let Some(cap) = c.final_logit_softcap {
            for l in &mut logits {
                *l = (*l / cap).tanh() * cap;
            }
        }
        Tensor::from_vec(logits, (rows, c.vocab), &Device::Cpu)
    }

    fn embed(&self, tokens: &[Vec<u32>]) -> Result<Vec<f32>> {
        let flat: Vec<u32> = tokens.iter().flatten().copied().collect();
        let n = flat.len();
        let ids = Tensor::from_vec(flat, n, &Device::Cpu)?;
        let x = match &self.embedding {
            Embedding::Quantized(q) => q.embedding(&ids)?,
            Embedding::Dense(w) => w.index_select(&ids, 0)?,
        };
        let mut x = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        if let Some(s) = self.config.embed_scale {
            for v in &mut x {
                *v *= s;
            }
        }
        Ok(x)
    }

    /// Rotary embedding of one row of heads at position `pos`, in place.
    fn rotate(&self, row: &mut [f32], table: &(Vec<f32>, Vec<f32>), pos: usize) {
        let d = self.config.head_dim;
        let half = d / 2;
        let cos = &table.0[pos * half..(pos + 1) * half];
        let sin = &table.1[pos * half..(pos + 1) * half];
        for head in row.chunks_exact_mut(d) {
            match self.config.rope_style {
                RopeStyle::Interleaved => {
                    for i in 0..half {
                        let (a, b) = (head[2 * i], head[2 * i + 1]);
                        head[2 * i] = a * cos[i] - b * sin[i];
                        head[2 * i + 1] = a * sin[i] + b * cos[i];
                    }
                }
                RopeStyle::Halves => {
                    for i in 0..half {
                        let (a, b) = (head[i], head[i + half]);
                        head[i] = a * cos[i] - b * sin[i];
                        head[i + half] = a * sin[i] + b * cos[i];
                    }
                }
            }
        }
    }

    /// Attention of each query row over its sequence's cache (which already holds the
    /// new tokens), causal and within the window: `[rows, heads * head_dim]`. Query row r
    /// is `(sequence, position)` = `queries[r]`. The (row, key-value group) pairs are
    /// spread over the thread pool, each with the query heads that share the group's
    /// keys and values (grouped-query attention: 3 in SmolLM2) and its arithmetic in
    /// [`attend`]; a prompt's rows see only the keys up to their own position.
    fn attend(
        &self,
        q: &[f32],
        kv: &[&mut PlainKv],
        queries: &[(usize, usize)],
        layer: usize,
        window: Option<usize>,
    ) -> Vec<f32> {
        let c = &self.config;
        let (d, heads, groups) = (c.head_dim, c.heads, c.kv_heads);
        let (qw, kw) = (heads * d, groups * d);
        let rep = heads / groups;
        let scale = c.attn_scale;
        let mut out = vec![0f32; queries.len() * qw];
        // What the unchecked writes below rely on (`Plain::new` refuses other head counts;
        // the projections give `q` its width).
        debug_assert_eq!(rep * groups, heads, "key/value groups tile the query heads");
        debug_assert_eq!(
            q.len(),
            queries.len() * qw,
            "one query row per (sequence, position)"
        );
        let out_len = out.len();
        let out_ptr = out.as_mut_ptr() as usize;
        super::pool::pool().run(queries.len() * groups, |range| {
            let mut weights = Vec::new();
            for item in range {
                let (r, g) = (item / groups, item % groups);
                let (seq, pos) = queries[r];
                let total = pos + 1;
                let first = match window {
                    Some(w) if total > w => total - w,
                    _ => 0,
                };
                let (keys, values) = (&kv[seq].k[layer], &kv[seq].v[layer]);
                let group = attend::Group {
                    queries: &q[r * qw + g * rep * d..r * qw + (g + 1) * rep * d],
                    keys: &keys[first * kw..total * kw],
                    values: &values[first * kw..total * kw],
                    stride: kw,
                    off: g * d,
                    d,
                    n: total - first,
                };
                debug_assert!(
                    r < queries.len() && (r * qw + (g + 1) * rep * d) <= out_len,
                    "head range outside the output"
                );
                // SAFETY: the pool hands out disjoint items, and item (r, g)
                // writes only the head_dim values of its own query heads in `out`, which
                // outlives the call.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        (out_ptr as *mut f32).add(r * qw + g * rep * d),
                        rep * d,
                    )
                };
                attend::attend(&group, scale, &mut weights, dst);
            }
        });
        out
    }
}

/// Additive mask `[t, keys]` of `t` queries from position `start` over keys
/// `0..keys`: causal, and within the window.
pub fn prompt_mask(t: usize, start: usize, keys: usize, window: Option<usize>) -> Vec<f32> {
    let mut m = vec![0f32; t * keys];
    for i in 0..t {
        let pos = start + i;
        for key in 0..keys {
            let visible = key <= pos && window.is_none_or(|w| pos - key < w);
            if !visible {
                m[i * keys + key] = f32::NEG_INFINITY;
            }
        }
    }
    m
}

/// RMSNorm of each `width`-long row of `x` with weight `w`.
fn rms_norm_rows(x: &[f32], w: &[f32], width: usize, eps: f32) -> Vec<f32> {
    let mut y = vec![0f32; x.len()];
    for (src, dst) in x.chunks_exact(width).zip(y.chunks_exact_mut(width)) {
        // llama.cpp's order of operations (sum of squares in f64, then the reciprocal).
        let sum: f64 = src.iter().map(|&v| f64::from(v * v)).sum();
        let scale = 1.0 / ((sum / width as f64) as f32 + eps).sqrt();
        for ((o, &v), &g) in dst.iter_mut().zip(src).zip(w) {
            *o = v * scale * g;
        }
    }
    y
}

fn add_into(x: &mut [f32], h: &[f32]) {
    for (a, b) in x.iter_mut().zip(h) {
        *a += b;
    }
}

/// GELU with the tanh approximation, as candle computes it.
fn gelu_tanh(v: f32) -> f32 {
    0.5 * v * (1.0 + (0.797_884_6 * v * (1.0 + 0.044_715 * v * v)).tanh())
}

/// Splits each of `rows` rows of `all` into consecutive column groups of the given
/// widths (the third may be 0).
fn split_columns(all: &[f32], rows: usize, widths: &[usize; 3]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let total: usize = widths.iter().sum();
    let mut parts: [Vec<f32>; 3] = Default::default();
    for r in 0..rows {
        let row = &all[r * total..(r + 1) * total];
        let mut at = 0;
        for (p, &w) in parts.iter_mut().zip(widths) {
            p.extend_from_slice(&row[at..at + w]);
            at += w;
        }
    }
    let [a, b, c] = parts;
    (a, b, c)
}
