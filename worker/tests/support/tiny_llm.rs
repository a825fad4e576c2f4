//! Tiny random-weight models that tests write themselves: Hugging Face safetensors
//! folders and GGUF files (quantised) of the four architectures credence runs, with a
//! word-level (safetensors), byte-level BPE or SentencePiece (GGUF) tokenizer and a
//! ChatML template. Seeded, so every test sees the same weights.
//!
//! `CREDENCE_TEST_DEVICE` (`cpu` when unset, or `cuda`, `cuda:N`) names the device that
//! the device tests (`tests/llm_device.rs`) load models on.

// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use credence_worker::llm::local::model::SeqCache;
use credence_worker::llm::local::{Format, LocalModel, LocalSettings};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::Path;

pub const VOCAB: usize = 64;
pub const HIDDEN: usize = 32;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const HEAD_DIM: usize = 8;
pub const FFN: usize = 48;
pub const LAYERS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arch {
    Llama,
    Qwen3,
    Phi3,
    Gemma3,
}

/// A word-level tokenizer: ChatML's two special tokens, `[UNK]`, and words `w3`..`w63`.
pub fn tokenizer_json() -> String {
    let special = |id: usize, content: &str| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true})
    };
    let mut vocab = serde_json::Map::new();
    vocab.insert("<|im_start|>".into(), 0.into());
    vocab.insert("<|im_end|>".into(), 1.into());
    vocab.insert("[UNK]".into(), 2.into());
    for i in 3..VOCAB {
        vocab.insert(format!("w{i}"), i.into());
    }
    serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "<|im_start|>"), special(1, "<|im_end|>")],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    })
    .to_string()
}

pub const CHATML: &str = "{% for m in messages %}<|im_start|>{{ m.role }} {{ m.content }} <|im_end|> {% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}";

pub fn config_json(arch: Arch) -> serde_json::Value {
    config_with_window(arch, 16)
}

/// `window`: Gemma 3's sliding window (16 covers the test prompts: candle-transformers'
/// Gemma 3 cannot prefill past its window, so the window itself is checked between
/// credence's two attention paths in `gemma3_sliding_window_is_the_same_in_prefill_and_decode`).
pub fn config_with_window(arch: Arch, window: usize) -> serde_json::Value {
    let mut c = serde_json::json!({
        "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "max_position_embeddings": 256, "hidden_act": "silu", "tie_word_embeddings": false,
    });
    let m = c.as_object_mut().unwrap();
    match arch {
        Arch::Llama => {
            m.insert("model_type".into(), "llama".into());
        }
        Arch::Qwen3 => {
            m.insert("model_type".into(), "qwen3".into());
            m.insert("head_dim".into(), HEAD_DIM.into());
            m.insert("attention_bias".into(), false.into());
            m.insert("max_window_layers".into(), LAYERS.into());
            m.insert("use_sliding_window".into(), false.into());
            m.insert("sliding_window".into(), serde_json::Value::Null);
        }
        Arch::Phi3 => {
            m.insert("model_type".into(), "phi3".into());
        }
        Arch::Gemma3 => {
            m.insert("model_type".into(), "gemma3_text".into());
            m.insert("head_dim".into(), HEAD_DIM.into());
            m.insert("hidden_activation".into(), "gelu_pytorch_tanh".into());
            m.insert("attention_bias".into(), false.into());
            m.insert("rope_local_base_freq".into(), 10000.0.into());
            m.insert("rope_theta".into(), 1_000_000.0.into());
            m.insert("query_pre_attn_scalar".into(), HEAD_DIM.into());
            m.insert("sliding_window".into(), window.into());
            m.insert("sliding_window_pattern".into(), 2.into());
            m.insert("final_logit_softcapping".into(), serde_json::Value::Null);
            m.insert("attn_logit_softcapping".into(), serde_json::Value::Null);
            m.insert("tie_word_embeddings".into(), true.into());
        }
    }
    c
}

