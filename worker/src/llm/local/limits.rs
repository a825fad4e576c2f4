//! The sizes a model file may declare, and the checks that hold a file to them before
//! anything is allocated from its numbers.
//!
//! A model file is input: its header says how many layers, heads and values to allocate,
//! and a crafted (or corrupt) one said `block_count = 2^40` (a 1 TB `vec!`, which aborts
//! the process), `head_count = 0` (a division by zero) or tensor dimensions whose product
//! wraps. So every size is read through [`Limit::check`] (a range, naming the file's own
//! key), the configuration as a whole through [`validate`] (heads divide evenly,
//! head_dim is even), and every tensor's dimensions through [`tensor_bytes`] (checked
//! arithmetic, whole blocks, bytes inside the file) and [`expect_shape`] (what the
//! configuration implies) before it is read.
//!
//! The caps are generous, well above every published model (the largest have 126 layers,
//! 128 query heads, head_dim 256, a 262k vocabulary, a 16k residual stream, a 10M
//! context): they exist to turn a nonsense number into an error line, not to judge a
//! model. Raising one is safe as long as the product of the caps still fits memory
//! arithmetic (all products below are also checked).

use super::model::Config;
use super::weights::LoadError;
use std::path::Path;

/// An inclusive range a size from a model file must lie in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Smallest value (1 for anything that is divided by or looped over).
    pub min: u64,
    /// Largest value.
    pub max: u64,
}

/// Transformer blocks (the largest published model has 126).
pub const LAYERS: Limit = Limit { min: 1, max: 1024 };
/// Query heads, and key/value heads (128 is the most published).
pub const HEADS: Limit = Limit { min: 1, max: 1024 };
/// Width of one head (256 is the most published).
pub const HEAD_DIM: Limit = Limit { min: 2, max: 4096 };
/// Vocabulary (262,144 is the largest published).
pub const VOCAB: Limit = Limit {
    min: 1,
    max: 4 << 20,
};
/// Width of the residual stream (16,384 is the widest published).
pub const HIDDEN: Limit = Limit {
    min: 1,
    max: 65_536,
};
/// Width of the MLP's hidden layer (about 4x the residual stream; 73,728 is the widest).
pub const FFN: Limit = Limit {
    min: 1,
    max: 1 << 20,
};
/// Trained context, and sliding windows (10M is the longest published).
pub const CONTEXT: Limit = Limit {
    min: 1,
    max: 1 << 26,
};

impl Limit {
    /// `value` as a usize if it lies in the range; else an error naming the file, the
    /// field (as the file spells it) and the limit.
    pub fn check(&self, path: &Path, field: &str, value: u64) -> Result<usize, LoadError> {
        if value > self.max {
            return Err(LoadError::new(
                path,
                format!("{field} = {value} exceeds the limit {}", self.max),
            ));
        }
        if value < self.min {
            return Err(LoadError::new(
                path,
                format!("{field} = {value} is below the minimum {}", self.min),
            ));
        }
        usize::try_from(value)
            .map_err(|_| LoadError::new(path, format!("{field} = {value} does not fit usize")))
    }
}

/// How the file names each size, for errors about the configuration as a whole.
pub struct Fields {
    /// Query heads.
    pub heads: String,
    /// Key/value heads.
    pub kv_heads: String,
    /// Head width.
    pub head_dim: String,
}

impl Fields {
    /// The GGUF keys of architecture `arch`.
    pub fn gguf(arch: &str) -> Self {
        Fields {
            heads: format!("{arch}.attention.head_count"),
            kv_heads: format!("{arch}.attention.head_count_kv"),
            head_dim: format!("{arch}.attention.key_length"),
        }
    }

    /// The `config.json` fields.
    pub fn hf() -> Self {
        Fields {
            heads: "num_attention_heads".into(),
            kv_heads: "num_key_value_heads".into(),
            head_dim: "head_dim".into(),
        }
    }
}

