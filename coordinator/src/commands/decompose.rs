//! `credence decompose`: one sentence through one decomposer, printing the model's raw
//! answer and the claims parsed from it, and with `--mode` the whole pipeline (verifier,
//! rule tier, LLM tier) on it. For trying a prompt, an endpoint or a mode before a sweep;
//! nothing is cached or stored.

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use credence_core::domain::Mode;
use credence_core::sweep::{
    self, ModelBackend, ModelSpec, PromptKind, VerifierSettings, LOCAL_PRESETS, PRESETS,
};
use credence_worker::decompose::{self, DecomposeContext};
use credence_worker::pipeline::modes;
use credence_worker::pipeline::scoring::Scorer;
use std::path::PathBuf;
use std::process::ExitCode;

/// Decompose SENTENCE with a model: an endpoint preset (`gemini-2.5-flash`, `openai`), a
/// model of a sweep file (`--sweep FILE`), or a baseline (`sentence-split`,
/// `conjunction-oracle`). Prints the raw completion and the parsed claims.
#[derive(Args)]
#[command(after_help = presets_help())]
pub struct DecomposeArgs {
    /// The sentence to decompose.
    sentence: String,
    /// A preset, a baseline, or (with --sweep) the name of one of the sweep's models.
    #[arg(long, value_name = "NAME_OR_PRESET")]
    model: String,
    /// Sweep file whose `[[models]]` entry --model names.
    #[arg(long, value_name = "FILE")]
    sweep: Option<PathBuf>,
    /// The decomposition prompt (default: the sweep model's, else credence).
    #[arg(long, value_enum)]
    prompt: Option<PromptArg>,
    /// Endpoint base URL, overriding the preset's (e.g. http://127.0.0.1:8000/v1).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model name the endpoint expects, overriding the preset's.
    #[arg(long, value_name = "NAME")]
    api_model: Option<String>,
    /// Environment variable holding the API key, overriding the preset's.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// Generation limit [default: the sweep model's or the preset's: 4096, the paper's;
    /// 256 for the small presets smollm2-135m-instruct and gemma-3-270m].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=131_072))]
    max_new_tokens: Option<u32>,
    /// Run the whole pipeline in this mode (base, repair, self_repair, all): verify the
    /// base claims and repair them as the mode does; prints the final claims and what
    /// each tier did. Loads the parser (and the encoder, unless --no-encoder).
    #[arg(long, value_name = "MODE")]
    mode: Option<Mode>,
    /// Sentence encoder for the repetition check and the rule tier's injection, with
    /// --mode: a preset (folder under models/).
    #[arg(
        long,
        value_name = "PRESET",
        default_value = "all-MiniLM-L6-v2",
        requires = "mode"
    )]
    encoder: String,
    /// With --mode: no encoder (no repetition check; verify_ok undecided).
    #[arg(long, requires = "mode")]
    no_encoder: bool,
    /// Print `{"model", "fingerprint", "prompt", "completion", "claims", "parse_failed", "hit_limit"}`
    /// (with --mode also `mode`, `base_claims`, `pipeline_version`, `trace`, `verifier`).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum PromptArg {
    /// The CREDENCE system prompt (PAPER.md, Appendix A).
    Credence,
    /// The FActScore baseline prompt (8 demonstrations, "- " bullets).
    Factscore,
}

fn presets_help() -> String {
    let mut out = String::from("Presets (endpoints):\n");
    for p in PRESETS {
        out.push_str(&format!("  {:<22} {}\n", p.name, p.doc));
    }
    out.push_str("Presets (local models, under $CREDENCE_MODELS_DIR or models/):\n");
    for p in LOCAL_PRESETS {
        out.push_str(&format!("  {:<22} {}\n", p.name, p.doc));
    }
    out
}