/// The Hugging Face tensors of `arch`, random with a fixed seed.
pub fn weights(arch: Arch) -> HashMap<String, Tensor> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut t = HashMap::new();
    let mut add = |name: String, shape: &[usize], scale: f32, offset: f32| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| offset + scale * (rng.random::<f32>() * 2.0 - 1.0))
            .collect();
        t.insert(name, Tensor::from_vec(v, shape, &Device::Cpu).unwrap());
    };
    let (q, kv) = (HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM);
    let head_dim = if matches!(arch, Arch::Llama | Arch::Phi3) {
        HIDDEN / HEADS
    } else {
        HEAD_DIM
    };
    let (q, kv) = if head_dim == HEAD_DIM {
        (q, kv)
    } else {
        (HEADS * head_dim, KV_HEADS * head_dim)
    };
    // Gemma stores norms as w for a (1 + w) scale: small values around 0; the others
    // around 1.
    let norm_offset = if arch == Arch::Gemma3 { 0.0 } else { 1.0 };
    add(
        "model.embed_tokens.weight".into(),
        &[VOCAB, HIDDEN],
        1.0,
        0.0,
    );
    add("model.norm.weight".into(), &[HIDDEN], 0.1, norm_offset);
    if arch != Arch::Gemma3 {
        add("lm_head.weight".into(), &[VOCAB, HIDDEN], 0.3, 0.0);
    }
    for l in 0..LAYERS {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        add(p("input_layernorm.weight"), &[HIDDEN], 0.1, norm_offset);
        add(
            p("post_attention_layernorm.weight"),
            &[HIDDEN],
            0.1,
            norm_offset,
        );
        if arch == Arch::Phi3 {
            add(
                p("self_attn.qkv_proj.weight"),
                &[q + 2 * kv, HIDDEN],
                0.3,
                0.0,
            );
            add(p("mlp.gate_up_proj.weight"), &[2 * FFN, HIDDEN], 0.3, 0.0);
        } else {
            add(p("self_attn.q_proj.weight"), &[q, HIDDEN], 0.3, 0.0);
            add(p("self_attn.k_proj.weight"), &[kv, HIDDEN], 0.3, 0.0);
            add(p("self_attn.v_proj.weight"), &[kv, HIDDEN], 0.3, 0.0);
            add(p("mlp.gate_proj.weight"), &[FFN, HIDDEN], 0.3, 0.0);
            add(p("mlp.up_proj.weight"), &[FFN, HIDDEN], 0.3, 0.0);
        }
        add(p("self_attn.o_proj.weight"), &[HIDDEN, q], 0.3, 0.0);
        add(p("mlp.down_proj.weight"), &[HIDDEN, FFN], 0.3, 0.0);
        if matches!(arch, Arch::Qwen3 | Arch::Gemma3) {
            add(p("self_attn.q_norm.weight"), &[head_dim], 0.1, norm_offset);
            add(p("self_attn.k_norm.weight"), &[head_dim], 0.1, norm_offset);
        }
        if arch == Arch::Gemma3 {
            add(p("pre_feedforward_layernorm.weight"), &[HIDDEN], 0.1, 0.0);
            add(p("post_feedforward_layernorm.weight"), &[HIDDEN], 0.1, 0.0);
        }
    }
    t
}

pub fn write_model(dir: &Path, arch: Arch) {
    write_model_with(dir, arch, config_json(arch));
}

pub fn write_model_with(dir: &Path, arch: Arch, config: serde_json::Value) {
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json()).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        serde_json::json!({"chat_template": CHATML, "eos_token": "<|im_end|>", "add_bos_token": false})
            .to_string(),
    )
    .unwrap();
    candle_core::safetensors::save(&weights(arch), dir.join("model.safetensors")).unwrap();
}

pub fn settings(dir: &Path, dtype: &str, max_new_tokens: u32) -> LocalSettings {
    settings_on(dir, Format::Safetensors, Some(dtype), "cpu", max_new_tokens)
}

