//! `credence sweep plan`: what a sweep will put on each queue and, with `--estimate`, how
//! long it will take on a given fleet ([`credence_core::estimate`] holds the model of
//! time); a pilot run's measured figures are read from its store here.

use anyhow::Context;
use credence_core::domain::{Mode, Stage};
use credence_core::estimate::{self, Counts, Estimate, Figure, Measured, Pilot, ServerSpeed};
use credence_core::sweep::SweepSpec;
use credence_core::timing::span;
use credence_infra::queue::{job_queue, AGGREGATE_QUEUE};
use credence_infra::store::Store;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Stages whose seconds are CPU work (the rest wait on a model or on the store).
pub const CPU_STAGES: [Stage; 5] = [
    Stage::Parse,
    Stage::Embed,
    Stage::Verify,
    Stage::Repair,
    Stage::Metrics,
];

/// The number of examples of each of the sweep's datasets, in sweep order (each file is
/// read and checked as a launch would).
pub fn dataset_lens(sweep: &SweepSpec) -> anyhow::Result<Vec<u32>> {
    sweep
        .datasets
        .iter()
        .map(|d| {
            let loaded = credence_core::dataset::load(&d.path)
                .with_context(|| format!("loading dataset {:?}", d.id))?;
            u32::try_from(loaded.examples.len())
                .with_context(|| format!("dataset {:?}: too many examples", d.id))
        })
        .collect()
}

/// The number of claims of each of the sweep's AFC datasets, in `[afc]` order (none
/// without `[afc]`).
pub fn afc_lens(sweep: &SweepSpec) -> anyhow::Result<Vec<u32>> {
    let Some(afc) = &sweep.afc else {
        return Ok(Vec::new());
    };
    afc.datasets
        .iter()
        .map(|d| {
            let loaded = credence_core::dataset::load_afc(&d.path)
                .with_context(|| format!("loading AFC dataset {:?}", d.id))?;
            u32::try_from(loaded.examples.len())
                .with_context(|| format!("AFC dataset {:?}: too many claims", d.id))
        })
        .collect()
}

/// The server speed of each model of the sweep that generates: the one given for it by
/// name, else that of the measured model its name is. A given name that is no model of
/// the sweep is an error.
pub fn speeds(
    sweep: &SweepSpec,
    given: &[(String, ServerSpeed)],
) -> anyhow::Result<BTreeMap<String, ServerSpeed>> {
    let mut speeds = BTreeMap::new();
    for (name, speed) in given {
        anyhow::ensure!(
            sweep.models.iter().any(|m| &m.name == name),
            "--server {name}=...: the sweep has no model {name:?} (its models: {})",
            sweep
                .models
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        speeds.insert(name.clone(), *speed);
    }
    for m in &sweep.models {
        if let (false, Some(measured)) = (
            speeds.contains_key(&m.name),
            Measured::of_model_name(&m.name),
        ) {
            speeds.insert(m.name.clone(), ServerSpeed::measured(measured));
        }
    }
    Ok(speeds)
}

/// What a pilot run measured: per model, its answer tokens per generation and LLM calls
/// per example of each mode; per mode, the CPU seconds of a scored example (the
/// [`CPU_STAGES`], wall seconds as the pilot's workers took them).
pub async fn read_pilot(store: &dyn Store, run: &str) -> anyhow::Result<Pilot> {
    let calls = store.llm_calls(run).await?;
    anyhow::ensure!(
        !calls.is_empty(),
        "the pilot run {run:?} has no stored outputs yet"
    );
    let mut pilot = Pilot {
        run: run.to_string(),
        ..Pilot::default()
    };
    let mut outputs: BTreeMap<Mode, u64> = BTreeMap::new();
    for c in &calls {
        if c.outputs == 0 {
            continue;
        }
        *outputs.entry(c.mode).or_default() += c.outputs;
        pilot
            .models
            .entry(c.model.clone())
            .or_default()
            .calls_per_example
            .insert(c.mode, c.calls as f64 / c.outputs as f64);
    }
    for u in store.generation_usage(run).await? {
        if u.with_tokens > 0 {
            pilot.models.entry(u.model).or_default().answer_tokens =
                Some(u.completion_tokens as f64 / u.with_tokens as f64);
        }
    }
    let mut cpu: BTreeMap<Mode, f64> = BTreeMap::new();
    for row in store.stage_seconds(run).await? {
        if CPU_STAGES.contains(&row.stage) {
            *cpu.entry(row.mode).or_default() += row.seconds;
        }
    }
    for (mode, seconds) in cpu {
        if let Some(&n) = outputs.get(&mode) {
            pilot.cpu_seconds.insert(mode, seconds / n as f64);
        }
    }
    Ok(pilot)
}

/// The jobs per queue as text.
pub fn render_counts(c: &Counts) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sweep {}: {} models x {} datasets ({} examples) x {} modes = {} scored examples",
        c.sweep,
        c.models.len(),
        c.datasets,
        c.examples,
        c.modes,
        c.models.iter().map(|m| m.scored).sum::<u64>(),
    );
    let width = c
        .models
        .iter()
        .map(|m| job_queue(&m.model).len())
        .chain([AGGREGATE_QUEUE.len()])
        .max()
        .unwrap_or(0);
    if let Some(a) = &c.afc {
        let _ = writeln!(
            out,
            "AFC: {} decomposer{} x {} datasets ({} claims) x {} settings = {} jobs, judged by {}",
            a.decomposers,
            if a.decomposers == 1 { "" } else { "s" },
            a.datasets,
            a.claims,
            a.settings,
            a.jobs,
            a.judge
        );
    }
    let _ = writeln!(out, "\n{:<width$}  {:>7}  {:>9}", "queue", "jobs", "scored");
    for m in &c.models {
        let q = job_queue(&m.model);
        let _ = writeln!(out, "{q:<width$}  {:>7}  {:>9}", m.jobs, m.scored);
    }
    let _ = writeln!(out, "{AGGREGATE_QUEUE:<width$}  {:>7}", c.aggregation_jobs);
    let jobs: u64 = c.models.iter().map(|m| m.jobs).sum::<u64>() + c.aggregation_jobs;
    let _ = writeln!(out, "{:<width$}  {jobs:>7}", "total");
    out
}

