//! Local LLMs on the real GGUF weights of `scripts/setup` (SmolLM2-135M-Instruct Q4_1,
//! Gemma-3-270m Q4_K_M), checked against llama.cpp: token ids of both tokenizers built
//! from GGUF metadata, Gemma 3's next-token logits position by position, SmolLM2's
//! chat template, greedy completion and end-of-turn stop. The reference files in
//! `fixtures/llm_local/` were written by `scripts/make_llm_fixtures.py` with
//! llama-cpp-python.

use crate::common;

use credence_worker::llm::local::engine::Finish;
use credence_worker::llm::local::model::SeqCache;
use credence_worker::llm::local::{Format, LocalBackend, LocalModel, LocalSettings};
use credence_worker::llm::{prompt, ChatMessage, PromptKind};
use std::path::{Path, PathBuf};

fn smollm2() -> Option<PathBuf> {
    common::require(
        common::models_dir().join("SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "SmolLM2-135M-Instruct GGUF",
    )
}

fn gemma3() -> Option<PathBuf> {
    common::require(
        common::models_dir().join("gemma-3-270m/gemma-3-270m-q4_k_m.gguf"),
        "Gemma-3-270m GGUF",
    )
}

fn settings(path: &Path) -> LocalSettings {
    LocalSettings {
        path: path.to_path_buf(),
        format: Format::Gguf,
        dtype: None,
        device: credence_worker::llm::local::ComputeDevice::Cpu,
        max_new_tokens: 512,
        max_batch: 4,
        generation_timeout: std::time::Duration::from_secs(600),
        kv_memory: None,
    }
}

fn fixture(name: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llm_local")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check_tokenizer(model: &LocalModel, fixture_name: &str) {
    let f = fixture(fixture_name);
    let cases = f["cases"].as_array().unwrap();
    assert!(cases.len() >= 30);
    let mut wrong = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        let got = model.tokenizer.encode(text).unwrap();
        if got != want {
            wrong.push(format!("{text:?}: llama.cpp {want:?}, credence {got:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {}:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}

#[test]
fn smollm2_tokenizer_from_gguf_metadata_matches_llama_cpp() {
    let Some(path) = smollm2() else { return };
    let model = LocalModel::load(&settings(&path)).unwrap();
    check_tokenizer(&model, "smollm2_tokens.json");
}

#[test]
fn gemma3_tokenizer_from_gguf_metadata_matches_llama_cpp() {
    let Some(path) = gemma3() else { return };
    let model = LocalModel::load(&settings(&path)).unwrap();
    check_tokenizer(&model, "gemma3_tokens.json");
}

#[test]
fn gemma3_next_token_logits_agree_with_llama_cpp() {
    let Some(path) = gemma3() else { return };
    let model = LocalModel::load(&settings(&path)).unwrap();
    let f = fixture("gemma3_logits.json");
    let tokens = ids(&f["ids"]);
    assert_eq!(tokens.len(), 256);
    let mut cache = SeqCache::new(model.model.config.layers);
    let logits = model.model.forward_all(&tokens, &mut cache).unwrap();
    let logits = logits.to_vec2::<f32>().unwrap();
    let mut same = 0;
    let mut worst = 0f32;
    let mut not_near_ties = Vec::new();
    for (pos, row) in logits.iter().enumerate() {
        let theirs = &f["top5"][pos];
        let top = theirs[0]["id"].as_u64().unwrap() as usize;
        let ours = row
            .iter()
            .enumerate()
            .fold(
                (0, f32::NEG_INFINITY),
                |b, (i, &v)| if v > b.1 { (i, v) } else { b },
            )
            .0;
        if ours == top {
            same += 1;
        } else {
            // A disagreement is acceptable only where both engines see a near tie:
            // llama.cpp's runner-up within 0.5 of its top, and our logit of llama.cpp's
            // top within 0.5 of our own top.
            let their_gap =
                theirs[0]["logit"].as_f64().unwrap() - theirs[1]["logit"].as_f64().unwrap();
            let our_gap = f64::from(row[ours] - row[top]);
            let line = format!(
                "position {pos}: llama.cpp {top} (lead {their_gap:.3}), credence {ours} (lead {our_gap:.3})"
            );
            println!("{line}");
            if their_gap > 0.5 || our_gap > 0.5 {
                not_near_ties.push(line);
            }
        }
        for t in theirs.as_array().unwrap() {
            let id = t["id"].as_u64().unwrap() as usize;
            let d = (row[id] - t["logit"].as_f64().unwrap() as f32).abs();
            worst = worst.max(d);
        }
    }
    println!("top-1 agreement {same}/256, largest top-5 logit difference {worst:.3}");
    // llama.cpp's own arithmetic moves these logits by tenths: switching its KV cache
    // from f16 to f32 alone changes its top-1 at several of the near ties listed above,
    // so 99% agreement would test the reference's rounding, not the model (ARCHITECTURE.md).
    assert!(
        same * 100 >= 93 * 256,
        "top-1 identical on only {same} of 256 positions"
    );
    assert!(
        not_near_ties.is_empty(),
        "clear disagreements:\n{}",
        not_near_ties.join("\n")
    );
    assert!(
        worst < 2.0,
        "a top-5 logit differs from llama.cpp's by {worst}"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn smollm2_renders_the_decomposition_prompt_with_its_template_and_stops_at_im_end() {
    let Some(path) = smollm2() else { return };
    let model = LocalModel::load(&settings(&path)).unwrap();
    let sentence = "The bridge collapsed and the road was blocked.";
    let messages = prompt::messages(PromptKind::Credence, sentence);
    let text = model.prompt_text(&messages).unwrap();
    assert!(text.starts_with("<|im_start|>system\n"), "{text}");
    assert!(
        text.ends_with("<|im_end|>\n<|im_start|>assistant\n"),
        "{text}"
    );
    assert!(text.contains(&format!("<|im_start|>user\n{sentence}<|im_end|>")));
    let prompt_ids = model.prompt_ids(&messages).unwrap();
    let im_start = model.tokenizer.token_id("<|im_start|>").unwrap();
    let im_end = model.tokenizer.token_id("<|im_end|>").unwrap();
    assert_eq!(
        prompt_ids[0], im_start,
        "the template's first token is <|im_start|>"
    );
    assert!(model.stops.contains(&im_end));
    drop(model);

    let backend = LocalBackend::load(&settings(&path)).unwrap();
    let rt = runtime();
    let first = rt.block_on(backend.run(&messages, 512, false)).unwrap();
    assert_eq!(first.finish, Finish::Stop, "{:?}", first.text);
    assert!(!first.ids.contains(&im_end));
    assert!(!first.text.is_empty());
    let second = rt.block_on(backend.run(&messages, 512, false)).unwrap();
    assert_eq!(first.text, second.text, "greedy decoding is deterministic");
    assert_eq!(first.ids, second.ids);
    // The second run reused the first's keys and values for all but the prompt's last
    // token, and generated the same bytes.
    assert_eq!(first.reused_tokens, 0);
    assert_eq!(second.reused_tokens, prompt_ids.len() - 1);

    // Another sentence reuses the shared instructions, and generates what it generates
    // in an engine that never saw the first.
    let other = prompt::messages(
        PromptKind::Credence,
        "Paris is the capital of France, and Berlin, which is larger, is the capital of Germany.",
    );
    let after = rt.block_on(backend.run(&other, 512, false)).unwrap();
    let fresh = LocalBackend::load(&settings(&path)).unwrap();
    let alone = rt.block_on(fresh.run(&other, 512, false)).unwrap();
    assert_eq!(alone.reused_tokens, 0);
    assert!(
        after.reused_tokens > prompt_ids.len() / 2,
        "reused {} of {}",
        after.reused_tokens,
        after.prompt_tokens
    );
    assert_eq!(after.ids, alone.ids, "{:?} vs {:?}", after.text, alone.text);
}

#[test]
fn smollm2_greedy_completion_follows_llama_cpp() {
    let Some(path) = smollm2() else { return };
    let f = fixture("smollm2_greedy.json");
    let backend = LocalBackend::load(&settings(&path)).unwrap();
    let rt = runtime();
    let messages = [
        ChatMessage::system("You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
        ChatMessage::user("What is the capital of France?"),
    ];
    let ours = rt.block_on(backend.run(&messages, 64, false)).unwrap();
    assert_eq!(ours.prompt_tokens, ids(&f["prompt_ids"]).len());
    let theirs = ids(&f["generated_ids"]);
    // Both engines multiply Q4_1 weights by 8-bit activations, but round differently
    // (sums in another order), so greedy decoding parts where llama.cpp's top two tokens
    // are nearly tied. Free-running, the completions agree up to the first step whose
    // lead in llama.cpp is under 0.1 (found in the fixture's top-5 of the first steps;
    // all of them when none is that close).
    let steps = f["top5_first_steps"].as_array().unwrap();
    let lead = |step: &serde_json::Value| {
        step[0]["logit"].as_f64().unwrap() - step[1]["logit"].as_f64().unwrap()
    };
    let clear = steps.iter().take_while(|s| lead(s) >= 0.1).count();
    let common_prefix = ours
        .ids
        .iter()
        .zip(&theirs)
        .take_while(|(a, b)| a == b)
        .count();
    println!("credence: {:?}\nllama.cpp: {:?}", ours.text, f["text"]);
    assert!(clear >= 4, "the fixture's first steps are near ties");
    assert!(
        common_prefix >= clear.min(theirs.len()),
        "first {common_prefix} tokens agree, {clear} expected"
    );

    // Teacher-forced, llama.cpp's tokens as input: at every recorded step our top token
    // is llama.cpp's, or llama.cpp sees a near tie (lead under 0.25) and ours is within
    // the engines' logit noise (under 1.0; the largest top-5 difference seen is about 1).
    let model = LocalModel::load(&settings(&path)).unwrap();
    let prompt = ids(&f["prompt_ids"]);
    let mut input = prompt.clone();
    input.extend_from_slice(&theirs[..steps.len() - 1]);
    let mut cache = SeqCache::new(model.model.config.layers);
    let logits = model
        .model
        .forward_all(&input, &mut cache)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    for (i, step) in steps.iter().enumerate() {
        let row = &logits[prompt.len() - 1 + i];
        let top = step[0]["id"].as_u64().unwrap() as usize;
        let mine = row
            .iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (j, &v)| if v > b.1 { (j, v) } else { b })
            .0;
        let our_lead = row[mine] - row[top];
        assert!(
            mine == top || (lead(step) < 0.25 && our_lead < 1.0),
            "step {i}: llama.cpp {top} (lead {:.3}), credence {mine} (lead {our_lead:.3})",
            lead(step)
        );
    }
}

#[test]
fn smollm2_prompt_logits_match_candles_quantized_llama() {
    let Some(path) = smollm2() else { return };
    let model = LocalModel::load(&settings(&path)).unwrap();
    let f = fixture("smollm2_greedy.json");
    let prompt = ids(&f["prompt_ids"]);
    let mut cache = SeqCache::new(model.model.config.layers);
    let ours = model
        .model
        .forward(std::slice::from_ref(&prompt), &mut [&mut cache])
        .unwrap();
    let ours = ours.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let mut file = std::fs::File::open(&path).unwrap();
    let content = candle_core::quantized::gguf_file::Content::read(&mut file).unwrap();
    let mut reference = candle_transformers::models::quantized_llama::ModelWeights::from_gguf(
        content,
        &mut file,
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let input = candle_core::Tensor::new(prompt.as_slice(), &candle_core::Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let theirs = reference.forward(&input, 0).unwrap();
    let theirs = theirs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let argmax = |v: &[f32]| {
        v.iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b })
            .0
    };
    let d = ours
        .iter()
        .zip(&theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    // candle runs Q4_1 natively, credence as Q8_0: the same model to within rounding.
    assert_eq!(argmax(&ours), argmax(&theirs));
    assert!(
        d < 2.5,
        "logits differ from candle's quantized_llama by {d}"
    );
}