/// The device the device tests run on: `$CREDENCE_TEST_DEVICE`, else `cpu`.
pub fn test_device() -> String {
    std::env::var("CREDENCE_TEST_DEVICE").unwrap_or_else(|_| "cpu".into())
}

/// Sizes of the tiny GGUF models: every matrix row a whole number of 256-value K-quant
/// blocks, so each weight type can be written.
pub const G_HIDDEN: usize = 256;
pub const G_HEADS: usize = 4;
pub const G_KV_HEADS: usize = 2;
pub const G_HEAD_DIM: usize = 64;
pub const G_FFN: usize = 512;
pub const G_LAYERS: usize = 2;

/// The GGUF `general.architecture` of each test architecture.
pub fn gguf_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::Llama => "llama",
        Arch::Qwen3 => "qwen3",
        Arch::Phi3 => "phi3",
        Arch::Gemma3 => "gemma3",
    }
}

/// GPT-2's byte-to-character table (printable bytes stand for themselves, the rest are
/// moved above U+0100), which byte-level BPE vocabularies are written in.
fn byte_chars() -> Vec<char> {
    let mut printable: Vec<u32> = (b'!' as u32..=b'~' as u32).collect();
    printable.extend(0xA1..=0xAC);
    printable.extend(0xAE..=0xFF);
    let mut next = 256;
    (0u32..256)
        .map(|b| {
            if printable.contains(&b) {
                char::from_u32(b).unwrap()
            } else {
                next += 1;
                char::from_u32(next - 1).unwrap()
            }
        })
        .collect()
}

/// Tokenizer metadata: byte-level BPE (Qwen's pre-tokenizer) for Qwen3, SentencePiece
/// with byte fallback for the others; ChatML's two control tokens in both. Returns the
/// metadata and the vocabulary size.
fn gguf_tokenizer(arch: Arch, small: bool) -> (Vec<(String, gguf_file::Value)>, usize) {
    use gguf_file::Value as V;
    let strings = |v: &[String]| V::Array(v.iter().cloned().map(V::String).collect());
    let ints = |v: &[i32]| V::Array(v.iter().copied().map(V::I32).collect());
    let mut md: Vec<(String, V)> = Vec::new();
    let (tokens, types) = if small {
        // SentencePiece without byte fallback: 18 tokens, for files of a few KB.
        let tokens: Vec<String> = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
            .iter()
            .map(|s| s.to_string())
            .chain(["\u{2581}", "\u{2581}w", "w"].iter().map(|s| s.to_string()))
            .chain((0..10).map(|d| d.to_string()))
            .collect();
        let mut types = vec![2, 3, 3, 3, 3];
        types.extend(std::iter::repeat_n(1, tokens.len() - 5));
        md.push(("tokenizer.ggml.model".into(), V::String("llama".into())));
        md.push((
            "tokenizer.ggml.scores".into(),
            V::Array((0..tokens.len()).map(|i| V::F32(-(i as f32))).collect()),
        ));
        md.push(("tokenizer.ggml.bos_token_id".into(), V::U32(1)));
        md.push(("tokenizer.ggml.eos_token_id".into(), V::U32(4)));
        (tokens, types)
    } else if arch == Arch::Qwen3 {
        let chars = byte_chars();
        let mut tokens: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
        let mut merges = Vec::new();
        // A few merges so that words become multi-byte tokens: "Ġw", "Ġw1", ...
        let g = chars[b' ' as usize];
        for (a, b) in [(g.to_string(), "w".to_string())]
            .into_iter()
            .chain((0..10).map(|d| (format!("{g}w"), d.to_string())))
        {
            merges.push(format!("{a} {b}"));
            tokens.push(format!("{a}{b}"));
        }
        let mut types = vec![1; tokens.len()];
        tokens.extend(["<|im_start|>".to_string(), "<|im_end|>".to_string()]);
        types.extend([3, 3]);
        md.push(("tokenizer.ggml.model".into(), V::String("gpt2".into())));
        md.push(("tokenizer.ggml.pre".into(), V::String("qwen2".into())));
        md.push(("tokenizer.ggml.merges".into(), strings(&merges)));
        let eos = tokens.len() as u32 - 1;
        md.push(("tokenizer.ggml.eos_token_id".into(), V::U32(eos)));
        md.push(("tokenizer.ggml.add_bos_token".into(), V::Bool(false)));
        (tokens, types)
    } else {
        let mut tokens: Vec<String> = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let mut types = vec![2, 3, 3, 3, 3];
        for b in 0..256 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
        }
        let pieces: Vec<String> = ["\u{2581}", "\u{2581}w", "w"]
            .iter()
            .map(|s| s.to_string())
            .chain((0..10).map(|d| format!("\u{2581}w{d}")))
            .chain((0..10).map(|d| d.to_string()))
            .collect();
        let scores: Vec<f32> = (0..tokens.len())
            .map(|_| 0.0)
            .chain((0..pieces.len()).map(|i| -(i as f32)))
            .collect();
        types.extend(std::iter::repeat_n(1, pieces.len()));
        tokens.extend(pieces);
        md.push(("tokenizer.ggml.model".into(), V::String("llama".into())));
        md.push((
            "tokenizer.ggml.scores".into(),
            V::Array(scores.into_iter().map(V::F32).collect()),
        ));
        md.push(("tokenizer.ggml.bos_token_id".into(), V::U32(1)));
        md.push(("tokenizer.ggml.eos_token_id".into(), V::U32(4)));
        md.push(("tokenizer.ggml.add_bos_token".into(), V::Bool(true)));
        (tokens, types)
    };
    let vocab = tokens.len();
    md.push(("tokenizer.ggml.tokens".into(), strings(&tokens)));
    md.push(("tokenizer.ggml.token_type".into(), ints(&types)));
    md.push(("tokenizer.chat_template".into(), V::String(CHATML.into())));
    (md, vocab)
}

