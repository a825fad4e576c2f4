//! A tiny BERT with random weights, written by the test itself: the CLS path (no small
//! CLS encoder can be had here), mean pooling, prefixes, truncation and the tokenizer
//! overrides, each checked against candle's BERT run by hand on the same folder.

use crate::common;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use candle_transformers::models::bert::{BertModel, Config};
use credence_worker::embed::{
    load_encoder, Attention, Backend, BertEncoder, Encoder, EncoderOptions, Pooling,
};
use std::path::Path;

const WORDS: [&str; 16] = [
    "query",
    ":",
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "a",
    "dog",
    "ran",
    ".",
    "bridge",
    "collapsed",
    "road",
    "was",
    "blocked",
];
const POSITIONS: usize = 24;

fn config_json() -> serde_json::Value {
    serde_json::json!({
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 16,
        "initializer_range": 0.02,
        "intermediate_size": 32,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": POSITIONS,
        "model_type": "bert",
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "pad_token_id": 0,
        "type_vocab_size": 2,
        "vocab_size": 4 + WORDS.len()
    })
}

/// A BERT WordPiece tokenizer.json that, like MiniLM's, declares fixed padding and
/// truncation at 128 (which the encoder must override).
fn tokenizer_json() -> serde_json::Value {
    let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"];
    let mut vocab = serde_json::Map::new();
    for (i, w) in specials.iter().chain(WORDS.iter()).enumerate() {
        vocab.insert(w.to_string(), i.into());
    }
    let added: Vec<_> = specials
        .iter()
        .enumerate()
        .map(|(i, s)| {
            serde_json::json!({"id": i, "content": s, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": false, "special": true})
        })
        .collect();
    serde_json::json!({
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 128, "strategy": "LongestFirst", "stride": 0},
        "padding": {"strategy": {"Fixed": 128}, "direction": "Right", "pad_to_multiple_of": null,
                    "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"},
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                       "strip_accents": null, "lowercase": true},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab}
    })
}

/// Writes config.json, tokenizer.json and model.safetensors with random weights (candle's
/// default initialisers through a VarMap) into `dir`.
fn write_tiny_bert(dir: &Path) {
    std::fs::write(dir.join("config.json"), config_json().to_string()).unwrap();
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json().to_string()).unwrap();
    let config: Config = serde_json::from_value(config_json()).unwrap();
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    BertModel::load(vb, &config).unwrap();
    // LayerNorms start at exactly 1 and 0; perturb every tensor so no path is trivial.
    for var in varmap.all_vars() {
        let noise = Tensor::randn(0f32, 0.2f32, var.shape(), &Device::Cpu).unwrap();
        var.set(&(var.as_tensor() + noise).unwrap()).unwrap();
    }
    varmap.save(dir.join("model.safetensors")).unwrap();
}

fn encoder(dir: &Path, preset: &str, batch_size: usize) -> BertEncoder {
    encoder_on(dir, preset, batch_size, Backend::Auto)
}

fn encoder_on(dir: &Path, preset: &str, batch_size: usize, backend: Backend) -> BertEncoder {
    let options = EncoderOptions {
        batch_size,
        backend,
        ..EncoderOptions::default()
    };
    load_encoder(preset, Some(dir), options).unwrap()
}

