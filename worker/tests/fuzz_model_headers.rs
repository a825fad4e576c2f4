//! Fuzzing of the model file readers on stable Rust: mutated GGUF files and safetensors
//! folders (from the committed seed corpus under `tests/fuzz/corpus/`) are loaded through
//! the real entry point, `LocalModel::load` (candle's header readers, credence's limits,
//! the tokenizer, the weights), and a model that loads runs one forward pass. A panic is
//! a failure: the input is written, with its seed, under
//! `$CARGO_TARGET_TMPDIR/fuzz-crashes/` to replay. An abort (an allocation a size check
//! missed) ends the test process, which fails the test as it should.
//!
//! Time budget: `CREDENCE_FUZZ_SECS` seconds for each of the two targets, else 15 when
//! `CI` is set (30 s in all) and 2.5 otherwise. A longer run:
//! `CREDENCE_FUZZ_SECS=600 cargo test -p credence-worker --test integration fuzz_model_headers:: -- --nocapture`.
//! `CREDENCE_FUZZ_SEED` fixes the run's seed (printed at the start; each input's own seed
//! is derived from it and its index); `CREDENCE_FUZZ_REPLAY=<file>` loads one saved input
//! (its name says `gguf` or `safetensors`). `CREDENCE_FUZZ_WRITE_CORPUS=1` rewrites the
//! corpus from `support/tiny_llm.rs` first.

use crate::support::tiny_llm as tiny;

use credence_worker::llm::local::model::SeqCache;
use credence_worker::llm::local::{Format, LocalModel};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tiny::*;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus")
}

/// The seed corpus: small GGUF models of each architecture, one cut after its header
/// (tensor data missing), and safetensors weights of one-layer models with a config.json
/// (mutated as the folder's config beside the seed weights).
fn write_corpus() {
    let gguf = corpus_dir().join("gguf");
    let st = corpus_dir().join("safetensors");
    std::fs::create_dir_all(&gguf).unwrap();
    std::fs::create_dir_all(&st).unwrap();
    for arch in [Arch::Llama, Arch::Qwen3, Arch::Phi3, Arch::Gemma3] {
        let path = gguf.join(format!("{}.gguf", gguf_arch(arch)));
        write_gguf_with(&path, arch, &SMALL_SIZES, &mut |_| {});
    }
    let whole = std::fs::read(gguf.join("llama.gguf")).unwrap();
    let header = candle_core::quantized::gguf_file::Content::read(&mut std::io::Cursor::new(&whole))
        .unwrap()
        .tensor_data_offset as usize;
    std::fs::write(gguf.join("llama-header-only.gguf"), &whole[..header]).unwrap();
    std::fs::write(
        st.join("llama-config.json"),
        serde_json::to_string_pretty(&small_config(Arch::Llama)).unwrap(),
    )
    .unwrap();
    for arch in [Arch::Llama, Arch::Phi3] {
        let weights = small_weights(arch);
        let name = format!("{}.safetensors", gguf_arch(arch));
        candle_core::safetensors::save(&weights, st.join(name)).unwrap();
    }
}

/// A one-layer config.json of the tiny vocabulary, 8 wide.
fn small_config(arch: Arch) -> serde_json::Value {
    let mut c = config_json(arch);
    c["hidden_size"] = 8.into();
    c["num_attention_heads"] = 2.into();
    c["num_key_value_heads"] = 1.into();
    c["intermediate_size"] = 8.into();
    c["num_hidden_layers"] = 1.into();
    c
}