/// GGUF metadata as [`write_gguf_with`] collects it, in order.
pub type Metadata = Vec<(String, gguf_file::Value)>;

/// Sizes of a tiny GGUF model.
#[derive(Clone, Copy, Debug)]
pub struct GgufSizes {
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub layers: usize,
    /// An 18-token tokenizer instead of one with 256 byte tokens.
    pub small_vocab: bool,
}

/// The sizes [`write_gguf`] writes.
pub const G_SIZES: GgufSizes = GgufSizes {
    hidden: G_HIDDEN,
    heads: G_HEADS,
    kv_heads: G_KV_HEADS,
    head_dim: G_HEAD_DIM,
    ffn: G_FFN,
    layers: G_LAYERS,
    small_vocab: false,
};

/// Files of a few KB (one block, 32 wide, 18 tokens): the fuzz corpus and the crafted
/// files of the limit tests.
pub const SMALL_SIZES: GgufSizes = GgufSizes {
    hidden: 32,
    heads: 4,
    kv_heads: 2,
    head_dim: 8,
    ffn: 32,
    layers: 1,
    small_vocab: true,
};

/// Writes a tiny GGUF model of `arch` to `path`: attention in Q8_0, feed-forward in Q4_1,
/// the output head in Q4_K, the embedding table in Q8_0 and norms in F32, as llama.cpp's
/// quantised files mix them. Returns its vocabulary size.
pub fn write_gguf(path: &Path, arch: Arch) -> usize {
    write_gguf_with(path, arch, &G_SIZES, &mut |_| {})
}

