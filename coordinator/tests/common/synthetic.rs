//! A synthetic finished run written through the `Store` API, for `credence view`'s tests
//! and its bench (`coordinator/benches/view.rs`): `models` rule baselines x `datasets` x
//! the four modes x `n` examples, each with claims, a verifier report the worker's types
//! read, rule-tier steps, every metric and stage seconds, varied by example so that
//! filters and sorts have something to choose. No model runs.
//!
//! The first example of the first dataset carries markup in its text, reference and
//! claims (`<script>`), to check that the view escapes what datasets and models write.

use credence_core::dataset::LoadedDataset;
use credence_core::domain::{Example, ExampleMetrics, ExampleResult, Mode, Stage, StageTimes};
use credence_core::job::{plan, PlannedDataset, PlannedModel};
use credence_infra::store::sqlite::SqliteStore;
use credence_infra::store::{PlannedDatasetRecord, RunRecord, Store};
use serde_json::json;
use std::path::Path;

/// The run id of a synthetic run.
pub const RUN: &str = "synthetic";

/// The claim of the first example that holds markup.
pub const SCRIPT_CLAIM: &str = "Ada said <script>alert('x')</script> & left.";

/// The sweep of a synthetic run (rule baselines, so no completion is looked up).
fn sweep(models: usize, datasets: usize) -> String {
    let mut s = format!(
        "[sweep]\nname = \"{RUN}\"\nmodes = [\"base\", \"repair\", \"self_repair\", \"all\"]\nshard_size = 100\n"
    );
    for m in 0..models {
        s.push_str(&format!(
            "[[models]]\nname = \"model-{m}\"\nbackend = \"conjunction-oracle\"\n"
        ));
    }
    for d in 0..datasets {
        s.push_str(&format!(
            "[[datasets]]\nid = \"data-{d}\"\npath = \"data-{d}.jsonl\"\n"
        ));
    }
    s
}

fn example(d: usize, i: usize) -> Example {
    let (text, reference) = if d == 0 && i == 0 {
        (
            "Ada said <b>hello</b> on Monday and Bob left.".to_string(),
            "Ada said <script>alert('r')</script> hello.".to_string(),
        )
    } else {
        (
            format!(
                "Company {i} said on Monday that sales rose {i}% and costs fell in region {d}."
            ),
            format!("Company {i} said on Monday that sales rose {i}%."),
        )
    };
    Example {
        id: format!("ex{i:05}"),
        text,
        references: vec![reference, format!("Costs fell in region {d}.")],
        meta: Default::default(),
    }
}

/// Figures of example `i` in `mode`: (Semantic-F1, EPR, AVR, RR, non-atomic, pronoun).
fn figures(i: usize, mode: Mode) -> (f64, f64, f64, f64, bool, bool) {
    let k = Mode::PAPER.iter().position(|m| *m == mode).unwrap_or(0);
    let sf1 = ((i * 37 + k * 11) % 100) as f64 / 100.0;
    let epr = if (i + k).is_multiple_of(7) { 0.5 } else { 1.0 };
    let non_atomic = (i + k).is_multiple_of(3);
    let avr = if non_atomic { 0.5 } else { 0.0 };
    let rr = if (i + 2 * k).is_multiple_of(11) {
        0.5
    } else {
        0.0
    };
    (sf1, epr, avr, rr, non_atomic, i % 13 == 5)
}

