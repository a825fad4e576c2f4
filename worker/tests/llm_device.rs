//! The local backends on the device that `CREDENCE_TEST_DEVICE` names (`cpu` when unset;
//! `cuda` with a build of `--features cuda` on a GPU machine). Tiny random-weight models
//! that the tests write, safetensors folders and quantised GGUF files of Llama, Qwen3,
//! Phi-3 and Gemma 3, load there, generate exactly the tokens asked for, and give the
//! logits of the CPU's plain-buffer path, for a whole prompt and token by token in a
//! batch. On the CPU the device side runs candle's tensor path, the one CUDA runs.

use crate::support::tiny_llm as tiny;

use credence_worker::llm::local::{Format, LocalBackend, LocalModel, LocalSettings};
use credence_worker::llm::ChatMessage;
use std::path::Path;
use tiny::*;

const ARCHS: [Arch; 4] = [Arch::Llama, Arch::Qwen3, Arch::Phi3, Arch::Gemma3];

/// The model as `settings` say; on the CPU, on candle's tensor path.
fn load_on_device(settings: &LocalSettings) -> LocalModel {
    let mut model = LocalModel::load(settings)
        .unwrap_or_else(|e| panic!("loading on {}: {e}", settings.device));
    if !settings.device.is_cuda() {
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

/// Decodes several sequences of different lengths, token by token, on the tensor path
/// twice: each over its own cache, and all together over one [`BatchKv`] (the engine's
/// decode on a GPU), with one sequence leaving and another joining midway.
fn batched_against_per_sequence(model: &LocalModel) -> Batched {
    use credence_worker::llm::local::model::SeqCache;
    let m = &model.model;
    let layers = m.config.layers;
    let prompts: [Vec<u32>; 4] = [
        vec![5, 9, 17, 3, 40, 22, 8, 61, 13, 7, 30, 12],
        vec![4, 11, 2, 33, 6],
        vec![21, 19, 1, 50, 44, 3, 27, 9, 10],
        vec![8, 8, 15, 2, 39, 41, 5],
    ];
    let prefill = |p: &[u32]| {
        let mut c = SeqCache::new(layers);
        let l = m.forward(&[p.to_vec()], &mut [&mut c]).unwrap();
        (
            c,
            l.argmax(candle_core::D::Minus1)
                .unwrap()
                .to_vec1::<u32>()
                .unwrap()[0],
        )
    };
    let mut own: Vec<(SeqCache, u32)> = prompts[..3].iter().map(|p| prefill(p)).collect();
    let mut batch = m.batch_kv();
    for (c, _) in &own {
        batch.push(c).unwrap();
    }
    let (mut worst, mut largest) = (0f32, 0f32);
    let mut logits = Vec::new();
    for step in 0..14 {
        if step == 4 {
            // The second sequence leaves (the last takes its row); a fourth joins.
            own.swap_remove(1);
            batch.swap_remove(1).unwrap();
            let joined = prefill(&prompts[3]);
            batch.push(&joined.0).unwrap();
            own.push(joined);
        }
        let tokens: Vec<u32> = own.iter().map(|(_, t)| *t).collect();
        let batched = m.decode_batched(&tokens, &mut batch).unwrap();
        let lists: Vec<Vec<u32>> = tokens.iter().map(|&t| vec![t]).collect();
        let mut caches: Vec<&mut SeqCache> = own.iter_mut().map(|(c, _)| c).collect();
        let single = m.forward(&lists, &mut caches).unwrap();
        let (b, s) = (
            batched.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            single.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        );
        worst = worst.max(max_diff(&b, &s));
        largest = largest.max(max_abs(&s));
        logits.extend_from_slice(&b);
        assert_eq!(
            batch.lens(),
            own.iter().map(|(c, _)| c.len()).collect::<Vec<_>>()
        );
        let next = single
            .argmax(candle_core::D::Minus1)
            .unwrap()
            .to_vec1::<u32>()
            .unwrap();
        for ((_, t), n) in own.iter_mut().zip(next) {
            *t = n;
        }
    }
    Batched {
        worst,
        largest,
        logits,
        kept: batch.kept_steps(),
    }
}

/// What [`batched_against_per_sequence`] saw.
struct Batched {
    /// The largest logit difference between the batched and the per-sequence steps.
    worst: f32,
    /// The largest logit.
    largest: f32,
    /// Every batched step's logits.
    logits: Vec<f32>,
    /// The batch's kept step shapes, and how many were captured as CUDA graphs.
    kept: (usize, usize),
}

/// Runs `check` on every architecture's tiny model, as f32 safetensors and as GGUF, on
/// the test device, with the tolerance of its batched decode against the per-sequence
/// one (times the largest logit). The models have a window of 8, shorter than the
/// sequences, so that the sliding window's mask (Gemma 3's local layers) is exercised.
fn each_windowed_model(mut check: impl FnMut(Arch, &str, LocalModel, f32)) {
    let device = test_device();
    for arch in ARCHS {
        let dir = tempfile::tempdir().unwrap();
        write_model_with(dir.path(), arch, config_with_window(arch, 8));
        let (gguf, _) = gguf_file(dir.path(), arch);
        // f32 differs only in the order of the attention's sums; the CPU's GGUF kernels
        // round each activation row to 8 bits, where such a difference can move a value
        // across a rounding step (0.15% of the largest logit seen).
        for (what, s, tolerance) in [
            (
                "f32",
                settings_on(dir.path(), Format::Safetensors, Some("f32"), &device, 8),
                1e-4,
            ),
            (
                "GGUF",
                settings_on(&gguf, Format::Gguf, None, &device, 8),
                1e-2,
            ),
        ] {
            check(arch, what, load_on_device(&s), tolerance);
        }
    }
}

#[test]
fn batched_decode_gives_the_per_sequence_logits_on_the_test_device() {
    let device = test_device();
    each_windowed_model(|arch, what, model, tolerance| {
        let Batched {
            worst: d, largest, ..
        } = batched_against_per_sequence(&model);
        let bound = tolerance * largest.max(1.0);
        println!("{arch:?} {what} on {device}: max |difference| {d:.2e} (bound {bound:.2e})");
        assert!(
            d <= bound,
            "{arch:?} {what}: batched decode differs by {d} > {bound}"
        );
    });
}

/// The batched decode in kept shapes (`CREDENCE_CUDA_GRAPHS`): attention over spans
/// rounded up to whole steps of positions, inputs written into kept buffers, and on a GPU
/// steps replayed as CUDA graphs. Through sequences leaving and joining it gives the
/// per-sequence logits, and a captured run the eager run's bits.
#[test]
fn decode_steps_in_kept_shapes_give_the_per_sequence_logits_on_the_test_device() {
    use credence_worker::llm::local::step_graph::GraphMode;
    let device = test_device();
    each_windowed_model(|arch, what, mut model, tolerance| {
        model.model.set_graph_mode(GraphMode::Eager);
        let eager = batched_against_per_sequence(&model);
        model.model.set_graph_mode(GraphMode::Captured);
        let captured = batched_against_per_sequence(&model);
        let bound = tolerance * eager.largest.max(1.0);
        println!(
            "{arch:?} {what} on {device}: max |difference| {:.2e} (bound {bound:.2e}), \
             shapes kept / captured {:?}",
            eager.worst, captured.kept
        );
        assert!(
            eager.worst <= bound,
            "{arch:?} {what}: kept-shape decode differs by {} > {bound}",
            eager.worst
        );
        // Three rows of at most 27 positions: one shape of one 256-position span (after
        // the fourth sequence joins, three rows again).
        assert_eq!(eager.kept, (1, 0), "{arch:?} {what}");
        let expect_captured = usize::from(device.starts_with("cuda"));
        assert_eq!(captured.kept, (1, expect_captured), "{arch:?} {what}");
        assert!(
            captured.logits == eager.logits,
            "{arch:?} {what}: captured steps differ from eager ones by {}",
            max_diff(&captured.logits, &eager.logits)
        );
    });
}

/// A GGUF model's batched keys and values in bf16 (what `CREDENCE_LLM_KV_DTYPE=bf16`
/// asks for, to fit twice the sequences in a GPU's memory): half the bytes a position,
/// and the batched decode's logits within bf16's rounding of the per-sequence (f32
/// keys and values) ones, through sequences leaving and joining.
#[test]
fn bf16_keys_and_values_halve_a_gguf_batch_and_keep_its_logits() {
    let device = test_device();
    for arch in ARCHS {
        let dir = tempfile::tempdir().unwrap();
        write_model_with(dir.path(), arch, config_with_window(arch, 8));
        let (gguf, _) = gguf_file(dir.path(), arch);
        let mut model = load_on_device(&settings_on(&gguf, Format::Gguf, None, &device, 8));
        let f32_bytes = model.model.batch_kv().bytes_per_position();
        model.model.set_kv_dtype(candle_core::DType::BF16);
        assert_eq!(
            2 * model.model.batch_kv().bytes_per_position(),
            f32_bytes,
            "{arch:?}"
        );
        let Batched {
            worst: d, largest, ..
        } = batched_against_per_sequence(&model);
        let bound = 0.05 * largest.max(1.0);
        println!("{arch:?} GGUF, bf16 keys and values on {device}: max |difference| {d:.2e} (bound {bound:.2e})");
        assert!(
            d <= bound,
            "{arch:?}: bf16 keys and values move the logits by {d} > {bound}"
        );
        assert!(d > 0.0, "{arch:?}: the keys and values were not rounded");
    }
}

/// The engine on the tensor path (bf16 on the CPU, as on a GPU) keeps every sequence in
/// flight in one batched cache: with more requests than `max_batch`, sequences join and
/// leave mid-flight, and each answer is the one its prompt gets alone.
#[test]
fn the_engine_answers_each_prompt_in_a_batch_as_it_does_alone() {
    let device = test_device();
    let dir = tempfile::tempdir().unwrap();
    write_model(dir.path(), Arch::Qwen3);
    let mut s = settings_on(dir.path(), Format::Safetensors, Some("bf16"), &device, 12);
    s.max_batch = 3;
    let backend = LocalBackend::load(&s).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let chats: Vec<Vec<ChatMessage>> = (0..7)
        .map(|i| {
            let words: Vec<String> = (0..3 + 2 * i)
                .map(|j| format!("w{}", 5 + (i * 7 + j) % 50))
                .collect();
            vec![ChatMessage::user(words.join(" "))]
        })
        .collect();
    // Different lengths, so that sequences leave at different steps.
    let limit = |i: usize| 4 + 3 * (i as u32 % 4);
    let together = runtime.block_on(futures::future::join_all(
        chats
            .iter()
            .enumerate()
            .map(|(i, c)| backend.run(c, limit(i), true)),
    ));
    for (i, (chat, g)) in chats.iter().zip(together).enumerate() {
        let g = g.unwrap();
        assert_eq!(g.ids.len(), limit(i) as usize, "prompt {i}");
        let alone = runtime.block_on(backend.run(chat, limit(i), true)).unwrap();
        assert_eq!(g.ids, alone.ids, "prompt {i} in a batch and alone");
    }
}

/// When the sequences in flight outgrow the memory for their keys and values, the newest
/// leave the batch (preempted), wait, and come back with their keys and values
/// recomputed, and every answer is the one the same batch gives with memory to spare.
/// The limit (`kv_memory`) admits 8 sequences at the 2,048 positions the engine sizes
/// for, so all six join; past 2,048 each row needs 4,096, and the limit holds only 4 such
/// rows: the two newest are preempted, and join again once the others have finished.
#[test]
fn sequences_that_outgrow_the_memory_preempt_the_newest_and_each_answer_is_unchanged() {
    let device = test_device();
    let dir = tempfile::tempdir().unwrap();
    let mut config = config_json(Arch::Qwen3);
    config["max_position_embeddings"] = 4096.into();
    write_model_with(dir.path(), Arch::Qwen3, config);
    let mut s = settings_on(dir.path(), Format::Safetensors, Some("bf16"), &device, 2100);
    s.max_batch = 8;
    let budget = LocalModel::load(&s)
        .unwrap()
        .model
        .batch_kv()
        .bytes_of(8, 2048);
    let chats: Vec<Vec<ChatMessage>> = (0..6)
        .map(|i| {
            vec![ChatMessage::user(format!(
                "w{} w{} w{}",
                5 + i,
                20 + 3 * i,
                9 + i
            ))]
        })
        .collect();
    // Different lengths past 2,048, so that sequences leave at different steps.
    let limit = |i: usize| 2060 + 8 * i as u32;
    let run = |kv_memory: Option<usize>| {
        let backend = LocalBackend::load(&LocalSettings {
            kv_memory,
            ..s.clone()
        })
        .unwrap();
        assert_eq!(
            credence_worker::llm::Generator::max_in_flight(&backend),
            8,
            "the limit admits 8 sequences of 2,048 positions"
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(futures::future::join_all(
            chats
                .iter()
                .enumerate()
                .map(|(i, c)| backend.run(c, limit(i), true)),
        ))
    };
    let spare = run(None);
    let tight = run(Some(budget));
    for (i, (a, b)) in spare.into_iter().zip(tight).enumerate() {
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(a.ids.len(), limit(i) as usize, "prompt {i}");
        assert_eq!(a.preempted, 0, "prompt {i} with memory to spare");
        // The two newest were preempted once each.
        assert_eq!(
            b.preempted,
            usize::from(i >= 4),
            "prompt {i} within the limit"
        );
        assert_eq!(a.ids, b.ids, "prompt {i}: preempted and recomputed, or not");
    }
}