/// The weights of [`small_config`].
fn small_weights(arch: Arch) -> std::collections::HashMap<String, candle_core::Tensor> {
    use candle_core::{Device, Tensor};
    let (v, h, q, kv, f) = (VOCAB, 8, 8, 4, 8);
    let mut shapes: Vec<(String, Vec<usize>)> = vec![
        ("model.embed_tokens.weight".into(), vec![v, h]),
        ("model.norm.weight".into(), vec![h]),
        ("lm_head.weight".into(), vec![v, h]),
        ("model.layers.0.input_layernorm.weight".into(), vec![h]),
        (
            "model.layers.0.post_attention_layernorm.weight".into(),
            vec![h],
        ),
        ("model.layers.0.self_attn.o_proj.weight".into(), vec![h, q]),
        ("model.layers.0.mlp.down_proj.weight".into(), vec![h, f]),
    ];
    let p = |s: &str| format!("model.layers.0.{s}");
    if arch == Arch::Phi3 {
        shapes.push((p("self_attn.qkv_proj.weight"), vec![q + 2 * kv, h]));
        shapes.push((p("mlp.gate_up_proj.weight"), vec![2 * f, h]));
    } else {
        shapes.push((p("self_attn.q_proj.weight"), vec![q, h]));
        shapes.push((p("self_attn.k_proj.weight"), vec![kv, h]));
        shapes.push((p("self_attn.v_proj.weight"), vec![kv, h]));
        shapes.push((p("mlp.gate_proj.weight"), vec![f, h]));
        shapes.push((p("mlp.up_proj.weight"), vec![f, h]));
    }
    shapes
        .into_iter()
        .enumerate()
        .map(|(i, (name, shape))| {
            let n: usize = shape.iter().product();
            let values: Vec<f32> = (0..n)
                .map(|j| ((i * 31 + j * 7) % 13) as f32 / 13.0)
                .collect();
            let t = Tensor::from_vec(values, shape, &Device::Cpu).unwrap();
            (name, t.to_dtype(candle_core::DType::F16).unwrap())
        })
        .collect()
}

fn corpus(kind: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir().join(kind))
        .unwrap_or_else(|e| panic!("the {kind} corpus: {e}"))
        .map(|e| e.unwrap().path())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the {kind} corpus is empty");
    files
}

/// Values that sizes and offsets break on.
const INTERESTING: [u64; 10] = [
    0,
    1,
    0xff,
    0x7fff_ffff,
    0xffff_ffff,
    1 << 32,
    1 << 40,
    1 << 56,
    i64::MAX as u64,
    u64::MAX,
];

/// One mutation of `input` (a few stacked): bit flips, byte and word overwrites with
/// interesting values (at an aligned offset, where the header's integers are, or
/// anywhere), truncation, and splicing with another corpus file.
fn mutate(rng: &mut StdRng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        if b.is_empty() {
            b.push(0);
        }
        let at = rng.random_range(0..b.len());
        match rng.random_range(0..7) {
            0 => b[at] ^= 1 << rng.random_range(0..8),
            1 => b[at] = [0, 0xff, 0x7f, 0x80, 1][rng.random_range(0..5)],
            2 | 3 => {
                let v = INTERESTING[rng.random_range(0..INTERESTING.len())];
                let width = [4, 8][rng.random_range(0..2)];
                let at = if rng.random_bool(0.5) { at & !3 } else { at };
                for (i, byte) in v.to_le_bytes()[..width].iter().enumerate() {
                    if let Some(slot) = b.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            4 => b.truncate(at),
            5 => {
                // A splice: this file up to `at`, the other from a random point.
                let from = rng.random_range(0..other.len().max(1));
                b.truncate(at);
                b.extend_from_slice(other.get(from..).unwrap_or(&[]));
            }
            _ => {
                // A run of random bytes.
                let n = rng.random_range(1..16).min(b.len() - at);
                rng.fill(&mut b[at..at + n]);
            }
        }
    }
    b
}

/// Loads a model from a GGUF file or a safetensors folder and, if it loads, runs one
/// forward pass (a configuration that slipped through the checks fails there).
fn exercise(settings: &credence_worker::llm::local::LocalSettings) {
    if let Ok(model) = LocalModel::load(settings) {
        let mut cache = SeqCache::new(model.model.config.layers);
        let _ = model.model.forward(&[vec![3, 4]], &mut [&mut cache]);
    }
}

/// Where a crashing input goes.
fn crash_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-crashes")
}

fn budget() -> Duration {
    let secs = match std::env::var("CREDENCE_FUZZ_SECS") {
        Ok(s) => s
            .parse::<f64>()
            .expect("CREDENCE_FUZZ_SECS is a number of seconds"),
        Err(_) if std::env::var_os("CI").is_some() => 15.0,
        Err(_) => 2.5,
    };
    Duration::from_secs_f64(secs)
}

