//! Llama (and the models that reuse its layout: SmolLM2, Mistral without sliding window):
//! RMSNorm, grouped-query attention with rotary embedding, a SiLU-gated MLP. Llama 3.1's
//! long-context rope scaling is read from `rope_freqs` (GGUF) or `rope_scaling`
//! (config.json).
//!
//! llama.cpp's converter permutes Llama's query and key rows so that rope rotates
//! adjacent pairs; the safetensors weights rotate halves.

use super::hf::HfConfig;
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
    let hidden = meta.usize("embedding_length")?;
    let heads = meta.usize("attention.head_count")?;
    let head_dim = match meta.usize_opt("attention.key_length")? {
        Some(d) => d,
        None => meta
            .usize_opt("rope.dimension_count")?
            .unwrap_or(hidden / heads),
    };
    let mut rope = Rope::plain(meta.f32_opt("rope.freq_base")?.unwrap_or(10_000.0));
    if let Some(factors) = source.gguf_vector("rope_freqs.weight")? {
        rope.freq_factors = factors;
    } else if let Some(f) = meta.f32_opt("rope.scaling.factor")? {
        if f > 0.0 && f != 1.0 {
            rope.freq_factors = vec![f; head_dim / 2];
        }
    }
    let layers = meta.usize("block_count")?;
    Ok(Config {
        rope_style: RopeStyle::Interleaved,
        ..Config::standard(
            ARCH,
            vocab,
            hidden,
            layers,
            heads,
            meta.usize_opt("attention.head_count_kv")?.unwrap_or(heads),
            head_dim,
            f64::from(meta.f32("attention.layer_norm_rms_epsilon")?),
            rope,
            meta.usize_opt("context_length")?.unwrap_or(4096),
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
    let hidden = cfg.usize("hidden_size")?;
    let heads = cfg.usize("num_attention_heads")?;
    let head_dim = cfg.usize_opt("head_dim")?.unwrap_or(hidden / heads);
    let theta = cfg.f64_opt("rope_theta")?.unwrap_or(10_000.0) as f32;
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
    let layers = cfg.usize("num_hidden_layers")?;
    Ok(Config::standard(
        ARCH,
        cfg.usize("vocab_size")?,
        hidden,
        layers,
        heads,
        cfg.usize_opt("num_key_value_heads")?.unwrap_or(heads),
        head_dim,
        cfg.f64_opt("rms_norm_eps")?.unwrap_or(1e-5),
        rope,
        cfg.usize_opt("max_position_embeddings")?.unwrap_or(4096),
    ))
}
