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
    assert_eq!(s.modes, Mode::ALL.to_vec());
    assert_eq!(s.shard_size, 10);
    assert_eq!(s.verifier, VerifierSettings::default());
    assert_eq!(
        s.bootstrap,
        BootstrapSettings {
            resamples: 10_000,
            seed: 42
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
