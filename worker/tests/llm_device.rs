//! The local backends on the device that `CREDENCE_TEST_DEVICE` names (`cpu` when unset;
//! `cuda` with a build of `--features cuda` on a GPU machine). Tiny random-weight models
//! that the tests write, safetensors folders and quantised GGUF files of Llama, Qwen3,
//! Phi-3 and Gemma 3, load there, generate exactly the tokens asked for, and give the
//! logits of the CPU's plain-buffer path, for a whole prompt and token by token in a
//! batch. On the CPU the device side runs candle's tensor path, the one CUDA runs.

#[path = "support/tiny_llm.rs"]
mod tiny;

use credence_worker::llm::local::{Format, LocalBackend, LocalModel, LocalSettings};
use credence_worker::llm::ChatMessage;
use std::path::Path;
use tiny::*;

const ARCHS: [Arch; 4] = [Arch::Llama, Arch::Qwen3, Arch::Phi3, Arch::Gemma3];

/// The model as `settings` say; on the CPU, on candle's tensor path.
fn load_on_device(settings: &LocalSettings) -> LocalModel {
    let mut model = LocalModel::load(settings)
        .unwrap_or_else(|e| panic!("loading on {}: {e}", settings.device));
    if settings.device == "cpu" {
        model.model.set_tensor_path(true);
    }
    model
}

fn max_abs(a: &[f32]) -> f32 {
    a.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// The device's logits against the CPU plain path's, within `tolerance` times the
/// largest logit (at least 1).
fn check_against_cpu(cpu: &LocalModel, device: &LocalModel, what: &str, tolerance: f32) {
    let prompt: Vec<u32> = vec![5, 9, 17, 3, 40, 22, 8, 61, 13, 7, 30, 12];
    let (cpu_whole, cpu_step) = logits(cpu, &prompt);
    let (dev_whole, dev_step) = logits(device, &prompt);
    let bound = tolerance * max_abs(&cpu_whole).max(1.0);
    for (name, ours, theirs) in [
        ("prefill", &dev_whole, &cpu_whole),
        ("batched decode", &dev_step, &cpu_step),
        ("decode vs prefill", &dev_step, &cpu_whole),
    ] {
        let d = max_diff(ours, theirs);
        println!("{what}: {name}: max |difference| {d:.2e} (bound {bound:.2e})");
        assert!(d <= bound, "{what}: {name}: logits differ by {d} > {bound}");
    }
}

/// Generates `n` tokens (end of turn ignored) from a short chat on the model.
fn generate(settings: &LocalSettings, n: u32) -> (Vec<u32>, usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let backend = LocalBackend::load(settings)
        .unwrap_or_else(|e| panic!("loading on {}: {e}", settings.device));
    let chat = [ChatMessage::system("w5 w6"), ChatMessage::user("w7 w8 w9")];
    let g = runtime.block_on(backend.run(&chat, n, true)).unwrap();
    (g.ids, g.prompt_tokens)
}

fn gguf_file(dir: &Path, arch: Arch) -> (std::path::PathBuf, usize) {
    let path = dir.join(format!("tiny-{}.gguf", gguf_arch(arch)));
    let vocab = write_gguf(&path, arch);
    (path, vocab)
}

#[test]
fn quantised_gguf_models_give_the_cpu_logits_on_the_test_device() {
    let device = test_device();
    for arch in ARCHS {
        let dir = tempfile::tempdir().unwrap();
        let (path, vocab) = gguf_file(dir.path(), arch);
        let cpu = LocalModel::load(&settings_on(&path, Format::Gguf, None, "cpu", 8)).unwrap();
        assert_eq!(cpu.model.config.vocab, vocab);
        assert_eq!(cpu.model.config.layers, G_LAYERS);
        let on_device = load_on_device(&settings_on(&path, Format::Gguf, None, &device, 8));
        // The two sides round activations differently (8-bit blocks on the CPU, candle's
        // own quantisation or f32 products on a GPU): a few percent of the largest logit.
        check_against_cpu(
            &cpu,
            &on_device,
            &format!("{arch:?} GGUF on {device}"),
            0.05,
        );
    }
}

#[test]
fn quantised_gguf_models_generate_the_tokens_asked_for_on_the_test_device() {
    let device = test_device();
    for arch in ARCHS {
        let dir = tempfile::tempdir().unwrap();
        let (path, vocab) = gguf_file(dir.path(), arch);
        let (ids, prompt_tokens) = generate(&settings_on(&path, Format::Gguf, None, &device, 9), 9);
        assert_eq!(ids.len(), 9, "{arch:?} GGUF on {device}");
        assert!(
            ids.iter().all(|&i| (i as usize) < vocab),
            "{arch:?}: {ids:?}"
        );
        // The tokenizer from the GGUF metadata: the same prompt as on the CPU.
        let cpu = LocalModel::load(&settings_on(&path, Format::Gguf, None, "cpu", 9)).unwrap();
        let chat = [ChatMessage::system("w5 w6"), ChatMessage::user("w7 w8 w9")];
        assert_eq!(prompt_tokens, cpu.prompt_ids(&chat).unwrap().len());
        let text = cpu.prompt_text(&chat).unwrap();
        assert!(
            text.starts_with("<|im_start|>system w5 w6 <|im_end|>"),
            "{text}"
        );
    }
}

#[test]
fn safetensors_models_give_the_cpu_logits_on_the_test_device() {
    let device = test_device();
    for arch in ARCHS {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path(), arch);
        let cpu = LocalModel::load(&settings(dir.path(), "f32", 8)).unwrap();
        let f32_settings = settings_on(dir.path(), Format::Safetensors, Some("f32"), &device, 8);
        let on_device = load_on_device(&f32_settings);
        check_against_cpu(&cpu, &on_device, &format!("{arch:?} f32 on {device}"), 1e-4);
        // Half precision keeps about three significant digits.
        for dtype in ["bf16", "f16"] {
            let half = load_on_device(&settings_on(
                dir.path(),
                Format::Safetensors,
                Some(dtype),
                &device,
                8,
            ));
            check_against_cpu(&cpu, &half, &format!("{arch:?} {dtype} on {device}"), 0.05);
        }
    }
}

