//! all-MiniLM-L6-v2 against sentence-transformers: the golden vectors in
//! `../shared/data/minilm-golden/` (made by sentence-transformers 6.2.0, see its README),
//! and invariance of the vectors to batch size and input order.

use crate::common;

use credence_worker::embed::{
    load_encoder, Backend, BertEncoder, Encoder, EncoderOptions, Pooling, Precision,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    id: u64,
    category: String,
    text: String,
    n_wordpieces: usize,
    embedding: Vec<f32>,
}

fn minilm(batch_size: usize) -> Option<BertEncoder> {
    minilm_on(batch_size, Backend::Auto)
}

fn minilm_on(batch_size: usize, backend: Backend) -> Option<BertEncoder> {
    let folder = common::require(
        common::models_dir().join("all-MiniLM-L6-v2"),
        "all-MiniLM-L6-v2 weights",
    )?;
    let options = EncoderOptions {
        batch_size,
        backend,
        ..EncoderOptions::default()
    };
    Some(load_encoder("all-MiniLM-L6-v2", Some(&folder), options).expect("loading MiniLM"))
}

fn goldens() -> Option<Vec<Golden>> {
    let path = common::require(
        common::shared_data().join("minilm-golden/minilm-golden.jsonl"),
        "minilm golden vectors",
    )?;
    let text = std::fs::read_to_string(&path).unwrap();
    Some(
        text.lines()
            .enumerate()
            .map(|(n, l)| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1))
            })
            .collect(),
    )
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
    let na: f64 = a.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn matches_sentence_transformers_golden_vectors() {
    for backend in common::encoder_backends() {
        let (Some(encoder), Some(goldens)) = (minilm_on(32, backend), goldens()) else {
            return;
        };
        assert_eq!(encoder.backend(), backend);
        check_goldens(&encoder, &goldens);
    }
}

#[test]
fn native_and_candle_passes_agree_to_float_rounding() {
    if common::encoder_backends().len() < 2 {
        return;
    }
    let (Some(native), Some(candle), Some(goldens)) = (
        minilm_on(16, Backend::Native),
        minilm_on(16, Backend::Candle),
        goldens(),
    ) else {
        return;
    };
    assert_ne!(native.fingerprint(), candle.fingerprint());
    let texts: Vec<&str> = goldens.iter().map(|g| g.text.as_str()).collect();
    let (a, b) = (
        native.encode(&texts).unwrap(),
        candle.encode(&texts).unwrap(),
    );
    let mut worst = 0.0f32;
    for (x, y) in a.iter().zip(&b) {
        for (p, q) in x.iter().zip(y) {
            worst = worst.max((p - q).abs());
        }
    }
    eprintln!(
        "max abs diff native vs candle over {} texts: {worst:e}",
        texts.len()
    );
    assert!(worst <= 1e-5, "native and candle differ by {worst}");
}

#[test]
fn bf16_products_keep_cosine_above_0_9999_and_batch_invariance() {
    let Some(folder) = common::require(
        common::models_dir().join("all-MiniLM-L6-v2"),
        "all-MiniLM-L6-v2 weights",
    ) else {
        return;
    };
    let load = |batch_size| {
        let options = EncoderOptions {
            batch_size,
            precision: Precision::Bf16,
            ..EncoderOptions::default()
        };
        load_encoder("all-MiniLM-L6-v2", Some(&folder), options)
    };
    #[cfg(target_arch = "x86_64")]
    let runs = std::arch::is_x86_feature_detected!("avx512bf16")
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma");
    #[cfg(not(target_arch = "x86_64"))]
    let runs = false;
    if !runs {
        let err = load(32)
            .err()
            .expect("bf16 on a CPU without AVX-512 BF16")
            .to_string();
        assert!(err.contains("AVX-512 BF16"), "{err}");
        println!("no AVX-512 BF16 here: only the refusal is tested");
        return;
    }
    let (Some(f32_encoder), Some(goldens)) = (minilm_on(32, Backend::Native), goldens()) else {
        return;
    };
    let mut bf16 = load(1).expect("loading MiniLM with bf16 products");
    assert_eq!(bf16.backend(), Backend::Native);
    assert_ne!(bf16.fingerprint(), f32_encoder.fingerprint());
    let texts: Vec<&str> = goldens.iter().map(|g| g.text.as_str()).collect();
    let exact = f32_encoder.encode(&texts).unwrap();
    let rounded = bf16.encode(&texts).unwrap();
    let (mut worst, mut worst_golden) = (f64::INFINITY, f64::INFINITY);
    for ((x, y), g) in exact.iter().zip(&rounded).zip(&goldens) {
        assert_ne!(x, y, "golden {}: bf16 products changed nothing", g.id);
        worst = worst.min(cosine(x, y));
        worst_golden = worst_golden.min(cosine(y, &g.embedding));
    }
    eprintln!("lowest cosine bf16 to f32: {worst:.8}; to golden: {worst_golden:.8}");
    assert!(worst >= 0.9999, "bf16 vs f32: cosine {worst}");
    assert!(
        worst_golden >= 0.9999,
        "bf16 vs golden: cosine {worst_golden}"
    );
    check_batch_invariance(&mut bf16, &goldens);
}