fn result(ex: &Example, i: usize, mode: Mode, first: bool) -> ExampleResult {
    let (sf1, epr, avr, rr, non_atomic, pronoun) = figures(i, mode);
    let base = if first {
        vec![SCRIPT_CLAIM.to_string(), "Bob left.".to_string()]
    } else {
        vec![ex.text.clone(), format!("Claim two of {}.", ex.id)]
    };
    let claims = match mode {
        Mode::Base | Mode::SelfRepair | Mode::Verify => base.clone(),
        Mode::Repair | Mode::All => {
            let mut c = vec![format!("{} (split).", ex.id)];
            c.extend(base.iter().cloned());
            c
        }
    };
    let boundaries = |c: usize| {
        if non_atomic && c == 0 {
            json!([{"rule": "advcl", "token_i": 1}])
        } else {
            json!([])
        }
    };
    let report = json!({
        "atomicity": (0..claims.len()).map(|c| json!({"boundaries": boundaries(c)})).collect::<Vec<_>>(),
        "n_viol": u32::from(non_atomic),
        "avr": avr,
        "entities": {
            "entities": [{"tier": 1, "label": "date", "text": "Monday", "span": [0, 3],
                          "preserved": epr >= 1.0, "held_by": if epr >= 1.0 { json!([0]) } else { json!([]) }}],
            "epr": epr, "epr_tier1": epr, "epr_tier2": 1.0, "passes": epr >= 1.0
        },
        "repetition": {
            "pairs": if rr > 0.0 { json!([{"i": 0, "j": 1, "cos": 0.95}]) } else { json!([]) },
            "dup_count": u32::from(rr > 0.0), "rr": rr,
            "max_later_cos": (0..claims.len()).map(|_| serde_json::Value::Null).collect::<Vec<_>>()
        },
        "self_containment": if pronoun {
            json!([{"claim": 0, "token_i": 0, "pronoun": "It", "antecedent": "Ada", "antecedent_label": "PERSON"}])
        } else { json!([]) },
        "modality": {"source_verbs": ["said"], "kept": ["said"], "mc": 1.0},
        "verify_ok": !non_atomic && epr >= 1.0 && rr == 0.0
    });
    let repair = match mode {
        Mode::Repair | Mode::All => Some(
            json!({"rule": [{"step": "split", "pass": 1, "claim": 0, "rule": "conservative_split", "parts": 2}]})
                .to_string(),
        ),
        _ => None,
    };
    let verify_ok = !non_atomic && epr >= 1.0 && rr == 0.0;
    let n_claims = claims.len() as f64;
    let values = ExampleMetrics::DEFS.iter().map(|d| {
        let v = match d.name {
            "semantic_f1" => sf1,
            "epr" => epr,
            "avr" => avr,
            "rr" => rr,
            "n_viol" => f64::from(u8::from(non_atomic)),
            "dup_count" => f64::from(u8::from(rr > 0.0)),
            "n_unresolved" => f64::from(u8::from(pronoun)),
            "verify_ok" => f64::from(u8::from(verify_ok)),
            "parse_failed" => 0.0,
            "n_claims" => n_claims,
            _ => 0.5,
        };
        (d.name, v)
    });
    let mut times = StageTimes::default();
    times.add(Stage::Parse, 0.001 * (i % 10) as f64);
    times.add(Stage::Verify, 0.002);
    ExampleResult {
        example_id: ex.id.clone(),
        base_claims: base,
        claims,
        pipeline_version: mode.as_str().to_string(),
        llm_calls: 0,
        verifier_json: Some(report.to_string()),
        repair_json: repair,
        error: None,
        metrics: ExampleMetrics::from_values(values).expect("metric names from the list"),
        stage_seconds: times,
    }
}

/// Writes the synthetic run into a new SQLite store at `db` (its directory gets the
/// sweep file) and returns the store.
pub async fn write(
    db: &Path,
    models: usize,
    datasets: usize,
    n: usize,
) -> anyhow::Result<SqliteStore> {
    let store = SqliteStore::open(db).await?;
    write_into(
        &store,
        db.parent().unwrap_or(Path::new(".")),
        models,
        datasets,
        n,
    )
    .await?;
    Ok(store)
}

