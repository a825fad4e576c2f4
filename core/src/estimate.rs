//! Sizing a fleet before a launch (`credence sweep plan --estimate`, issue 29 item 4): the
//! jobs a sweep puts on each queue and how long it will take, from the throughput of its
//! model servers ([`ServerSpeed`]), the answers' lengths, the self-repair calls and the
//! CPU work per scored example, each taken from a figure stated on the command line, else
//! from a pilot run, else from the sweep's own limit (an upper bound).
//!
//! **Generation.** Every example is decomposed once per model, whatever the modes (the
//! generation cache shares it); `self_repair` and `all` add their self-repair calls
//! (models under the CREDENCE prompt only). A worker runs one job at a time and keeps up
//! to `min(shard_size, the backend's requests in flight)` of its examples at the model:
//! a local model (GGUF, safetensors) runs on each worker's own device, so each worker is
//! a server; an OpenAI-compatible endpoint is one server shared by the model's workers.
//! A self-repair phase keeps only the shard's failing examples in flight. A model's
//! generation time is its calls through [`ServerSpeed::seconds_for`].
//!
//! **CPU.** Parsing, embedding, verifying, rule repair and metrics of every scored
//! example (model x example x mode), spread over the fleet's cores.
//!
//! **Wall time.** Models run side by side (a queue and servers each), the CPU work beside
//! them: the estimate is the larger of the slowest model's generation time and the CPU
//! time, the ideal a run reaches when nothing waits (its overhead over it is what the
//! full-size rehearsal measures). Aggregation (the bootstrap) and retries are not in it.

pub mod speed;
#[cfg(test)]
mod tests;

use crate::domain::Mode;
use crate::sweep::{default_max_batch, ModelBackend, PromptKind, SweepSpec};
use serde::Serialize;
pub use speed::{Measured, ServerSpeed, DEFAULT_TTFT_S, MEASURED_BATCH};
use std::collections::BTreeMap;

/// Where a figure of the estimate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Measured in the pilot run.
    Pilot,
    /// Given on the command line.
    Stated,
    /// The sweep's limit (`max_new_tokens`, `max_llm_calls`): an upper bound.
    Bound,
}

impl Source {
    /// The word tables print.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Pilot => "pilot",
            Source::Stated => "stated",
            Source::Bound => "bound",
        }
    }
}

/// A number and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figure {
    /// The number.
    pub value: f64,
    /// Its source.
    pub source: Source,
}

/// The machines that run the sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fleet {
    /// Worker processes per model (each runs one job at a time; a local model's worker
    /// has a device of its own).
    pub workers: usize,
    /// CPU cores for the verifier and the metrics, over all workers.
    pub cores: f64,
}

/// Figures given on the command line; each wins over the pilot's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stated {
    /// Mean answer tokens per generation.
    pub answer_tokens: Option<f64>,
    /// Share of examples that get self-repair calls in `self_repair` and `all`.
    pub repair_share: Option<f64>,
    /// CPU seconds per scored example.
    pub cpu_seconds: Option<f64>,
}

/// What a pilot run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pilot {
    /// Its name.
    pub run: String,
    /// Per model (by name).
    pub models: BTreeMap<String, PilotModel>,
    /// Mean CPU seconds per scored example, per mode (over every model).
    pub cpu_seconds: BTreeMap<Mode, f64>,
}

/// What a pilot run measured of one model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PilotModel {
    /// Mean answer tokens per generation (`None` when the backend reported none).
    pub answer_tokens: Option<f64>,
    /// Mean LLM calls per example, per mode (the base decomposition included).
    pub calls_per_example: BTreeMap<Mode, f64>,
}

/// The jobs a sweep puts on its queues.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Counts {
    /// The sweep's name.
    pub sweep: String,
    /// Datasets.
    pub datasets: usize,
    /// Modes.
    pub modes: usize,
    /// Examples over the datasets (each model's).
    pub examples: u64,
    /// Per model, in sweep order.
    pub models: Vec<ModelJobs>,
    /// Aggregation jobs (one per model x dataset x mode, and per AFC configuration).
    pub aggregation_jobs: u64,
    /// The AFC jobs (`[afc]`, [`add_afc`]), already counted in their decomposers'
    /// queues; the time estimate leaves them out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub afc: Option<AfcCounts>,
}

/// The downstream fact-checking jobs of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AfcCounts {
    /// Decomposers.
    pub decomposers: usize,
    /// AFC datasets.
    pub datasets: usize,
    /// Claims over the AFC datasets.
    pub claims: u64,
    /// Settings.
    pub settings: usize,
    /// AFC jobs in all.
    pub jobs: u64,
    /// The judge.
    pub judge: String,
}

