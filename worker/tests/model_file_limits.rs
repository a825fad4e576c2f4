//! Crafted model files: every size a GGUF header or a `config.json` states is held to
//! the limits of `llm::local::limits` before anything is allocated from it, so a bad file
//! is one error line naming the file and the field, and the process goes on (a 1 TB
//! `vec!` aborted it; a zero head count divided by zero on the first prompt). Each test
//! writes a tiny valid model (`support/tiny_llm.rs`) and corrupts one field.

use crate::support::tiny_llm as tiny;

use candle_core::quantized::gguf_file::Value as V;
use credence_worker::llm::local::model::SeqCache;
use credence_worker::llm::local::{fingerprint, Format, LocalBackend, LocalModel};
use std::path::{Path, PathBuf};
use tiny::*;

/// A small GGUF model of `arch` whose metadata key `{arch}.{key}` is set to `value`.
fn gguf_with(dir: &Path, arch: Arch, key: &str, value: V) -> PathBuf {
    let path = dir.join(format!("{}.gguf", gguf_arch(arch)));
    let full = format!("{}.{key}", gguf_arch(arch));
    write_gguf_with(&path, arch, &SMALL_SIZES, &mut |md| {
        md.retain(|(k, _)| *k != full);
        md.push((full.clone(), value.clone()));
    });
    path
}

fn load_gguf(path: &Path) -> String {
    match LocalModel::load(&settings_on(path, Format::Gguf, None, "cpu", 4)) {
        Ok(_) => panic!("{} loaded", path.display()),
        Err(e) => e.to_string(),
    }
}

/// The error is one line that starts with the file and names the field.
fn assert_names(error: &str, path: &Path, field: &str) {
    assert!(!error.contains('\n'), "one line: {error}");
    assert!(
        error.starts_with(&path.display().to_string()),
        "names the file: {error}"
    );
    assert!(error.contains(field), "names {field}: {error}");
}

#[test]
fn the_small_files_load_and_run() {
    // The base every other test corrupts one field of.
    let dir = tempfile::tempdir().unwrap();
    for arch in [Arch::Llama, Arch::Qwen3, Arch::Phi3, Arch::Gemma3] {
        let path = dir.path().join(format!("{arch:?}.gguf"));
        write_gguf_with(&path, arch, &SMALL_SIZES, &mut |_| {});
        let model = LocalModel::load(&settings_on(&path, Format::Gguf, None, "cpu", 4)).unwrap();
        let mut cache = SeqCache::new(model.model.config.layers);
        let logits = model
            .model
            .forward(&[vec![3, 5]], &mut [&mut cache])
            .unwrap();
        assert_eq!(logits.dims(), &[1, 18], "{arch:?}");
    }
}

#[test]
fn a_huge_block_count_is_an_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let path = gguf_with(dir.path(), Arch::Llama, "block_count", V::U64(1 << 40));
    let e = load_gguf(&path);
    assert_eq!(
        e,
        format!(
            "{}: llama.block_count = 1099511627776 exceeds the limit 1024",
            path.display()
        )
    );
}

#[test]
fn a_huge_key_length_is_an_error_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    for arch in [Arch::Llama, Arch::Qwen3, Arch::Gemma3] {
        let path = gguf_with(dir.path(), arch, "attention.key_length", V::U64(1 << 42));
        let e = load_gguf(&path);
        assert_names(&e, &path, "attention.key_length = 4398046511104 exceeds");
    }
    let path = gguf_with(
        dir.path(),
        Arch::Phi3,
        "rope.dimension_count",
        V::U64(1 << 42),
    );
    assert_names(&load_gguf(&path), &path, "phi3.rope.dimension_count");
}

#[test]
fn zero_heads_are_an_error_not_a_division_by_zero() {
    let dir = tempfile::tempdir().unwrap();
    for arch in [Arch::Llama, Arch::Qwen3, Arch::Phi3, Arch::Gemma3] {
        for key in ["attention.head_count", "attention.head_count_kv"] {
            let path = gguf_with(dir.path(), arch, key, V::U32(0));
            let e = load_gguf(&path);
            let field = format!("{}.{key} = 0 is below the minimum 1", gguf_arch(arch));
            assert_names(&e, &path, &field);
        }
    }
}

#[test]
fn heads_that_do_not_group_evenly_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = gguf_with(
        dir.path(),
        Arch::Llama,
        "attention.head_count_kv",
        V::U32(3),
    );
    assert_names(
        &load_gguf(&path),
        &path,
        "llama.attention.head_count = 4 is not a multiple of llama.attention.head_count_kv = 3",
    );
}

#[test]
fn a_head_width_the_tensors_do_not_have_is_refused_before_reading_them() {
    // Within every limit, but the attention matrices are [32, 32], not [4 x 16, 32].
    let dir = tempfile::tempdir().unwrap();
    let path = gguf_with(dir.path(), Arch::Llama, "attention.key_length", V::U32(16));
    assert_names(
        &load_gguf(&path),
        &path,
        "tensor blk.0.attn_q.weight: has shape [32, 32], the configuration implies [64, 32]",
    );
}