fn run_seed() -> u64 {
    match std::env::var("CREDENCE_FUZZ_SEED") {
        Ok(s) => s.parse().expect("CREDENCE_FUZZ_SEED is a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}

/// Feeds mutated inputs of `kind` to `target` (which writes them where the loader reads
/// them and loads) until the budget is spent; returns the inputs run, or panics with
/// the crashing inputs' files.
fn fuzz(kind: &str, target: &dyn Fn(&[u8])) -> usize {
    if std::env::var_os("CREDENCE_FUZZ_WRITE_CORPUS").is_some() {
        write_corpus();
    }
    let files = corpus(kind);
    // Every corpus entry as it is first: the seeds themselves must not crash.
    for (_, bytes) in &files {
        target(bytes);
    }
    let seed = run_seed();
    println!("fuzz {kind}: CREDENCE_FUZZ_SEED={seed}, {:?}", budget());
    let deadline = Instant::now() + budget();
    let mut crashes = Vec::new();
    let mut runs = 0usize;
    while Instant::now() < deadline {
        let input_seed = seed ^ (runs as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut rng = StdRng::seed_from_u64(input_seed);
        let (_, base) = &files[rng.random_range(0..files.len())];
        let (_, other) = &files[rng.random_range(0..files.len())];
        let input = mutate(&mut rng, base, other);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(&input)));
        if outcome.is_err() {
            std::fs::create_dir_all(crash_dir()).unwrap();
            let file = crash_dir().join(format!("{kind}-{input_seed:016x}.bin"));
            std::fs::write(&file, &input).unwrap();
            crashes.push(file);
        }
        runs += 1;
    }
    println!("fuzz {kind}: {runs} inputs, {} crashes", crashes.len());
    assert!(
        crashes.is_empty(),
        "inputs that panicked the loader (replay with CREDENCE_FUZZ_REPLAY=<file>): {crashes:?}"
    );
    runs
}

fn gguf_target(dir: &Path) -> impl Fn(&[u8]) + '_ {
    move |bytes: &[u8]| {
        let path = dir.join("model.gguf");
        std::fs::write(&path, bytes).unwrap();
        exercise(&settings_on(&path, Format::Gguf, None, "cpu", 4));
    }
}

/// A safetensors folder: the mutated weights file, or (for an input that starts with
/// `{`) a mutated config.json beside the seed weights.
fn safetensors_target(dir: &Path) -> impl Fn(&[u8]) + '_ {
    move |bytes: &[u8]| {
        let weights = dir.join("model.safetensors");
        let seed_weights =
            || std::fs::read(corpus_dir().join("safetensors/llama.safetensors")).unwrap();
        if bytes.first() == Some(&b'{')
            && serde_json::from_slice::<serde_json::Value>(bytes).is_ok()
        {
            std::fs::write(dir.join("config.json"), bytes).unwrap();
            std::fs::write(&weights, seed_weights()).unwrap();
        } else {
            std::fs::write(
                dir.join("config.json"),
                small_config(Arch::Llama).to_string(),
            )
            .unwrap();
            std::fs::write(&weights, bytes).unwrap();
        }
        exercise(&settings(dir, "f32", 4));
    }
}

fn safetensors_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_model_with(dir.path(), Arch::Llama, small_config(Arch::Llama));
    dir
}

#[test]
fn mutated_gguf_files_never_panic_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    if let Ok(replay) = std::env::var("CREDENCE_FUZZ_REPLAY") {
        if replay.contains("gguf") {
            gguf_target(dir.path())(&std::fs::read(replay).unwrap());
        }
        return;
    }
    let runs = fuzz("gguf", &gguf_target(dir.path()));
    assert!(runs > 0, "the budget ran no input");
}

#[test]
fn mutated_safetensors_folders_never_panic_the_loader() {
    let dir = safetensors_folder();
    if let Ok(replay) = std::env::var("CREDENCE_FUZZ_REPLAY") {
        if replay.contains("safetensors") {
            safetensors_target(dir.path())(&std::fs::read(replay).unwrap());
        }
        return;
    }
    let runs = fuzz("safetensors", &safetensors_target(dir.path()));
    assert!(runs > 0, "the budget ran no input");
}

#[test]
fn the_seed_corpus_loads() {
    // The corpus is worth mutating only if its files reach the whole loader.
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in corpus("gguf") {
        let path = dir.path().join(&name);
        std::fs::write(&path, &bytes).unwrap();
        let loaded = LocalModel::load(&settings_on(&path, Format::Gguf, None, "cpu", 4));
        assert_eq!(loaded.is_ok(), !name.contains("header-only"), "{name}");
    }
    let folder = safetensors_folder();
    for (name, bytes) in corpus("safetensors") {
        if name.ends_with(".json") {
            continue;
        }
        let arch = if name.starts_with("phi3") {
            Arch::Phi3
        } else {
            Arch::Llama
        };
        std::fs::write(
            folder.path().join("config.json"),
            small_config(arch).to_string(),
        )
        .unwrap();
        std::fs::write(folder.path().join("model.safetensors"), &bytes).unwrap();
        LocalModel::load(&settings(folder.path(), "f32", 4))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
