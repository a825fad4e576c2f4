use super::*;

const GOOD: &str = r#"[sweep]
name = "demo"
modes = ["base", "repair", "self_repair", "all"]
shard_size = 10

[encoder]
preset = "all-MiniLM-L6-v2"

[verifier]
tau_dup = 0.92

[[models]]
name = "split"
backend = "sentence-split"

[[models]]
name = "smol"
backend = "gguf"
path = "models/smol.gguf"
max_new_tokens = 512

[[datasets]]
id = "sample"
path = "sample.jsonl"
"#;

fn parse_str(text: &str) -> Result<SweepSpec, SweepError> {
    parse(text, Path::new("sweeps/x.toml"), Path::new("sweeps"))
}

fn err(text: &str) -> String {
    parse_str(text).unwrap_err().to_string()
}

#[test]
fn valid_sweep_is_typed_with_defaults() {
    let s = parse_str(GOOD).unwrap();
    assert_eq!(s.name, "demo");
    assert_eq!(s.modes, Mode::PAPER.to_vec());
    assert_eq!(s.shard_size, 10);
    assert_eq!(s.verifier, VerifierSettings::default());
    assert_eq!(
        s.bootstrap,
        BootstrapSettings {
            resamples: 10_000,
            seed: 42,
            ci: crate::stats::CiMethod::Percentile,
        }
    );
    assert_eq!(s.models[0].backend, ModelBackend::SentenceSplit);
    assert_eq!(
        s.models[1].backend,
        ModelBackend::Gguf {
            path: PathBuf::from("sweeps/models/smol.gguf")
        }
    );
    assert_eq!(s.models[1].max_new_tokens, 512);
    assert_eq!(s.models[0].max_new_tokens, 4096);
    assert_eq!(s.datasets[0].path, PathBuf::from("sweeps/sample.jsonl"));
    assert_eq!(s.encoder.as_ref().unwrap().batch_size, 64);
}