/// What the encoder should give for one text: candle's BERT on the ids, unpadded, then
/// CLS or mean pooling and L2 normalisation, done here by hand.
fn by_hand(dir: &Path, ids: &[u32], pooling: Pooling) -> Vec<f32> {
    let config: Config = serde_json::from_value(config_json()).unwrap();
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu).unwrap();
    let model = BertModel::load(vb, &config).unwrap();
    let input = Tensor::new(ids, &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let states = model
        .forward(&input, &input.zeros_like().unwrap(), None)
        .unwrap()
        .squeeze(0)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let pooled: Vec<f32> = match pooling {
        Pooling::Cls => states[0].clone(),
        Pooling::Mean => (0..states[0].len())
            .map(|k| states.iter().map(|row| row[k]).sum::<f32>() / states.len() as f32)
            .collect(),
    };
    let norm = pooled.iter().map(|x| x * x).sum::<f32>().sqrt();
    pooled.iter().map(|x| x / norm).collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn cls_and_mean_pooling_follow_the_preset() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_bert(dir.path());
    let texts = [
        "The cat sat on the mat.",
        "A dog ran.",
        "the bridge collapsed",
    ];
    // Both forward passes, each against candle's own BERT run by hand.
    for backend in common::encoder_backends() {
        let bge = encoder_on(dir.path(), "bge-small-en-v1.5", 2, backend);
        let minilm = encoder_on(dir.path(), "all-MiniLM-L6-v2", 2, backend);
        assert_eq!(bge.backend(), backend);
        check_pooling(dir.path(), &bge, &minilm, &texts);
    }
}

fn check_pooling(dir: &Path, bge: &BertEncoder, minilm: &BertEncoder, texts: &[&str]) {
    assert_eq!(bge.settings().pooling, Pooling::Cls);
    assert_eq!(minilm.settings().pooling, Pooling::Mean);
    assert_eq!(bge.dim(), 16);
    let cls = bge.encode(texts).unwrap();
    let mean = minilm.encode(texts).unwrap();
    let ids = bge.token_ids(texts).unwrap();
    for (i, ids) in ids.iter().enumerate() {
        // Padding is not the tokenizer.json's fixed 128: just the text and its specials.
        assert_eq!(ids.first(), Some(&2));
        assert_eq!(ids.last(), Some(&3));
        assert!(ids.len() < 12, "{ids:?}");
        let d = max_abs_diff(&cls[i], &by_hand(dir, ids, Pooling::Cls));
        assert!(d <= 1e-5, "CLS text {i}: {d}");
        let d = max_abs_diff(&mean[i], &by_hand(dir, ids, Pooling::Mean));
        assert!(d <= 1e-5, "mean text {i}: {d}");
        assert!(max_abs_diff(&cls[i], &mean[i]) > 1e-3, "CLS and mean agree");
    }
}

#[test]
fn e5_prefix_is_put_before_every_text() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_bert(dir.path());
    let e5 = encoder(dir.path(), "e5-base-v2", 4);
    let minilm = encoder(dir.path(), "all-MiniLM-L6-v2", 4);
    assert_eq!(e5.settings().prefix, "query: ");
    assert_eq!(minilm.settings().prefix, "");
    // query=4, ":"=5, the=6, cat=7
    assert_eq!(
        e5.token_ids(&["the cat"]).unwrap()[0],
        vec![2, 4, 5, 6, 7, 3]
    );
    let with_preset = e5.encode(&["the cat sat", "a dog ran"]).unwrap();
    let by_text = minilm
        .encode(&["query: the cat sat", "query: a dog ran"])
        .unwrap();
    for (a, b) in with_preset.iter().zip(&by_text) {
        assert!(max_abs_diff(a, b) <= 1e-6);
    }
    // Pooling, prefix and length are in the fingerprint; reloading gives the same one.
    assert_ne!(e5.fingerprint(), minilm.fingerprint());
    assert_eq!(
        e5.fingerprint(),
        encoder(dir.path(), "e5-base-v2", 1).fingerprint()
    );
}

