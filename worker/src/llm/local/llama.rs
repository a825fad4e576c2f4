//! Llama (and the models that reuse its layout: SmolLM2, Mistral without sliding window):
//! RMSNorm, grouped-query attention with rotary embedding, a SiLU-gated MLP. Llama 3.1's
//! long-context rope scaling is read from `rope_freqs` (GGUF) or `rope_scaling`
//! (config.json).
//!
//! llama.cpp's converter permutes Llama's query and key rows so that rope rotates
//! adjacent pairs; the safetensors weights rotate halves.

use super::hf::HfConfig;
use super::limits;
use super::model::{Config, Rope, RopeStyle};
use super::weights::{hf_llama_name, LoadError, Meta, Source};

/// GGUF `general.architecture`.
pub const ARCH: &str = "llama";

/// Norm weights are stored as used.
pub const NORM_OFFSET: f64 = 0.0;

/// The Hugging Face tensor name of a GGUF base name.
pub fn hf_name(base: &str) -> String {
    hf_llama_name(base)
}

/// The configuration from GGUF metadata.
pub fn from_gguf(meta: &Meta, source: &mut Source, vocab: usize) -> Result<Config, LoadError> {
    let hidden = meta.size("embedding_length", &limits::HIDDEN)?;
    let heads = meta.size("attention.head_count", &limits::HEADS)?;
    let head_dim = match meta.size_opt("attention.key_length", &limits::HEAD_DIM)? {
        Some(d) => d,
        None => match meta.size_opt("rope.dimension_count", &limits::HEAD_DIM)? {
            Some(d) => d,
            None => meta.head_dim_of(hidden, heads)?,
        },
    };
    let mut rope = Rope::plain(meta.f32_opt("rope.freq_base")?.unwrap_or(10_000.0));
    if let Some(factors) = source.gguf_vector("rope_freqs.weight")? {
        rope.freq_factors = factors;
    } else if let Some(f) = meta.f32_opt("rope.scaling.factor")? {
        if f > 0.0 && f != 1.0 {
            rope.freq_factors = vec![f; head_dim / 2];
        }
    }
    let layers = meta.size("block_count", &limits::LAYERS)?;
    Ok(Config {
        rope_style: RopeStyle::Interleaved,
        ..Config::standard(
            ARCH,
            vocab,
            hidden,
            layers,
            heads,
            meta.size_opt("attention.head_count_kv", &limits::HEADS)?
                .unwrap_or(heads),
            head_dim,
            f64::from(meta.f32("attention.layer_norm_rms_epsilon")?),
            rope,
            meta.size_opt("context_length", &limits::CONTEXT)?
                .unwrap_or(4096),
        )
    })
}

/// Llama 3's rope scaling: per-frequency dividers that leave high frequencies alone,
/// divide low ones by `factor` and blend in between.
pub fn llama3_factors(
    theta: f32,
    head_dim: usize,
    factor: f32,
    low_freq_factor: f32,
    high_freq_factor: f32,
    original: f32,
) -> Vec<f32> {
    let low_wavelen = original / low_freq_factor;
    let high_wavelen = original / high_freq_factor;
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / theta.powf(2.0 * i as f32 / head_dim as f32);
            let wavelen = 2.0 * std::f32::consts::PI / freq;
            if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor
            } else {
                let smooth =
                    (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                // freq' = (1 - smooth) * freq / factor + smooth * freq
                1.0 / ((1.0 - smooth) / factor + smooth)
            }
        })
        .collect()
}

/// The configuration from `config.json`.
pub fn from_hf(cfg: &HfConfig) -> Result<Config, LoadError> {
    let hidden = cfg.size("hidden_size", &limits::HIDDEN)?;
    let heads = cfg.size("num_attention_heads", &limits::HEADS)?;
    let head_dim = match cfg.size_opt("head_dim", &limits::HEAD_DIM)? {
        Some(d) => d,
        None => cfg.head_dim_of(hidden, heads)?,
    };
    let theta = cfg.rope_theta()?.unwrap_or(10_000.0) as f32;
    let mut rope = Rope::plain(theta);
    if let Some(scaling) = cfg.get("rope_scaling") {
        let kind = scaling
            .get("rope_type")
            .or_else(|| scaling.get("type"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        let num =
            |k: &str, default: f64| scaling.get(k).and_then(|v| v.as_f64()).unwrap_or(default);
        match kind {
            "llama3" => {
                rope.freq_factors = llama3_factors(
                    theta,
                    head_dim,
                    num("factor", 8.0) as f32,
                    num("low_freq_factor", 1.0) as f32,
                    num("high_freq_factor", 4.0) as f32,
                    num("original_max_position_embeddings", 8192.0) as f32,
                );
            }
            "linear" => rope.freq_factors = vec![num("factor", 1.0) as f32; head_dim / 2],
            "default" | "" => {}
            other => {
                return Err(LoadError::new(
                    &cfg.path,
                    format!("rope_scaling type {other:?} is not supported for llama"),
                ))
            }
        }
    }
    let layers = cfg.size("num_hidden_layers", &limits::LAYERS)?;
    Ok(Config::standard(
        ARCH,
        cfg.size("vocab_size", &limits::VOCAB)?,
        hidden,
        layers,
        heads,
        cfg.size_opt("num_key_value_heads", &limits::HEADS)?
            .unwrap_or(heads),
        head_dim,
        cfg.f64_opt("rms_norm_eps")?.unwrap_or(1e-5),
        rope,
        cfg.size_opt("max_position_embeddings", &limits::CONTEXT)?
            .unwrap_or(4096),
    ))
}