/// Writes the synthetic run into `store`; `dir` is where its sweep says it lives.
pub async fn write_into(
    store: &dyn Store,
    dir: &Path,
    models: usize,
    datasets: usize,
    n: usize,
) -> anyhow::Result<()> {
    let text = sweep(models, datasets);
    let spec = credence_core::sweep::parse(&text, &dir.join("synthetic.toml"), dir)?;
    let loaded: Vec<LoadedDataset> = (0..datasets)
        .map(|d| LoadedDataset {
            path: dir.join(format!("data-{d}.jsonl")),
            hash: format!("synthetic-{d}-{n}"),
            examples: (0..n).map(|i| example(d, i)).collect(),
        })
        .collect();
    let planned_models: Vec<PlannedModel> = (0..models)
        .map(|m| PlannedModel {
            name: format!("model-{m}"),
            fingerprint: format!("conjunction-oracle/v1+m{m}"),
        })
        .collect();
    let planned: Vec<PlannedDataset> = loaded
        .iter()
        .enumerate()
        .map(|(d, l)| PlannedDataset {
            id: format!("data-{d}"),
            hash: l.hash.clone(),
            len: n as u32,
        })
        .collect();
    let jobs = plan(
        RUN,
        &planned_models,
        &planned,
        &Mode::PAPER,
        100,
        "synthetic",
    );
    let ids: Vec<String> = (0..datasets).map(|d| format!("data-{d}")).collect();
    let records: Vec<PlannedDatasetRecord<'_>> = ids
        .iter()
        .zip(&loaded)
        .map(|(id, data)| PlannedDatasetRecord { id, data })
        .collect();
    store
        .record_plan(
            &RunRecord {
                run_id: RUN.into(),
                spec_json: serde_json::to_string(&spec)?,
            },
            &records,
            &jobs,
        )
        .await?;
    for job in &jobs {
        let d: usize = job.dataset.trim_start_matches("data-").parse()?;
        let results: Vec<ExampleResult> = (job.start..job.start + job.len)
            .map(|i| i as usize)
            .map(|i| result(&loaded[d].examples[i], i, job.mode, d == 0 && i == 0))
            .collect();
        let _commit = store.record_results(job, &results).await?;
    }
    Ok(())
}

/// How many examples of one model in `mode` the synthetic figures make non-atomic.
pub fn non_atomic_count(n: usize, mode: Mode) -> usize {
    (0..n).filter(|&i| figures(i, mode).4).count()
}

/// The run id of a synthetic AFC run ([`write_afc_into`]).
pub const AFC_RUN: &str = "synthetic-afc";

/// The claim of an AFC run's first claim, which holds markup.
pub const AFC_SCRIPT_CLAIM: &str = "Masks <script>alert('c')</script> & reduce spread.";

/// The judged (sub-)claims of claim `i` in `setting` by decomposer `d`: the claim whole
/// for `none`, two or three sub-claims otherwise (none for the credence setting's claim
/// 1, an empty decomposition judged whole), with labels that vary by claim, setting and
/// decomposer; claim 2's last judgement held no label.
fn afc_judged(
    text: &str,
    i: usize,
    d: usize,
    setting: credence_core::afc::AfcSetting,
) -> (Vec<credence_core::afc::JudgedClaim>, bool) {
    use credence_core::afc::{AfcSetting, JudgedClaim, NliLabel};
    let label = |k: usize| match (i + k + d) % 3 {
        0 => NliLabel::Support,
        1 => NliLabel::Contradict,
        _ => NliLabel::Neutral,
    };
    let judged = |claim: String, k: usize, unparsable: bool| {
        let label = if unparsable {
            NliLabel::Neutral
        } else {
            label(k)
        };
        JudgedClaim {
            claim,
            label,
            score: if unparsable {
                0.0
            } else {
                label.default_score() * 0.9
            },
            unparsable,
        }
    };
    let parts = match setting {
        AfcSetting::None => return (vec![judged(text.to_string(), 0, false)], false),
        AfcSetting::Credence if i == 1 => {
            return (vec![judged(text.to_string(), 0, false)], true);
        }
        AfcSetting::Credence => 2,
        AfcSetting::Factscore => 3,
    };
    let kind = setting.as_str();
    let judged = (0..parts)
        .map(|k| {
            judged(
                format!("Part {k} of claim {i} ({kind})."),
                k + 1,
                i == 2 && k + 1 == parts,
            )
        })
        .collect();
    (judged, false)
}