/// Adds a sweep's AFC jobs (AFC datasets of `lens` claims, in `[afc]` order) to its
/// decomposers' queues and to the aggregation jobs, as the planner makes them.
pub fn add_afc(counts: &mut Counts, sweep: &SweepSpec, lens: &[u32]) {
    let Some(afc) = &sweep.afc else { return };
    let shard = u64::from(sweep.shard_size.max(1));
    let shards: u64 = lens.iter().map(|&n| u64::from(n).div_ceil(shard)).sum();
    let settings = afc.settings.len() as u64;
    for m in counts
        .models
        .iter_mut()
        .filter(|m| afc.decomposers.contains(&m.model))
    {
        m.jobs += shards * settings;
    }
    let decomposers = afc.decomposers.len() as u64;
    counts.aggregation_jobs += decomposers * lens.len() as u64 * settings;
    counts.afc = Some(AfcCounts {
        decomposers: afc.decomposers.len(),
        datasets: lens.len(),
        claims: lens.iter().map(|&n| u64::from(n)).sum(),
        settings: afc.settings.len(),
        jobs: decomposers * shards * settings,
        judge: afc.judge.clone(),
    });
}

/// The jobs of one model's queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelJobs {
    /// The model's name.
    pub model: String,
    /// Jobs on its queue.
    pub jobs: u64,
    /// Scored examples (examples x modes).
    pub scored: u64,
}

/// The time of one model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelEstimate {
    /// The model's name.
    pub model: String,
    /// Its generation, `None` for a baseline that calls no model.
    pub generation: Option<Generation>,
}

/// A model's generation work and time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generation {
    /// The server's speed.
    pub speed: ServerSpeed,
    /// Servers (the workers' devices for a local model, else 1).
    pub servers: usize,
    /// Requests kept in flight at each server while examples are decomposed.
    pub in_flight: usize,
    /// Mean answer tokens per generation.
    pub answer_tokens: Figure,
    /// Self-repair calls per example, per mode that makes them.
    pub repair_calls: BTreeMap<Mode, Figure>,
    /// Generations in all (each made once).
    pub calls: f64,
    /// Answer tokens in all.
    pub tokens: f64,
    /// Seconds of generation with the fleet's concurrency.
    pub seconds: f64,
}

/// The CPU work of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cpu {
    /// Scored examples.
    pub scored: u64,
    /// CPU seconds per scored example, per mode.
    pub seconds_per_example: BTreeMap<Mode, Figure>,
    /// Cores it is spread over.
    pub cores: f64,
    /// Seconds of CPU work over the cores.
    pub seconds: f64,
}

/// The estimate of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The jobs.
    pub counts: Counts,
    /// The pilot run the measured figures come from.
    pub pilot: Option<String>,
    /// Worker processes per model.
    pub workers: usize,
    /// Per model, in sweep order.
    pub models: Vec<ModelEstimate>,
    /// The CPU work; `None` when neither a pilot nor a flag gives its seconds.
    pub cpu: Option<Cpu>,
    /// The slowest model's generation seconds.
    pub generation_seconds: f64,
    /// The estimated wall time: the larger of generation and CPU.
    pub wall_seconds: f64,
    /// What bounds it: a model's name or `cpu`.
    pub bound_by: String,
}

/// The jobs of a sweep over datasets of `lens` examples (in sweep order), as the planner
/// makes them.
pub fn counts(sweep: &SweepSpec, lens: &[u32]) -> Counts {
    let shard = u64::from(sweep.shard_size.max(1));
    let shards: u64 = lens.iter().map(|&n| u64::from(n).div_ceil(shard)).sum();
    let modes = sweep.modes.len() as u64;
    let examples: u64 = lens.iter().map(|&n| u64::from(n)).sum();
    Counts {
        sweep: sweep.name.clone(),
        datasets: lens.len(),
        modes: sweep.modes.len(),
        examples,
        models: sweep
            .models
            .iter()
            .map(|m| ModelJobs {
                model: m.name.clone(),
                jobs: shards * modes,
                scored: examples * modes,
            })
            .collect(),
        aggregation_jobs: (sweep.models.len() * lens.len()) as u64 * modes,
        afc: None,
    }
}

/// Estimates a sweep over datasets of `lens` examples (in sweep order). `speeds` holds
/// the speed of every model that generates, by name; the error names the models without.
pub fn estimate(
    sweep: &SweepSpec,
    lens: &[u32],
    speeds: &BTreeMap<String, ServerSpeed>,
    fleet: Fleet,
    stated: Stated,
    pilot: Option<&Pilot>,
) -> Result<Estimate, String> {
    let missing: Vec<&str> = sweep
        .models
        .iter()
        .filter(|m| generates(&m.backend) && !speeds.contains_key(&m.name))
        .map(|m| m.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "no server speed for {}: give --server NAME=SPEED for each",
            missing.join(", ")
        ));
    }
    let counts = counts(sweep, lens);
    let workers = fleet.workers.max(1);
    let examples = counts.examples as f64;
    let mut models = Vec::new();
    for m in &sweep.models {
        let generation = match speeds.get(&m.name) {
            Some(&speed) if generates(&m.backend) => Some(generation(
                sweep,
                m,
                examples,
                speed,
                workers,
                stated,
                pilot.and_then(|p| p.models.get(&m.name)),
            )),
            _ => None,
        };
        models.push(ModelEstimate {
            model: m.name.clone(),
            generation,
        });
    }
    let scored: u64 = counts.models.iter().map(|m| m.scored).sum();
    let cpu = cpu(sweep, scored, fleet, stated, pilot);
    let (generation_seconds, slowest) = models
        .iter()
        .filter_map(|m| m.generation.as_ref().map(|g| (g.seconds, m.model.as_str())))
        .fold((0.0, "none"), |a, b| if b.0 > a.0 { b } else { a });
    let cpu_seconds = cpu.as_ref().map_or(0.0, |c| c.seconds);
    let (wall_seconds, bound_by) = if cpu_seconds > generation_seconds {
        (cpu_seconds, "cpu".to_string())
    } else {
        (generation_seconds, slowest.to_string())
    };
    Ok(Estimate {
        counts,
        pilot: pilot.map(|p| p.run.clone()),
        workers,
        models,
        cpu,
        generation_seconds,
        wall_seconds,
        bound_by,
    })
}