#[test]
fn truncation_follows_position_limit_and_sentence_bert_config() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_bert(dir.path());
    let long = ["the cat sat on the mat"; 8].join(" ");
    let words: Vec<&str> = long.split(' ').collect();
    // Without sentence_bert_config.json: the preset's 512 is cut to the model's 24.
    let bge = encoder(dir.path(), "bge-small-en-v1.5", 8);
    assert_eq!(bge.settings().max_len, POSITIONS);
    let ids = bge.token_ids(&[&long]).unwrap();
    assert_eq!(ids[0].len(), POSITIONS);
    assert_eq!(ids[0].last(), Some(&3), "[SEP] survives truncation");
    let v = bge.encode(&[&long, "a dog ran"]).unwrap();
    let cut = words[..POSITIONS - 2].join(" ");
    assert!(max_abs_diff(&v[0], &bge.encode(&[&cut]).unwrap()[0]) <= 1e-5);

    // sentence_bert_config.json's max_seq_length wins over the preset.
    std::fs::write(
        dir.path().join("sentence_bert_config.json"),
        r#"{"max_seq_length": 10, "do_lower_case": false}"#,
    )
    .unwrap();
    let short = encoder(dir.path(), "bge-small-en-v1.5", 8);
    assert_eq!(short.settings().max_len, 10);
    assert_eq!(short.token_ids(&[&long]).unwrap()[0].len(), 10);
    let v = short.encode(&[&long]).unwrap();
    let cut = words[..8].join(" ");
    assert!(max_abs_diff(&v[0], &short.encode(&[&cut]).unwrap()[0]) <= 1e-5);
    assert_ne!(short.fingerprint(), bge.fingerprint());
}

#[test]
fn a_folder_without_weights_or_tokenizer_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_bert(dir.path());
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    let err = load_encoder(
        "bge-small-en-v1.5",
        Some(dir.path()),
        EncoderOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("model.safetensors or pytorch_model.bin"),
        "{err}"
    );
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let err = load_encoder(
        "bge-small-en-v1.5",
        Some(dir.path()),
        EncoderOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("tokenizer.json"), "{err}");
    let err = load_encoder("no-such-encoder", None, EncoderOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no-such-encoder") && err.contains("bge-large-en-v1.5"),
        "{err}"
    );
}

/// Texts of different lengths, so that a batch pads: the longest is 11 tokens, the
/// shortest 3.
const RAGGED: [&str; 6] = [
    "the cat sat on the mat . a dog ran on the road",
    "dog",
    "the bridge collapsed .",
    "a road was blocked",
    "cat",
    "the dog sat on a mat .",
];

/// The candle forward pass with one padded product per layer for the whole batch (a GPU's
/// attention) gives the per-sequence pass's vectors (the CPU's), for CLS and mean
/// pooling, on the device `CREDENCE_TEST_DEVICE` names (`cuda` on a GPU machine; on the
/// CPU, when unset, the padded attention is forced).
#[test]
fn padded_attention_on_the_test_device_gives_the_per_sequence_vectors() {
    let name = crate::support::tiny_llm::test_device();
    let device = credence_worker::embed::device(name.parse().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_tiny_bert(dir.path());
    for preset in ["bge-small-en-v1.5", "all-MiniLM-L6-v2"] {
        let reference = load_encoder(
            preset,
            Some(dir.path()),
            EncoderOptions {
                batch_size: 1,
                backend: Backend::Candle,
                attention: Attention::PerSequence,
                ..EncoderOptions::default()
            },
        )
        .unwrap()
        .encode(&RAGGED)
        .unwrap();
        let padded = load_encoder(
            preset,
            Some(dir.path()),
            EncoderOptions {
                batch_size: RAGGED.len(),
                backend: Backend::Candle,
                device: device.clone(),
                attention: if device.is_cpu() {
                    Attention::Padded
                } else {
                    Attention::Auto
                },
                ..EncoderOptions::default()
            },
        )
        .unwrap();
        let vectors = padded.encode(&RAGGED).unwrap();
        for (i, (a, b)) in reference.iter().zip(&vectors).enumerate() {
            let d = max_abs_diff(a, b);
            let cosine: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            assert!(
                d <= 1e-5 && cosine >= 0.9999,
                "{preset} on {name}, text {i}: max difference {d}, cosine {cosine}"
            );
        }
        // A sequence's padding changes nothing beyond rounding: alone it gives the same.
        let alone = padded.encode(&RAGGED[1..2]).unwrap();
        assert!(max_abs_diff(&alone[0], &vectors[1]) <= 1e-5, "{preset}");
    }
}