#[test]
fn safetensors_models_generate_the_tokens_asked_for_on_the_test_device() {
    let device = test_device();
    for arch in ARCHS {
        let dir = tempfile::tempdir().unwrap();
        write_model(dir.path(), arch);
        for dtype in ["f32", "bf16", "f16"] {
            let s = settings_on(dir.path(), Format::Safetensors, Some(dtype), &device, 9);
            let (ids, prompt_tokens) = generate(&s, 9);
            assert_eq!(ids.len(), 9, "{arch:?} {dtype} on {device}");
            assert_eq!(
                prompt_tokens, 13,
                "{arch:?} {dtype}: the ChatML prompt's tokens"
            );
            assert!(ids.iter().all(|&i| (i as usize) < VOCAB));
        }
    }
}

/// Runs `chats` one after another on one backend; each generation's ids and reused
/// prompt tokens.
fn run_in_order(settings: &LocalSettings, chats: &[Vec<ChatMessage>]) -> Vec<(Vec<u32>, usize)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let backend = LocalBackend::load(settings).unwrap();
    chats
        .iter()
        .map(|chat| {
            let g = runtime.block_on(backend.run(chat, 12, true)).unwrap();
            (g.ids, g.reused_tokens)
        })
        .collect()
}

#[test]
fn a_prompt_continuing_an_earlier_prompts_prefix_generates_what_it_does_alone() {
    let device = test_device();
    let system = ChatMessage::system("w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16");
    let first = vec![system.clone(), ChatMessage::user("w20 w21")];
    let second = vec![system, ChatMessage::user("w22 w23 w24")];
    let dir = tempfile::tempdir().unwrap();
    let (gguf, _) = gguf_file(dir.path(), Arch::Qwen3);
    write_model(dir.path(), Arch::Llama);
    for (what, s) in [
        (
            "Qwen3 GGUF",
            settings_on(&gguf, Format::Gguf, None, &device, 12),
        ),
        (
            "Llama f32",
            settings_on(dir.path(), Format::Safetensors, Some("f32"), &device, 12),
        ),
    ] {
        let after = run_in_order(&s, &[first.clone(), second.clone()]);
        let alone = run_in_order(&s, std::slice::from_ref(&second));
        assert_eq!(
            after[0].1, 0,
            "{what}: nothing to reuse for the first prompt"
        );
        // The shared system turn, up to where the user turns differ.
        assert!(after[1].1 >= 14, "{what}: reused {} tokens", after[1].1);
        assert_eq!(alone[0].1, 0);
        assert_eq!(after[1].0, alone[0].0, "{what} on {device}");
        // The same prompt again reuses all of it but its last token.
        let twice = run_in_order(&s, &[second.clone(), second.clone()]);
        assert_eq!(
            twice[1].0, alone[0].0,
            "{what} on {device}: the same prompt again"
        );
    }
}