/// Runs the command.
pub fn run(args: DecomposeArgs) -> anyhow::Result<ExitCode> {
    let spec = model_spec(&args)?;
    let decomposer = decompose::load(&spec).with_context(|| format!("model {:?}", spec.name))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let out = runtime
        .block_on(decomposer.decompose(&args.sentence, &DecomposeContext::standalone()))
        .with_context(|| format!("decomposing with {:?}", spec.name))?;
    // What `--json` prints in any case; a mode adds its claims, trace and report.
    let mut value = serde_json::json!({
        "model": spec.name,
        "fingerprint": decomposer.fingerprint(),
        "prompt": spec.prompt,
        "completion": out.completion,
        "claims": out.claims,
        "parse_failed": out.parse_failed,
        "hit_limit": out.hit_limit,
    });
    if out.hit_limit {
        eprintln!(
            "note: the generation stopped at max_new_tokens = {}; the answer may be cut off (--max-new-tokens raises it)",
            spec.max_new_tokens
        );
    }
    if let Some(mode) = args.mode {
        let scorer = load_scorer(args.sweep.as_deref(), &args.encoder, args.no_encoder)?;
        let (_, outcome) = runtime.block_on(modes::one_sentence(
            &scorer,
            decomposer.llm(),
            mode,
            &args.sentence,
            out.claims.clone(),
        ))?;
        let report = &outcome.scored.examples[0].report;
        if args.json {
            value["mode"] = serde_json::json!(mode);
            value["base_claims"] = serde_json::json!(out.claims);
            value["claims"] = serde_json::json!(outcome.claims[0]);
            value["pipeline_version"] = serde_json::json!(outcome.pipeline_version);
            value["trace"] = serde_json::json!(outcome.traces[0]);
            value["verifier"] = serde_json::to_value(report)?;
            println!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            println!("base claims:");
            for (i, c) in out.claims.iter().enumerate() {
                println!("{:>3}. {c}", i + 1);
            }
            println!("\n{mode} claims ({}):", outcome.pipeline_version);
            for (i, c) in outcome.claims[0].iter().enumerate() {
                println!("{:>3}. {c}", i + 1);
            }
            if let Some(trace) = &outcome.traces[0] {
                println!("\nwhat the tiers did: {}", serde_json::to_string(trace)?);
            }
            println!(
                "\nAVR {:.3}  EPR {:.3}  n_viol {}  verify_ok {}",
                report.avr,
                report.entities.epr,
                report.n_viol,
                report.verify_ok.map_or("-".to_string(), |b| b.to_string())
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        if let Some(completion) = &out.completion {
            println!("completion:\n{}\n", completion.trim_end());
        }
        if out.parse_failed == Some(true) {
            println!("claims: none (the answer could not be parsed)");
        } else {
            println!("claims:");
            for (i, c) in out.claims.iter().enumerate() {
                println!("{:>3}. {c}", i + 1);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The scorer of a one-sentence command: the encoder preset unless `no_encoder`, the
/// `[verifier]` settings of `sweep` if given.
pub(crate) fn load_scorer(
    sweep: Option<&std::path::Path>,
    encoder: &str,
    no_encoder: bool,
) -> anyhow::Result<Scorer> {
    let verifier = match sweep {
        Some(path) => sweep::load(path)?.verifier,
        None => VerifierSettings::default(),
    };
    Scorer::for_one_sentence((!no_encoder).then_some(encoder), &verifier)
        .context("loading the parser and encoder (or pass --no-encoder)")
}

/// The model the arguments name, with the overrides applied.
fn model_spec(args: &DecomposeArgs) -> anyhow::Result<ModelSpec> {
    let mut spec = if let Some(path) = &args.sweep {
        let sweep = sweep::load(path)?;
        let names: Vec<String> = sweep.models.iter().map(|m| m.name.clone()).collect();
        sweep
            .models
            .into_iter()
            .find(|m| m.name == args.model)
            .with_context(|| {
                format!(
                    "{} has no model {:?}; its models are {}",
                    path.display(),
                    args.model,
                    names.join(", ")
                )
            })?
    } else {
        ModelSpec::named(&args.model).with_context(|| {
            format!(
                "unknown model {:?}: give a preset ({}), a baseline \
                 (sentence-split, conjunction-oracle), or --sweep FILE with one of its models",
                args.model,
                sweep::preset_names()
            )
        })?
    };
    if let Some(p) = args.prompt {
        spec.prompt = match p {
            PromptArg::Credence => PromptKind::Credence,
            PromptArg::Factscore => PromptKind::Factscore,
        };
    }
    if let Some(n) = args.max_new_tokens {
        spec.max_new_tokens = n;
    }
    match &mut spec.backend {
        ModelBackend::Openai {
            base_url,
            api_model,
            api_key_env,
            ..
        } => {
            if let Some(u) = &args.base_url {
                base_url.clone_from(u);
            }
            if let Some(m) = &args.api_model {
                api_model.clone_from(m);
            }
            if let Some(k) = &args.api_key_env {
                *api_key_env = Some(k.clone());
            }
            if api_model.is_empty() {
                bail!(
                    "model {:?} needs --api-model (the model name the endpoint expects)",
                    args.model
                );
            }
        }
        _ => {
            if args.base_url.is_some() || args.api_model.is_some() || args.api_key_env.is_some() {
                bail!(
                    "--base-url, --api-model and --api-key-env apply to endpoint models, not {:?}",
                    args.model
                );
            }
        }
    }
    Ok(spec)
}