/// [`write_gguf`] of any sizes, with `edit` applied to the metadata before it is written
/// (the limit tests corrupt one field). The output head is Q8_0 where the width is not
/// whole Q4_K blocks.
pub fn write_gguf_with(
    path: &Path,
    arch: Arch,
    sizes: &GgufSizes,
    edit: &mut dyn FnMut(&mut Metadata),
) -> usize {
    use gguf_file::Value as V;
    let GgufSizes {
        hidden: g_hidden,
        heads: g_heads,
        kv_heads: g_kv_heads,
        head_dim: g_head_dim,
        ffn: g_ffn,
        layers: g_layers,
        small_vocab,
    } = *sizes;
    let (mut md, vocab) = gguf_tokenizer(arch, small_vocab);
    let name = gguf_arch(arch);
    let key = |k: &str| format!("{name}.{k}");
    md.push(("general.architecture".into(), V::String(name.into())));
    md.push((key("block_count"), V::U32(g_layers as u32)));
    md.push((key("context_length"), V::U32(256)));
    md.push((key("embedding_length"), V::U32(g_hidden as u32)));
    md.push((key("feed_forward_length"), V::U32(g_ffn as u32)));
    md.push((key("attention.head_count"), V::U32(g_heads as u32)));
    md.push((key("attention.head_count_kv"), V::U32(g_kv_heads as u32)));
    md.push((key("attention.key_length"), V::U32(g_head_dim as u32)));
    md.push((key("attention.value_length"), V::U32(g_head_dim as u32)));
    md.push((key("rope.dimension_count"), V::U32(g_head_dim as u32)));
    md.push((key("attention.layer_norm_rms_epsilon"), V::F32(1e-6)));
    md.push((key("rope.freq_base"), V::F32(10_000.0)));
    if arch == Arch::Gemma3 {
        md.push((key("attention.sliding_window"), V::U32(4)));
    }

    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut tensors: Vec<(String, QTensor)> = Vec::new();
    let mut add = |name: String, shape: &[usize], dtype: GgmlDType, scale: f32, offset: f32| {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| offset + scale * (rng.random::<f32>() * 2.0 - 1.0))
            .collect();
        let t = Tensor::from_vec(v, shape, &Device::Cpu).unwrap();
        tensors.push((name, QTensor::quantize(&t, dtype).unwrap()));
    };
    let (h, hd) = (g_hidden, g_head_dim);
    let (q, kv) = (g_heads * hd, g_kv_heads * hd);
    // Scales keep each layer's output of order one: about 1/sqrt(fan-in).
    let s = 1.0 / (h as f32).sqrt();
    add(
        "token_embd.weight".into(),
        &[vocab, h],
        GgmlDType::Q8_0,
        1.0,
        0.0,
    );
    add("output_norm.weight".into(), &[h], GgmlDType::F32, 0.1, 1.0);
    if arch != Arch::Gemma3 {
        add(
            "output.weight".into(),
            &[vocab, h],
            if g_hidden % 256 == 0 {
                GgmlDType::Q4K
            } else {
                GgmlDType::Q8_0
            },
            3.0 * s,
            0.0,
        );
    }
    for l in 0..g_layers {
        let p = |part: &str| format!("blk.{l}.{part}.weight");
        add(p("attn_norm"), &[h], GgmlDType::F32, 0.1, 1.0);
        add(p("ffn_norm"), &[h], GgmlDType::F32, 0.1, 1.0);
        if arch == Arch::Phi3 {
            add(p("attn_qkv"), &[q + 2 * kv, h], GgmlDType::Q8_0, s, 0.0);
            add(p("ffn_up"), &[2 * g_ffn, h], GgmlDType::Q4_1, s, 0.0);
        } else {
            add(p("attn_q"), &[q, h], GgmlDType::Q8_0, s, 0.0);
            add(p("attn_k"), &[kv, h], GgmlDType::Q8_0, s, 0.0);
            add(p("attn_v"), &[kv, h], GgmlDType::Q8_0, s, 0.0);
            add(p("ffn_gate"), &[g_ffn, h], GgmlDType::Q4_1, s, 0.0);
            add(p("ffn_up"), &[g_ffn, h], GgmlDType::Q4_1, s, 0.0);
        }
        add(p("attn_output"), &[h, q], GgmlDType::Q8_0, s, 0.0);
        let down = 1.0 / (g_ffn as f32).sqrt();
        add(p("ffn_down"), &[h, g_ffn], GgmlDType::Q8_0, down, 0.0);
        if matches!(arch, Arch::Qwen3 | Arch::Gemma3) {
            add(p("attn_q_norm"), &[hd], GgmlDType::F32, 0.1, 1.0);
            add(p("attn_k_norm"), &[hd], GgmlDType::F32, 0.1, 1.0);
        }
        if arch == Arch::Gemma3 {
            add(p("post_attention_norm"), &[h], GgmlDType::F32, 0.1, 1.0);
            add(p("post_ffw_norm"), &[h], GgmlDType::F32, 0.1, 1.0);
        }
    }
    edit(&mut md);
    let md_refs: Vec<(&str, &V)> = md.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let t_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &md_refs, &t_refs).unwrap();
    vocab
}