fn check_goldens(encoder: &BertEncoder, goldens: &[Golden]) {
    assert_eq!(encoder.settings().pooling, Pooling::Mean);
    assert_eq!(
        encoder.settings().max_len,
        256,
        "sentence_bert_config.json says 256"
    );
    assert!(goldens.len() >= 200, "{} golden texts", goldens.len());
    let texts: Vec<&str> = goldens.iter().map(|g| g.text.as_str()).collect();
    let ids = encoder.token_ids(&texts).unwrap();
    let vectors = encoder.encode(&texts).unwrap();
    let mut worst = (f64::INFINITY, 0u64);
    for ((g, v), ids) in goldens.iter().zip(&vectors).zip(&ids) {
        assert_eq!(
            ids.len(),
            g.n_wordpieces,
            "golden {} ({}): word pieces after truncation",
            g.id,
            g.category
        );
        let c = cosine(v, &g.embedding);
        if c < worst.0 {
            worst = (c, g.id);
        }
        let norm: f64 = v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "golden {}: norm {norm}", g.id);
    }
    eprintln!("lowest cosine to golden: {:.8} (id {})", worst.0, worst.1);
    assert!(
        worst.0 >= 0.99999,
        "golden {}: cosine {} < 0.99999",
        worst.1,
        worst.0
    );
    // Texts past 256 word pieces are in the set, so truncation is exercised.
    assert!(goldens.iter().any(|g| g.n_wordpieces == 256));
}

#[test]
fn vectors_are_bit_identical_whatever_the_batch_size_or_order() {
    for backend in common::encoder_backends() {
        let (Some(mut encoder), Some(goldens)) = (minilm_on(1, backend), goldens()) else {
            return;
        };
        check_batch_invariance(&mut encoder, &goldens);
    }
}

fn check_batch_invariance(encoder: &mut BertEncoder, goldens: &[Golden]) {
    // Mixed lengths (short claims to truncated 256-piece texts); 96 of them, so batch 64
    // runs a full and a partial batch.
    let texts: Vec<&str> = goldens.iter().take(96).map(|g| g.text.as_str()).collect();
    let one_by_one = encoder.encode(&texts).unwrap();
    encoder.set_batch_size(64);
    // A fixed shuffle: stride 37 is coprime with 96.
    let order: Vec<usize> = (0..texts.len())
        .map(|i| (i * 37 + 11) % texts.len())
        .collect();
    let shuffled: Vec<&str> = order.iter().map(|&i| texts[i]).collect();
    let batched = encoder.encode(&shuffled).unwrap();
    let mut max_diff = 0.0f32;
    for (k, &i) in order.iter().enumerate() {
        for (a, b) in one_by_one[i].iter().zip(&batched[k]) {
            max_diff = max_diff.max((a - b).abs());
        }
    }
    eprintln!("max abs diff batch 1 vs 64 shuffled: {max_diff:e}");
    // Bit-identical, not just close: the embedding cache shares vectors between jobs, so
    // a vector that changed with its batch companions would make result rows depend on
    // which job encoded the sentence first.
    assert_eq!(max_diff, 0.0, "a vector changed with its batch");
}

#[test]
fn duplicate_texts_get_identical_vectors() {
    let Some(encoder) = minilm(8) else {
        return;
    };
    let v = encoder
        .encode(&[
            "The bridge collapsed.",
            "The road was blocked.",
            "The bridge collapsed.",
        ])
        .unwrap();
    assert_eq!(v[0], v[2]);
    assert_ne!(v[0], v[1]);
    // Related sentences are close but not 0.8-for-everything (the padding gotcha).
    let w = encoder
        .encode(&[
            "A cat sat on the mat.",
            "Stock markets fell sharply on Monday.",
        ])
        .unwrap();
    assert!(cosine(&w[0], &w[1]) < 0.3, "{}", cosine(&w[0], &w[1]));
}
