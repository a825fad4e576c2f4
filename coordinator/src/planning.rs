//! From a validated sweep to jobs: load every dataset and decomposer first (so a run
//! that fails validation writes nothing), then plan jobs with their content keys.

use anyhow::Context;
use credence_core::dataset::{self, LoadedDataset};
use credence_core::job::{plan, plan_afc, AfcPlan, Job, PlannedDataset, PlannedModel};
use credence_core::sweep::{AfcSpec, SweepSpec};
use credence_worker::decompose::{self, Decomposer};
use credence_worker::pipeline::scoring::Scorer;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// Loads the decomposer of every model of a sweep (the embedded engine, which runs them
/// in this process), checking that each has the fingerprint it was planned with.
pub fn load_decomposers(sweep: &SweepSpec) -> anyhow::Result<HashMap<String, Arc<dyn Decomposer>>> {
    let mut decomposers: HashMap<String, Arc<dyn Decomposer>> = HashMap::new();
    for m in &sweep.models {
        let d: Arc<dyn Decomposer> = Arc::from(decompose::load(m)?);
        let planned = decompose::fingerprint(m)?;
        anyhow::ensure!(
            d.fingerprint() == planned,
            "model {:?}: loaded fingerprint {} differs from the planned {planned}",
            m.name,
            d.fingerprint()
        );
        decomposers.insert(m.name.clone(), d);
    }
    Ok(decomposers)
}

/// Version of the per-example pipeline; part of every job key, so changing how results
/// are computed re-runs the jobs.
pub const PIPELINE_VERSION: &str = "modes-1";

/// A sweep ready to run: datasets loaded, decomposers built, jobs planned.
pub struct Plan {
    /// The sweep.
    pub sweep: SweepSpec,
    /// Datasets by sweep id, in sweep order.
    pub datasets: Vec<(String, LoadedDataset)>,
    /// The run's parser, verifier and encoder (behind the embedding cache).
    pub scorer: Arc<Scorer>,
    /// Every job of the run, in plan order.
    pub jobs: Vec<Job>,
}

/// Loads everything a sweep needs and plans its jobs. Nothing is written anywhere.
pub fn prepare(sweep: SweepSpec) -> anyhow::Result<Plan> {
    let mut datasets = Vec::new();
    for ds in &sweep.datasets {
        let loaded =
            dataset::load(&ds.path).with_context(|| format!("loading dataset {:?}", ds.id))?;
        datasets.push((ds.id.clone(), loaded));
    }
    // Fingerprints only: planning never loads a model or needs an endpoint's key.
    let mut models = Vec::new();
    for m in &sweep.models {
        models.push(PlannedModel {
            name: m.name.clone(),
            fingerprint: decompose::fingerprint(m)?,
        });
    }
    let scorer = Arc::new(Scorer::load(
        &sweep.nlp,
        sweep.encoder.as_ref(),
        &sweep.verifier,
    )?);
    let encoder_fingerprint = scorer.encoder.as_ref().map(|e| e.encoder().fingerprint());
    let planned: Vec<PlannedDataset> = datasets
        .iter()
        .map(|(id, d)| PlannedDataset {
            id: id.clone(),
            hash: d.hash.clone(),
            len: d.examples.len() as u32,
        })
        .collect();
    let version = config_version(&sweep, encoder_fingerprint);
    let mut jobs = plan(
        &sweep.name,
        &models,
        &planned,
        &sweep.modes,
        sweep.shard_size,
        &version,
    );
    if let Some(afc) = &sweep.afc {
        let mut afc_sets = Vec::new();
        for ds in &afc.datasets {
            let loaded = dataset::load_afc(&ds.path)
                .with_context(|| format!("loading AFC dataset {:?}", ds.id))?;
            afc_sets.push(PlannedDataset {
                id: ds.id.clone(),
                hash: loaded.hash.clone(),
                len: loaded.examples.len() as u32,
            });
            datasets.push((ds.id.clone(), loaded));
        }
        jobs.extend(afc_jobs(&sweep, afc, &models, &afc_sets, &version)?);
    }
    Ok(Plan {
        sweep,
        datasets,
        scorer,
        jobs,
    })
}

/// The AFC jobs of a sweep: decomposer x AFC dataset x setting x shard, judged by the
/// `[afc]` judge, whose fingerprint is computed here without loading it.
fn afc_jobs(
    sweep: &SweepSpec,
    afc: &AfcSpec,
    models: &[PlannedModel],
    datasets: &[PlannedDataset],
    version: &str,
) -> anyhow::Result<Vec<Job>> {
    let judge_spec = sweep
        .models
        .iter()
        .find(|m| m.name == afc.judge)
        .context("the [afc] judge is not a model of the sweep")?;
    let generator = decompose::generator_fingerprint(judge_spec)?
        .with_context(|| format!("the [afc] judge {:?} is not an LLM", afc.judge))?;
    let judge_fingerprint = credence_worker::llm::nli::NliJudge::fingerprint_of(&generator);
    let decomposers: Vec<PlannedModel> = models
        .iter()
        .filter(|m| afc.decomposers.contains(&m.name))
        .cloned()
        .collect();
    // What changes an AFC job's results beyond its decomposer, dataset, setting and judge.
    let settings = serde_json::json!({
        "sweep": version,
        "nli_prompt": credence_worker::llm::nli::VERSION,
        "decomposition_mode": afc.decomposition_mode,
        "judge_max_new_tokens": afc.max_new_tokens,
    });
    let afc_version =
        hex::encode(Sha256::digest(settings.to_string().as_bytes()))[..16].to_string();
    Ok(plan_afc(
        &sweep.name,
        &decomposers,
        datasets,
        &AfcPlan {
            settings: &afc.settings,
            decomposition_mode: afc.decomposition_mode,
            judge: &afc.judge,
            judge_fingerprint: &judge_fingerprint,
        },
        sweep.shard_size,
        &afc_version,
    ))
}

/// Hash of the settings that change results, beyond model and dataset. The encoder
/// enters by fingerprint (weights, pooling, prefix, length), not by name.
pub fn config_version(sweep: &SweepSpec, encoder_fingerprint: Option<&str>) -> String {
    let settings = serde_json::json!({
        "pipeline": PIPELINE_VERSION,
        "self_repair_prompt": credence_worker::pipeline::repair::llm::VERSION,
        "verifier": sweep.verifier,
        "encoder": encoder_fingerprint,
        "nlp": credence_nlp::fingerprint(),
        "models": sweep.models.iter().map(|m| (&m.name, m.prompt, m.max_new_tokens)).collect::<Vec<_>>(),
    });
    hex::encode(Sha256::digest(settings.to_string().as_bytes()))[..16].to_string()
}