/// Writes a synthetic finished AFC run into `store` (`dir` is where its sweep says it
/// lives): `decomposers` endpoint models (never reached) x one AFC dataset (`claims`)
/// of `n` claims x the three settings, every claim judged. Returns the run's id.
pub async fn write_afc_into(
    store: &dyn Store,
    dir: &Path,
    decomposers: usize,
    n: usize,
) -> anyhow::Result<&'static str> {
    use credence_core::afc::{AfcResult, AfcSetting, Verdict};
    use credence_core::domain::{AfcGold, AFC_META_KEY};
    use credence_core::job::{plan_afc, AfcPlan};
    let mut text = format!("[sweep]\nname = \"{AFC_RUN}\"\n");
    for d in 0..decomposers {
        text.push_str(&format!(
            "[[models]]\nname = \"dec-{d}\"\nbackend = \"openai\"\n\
             base_url = \"http://127.0.0.1:9/v1\"\napi_model = \"m{d}\"\n"
        ));
    }
    text.push_str(
        "[afc]\njudge = \"dec-0\"\n[[afc.datasets]]\nid = \"claims\"\npath = \"claims.jsonl\"\n",
    );
    let spec = credence_core::sweep::parse(&text, &dir.join("synthetic-afc.toml"), dir)?;
    let gold = |i: usize| {
        if i.is_multiple_of(2) {
            Verdict::Support
        } else {
            Verdict::Refute
        }
    };
    let examples: Vec<Example> = (0..n)
        .map(|i| {
            let mut meta = serde_json::Map::new();
            let evidence = vec![
                format!("Evidence one for claim {i} <b>bold</b>."),
                format!("Evidence two for claim {i}."),
            ];
            meta.insert(
                AFC_META_KEY.to_string(),
                serde_json::to_value(AfcGold {
                    label: gold(i),
                    evidence,
                })
                .expect("gold as JSON"),
            );
            Example {
                id: format!("c{i:04}"),
                text: if i == 0 {
                    AFC_SCRIPT_CLAIM.to_string()
                } else {
                    format!("Claim {i} says that measure {i} worked in {}.", 2000 + i)
                },
                references: Vec::new(),
                meta,
            }
        })
        .collect();
    let loaded = LoadedDataset {
        path: dir.join("claims.jsonl"),
        hash: format!("synthetic-afc-{n}"),
        examples,
    };
    let models: Vec<PlannedModel> = (0..decomposers)
        .map(|d| PlannedModel {
            name: format!("dec-{d}"),
            fingerprint: format!("openai/m{d}"),
        })
        .collect();
    let datasets = [PlannedDataset {
        id: "claims".into(),
        hash: loaded.hash.clone(),
        len: n as u32,
    }];
    let jobs = plan_afc(
        AFC_RUN,
        &models,
        &datasets,
        &AfcPlan {
            settings: &AfcSetting::ALL,
            decomposition_mode: Mode::All,
            judge: "dec-0",
            judge_fingerprint: "openai/m0",
        },
        100,
        "synthetic",
    );
    let id = "claims".to_string();
    store
        .record_plan(
            &RunRecord {
                run_id: AFC_RUN.into(),
                spec_json: serde_json::to_string(&spec)?,
            },
            &[PlannedDatasetRecord {
                id: &id,
                data: &loaded,
            }],
            &jobs,
        )
        .await?;
    for job in &jobs {
        let task = job.afc.as_ref().expect("an AFC job");
        let d: usize = job.model.trim_start_matches("dec-").parse()?;
        let results: Vec<AfcResult> = (job.start..job.start + job.len)
            .map(|i| i as usize)
            .map(|i| {
                let ex = &loaded.examples[i];
                let (judged, fell_back) = afc_judged(&ex.text, i, d, task.setting);
                let whole = task.setting == AfcSetting::None || fell_back;
                let compound = AfcResult::verdict_of(&judged, whole);
                AfcResult {
                    example_id: ex.id.clone(),
                    gold: gold(i),
                    n_subclaims: if whole { 0 } else { judged.len() as u32 },
                    llm_calls: judged.len() as u32 + u32::from(!whole),
                    judged,
                    verdict: compound.verdict,
                    score: compound.score,
                    fell_back,
                    error: None,
                }
            })
            .collect();
        let _commit = store.record_afc_results(job, &results).await?;
    }
    Ok(AFC_RUN)
}