#[test]
fn tensor_dimensions_whose_product_wraps_are_refused() {
    // Rows x columns = 2^64 + 256 elements: it wraps to 256 (a few bytes, which pass a
    // file-size check computed in unchecked arithmetic).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrap.gguf");
    write_gguf_with(&path, Arch::Llama, &SMALL_SIZES, &mut |_| {});
    patch_tensor_dims(&path, "blk.0.attn_q.weight", &[256, (1u64 << 56) + 1]);
    let e = load_gguf(&path);
    assert_names(&e, &path, "tensor blk.0.attn_q.weight: dimensions");
    assert!(e.contains("overflow"), "{e}");
    // And dimensions that do not wrap but need more bytes than the file has.
    patch_tensor_dims(&path, "blk.0.attn_q.weight", &[32, 1 << 20]);
    let e = load_gguf(&path);
    assert_names(&e, &path, "tensor blk.0.attn_q.weight");
    assert!(e.contains("do not fit the file"), "{e}");
}

#[test]
fn a_zero_alignment_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("align.gguf");
    write_gguf_with(&path, Arch::Llama, &SMALL_SIZES, &mut |md| {
        md.push(("general.alignment".into(), V::U32(0)));
    });
    assert_names(&load_gguf(&path), &path, "not a readable GGUF file");
}

/// A safetensors folder of `arch` whose config.json has `key` set to `value`.
fn folder_with(dir: &Path, arch: Arch, key: &str, value: serde_json::Value) -> PathBuf {
    let folder = dir.join(format!("{arch:?}-{key}"));
    std::fs::create_dir_all(&folder).unwrap();
    let mut config = config_json(arch);
    config[key] = value;
    write_model_with(&folder, arch, config);
    folder
}

fn load_folder(folder: &Path) -> String {
    match LocalModel::load(&settings(folder, "f32", 4)) {
        Ok(_) => panic!("{} loaded", folder.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn config_json_sizes_are_held_to_the_same_limits() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Arch, &str, serde_json::Value, &str); 7] = [
        (
            Arch::Llama,
            "num_hidden_layers",
            (1u64 << 40).into(),
            "num_hidden_layers = 1099511627776 exceeds the limit 1024",
        ),
        (
            Arch::Qwen3,
            "head_dim",
            (1u64 << 42).into(),
            "head_dim = 4398046511104 exceeds the limit 4096",
        ),
        (
            Arch::Phi3,
            "num_attention_heads",
            0.into(),
            "num_attention_heads = 0 is below the minimum 1",
        ),
        (
            Arch::Gemma3,
            "num_key_value_heads",
            0.into(),
            "num_key_value_heads = 0 is below the minimum 1",
        ),
        (
            Arch::Llama,
            "vocab_size",
            (1u64 << 40).into(),
            "vocab_size = 1099511627776 exceeds the limit",
        ),
        (
            Arch::Qwen3,
            "hidden_size",
            (1u64 << 20).into(),
            "hidden_size = 1048576 exceeds the limit 65536",
        ),
        (
            Arch::Llama,
            "num_key_value_heads",
            3.into(),
            "num_attention_heads = 4 is not a multiple of num_key_value_heads = 3",
        ),
    ];
    for (arch, key, value, field) in cases {
        let folder = folder_with(dir.path(), arch, key, value);
        let e = load_folder(&folder);
        assert_names(&e, &folder.join("config.json"), field);
    }
}

#[test]
fn a_failed_load_leaves_no_backend_and_the_next_load_works() {
    // What the worker does per job: the bad model's load is an error (the job fails with
    // it, and the handler caches only a loaded backend), and the same process then loads
    // and runs a good model.
    let dir = tempfile::tempdir().unwrap();
    let bad = gguf_with(
        dir.path(),
        Arch::Llama,
        "attention.head_count_kv",
        V::U32(0),
    );
    let e = match LocalBackend::load(&settings_on(&bad, Format::Gguf, None, "cpu", 4)) {
        Ok(_) => panic!("a backend for a file with no key/value heads"),
        Err(e) => e.to_string(),
    };
    assert_names(&e, &bad, "llama.attention.head_count_kv = 0");
    let good = dir.path().join("good.gguf");
    write_gguf_with(&good, Arch::Llama, &SMALL_SIZES, &mut |_| {});
    let backend = LocalBackend::load(&settings_on(&good, Format::Gguf, None, "cpu", 4)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let g = rt
        .block_on(backend.run(&[credence_worker::llm::ChatMessage::user("w1 w2")], 3, true))
        .unwrap();
    assert_eq!(g.ids.len(), 3);
}

#[test]
fn a_weights_file_that_is_a_device_is_refused_not_hashed_forever() {
    // `model.safetensors -> /dev/zero` made the fingerprint read zeros without end.
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("m");
    std::fs::create_dir(&folder).unwrap();
    write_model(&folder, Arch::Llama);
    std::fs::remove_file(folder.join("model.safetensors")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", folder.join("model.safetensors")).unwrap();
    let settings = settings(&folder, "f32", 4);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(fingerprint(&settings).map_err(|e| e.to_string()));
    });
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("fingerprinting a symlink to /dev/zero returns");
    let e = result.expect_err("a device is not a model file");
    assert_names(
        &e,
        &folder.join("model.safetensors"),
        "is not a regular file",
    );
}
