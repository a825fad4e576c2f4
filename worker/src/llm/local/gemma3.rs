//! Gemma 3: four norms per block (before and after attention and the MLP), per-head
//! query/key norms, a GELU-tanh gated MLP (candle's stock quantized Gemma 3 uses SiLU,
//! which gives wrong logits), embeddings scaled by sqrt(hidden), and five
//! sliding-window layers (window 512 or 1024, rope base 10,000) for each full-attention
//! layer (rope base 1,000,000, linearly scaled on the larger models).
//!
//! Hugging Face stores each norm as `w` and multiplies by `1 + w`; llama.cpp's converter
//! adds the 1 when writing GGUF, so only safetensors weights get the offset here.

use super::hf::HfConfig;
use super::limits;
use super::model::{Activation, Config, Rope};
use super::weights::{LoadError, Meta, Source};

/// GGUF `general.architecture`.
pub const ARCH: &str = "gemma3";

/// Norm weights are stored as `w` for a `1 + w` scale.
pub const NORM_OFFSET: f64 = 1.0;

/// Every sixth layer attends to the whole sequence, the others through the window.
const DEFAULT_PATTERN: usize = 6;

/// Rope base of the sliding-window layers.
const LOCAL_THETA: f32 = 10_000.0;

/// The Hugging Face tensor name of a GGUF base name.
pub fn hf_name(base: &str) -> String {
    if let Some(rest) = base.strip_prefix("blk.") {
        let (layer, part) = rest.split_once('.').unwrap_or((rest, ""));
        let hf = match part {
            "attn_norm" => Some("input_layernorm"),
            "post_attention_norm" => Some("post_attention_layernorm"),
            "ffn_norm" => Some("pre_feedforward_layernorm"),
            "post_ffw_norm" => Some("post_feedforward_layernorm"),
            _ => None,
        };
        if let Some(hf) = hf {
            return format!("model.layers.{layer}.{hf}");
        }
    }
    super::weights::hf_llama_name(base)
}

fn window_layers(layers: usize, pattern: usize) -> Vec<bool> {
    (0..layers)
        .map(|i| pattern == 0 || (i + 1) % pattern != 0)
        .collect()
}

fn global_rope(theta: f32, head_dim: usize, linear: Option<f32>) -> Rope {
    let mut rope = Rope::plain(theta);
    if let Some(f) = linear.filter(|&f| f > 0.0 && f != 1.0) {
        rope.freq_factors = vec![f; head_dim / 2];
    }
    rope
}

/// The configuration from GGUF metadata.
pub fn from_gguf(meta: &Meta, _source: &mut Source, vocab: usize) -> Result<Config, LoadError> {
    let hidden = meta.size("embedding_length", &limits::HIDDEN)?;
    let heads = meta.size("attention.head_count", &limits::HEADS)?;
    let head_dim = meta
        .size_opt("attention.key_length", &limits::HEAD_DIM)?
        .unwrap_or(256);
    let layers = meta.size("block_count", &limits::LAYERS)?;
    let pattern = meta
        .usize_opt("attention.sliding_window_pattern")?
        .unwrap_or(DEFAULT_PATTERN);
    Ok(Config {
        rope_local: Some(Rope::plain(LOCAL_THETA)),
        sliding_window: Some(meta.size("attention.sliding_window", &limits::CONTEXT)?),
        layer_uses_window: window_layers(layers, pattern),
        activation: Activation::GeluTanh,
        embed_scale: Some((hidden as f32).sqrt()),
        ..Config::standard(
            ARCH,
            vocab,
            hidden,
            layers,
            heads,
            meta.size_opt("attention.head_count_kv", &limits::HEADS)?
                .unwrap_or(heads),
            head_dim,
            f64::from(
                meta.f32_opt("attention.layer_norm_rms_epsilon")?
                    .unwrap_or(1e-6),
            ),
            global_rope(
                meta.f32_opt("rope.freq_base")?.unwrap_or(1_000_000.0),
                head_dim,
                meta.f32_opt("rope.scaling.factor")?,
            ),
            meta.size_opt("context_length", &limits::CONTEXT)?
                .unwrap_or(32_768),
        )
    })
}

/// The configuration from `config.json` (its `text_config` for the multimodal models).
pub fn from_hf(cfg: &HfConfig) -> Result<Config, LoadError> {
    let hidden = cfg.size("hidden_size", &limits::HIDDEN)?;
    let heads = cfg.size("num_attention_heads", &limits::HEADS)?;
    let head_dim = cfg.size_opt("head_dim", &limits::HEAD_DIM)?.unwrap_or(256);
    let layers = cfg.size("num_hidden_layers", &limits::LAYERS)?;
    let layer_uses_window = match cfg.get("layer_types").and_then(|v| v.as_array()) {
        Some(types) => {
            if types.len() != layers {
                return Err(LoadError::new(
                    &cfg.path,
                    format!(
                        "layer_types has {} entries for {layers} layers",
                        types.len()
                    ),
                ));
            }
            types
                .iter()
                .map(|t| t.as_str() == Some("sliding_attention"))
                .collect()
        }
        None => window_layers(
            layers,
            cfg.usize_opt("sliding_window_pattern")?
                .unwrap_or(DEFAULT_PATTERN),
        ),
    };
    let linear = cfg
        .get("rope_scaling")
        .and_then(|s| s.get("factor"))
        .and_then(|f| f.as_f64())
        .map(|f| f as f32);
    let scalar = cfg
        .f64_opt("query_pre_attn_scalar")?
        .unwrap_or(head_dim as f64);
    Ok(Config {
        rope_local: Some(Rope::plain(
            cfg.f64_opt("rope_local_base_freq")?
                .unwrap_or(f64::from(LOCAL_THETA)) as f32,
        )),
        sliding_window: Some(
            cfg.size_opt("sliding_window", &limits::CONTEXT)?
                .unwrap_or(512),
        ),
        layer_uses_window,
        activation: Activation::GeluTanh,
        embed_scale: Some((hidden as f32).sqrt()),
        attn_scale: (1.0 / scalar.sqrt()) as f32,
        final_logit_softcap: cfg.f64_opt("final_logit_softcapping")?.map(|x| x as f32),
        ..Config::standard(
            ARCH,
            cfg.size("vocab_size", &limits::VOCAB)?,
            hidden,
            layers,
            heads,
            cfg.size_opt("num_key_value_heads", &limits::HEADS)?
                .unwrap_or(heads),
            head_dim,
            cfg.f64_opt("rms_norm_eps")?.unwrap_or(1e-6),
            global_rope(
                cfg.rope_theta()?.unwrap_or(1_000_000.0) as f32,
                head_dim,
                linear,
            ),
            cfg.size_opt("max_position_embeddings", &limits::CONTEXT)?
                .unwrap_or(32_768),
        )
    })
}
