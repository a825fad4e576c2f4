//! Qwen3: the Llama layout with a per-head RMSNorm of queries and keys before rope, rope
//! over halves in both formats, and a wide base frequency. Its chat template is rendered
//! with `enable_thinking=False` (see [`super::chat`]).

use super::hf::HfConfig;
use super::model::{Config, Rope};
use super::weights::{hf_llama_name, LoadError, Meta, Source};

/// GGUF `general.architecture`.
pub const ARCH: &str = "qwen3";

/// Norm weights are stored as used.
pub const NORM_OFFSET: f64 = 0.0;

/// The Hugging Face tensor name of a GGUF base name (the Llama layout, with
/// `self_attn.q_norm` and `self_attn.k_norm`).
pub fn hf_name(base: &str) -> String {
    hf_llama_name(base)
}

/// The configuration from GGUF metadata.
pub fn from_gguf(meta: &Meta, _source: &mut Source, vocab: usize) -> Result<Config, LoadError> {
    let hidden = meta.usize("embedding_length")?;
    let heads = meta.usize("attention.head_count")?;
    let head_dim = meta
        .usize_opt("attention.key_length")?
        .unwrap_or(hidden / heads);
    let layers = meta.usize("block_count")?;
    Ok(Config::standard(
        ARCH,
        vocab,
        hidden,
        layers,
        heads,
        meta.usize_opt("attention.head_count_kv")?.unwrap_or(heads),
        head_dim,
        f64::from(meta.f32("attention.layer_norm_rms_epsilon")?),
        Rope::plain(meta.f32_opt("rope.freq_base")?.unwrap_or(1_000_000.0)),
        meta.usize_opt("context_length")?.unwrap_or(40_960),
    ))
}

/// The configuration from `config.json`.
pub fn from_hf(cfg: &HfConfig) -> Result<Config, LoadError> {
    let hidden = cfg.usize("hidden_size")?;
    let heads = cfg.usize("num_attention_heads")?;
    let head_dim = cfg.usize_opt("head_dim")?.unwrap_or(hidden / heads);
    let layers = cfg.usize("num_hidden_layers")?;
    Ok(Config::standard(
        ARCH,
        cfg.usize("vocab_size")?,
        hidden,
        layers,
        heads,
        cfg.usize_opt("num_key_value_heads")?.unwrap_or(heads),
        head_dim,
        cfg.f64_opt("rms_norm_eps")?.unwrap_or(1e-6),
        Rope::plain(cfg.f64_opt("rope_theta")?.unwrap_or(1_000_000.0) as f32),
        cfg.usize_opt("max_position_embeddings")?.unwrap_or(40_960),
    ))
}