/// The checks between fields, once a configuration is assembled from sizes that each
/// passed their [`Limit`]: grouped-query attention needs `heads` to be a multiple of
/// `kv_heads` (the attention divides one by the other), rope rotates pairs of a head's
/// values, and each layer has its window flag.
pub fn validate(config: &Config, path: &Path, fields: &Fields) -> Result<(), LoadError> {
    let err = |m: String| Err(LoadError::new(path, m));
    let c = config;
    for (limit, name, value) in [
        (&LAYERS, "layers", c.layers),
        (&HEADS, fields.heads.as_str(), c.heads),
        (&HEADS, fields.kv_heads.as_str(), c.kv_heads),
        (&HEAD_DIM, fields.head_dim.as_str(), c.head_dim),
        (&VOCAB, "vocabulary", c.vocab),
        (&HIDDEN, "hidden size", c.hidden),
        (&CONTEXT, "context length", c.context_length),
    ] {
        limit.check(path, name, value as u64)?;
    }
    if !c.heads.is_multiple_of(c.kv_heads) {
        return err(format!(
            "{} = {} is not a multiple of {} = {}",
            fields.heads, c.heads, fields.kv_heads, c.kv_heads
        ));
    }
    if !c.head_dim.is_multiple_of(2) {
        return err(format!(
            "{} = {} is odd; rotary embedding needs pairs",
            fields.head_dim, c.head_dim
        ));
    }
    if c.layer_uses_window.len() != c.layers {
        return err(format!(
            "{} layers but {} sliding-window flags",
            c.layers,
            c.layer_uses_window.len()
        ));
    }
    if let Some(w) = c.sliding_window {
        CONTEXT.check(path, "sliding window", w as u64)?;
    }
    if !c.rope.freq_factors.is_empty() && c.rope.freq_factors.len() != c.head_dim / 2 {
        return err(format!(
            "{} rope frequency factors for head_dim {} (expected {})",
            c.rope.freq_factors.len(),
            c.head_dim,
            c.head_dim / 2
        ));
    }
    Ok(())
}

/// The number of bytes of a tensor of `dims` stored in blocks of `block` elements of
/// `block_bytes` bytes each, with every product checked: the element count must not
/// overflow, each row (the last dimension) must be whole blocks, as ggml stores them.
pub fn tensor_bytes(dims: &[usize], block: usize, block_bytes: usize) -> Result<usize, String> {
    let elements = dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("dimensions {dims:?} overflow"))?;
    let row = dims.last().copied().unwrap_or(1);
    if block == 0 || !row.is_multiple_of(block) {
        return Err(format!(
            "dimensions {dims:?}: a row of {row} is not whole blocks of {block}"
        ));
    }
    (elements / block)
        .checked_mul(block_bytes)
        .ok_or_else(|| format!("dimensions {dims:?} overflow in bytes"))
}

/// An error unless a tensor's `dims` equal `expected` (what the configuration implies,
/// each product computed with checked arithmetic by the caller).
pub fn expect_shape(dims: &[usize], expected: &[usize]) -> Result<(), String> {
    if dims == expected {
        Ok(())
    } else {
        Err(format!(
            "has shape {dims:?}, the configuration implies {expected:?}"
        ))
    }
}

/// `a * b`, or an error naming what overflowed (products of sizes that each passed a
/// [`Limit`] do not, but the check costs nothing).
pub fn mul(a: usize, b: usize, what: &str) -> Result<usize, String> {
    a.checked_mul(b)
        .ok_or_else(|| format!("{what} = {a} x {b} overflows"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_names_the_field_and_the_bound() {
        let p = Path::new("models/x.gguf");
        let e = LAYERS.check(p, "llama.block_count", 1 << 40).unwrap_err();
        assert_eq!(
            e.to_string(),
            "models/x.gguf: llama.block_count = 1099511627776 exceeds the limit 1024"
        );
        let e = HEADS.check(p, "llama.attention.head_count", 0).unwrap_err();
        assert_eq!(
            e.to_string(),
            "models/x.gguf: llama.attention.head_count = 0 is below the minimum 1"
        );
        assert_eq!(LAYERS.check(p, "k", 30).unwrap(), 30);
    }

    #[test]
    fn tensor_sizes_never_wrap() {
        assert_eq!(tensor_bytes(&[4, 64], 32, 34), Ok(8 * 34));
        assert!(tensor_bytes(&[1 << 40, 1 << 40], 32, 34)
            .unwrap_err()
            .contains("overflow"));
        assert!(tensor_bytes(&[usize::MAX / 32, 64], 32, 34)
            .unwrap_err()
            .contains("overflow"));
        assert!(tensor_bytes(&[4, 48], 32, 34)
            .unwrap_err()
            .contains("whole blocks"));
        assert_eq!(tensor_bytes(&[], 1, 4), Ok(4));
    }
}
