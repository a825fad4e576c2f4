//! Phi-3: the Llama block with fused projections (`qkv_proj` = [q; k; v] and
//! `gate_up_proj` = [gate; up]), rope over halves, and for the 128k models LongRoPE:
//! per-frequency dividers (`short_factor` while the sequence fits the original 4k
//! context, which is all a decomposition needs) and an attention factor on cos and sin.
//! The instance runs the original context; a longer sequence is refused, not silently
//! switched to the long factors.

use super::hf::HfConfig;
use super::limits;
use super::model::{Config, Rope};
use super::weights::{hf_llama_name, LoadError, Meta, Source};

/// GGUF `general.architecture`.
pub const ARCH: &str = "phi3";

/// Norm weights are stored as used.
pub const NORM_OFFSET: f64 = 0.0;

/// The Hugging Face tensor name of a GGUF base name.
pub fn hf_name(base: &str) -> String {
    if let Some(rest) = base.strip_prefix("blk.") {
        if let Some(layer) = rest.strip_suffix(".ffn_up") {
            return format!("model.layers.{layer}.mlp.gate_up_proj");
        }
    }
    hf_llama_name(base)
}

/// LongRoPE's attention factor for a model trained to `max` positions from `original`.
pub fn longrope_magnitude(max: usize, original: usize) -> f32 {
    let scale = max as f64 / original as f64;
    if scale <= 1.0 {
        1.0
    } else {
        (1.0 + scale.ln() / (original as f64).ln()).sqrt() as f32
    }
}

fn windows(layers: usize, window: Option<usize>, context: usize) -> (Option<usize>, Vec<bool>) {
    match window {
        Some(w) if w < context => (Some(w), vec![true; layers]),
        _ => (None, vec![false; layers]),
    }
}

/// The configuration from GGUF metadata.
pub fn from_gguf(meta: &Meta, source: &mut Source, vocab: usize) -> Result<Config, LoadError> {
    let hidden = meta.size("embedding_length", &limits::HIDDEN)?;
    let heads = meta.size("attention.head_count", &limits::HEADS)?;
    let head_dim = match meta.size_opt("rope.dimension_count", &limits::HEAD_DIM)? {
        Some(d) => d,
        None => meta.head_dim_of(hidden, heads)?,
    };
    let layers = meta.size("block_count", &limits::LAYERS)?;
    let mut context = meta
        .size_opt("context_length", &limits::CONTEXT)?
        .unwrap_or(4096);
    let mut rope = Rope::plain(meta.f32_opt("rope.freq_base")?.unwrap_or(10_000.0));
    if let Some(short) = source.gguf_vector("rope_factors_short.weight")? {
        let original = meta
            .size_opt("rope.scaling.original_context_length", &limits::CONTEXT)?
            .unwrap_or(4096);
        rope.freq_factors = short;
        rope.magnitude = match meta.f32_opt("rope.scaling.attn_factor")? {
            Some(f) => f,
            None => longrope_magnitude(context, original),
        };
        context = original;
    }
    let (sliding_window, layer_uses_window) = windows(
        layers,
        meta.size_opt("attention.sliding_window", &limits::CONTEXT)?,
        context,
    );
    Ok(Config {
        sliding_window,
        layer_uses_window,
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
            context,
        )
    })
}

/// The configuration from `config.json`.
pub fn from_hf(cfg: &HfConfig) -> Result<Config, LoadError> {
    let hidden = cfg.size("hidden_size", &limits::HIDDEN)?;
    let heads = cfg.size("num_attention_heads", &limits::HEADS)?;
    let head_dim = cfg.head_dim_of(hidden, heads)?;
    let layers = cfg.size("num_hidden_layers", &limits::LAYERS)?;
    let mut context = cfg
        .size_opt("max_position_embeddings", &limits::CONTEXT)?
        .unwrap_or(4096);
    let mut rope = Rope::plain(cfg.rope_theta()?.unwrap_or(10_000.0) as f32);
    if let Some(scaling) = cfg.get("rope_scaling") {
        let kind = scaling
            .get("rope_type")
            .or_else(|| scaling.get("type"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        match kind {
            "longrope" | "su" => {
                let original = cfg
                    .size_opt("original_max_position_embeddings", &limits::CONTEXT)?
                    .unwrap_or(4096);
                let short = cfg.floats(scaling, "short_factor")?;
                if short.len() != head_dim / 2 {
                    return Err(LoadError::new(
                        &cfg.path,
                        format!(
                            "rope_scaling.short_factor has {} values, expected {}",
                            short.len(),
                            head_dim / 2
                        ),
                    ));
                }
                rope.freq_factors = short;
                rope.magnitude = longrope_magnitude(context, original);
                context = original;
            }
            "default" | "" => {}
            other => {
                return Err(LoadError::new(
                    &cfg.path,
                    format!("rope_scaling type {other:?} is not supported for phi3"),
                ))
            }
        }
    }
    let (sliding_window, layer_uses_window) = windows(
        layers,
        cfg.size_opt("sliding_window", &limits::CONTEXT)?,
        context,
    );
    Ok(Config {
        sliding_window,
        layer_uses_window,
        ..Config::standard(
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
            context,
        )
    })
}