/// Whether a backend calls a model.
pub fn generates(backend: &ModelBackend) -> bool {
    !matches!(
        backend,
        ModelBackend::SentenceSplit | ModelBackend::ConjunctionOracle
    )
}

fn generation(
    sweep: &SweepSpec,
    m: &crate::sweep::ModelSpec,
    examples: f64,
    speed: ServerSpeed,
    workers: usize,
    stated: Stated,
    pilot: Option<&PilotModel>,
) -> Generation {
    let (per_worker, local) = match &m.backend {
        ModelBackend::Openai {
            max_concurrency, ..
        } => (max_concurrency.map_or(256, |n| n as usize), false),
        _ => (default_max_batch(m.device), true),
    };
    let window = per_worker.min(sweep.shard_size.max(1) as usize).max(1);
    let (servers, clients) = if local { (workers, 1) } else { (1, workers) };
    let answer_tokens = match (pilot.and_then(|p| p.answer_tokens), stated.answer_tokens) {
        (_, Some(t)) => figure(t, Source::Stated),
        (Some(t), None) => figure(t, Source::Pilot),
        (None, None) => figure(f64::from(m.max_new_tokens), Source::Bound),
    };
    let tokens = answer_tokens.value;
    let per_server = examples / servers as f64;
    let mut seconds = speed.seconds_for(per_server, tokens, clients * window);
    let mut calls = examples;
    let mut repair_calls = BTreeMap::new();
    let max_calls = f64::from(sweep.verifier.max_llm_calls);
    if m.prompt == PromptKind::Credence && max_calls > 0.0 {
        for &mode in sweep
            .modes
            .iter()
            .filter(|m| matches!(m, Mode::SelfRepair | Mode::All))
        {
            let measured = pilot.and_then(|p| {
                let base = p.calls_per_example.get(&Mode::Base).copied().unwrap_or(1.0);
                p.calls_per_example
                    .get(&mode)
                    .map(|&c| (c - base).clamp(0.0, max_calls))
            });
            let per_example = match (measured, stated.repair_share) {
                (_, Some(share)) => figure(share * max_calls, Source::Stated),
                (Some(c), None) => figure(c, Source::Pilot),
                (None, None) => figure(max_calls, Source::Bound),
            };
            // Only the shard's failing examples are in flight in a self-repair phase.
            let share = (per_example.value / max_calls).clamp(0.0, 1.0);
            let repair_window = ((window as f64 * share).ceil() as usize).clamp(1, window);
            let n = examples * per_example.value;
            seconds += speed.seconds_for(n / servers as f64, tokens, clients * repair_window);
            calls += n;
            repair_calls.insert(mode, per_example);
        }
    }
    Generation {
        speed,
        servers,
        in_flight: (clients * window).min(speed.batch_limit),
        answer_tokens,
        repair_calls,
        calls,
        tokens: calls * tokens,
        seconds,
    }
}

fn cpu(
    sweep: &SweepSpec,
    scored: u64,
    fleet: Fleet,
    stated: Stated,
    pilot: Option<&Pilot>,
) -> Option<Cpu> {
    let mut per_mode = BTreeMap::new();
    for &mode in &sweep.modes {
        let f = match (
            pilot.and_then(|p| p.cpu_seconds.get(&mode)),
            stated.cpu_seconds,
        ) {
            (_, Some(s)) => figure(s, Source::Stated),
            (Some(&s), None) => figure(s, Source::Pilot),
            (None, None) => return None,
        };
        per_mode.insert(mode, f);
    }
    let per_mode_scored = scored as f64 / sweep.modes.len().max(1) as f64;
    let cores = fleet.cores.max(1e-9);
    let total: f64 = per_mode.values().map(|f| f.value * per_mode_scored).sum();
    Some(Cpu {
        scored,
        seconds_per_example: per_mode,
        cores: fleet.cores,
        seconds: total / cores,
    })
}

fn figure(value: f64, source: Source) -> Figure {
    Figure { value, source }
}