#[test]
fn the_encoder_precision_is_f32_unless_bf16_is_asked() {
    assert_eq!(parse_str(GOOD).unwrap().encoder.unwrap().precision, None);
    let with = |p: &str| {
        GOOD.replace(
            "preset = \"all-MiniLM-L6-v2\"",
            &format!("preset = \"all-MiniLM-L6-v2\"\nprecision = \"{p}\""),
        )
    };
    let bf16 = parse_str(&with("bf16")).unwrap();
    assert_eq!(
        bf16.encoder.as_ref().unwrap().precision,
        Some(EncoderPrecision::Bf16)
    );
    assert_eq!(
        parse_str(&with("f32")).unwrap().encoder.unwrap().precision,
        None
    );
    // The field is left out of a f32 sweep's JSON, so its recorded form is unchanged.
    let plain = serde_json::to_string(&parse_str(GOOD).unwrap()).unwrap();
    assert!(!plain.contains("precision"), "{plain}");
    let json = serde_json::to_string(&bf16).unwrap();
    assert!(json.contains(r#""precision":"bf16""#), "{json}");
    assert_eq!(serde_json::from_str::<SweepSpec>(&json).unwrap(), bf16);
    assert_eq!(
        err(&with("f16")),
        r#"sweeps/x.toml:8:13: unknown encoder precision "f16"; expected f32, bf16"#
    );
}

#[test]
fn unknown_mode_names_line_column_and_choices() {
    let text = GOOD.replace(r#""self_repair", "all""#, r#""self_repair", "fix""#);
    assert_eq!(
        err(&text),
        r#"sweeps/x.toml:3:43: unknown mode "fix"; expected base, repair, self_repair, all"#
    );
}

/// Each malformed file gives one line naming the place; `want` is the exact message.
#[test]
fn malformed_sweeps_give_one_line_errors() {
    let cases: Vec<(String, &str)> = vec![
        (GOOD.replace("[sweep]\n", "[sweep\n"), "sweeps/x.toml:1:7: "),
        (
            GOOD.replace("shard_size = 10", "shard_size = 0"),
            "sweeps/x.toml:4:14: shard_size must be between 1 and 1000000, got 0",
        ),
        (
            GOOD.replace("shard_size = 10", "shard_size = \"ten\""),
            "sweeps/x.toml:4:14: ",
        ),
        (
            GOOD.replace("tau_dup = 0.92", "tau_dup = 1.5"),
            "sweeps/x.toml:10:11: tau_dup must be between 0 and 1, got 1.5",
        ),
        (
            GOOD.replace("tau_dup = 0.92", "tau = 0.92"),
            "sweeps/x.toml:10:1: unknown field `tau`",
        ),
        (
            GOOD.replace(r#"backend = "gguf""#, r#"backend = "ggml""#),
            r#"sweeps/x.toml:18:11: unknown backend "ggml"; expected one of sentence-split, conjunction-oracle, gguf, safetensors, openai"#,
        ),
        (
            GOOD.replace("path = \"models/smol.gguf\"\n", ""),
            r#"sweeps/x.toml:18:11: backend "gguf" of model "smol" needs field "path""#,
        ),
        (
            GOOD.replace(r#"name = "smol""#, r#"name = "split""#),
            r#"sweeps/x.toml:17:8: model name "split" used twice"#,
        ),
        (
            GOOD.replace(r#""base", "repair""#, r#""base", "base""#),
            r#"sweeps/x.toml:3:18: mode "base" listed twice"#,
        ),
        (
            GOOD.replace(r#"name = "demo""#, r#"name = "my demo""#),
            r#"sweeps/x.toml:2:8: sweep name "my demo" must be non-empty and use only letters, digits, '-', '_', '.'"#,
        ),
        (
            GOOD.replace(
                "[[datasets]]\nid = \"sample\"\npath = \"sample.jsonl\"\n",
                "",
            ),
            "sweeps/x.toml:1:1: no [[datasets]]; a sweep needs at least one dataset",
        ),
        (
            GOOD.replace("path = \"sample.jsonl\"\n", ""),
            r#"sweeps/x.toml:22:1: dataset "sample" is missing field "path""#,
        ),
        (
            GOOD.replace("max_new_tokens = 512", "max_new_tokens = -1"),
            "sweeps/x.toml:20:18: max_new_tokens must be between 1 and 131072, got -1",
        ),
        (
            GOOD.replace("[sweep]\nname = \"demo\"\n", "[sweep]\n"),
            "sweeps/x.toml:1:1: [sweep] is missing field \"name\"",
        ),
        (
            GOOD.replace(
                "backend = \"sentence-split\"",
                "backend = \"sentence-split\"\nprompt = \"credence\"",
            ),
            r#"sweeps/x.toml:15:10: field "prompt" does not apply to backend "sentence-split""#,
        ),
        (
            GOOD.replace(
                "[encoder]\npreset = \"all-MiniLM-L6-v2\"",
                "[encoder]\npreset = \"\"",
            ),
            "sweeps/x.toml:7:10: encoder preset is empty",
        ),
        (
            GOOD.replace(
                "modes = [\"base\", \"repair\", \"self_repair\", \"all\"]",
                "modes = []",
            ),
            "sweeps/x.toml:3:9: modes is empty; expected some of base, repair, self_repair, all",
        ),
        (
            format!("{GOOD}[[datasets]]\nid = \"sample\"\npath = \"b.jsonl\"\n"),
            r#"sweeps/x.toml:26:6: dataset id "sample" used twice"#,
        ),
        (
            GOOD.replace("[[models]]\nname = \"split\"\n", "[[models]]\n"),
            r#"sweeps/x.toml:12:1: model is missing field "name""#,
        ),
    ];
    assert!(cases.len() >= 10);
    for (text, want) in &cases {
        let got = err(text);
        assert!(got.starts_with(want), "\n got: {got}\nwant: {want}");
        assert!(!got.contains('\n'), "not one line: {got:?}");
    }
}

#[test]
fn line_col_counts_characters() {
    assert_eq!(line_col("ab\ncé d", 7), (2, 4));
    assert_eq!(line_col("", 0), (1, 1));
}

#[test]
fn comparisons_are_typed_and_checked_with_their_line() {
    let with = |c: &str| format!("{GOOD}\n[[comparisons]]\n{c}\n");
    let s = parse_str(&with(
        r#"a = "smol/all"
b = "split/base"
dataset = "sample""#,
    ))
    .unwrap();
    assert_eq!(
        s.comparisons,
        [ComparisonSpec {
            a: ModelMode {
                model: "smol".into(),
                mode: Mode::All
            },
            b: ModelMode {
                model: "split".into(),
                mode: Mode::Base
            },
            dataset: "sample".into(),
        }]
    );
    let line = GOOD.lines().count() + 3;
    assert_eq!(
        err(&with(
            "a = \"smol/all\"\nb = \"nope/base\"\ndataset = \"sample\""
        )),
        format!(
            "sweeps/x.toml:{}:5: unknown model \"nope\"; the sweep has split, smol",
            line + 1
        )
    );
    assert!(err(&with(
        "a = \"smol\"\nb = \"split/base\"\ndataset = \"sample\""
    ))
    .contains("\"smol\" is not MODEL/MODE"));
    assert!(err(&with(
        "a = \"smol/all\"\nb = \"smol/all\"\ndataset = \"sample\""
    ))
    .contains("compared with itself"));
    assert!(err(&with(
        "a = \"smol/all\"\nb = \"split/base\"\ndataset = \"x\""
    ))
    .contains("unknown dataset \"x\""));
    assert!(err(&with(
        "a = \"smol/fix\"\nb = \"split/base\"\ndataset = \"sample\""
    ))
    .contains("unknown mode"));
    assert!(err(&format!("{GOOD}\n[bootstrap]\nci = \"normal\"\n"))
        .contains("expected percentile or bca"));
}

#[test]
fn sweeps_recorded_before_comparisons_still_load() {
    let mut json: serde_json::Value = serde_json::to_value(parse_str(GOOD).unwrap()).unwrap();
    let obj = json.as_object_mut().unwrap();
    obj.remove("comparisons");
    obj["bootstrap"].as_object_mut().unwrap().remove("ci");
    let old: SweepSpec = serde_json::from_value(json).unwrap();
    assert!(old.comparisons.is_empty());
    assert_eq!(old.bootstrap, BootstrapSettings::default());
}

#[test]
fn presets_fill_an_endpoint_and_the_model_overrides_them() {
    let gemini = GOOD.replace(
        "backend = \"gguf\"\npath = \"models/smol.gguf\"\n",
        "preset = \"gemini-2.5-flash\"\n",
    );
    let s = parse_str(&gemini).unwrap();
    assert_eq!(
        s.models[1].backend,
        ModelBackend::Openai {
            base_url: "https://generativelanguage.googleapis.com/v1beta/openai".into(),
            api_model: "gemini-2.5-flash".into(),
            api_key_env: Some("GEMINI_API_KEY".into()),
            request_timeout_s: None,
            max_concurrency: Some(64),
        }
    );
    let vllm = GOOD.replace(
        "backend = \"gguf\"\npath = \"models/smol.gguf\"\n",
        "preset = \"openai\"\nbase_url = \"http://gpu-1:8000/v1\"\napi_model = \"Qwen/Qwen3-8B\"\n\
         max_concurrency = 32\nrequest_timeout_s = 60\nprompt = \"factscore\"\n",
    );
    let s = parse_str(&vllm).unwrap();
    assert_eq!(
        s.models[1].backend,
        ModelBackend::Openai {
            base_url: "http://gpu-1:8000/v1".into(),
            api_model: "Qwen/Qwen3-8B".into(),
            api_key_env: None,
            request_timeout_s: Some(60),
            max_concurrency: Some(32),
        }
    );
    assert_eq!(s.models[1].prompt, PromptKind::Factscore);
    // The vllm preset: vLLM's address, the served model named by the sweep.
    let served = GOOD.replace(
        "backend = \"gguf\"\npath = \"models/smol.gguf\"\n",
        "preset = \"vllm\"\napi_model = \"Qwen/Qwen3-8B\"\n",
    );
    assert_eq!(
        parse_str(&served).unwrap().models[1].backend,
        ModelBackend::Openai {
            base_url: "http://127.0.0.1:8000/v1".into(),
            api_model: "Qwen/Qwen3-8B".into(),
            api_key_env: None,
            request_timeout_s: None,
            max_concurrency: Some(256),
        }
    );
    // A recorded sweep from before these fields still loads.
    let old = r#"{"backend":"openai","base_url":"http://h/v1","api_model":"m","api_key_env":null}"#;
    let b: ModelBackend = serde_json::from_str(old).unwrap();
    assert!(matches!(
        b,
        ModelBackend::Openai {
            max_concurrency: None,
            ..
        }
    ));
}

#[test]
fn endpoint_mistakes_name_their_place() {
    let base = "backend = \"gguf\"\npath = \"models/smol.gguf\"\n";
    for (replacement, want) in [
        (
            "preset = \"gpt-9\"\n",
            r#"sweeps/x.toml:18:10: unknown preset "gpt-9"; expected one of gemini-2.5-flash, openai, vllm, phi-3-mini-128k, qwen3-8b, gemma-3-12b-it, smollm2-135m-instruct, gemma-3-270m"#,
        ),
        (
            "preset = \"openai\"\n",
            r#"sweeps/x.toml:18:10: backend "openai" of model "smol" needs field "api_model""#,
        ),
        (
            "backend = \"gguf\"\npreset = \"openai\"\npath = \"m.gguf\"\n",
            r#"sweeps/x.toml:19:10: preset "openai" is an OpenAI-compatible endpoint; it does not apply to backend "gguf""#,
        ),
        (
            "preset = \"openai\"\napi_model = \"m\"\nbase_url = \"gpu-1:8000\"\n",
            r#"sweeps/x.toml:20:12: base_url "gpu-1:8000" must start with http:// or https://"#,
        ),
        (
            "preset = \"openai\"\napi_model = \"m\"\nmax_concurrency = 0\n",
            "sweeps/x.toml:20:19: max_concurrency must be between 1 and 4096, got 0",
        ),
        (
            "backend = \"gguf\"\npath = \"m.gguf\"\nmax_concurrency = 8\n",
            r#"sweeps/x.toml:20:19: field "max_concurrency" only applies to backend "openai", not "gguf""#,
        ),
        (
            "backend = \"gguf\"\npath = \"m.gguf\"\ndtype = \"fp16\"\n",
            r#"sweeps/x.toml:20:9: unknown dtype "fp16"; expected f32, bf16, f16"#,
        ),
        (
            "backend = \"gguf\"\npath = \"m.gguf\"\ndevice = \"gpu\"\n",
            r#"sweeps/x.toml:20:10: unknown device "gpu"; expected cpu, cuda or cuda:N"#,
        ),
    ] {
        assert_eq!(err(&GOOD.replace(base, replacement)), want, "{replacement}");
    }
}

#[test]
fn a_local_preset_fills_backend_path_dtype_and_device_unless_given() {
    let sweep = |model: &str| {
        format!(
            "[sweep]\nname = \"p\"\n[[models]]\nname = \"m\"\n{model}\n\
             [[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n"
        )
    };
    let spec = parse_str(&sweep("preset = \"qwen3-8b\"")).unwrap();
    let m = &spec.models[0];
    let ModelBackend::Safetensors { path } = &m.backend else {
        panic!("{:?}", m.backend)
    };
    assert!(path.ends_with("Qwen3-8B"), "{}", path.display());
    assert_eq!(
        (m.dtype, m.device),
        (Some(WeightDtype::Bf16), ComputeDevice::Cuda(None))
    );

    let spec = parse_str(&sweep(
        "preset = \"smollm2-135m-instruct\"\npath = \"mine.gguf\"\ndevice = \"cuda:1\"",
    ))
    .unwrap();
    let m = &spec.models[0];
    assert_eq!(
        m.backend,
        ModelBackend::Gguf {
            path: PathBuf::from("sweeps/mine.gguf")
        }
    );
    assert_eq!((m.dtype, m.device), (None, ComputeDevice::Cuda(Some(1))));
    // A small preset's own generation limit; the paper's for the paper's models; the
    // model's own wins.
    assert_eq!(m.max_new_tokens, 256);
    let paper = parse_str(&sweep("preset = \"qwen3-8b\"")).unwrap();
    assert_eq!(paper.models[0].max_new_tokens, PAPER_MAX_NEW_TOKENS);
    let mine = parse_str(&sweep("preset = \"gemma-3-270m\"\nmax_new_tokens = 1000")).unwrap();
    assert_eq!(mine.models[0].max_new_tokens, 1000);

    let e = err(&sweep("preset = \"gemma-3-270m\"\nbackend = \"openai\""));
    assert!(e.contains("preset \"gemma-3-270m\" is a gguf model"), "{e}");
    let e = err(&sweep("preset = \"nope\""));
    assert!(
        e.contains("smollm2-135m-instruct") && e.contains("gemini-2.5-flash"),
        "{e}"
    );
}

/// A preset's weights never come from a folder beside or above the sweep file: a sweep
/// in a shared folder (/tmp) with a planted `models/` one level up resolves to the same
/// path as any other sweep, `$CREDENCE_MODELS_DIR` or the checkout's `models/`.
#[test]
fn a_models_folder_planted_above_the_sweep_is_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    let planted = tmp.path().join("models/SmolLM2-135M-Instruct");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(
        planted.join("SmolLM2-135M-Instruct.Q4_1.gguf"),
        b"GGUF planted",
    )
    .unwrap();
    let sweeps = tmp.path().join("sweeps");
    std::fs::create_dir_all(&sweeps).unwrap();
    let file = sweeps.join("planted.toml");
    std::fs::write(
        &file,
        "[sweep]\nname = \"p\"\n[[models]]\nname = \"m\"\npreset = \"smollm2-135m-instruct\"\n\
         [[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n",
    )
    .unwrap();
    let spec = load(&file).unwrap();
    let ModelBackend::Gguf { path } = &spec.models[0].backend else {
        panic!("{:?}", spec.models[0].backend)
    };
    assert!(
        !path.starts_with(tmp.path()),
        "{} comes from the planted folder",
        path.display()
    );
    assert_eq!(
        *path,
        models_dir().join("SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
    );
    assert!(path.is_absolute(), "{}", path.display());
}

/// `$CREDENCE_MODELS_DIR` wins, made absolute; an empty value does not count; without it
/// the checkout's own `models/` is the folder, whatever the current folder is.
#[test]
fn the_models_folder_is_the_variable_or_the_checkouts() {
    let checkout = checkout_models();
    assert!(checkout.ends_with("models") && checkout.is_absolute());
    assert_eq!(
        checkout.parent().unwrap(),
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
    );
    assert_eq!(models_dir_with(None, &checkout), checkout);
    assert_eq!(models_dir_with(Some("".into()), &checkout), checkout);
    assert_eq!(
        models_dir_with(Some("weights".into()), &checkout),
        std::env::current_dir().unwrap().join("weights")
    );
}

#[test]
fn a_local_models_generation_time_limit_is_checked_and_defaults_generously() {
    let sweep = |model: &str| {
        format!(
            "[sweep]\nname = \"p\"\n[[models]]\nname = \"m\"\n{model}\n\
             [[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n"
        )
    };
    let spec = parse_str(&sweep("preset = \"gemma-3-270m\"")).unwrap();
    assert_eq!(spec.models[0].generation_timeout_s, None);
    assert_eq!(
        spec.models[0].generation_timeout(),
        std::time::Duration::from_secs(u64::from(DEFAULT_GENERATION_TIMEOUT_S))
    );
    let spec = parse_str(&sweep(
        "preset = \"gemma-3-270m\"\ngeneration_timeout_s = 90",
    ))
    .unwrap();
    assert_eq!(
        spec.models[0].generation_timeout(),
        std::time::Duration::from_secs(90)
    );
    // Unset, it is left out of the stored sweep (and so of every key made from it).
    let json =
        serde_json::to_string(&parse_str(&sweep("backend = \"sentence-split\"")).unwrap()).unwrap();
    assert!(!json.contains("generation_timeout_s"), "{json}");
    let e = err(&sweep(
        "preset = \"gemma-3-270m\"\ngeneration_timeout_s = 0",
    ));
    assert!(
        e.contains("sweeps/x.toml:6:") && e.contains("generation_timeout_s must be between 1"),
        "{e}"
    );
    let e = err(&sweep(
        "backend = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_model = \"x\"\ngeneration_timeout_s = 60",
    ));
    assert!(e.contains("only applies to local models"), "{e}");
}

/// The JSON the store keeps gives back the sweep to the last bit: a threshold one ulp
/// off would be another verifier (found by the sweep parser's fuzzing).
#[test]
fn a_sweep_survives_its_json_round_trip_to_the_last_bit() {
    let text = GOOD.replace("tau_dup = 0.92", "tau_dup = 0.9184467440737095");
    let spec = parse_str(&text).unwrap();
    assert_eq!(
        spec.verifier.tau_dup.to_bits(),
        0.9184467440737095f64.to_bits()
    );
    let back: SweepSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
    assert_eq!(back, spec);
}

/// `ModelSpec::named` (what `credence decompose --model NAME` runs): the baselines, a
/// local preset with its weights under the models folder, its device and generation
/// limit, an endpoint preset with its address and key variable, and nothing else.
#[test]
fn a_model_is_named_by_baseline_local_or_endpoint_preset() {
    let split = ModelSpec::named("sentence-split").expect("a baseline");
    assert_eq!(split.backend, ModelBackend::SentenceSplit);
    assert_eq!(split.max_new_tokens, PAPER_MAX_NEW_TOKENS);
    assert_eq!(
        ModelSpec::named("conjunction-oracle").map(|m| m.backend),
        Some(ModelBackend::ConjunctionOracle)
    );
    let local = ModelSpec::named("smollm2-135m-instruct").expect("a local preset");
    assert_eq!(
        local.backend,
        ModelBackend::Gguf {
            path: models_dir().join("SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
        }
    );
    assert_eq!(
        (local.device, local.max_new_tokens),
        (ComputeDevice::Cpu, 256)
    );
    assert_eq!(local.prompt, PromptKind::Credence);
    let endpoint = ModelSpec::named("gemini-2.5-flash").expect("an endpoint preset");
    match &endpoint.backend {
        ModelBackend::Openai {
            base_url,
            api_model,
            api_key_env,
            max_concurrency,
            ..
        } => {
            assert!(base_url.starts_with("https://generativelanguage.googleapis.com"));
            assert_eq!(api_model, "gemini-2.5-flash");
            assert_eq!(api_key_env.as_deref(), Some("GEMINI_API_KEY"));
            assert_eq!(*max_concurrency, Some(64));
        }
        other => panic!("gemini-2.5-flash is {other:?}"),
    }
    assert_eq!(endpoint.name, "gemini-2.5-flash");
    assert!(ModelSpec::named("no-such-model").is_none());
}

const AFC: &str = r#"
[afc]
judge = "smol"
decomposition_mode = "repair"

[[afc.datasets]]
id = "covidfact"
path = "afc-covidfact.jsonl"
"#;

#[test]
fn afc_section_is_typed_with_defaults() {
    let s = parse_str(&format!("{GOOD}{AFC}")).unwrap();
    let afc = s.afc.expect("[afc]");
    assert_eq!(afc.judge, "smol");
    assert_eq!(afc.settings, crate::afc::AfcSetting::ALL.to_vec());
    assert_eq!(afc.decomposition_mode, Mode::Repair);
    // Only the LLM with the CREDENCE prompt decomposes by default.
    assert_eq!(afc.decomposers, ["smol"]);
    assert_eq!(afc.max_new_tokens, DEFAULT_JUDGE_MAX_NEW_TOKENS);
    assert_eq!(
        afc.datasets[0].path,
        PathBuf::from("sweeps/afc-covidfact.jsonl")
    );
    // A sweep without [afc] records none (its recorded JSON is as before).
    let plain = parse_str(GOOD).unwrap();
    assert!(plain.afc.is_none());
    assert!(!serde_json::to_string(&plain).unwrap().contains("afc"));
}

#[test]
fn an_afc_sweep_needs_no_decomposition_dataset() {
    let text = format!("{GOOD}{AFC}");
    let without = text.replace(
        "[[datasets]]\nid = \"sample\"\npath = \"sample.jsonl\"\n",
        "",
    );
    let s = parse_str(&without).unwrap();
    assert!(s.datasets.is_empty());
    assert_eq!(s.afc.unwrap().datasets.len(), 1);
    // Without [afc], the same sweep is refused.
    let plain = GOOD.replace(
        "[[datasets]]\nid = \"sample\"\npath = \"sample.jsonl\"\n",
        "",
    );
    assert!(err(&plain).contains("no [[datasets]]"), "{}", err(&plain));
}

#[test]
fn afc_errors_name_the_place_and_what_is_wrong() {
    let text = format!("{GOOD}{AFC}");
    for (bad, want) in [
        (
            text.replace("judge = \"smol\"", "judge = \"split\""),
            "judge \"split\" is a sentence-split model; the judge must be an LLM",
        ),
        (
            text.replace("judge = \"smol\"", "judge = \"gpt\""),
            "judge \"gpt\" is not a model of the sweep; its LLM models: smol",
        ),
        (
            text.replace("id = \"covidfact\"", "id = \"sample\""),
            "dataset id \"sample\" used twice",
        ),
        (
            text.replace(
                "decomposition_mode = \"repair\"",
                "settings = [\"none\", \"whole\"]",
            ),
            "unknown AFC setting \"whole\"; expected none, credence, factscore",
        ),
        (
            text.replace(
                "decomposition_mode = \"repair\"",
                "decomposers = [\"split\"]",
            ),
            "decomposer \"split\" must be an LLM with the CREDENCE prompt",
        ),
        (
            text.replace("decomposition_mode = \"repair\"", "max_new_tokens = 0"),
            "max_new_tokens must be between 1 and 32768, got 0",
        ),
    ] {
        let e = err(&bad);
        assert!(e.starts_with("sweeps/x.toml:"), "{e}");
        assert!(e.contains(want), "{e}\nwanted: {want}");
    }
}

#[test]
fn the_shipped_afc_sweeps_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sweeps");
    for name in ["afc.toml", "afc-local-cpu.toml"] {
        let s = load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let afc = s.afc.expect("[afc]");
        assert_eq!(afc.datasets.len(), 5, "{name}");
        assert_eq!(afc.settings.len(), 3, "{name}");
        assert_eq!(afc.decomposition_mode, Mode::All, "{name}");
    }
}