/// The estimate as text: the jobs per queue, then its figures per model, the CPU work
/// and the wall time, each figure with its source.
pub fn render_estimate(e: &Estimate) -> String {
    let mut out = render_counts(&e.counts);
    if e.counts.afc.is_some() {
        let _ = writeln!(
            out,
            "(the AFC jobs are counted above but not in the time estimate below)"
        );
    }
    let _ = writeln!(
        out,
        "\nestimate: {} worker{} per model{}",
        e.workers,
        if e.workers == 1 { "" } else { "s" },
        e.pilot.as_ref().map_or(String::new(), |p| format!(
            ", measured figures from pilot run {p}"
        ))
    );
    let mut bounds = false;
    let mut show = |f: &Figure, digits: usize| {
        bounds |= f.source == estimate::Source::Bound;
        format!("{:.digits$} ({})", f.value, f.source.as_str())
    };
    for m in &e.models {
        let Some(g) = &m.generation else {
            let _ = writeln!(out, "  {}: calls no model", m.model);
            continue;
        };
        let repairs: Vec<String> = g
            .repair_calls
            .iter()
            .map(|(mode, f)| format!("{} {}", mode.as_str(), show(f, 2)))
            .collect();
        let _ = writeln!(
            out,
            "  {}: {:.0} generations of {} tokens{}\n    {} server{} at {:.1} tokens/s alone, \
             {:.1} with {} decoding, {} in flight at each: {}",
            m.model,
            g.calls,
            show(&g.answer_tokens, 0),
            if repairs.is_empty() {
                String::new()
            } else {
                format!("; self-repair calls per example: {}", repairs.join(", "))
            },
            g.servers,
            if g.servers == 1 { "" } else { "s" },
            g.speed.decode_tps,
            g.speed.batch_tps,
            g.speed.batch_limit,
            g.in_flight,
            span(g.seconds),
        );
    }
    match &e.cpu {
        Some(c) => {
            let per: Vec<String> = c
                .seconds_per_example
                .iter()
                .map(|(mode, f)| {
                    let ms = Figure {
                        value: f.value * 1000.0,
                        source: f.source,
                    };
                    format!("{} {} ms", mode.as_str(), show(&ms, 1))
                })
                .collect();
            let _ = writeln!(
                out,
                "  CPU: {} scored examples ({})\n    over {} cores: {}",
                c.scored,
                per.join(", "),
                c.cores,
                span(c.seconds)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  CPU: not estimated (give --pilot RUN or --cpu-ms MS per scored example)"
            );
        }
    }
    let _ = writeln!(
        out,
        "wall: {} (bound by {}); the bootstrap's aggregation jobs and retries are not in it",
        span(e.wall_seconds),
        if e.bound_by == "cpu" {
            "the CPU work".to_string()
        } else {
            format!("{}'s generation", e.bound_by)
        }
    );
    if bounds {
        let _ = writeln!(
            out,
            "(bound): the sweep's max_new_tokens or max_llm_calls, an upper bound; a --pilot \
             run or --answer-tokens / --repair-share narrow it"
        );
    }
    out
}