/// Overwrites, in a GGUF file written by [`write_gguf_with`], the dimensions of tensor
/// `name` (in GGUF's order: the row length first), which must have as many as before:
/// a header whose sizes the data does not back.
pub fn patch_tensor_dims(path: &Path, name: &str, dims: &[u64]) {
    let mut bytes = std::fs::read(path).unwrap();
    // A tensor info: name length (u64), name, n_dims (u32), dims (u64 each), ...
    let mut key = (name.len() as u64).to_le_bytes().to_vec();
    key.extend_from_slice(name.as_bytes());
    let at = bytes
        .windows(key.len())
        .rposition(|w| w == key.as_slice())
        .expect("the tensor's name in the header");
    let mut p = at + key.len();
    let n = u32::from_le_bytes(bytes[p..p + 4].try_into().unwrap()) as usize;
    assert_eq!(n, dims.len(), "{name} has {n} dimensions");
    p += 4;
    for d in dims {
        bytes[p..p + 8].copy_from_slice(&d.to_le_bytes());
        p += 8;
    }
    std::fs::write(path, bytes).unwrap();
}

/// Settings for a model file or folder on `device`.
pub fn settings_on(
    path: &Path,
    format: Format,
    dtype: Option<&str>,
    device: &str,
    max_new_tokens: u32,
) -> LocalSettings {
    LocalSettings {
        path: path.to_path_buf(),
        format,
        dtype: dtype.map(|d| d.parse().expect("a dtype name: f32, bf16 or f16")),
        device: device.parse().expect("a device name: cpu, cuda or cuda:N"),
        max_new_tokens,
        max_batch: 4,
        generation_timeout: std::time::Duration::from_secs(600),
        kv_memory: None,
    }
}

/// Last-position logits of `prompt` fed whole, and fed token by token in a batch beside
/// another sequence.
pub fn logits(model: &LocalModel, prompt: &[u32]) -> (Vec<f32>, Vec<f32>) {
    let layers = model.model.config.layers;
    let mut cache = SeqCache::new(layers);
    let whole = model
        .model
        .forward(&[prompt.to_vec()], &mut [&mut cache])
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let (mut a, mut b) = (SeqCache::new(layers), SeqCache::new(layers));
    model
        .model
        .forward(&[vec![prompt[0]]], &mut [&mut a])
        .unwrap();
    model
        .model
        .forward(&[vec![7, 8, 9]], &mut [&mut b])
        .unwrap();
    let mut step = Vec::new();
    for (i, &tok) in prompt.iter().enumerate().skip(1) {
        let out = model
            .model
            .forward(&[vec![tok], vec![10 + i as u32]], &mut [&mut a, &mut b])
            .unwrap();
        step = out.get(0).unwrap().to_vec1::<f32>().unwrap();
    }
    (whole, step)
}

pub fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}
