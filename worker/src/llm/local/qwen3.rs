//! Qwen3: the Llama layout with a per-head RMSNorm of queries and keys before rope, rope
//! over halves in both formats, and a wide base frequency. Its chat template is rendered
//! with `enable_thinking=False` (see [`super::chat`]).

use super::hf::HfConfig;
use super::limits;
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
    let hidden = meta.size("embedding_length", &limits::HIDDEN)?;
    let heads = meta.size("attention.head_count", &limits::HEADS)?;
    let head_dim = match meta.size_opt("attention.key_length", &limits::HEAD_DIM)? {
        Some(d) => d,
        None => meta.head_dim_of(hidden, heads)?,
    };
    let layers = meta.size("block_count", &limits::LAYERS)?;
    Ok(Config::standard(
        ARCH,
        vocab,
        hidden,
        layers,
        heads,
        meta.size_opt("attention.head_count_kv", &limits::HEADS)?
            .unwrap_or(heads),
        head_dim,
        f64::from(meta.f32("attention.layer_norm_rms_epsilon")?),
        Rope::plain(meta.f32_opt("rope.freq_base")?.unwrap_or(1_000_000.0)),
        meta.size_opt("context_length", &limits::CONTEXT)?
            .unwrap_or(40_960),
    ))
}

/// The configuration from `config.json`.
pub fn from_hf(cfg: &HfConfig) -> Result<Config, LoadError> {
    let hidden = cfg.size("hidden_size", &limits::HIDDEN)?;
    let heads = cfg.size("num_attention_heads", &limits::HEADS)?;
    let head_dim = match cfg.size_opt("head_dim", &limits::HEAD_DIM)? {
        Some(d) => d,
        None => cfg.head_dim_of(hidden, heads)?,
    };
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
        cfg.f64_opt("rms_norm_eps")?.unwrap_or(1e-6),
        Rope::plain(cfg.rope_theta()?.unwrap_or(1_000_000.0) as f32),
        cfg.size_opt("max_position_embeddings", &limits::CONTEXT)?
            .unwrap_or(40_960),
    ))
}
