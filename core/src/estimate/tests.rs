use super::*;
use crate::job::{plan, PlannedDataset, PlannedModel};
use std::path::Path;

const SWEEP: &str = r#"[sweep]
name = "sized"
modes = ["base", "repair", "self_repair", "all"]
shard_size = 10

[verifier]
max_llm_calls = 2

[[models]]
name = "oracle"
backend = "conjunction-oracle"

[[models]]
name = "qwen3-8b"
backend = "openai"
base_url = "http://127.0.0.1:8000/v1"
api_model = "qwen3-8b"
max_concurrency = 4
max_new_tokens = 300

[[models]]
name = "factscore-phi"
backend = "safetensors"
path = "phi"
device = "cuda"
prompt = "factscore"
max_new_tokens = 200

[[datasets]]
id = "a"
path = "a.jsonl"

[[datasets]]
id = "b"
path = "b.jsonl"
"#;

fn sweep() -> SweepSpec {
    crate::sweep::parse(SWEEP, Path::new("sweeps/x.toml"), Path::new("sweeps")).unwrap()
}

/// 100 tokens/s alone, 1,000 with 32 in flight, no time to first token.
fn speed() -> ServerSpeed {
    ServerSpeed {
        ttft_s: 0.0,
        ..ServerSpeed::parse("100:1000").unwrap()
    }
}

fn speeds() -> BTreeMap<String, ServerSpeed> {
    ["qwen3-8b", "factscore-phi"]
        .into_iter()
        .map(|m| (m.to_string(), speed()))
        .collect()
}

fn stated(answer_tokens: f64, repair_share: f64, cpu_seconds: f64) -> Stated {
    Stated {
        answer_tokens: Some(answer_tokens),
        repair_share: Some(repair_share),
        cpu_seconds: Some(cpu_seconds),
    }
}

/// The estimate of two datasets of 100 examples.
fn of(stated: Stated, pilot: Option<&Pilot>) -> Estimate {
    estimate(&sweep(), &[100, 100], &speeds(), FLEET, stated, pilot).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn the_measured_speeds_hold_at_32_and_move_along_their_line() {
    for (m, name) in Measured::EVERY {
        assert_eq!(Measured::parse(name), Some(m));
        let (alone, full) = m.speeds();
        let s = ServerSpeed::from_measured(m, 32, None, None, DEFAULT_TTFT_S);
        assert!(close(1.0 / s.step_seconds(1), alone));
        assert!(close(32.0 / s.step_seconds(32), full));
        // Another limit: the same step time per batch size, so the same aggregate at 32.
        let wide = ServerSpeed::from_measured(m, 64, None, None, DEFAULT_TTFT_S);
        assert!(close(wide.step_seconds(32), s.step_seconds(32)));
        assert!(wide.batch_tps > s.batch_tps);
        // Only the speed alone given: the measured slowdown per extra request is kept.
        let half = ServerSpeed::from_measured(m, 32, Some(alone / 2.0), None, 0.1);
        assert!(close(half.slowdown(), m.slowdown()));
        assert!(close(half.batch_tps, full / 2.0));
        assert_eq!(half.ttft_s, 0.1);
    }
}

#[test]
fn speeds_parse_from_a_name_or_three_numbers_and_bad_ones_say_what_was_expected() {
    let s = ServerSpeed::parse("qwen3-8b").unwrap();
    assert_eq!(
        (s.decode_tps, s.batch_tps, s.batch_limit),
        (89.7, 1890.0, 32)
    );
    let s = ServerSpeed::parse("50:400:16").unwrap();
    assert_eq!(
        (s.decode_tps, s.batch_tps, s.batch_limit),
        (50.0, 400.0, 16)
    );
    for bad in [
        "llama",
        "",
        "100",
        "100:50",
        "100:4000:16",
        "1:2:3:4",
        "x:100",
        "0:0",
    ] {
        let e = ServerSpeed::parse(bad).unwrap_err();
        assert!(!e.is_empty(), "{bad}");
    }
    assert!(ServerSpeed::parse("nope").unwrap_err().contains("qwen3-8b"));
    assert!(ServerSpeed::parse("100:50")
        .unwrap_err()
        .contains("at least"));
}

#[test]
fn a_sweep_model_name_finds_its_measured_model() {
    for (name, m) in [
        ("qwen3-8b", Some(Measured::Qwen3_8b)),
        ("Qwen3-8B-AWQ", Some(Measured::Qwen3_8b)),
        ("phi-3-mini-128k", Some(Measured::Phi3Mini)),
        ("gemma-3-12b-it", Some(Measured::Gemma3_12b)),
        ("gemma-3-270m", None),
        ("gemini-2.5-flash", None),
    ] {
        assert_eq!(Measured::of_model_name(name), m, "{name}");
    }
}

#[test]
fn the_time_of_a_batch_of_calls_follows_the_step_time_of_the_batch_it_fills() {
    let s = ServerSpeed {
        ttft_s: 0.5,
        ..speed()
    };
    // One call: alone.
    assert!(close(s.seconds_for(1.0, 100.0, 32), s.alone_seconds(100)));
    // 64 calls, 32 at a time: two rounds at the full batch's step time.
    let round = 0.5 + 100.0 * 32.0 / 1000.0;
    assert!(close(s.seconds_for(64.0, 100.0, 32), 2.0 * round));
    // More in flight than the batch limit queue: no faster.
    assert!(close(s.seconds_for(64.0, 100.0, 500), 2.0 * round));
    // Fewer in flight: the step time of that batch.
    let four = 0.5 + 100.0 * s.step_seconds(4);
    assert!(close(s.seconds_for(64.0, 100.0, 4), 16.0 * four));
    assert_eq!(s.seconds_for(0.0, 100.0, 4), 0.0);
}

#[test]
fn job_counts_are_the_planners() {
    let sweep = sweep();
    let lens = [25, 40];
    let models: Vec<PlannedModel> = sweep
        .models
        .iter()
        .map(|m| PlannedModel {
            name: m.name.clone(),
            fingerprint: "f".into(),
        })
        .collect();
    let datasets: Vec<PlannedDataset> = sweep
        .datasets
        .iter()
        .zip(lens)
        .map(|(d, len)| PlannedDataset {
            id: d.id.clone(),
            hash: "h".into(),
            len,
        })
        .collect();
    let jobs = plan("sized", &models, &datasets, &sweep.modes, 10, "c");
    let c = counts(&sweep, &lens);
    for m in &c.models {
        let planned = jobs.iter().filter(|j| j.model == m.model).count() as u64;
        assert_eq!(m.jobs, planned, "{}", m.model);
        assert_eq!(m.scored, 260);
    }
    assert_eq!(c.models.len(), 3);
    assert_eq!((c.examples, c.datasets, c.modes), (65, 2, 4));
    assert_eq!(c.aggregation_jobs, 3 * 2 * 4);
}

const FLEET: Fleet = Fleet {
    workers: 2,
    cores: 4.0,
};

#[test]
fn without_a_pilot_or_figures_the_sweeps_limits_bound_the_estimate() {
    let e = estimate(
        &sweep(),
        &[100, 100],
        &speeds(),
        FLEET,
        Stated::default(),
        None,
    )
    .unwrap();
    assert!(
        e.models[0].generation.is_none(),
        "a baseline calls no model"
    );
    assert!(e.cpu.is_none(), "no CPU figure without a pilot or --cpu-ms");
    // The endpoint: one server, 2 workers x min(shard 10, 4 in flight) = 8 in flight.
    let g = e.models[1].generation.as_ref().unwrap();
    assert_eq!((g.servers, g.in_flight), (1, 8));
    assert_eq!(g.answer_tokens, figure(300.0, Source::Bound));
    let bound = figure(2.0, Source::Bound);
    assert_eq!(g.repair_calls.get(&Mode::SelfRepair), Some(&bound));
    assert_eq!(g.repair_calls.get(&Mode::All), Some(&bound));
    // 200 decompositions + 2 x 200 x 2 self-repair calls, all 8 in flight.
    assert!(close(g.calls, 1000.0));
    let step8 = speed().step_seconds(8);
    assert!(close(g.seconds, 1000.0 * 300.0 * step8 / 8.0));
    // The FActScore model: no self-repair, a device per worker with 10 in flight each.
    let f = e.models[2].generation.as_ref().unwrap();
    assert!(f.repair_calls.is_empty());
    assert_eq!((f.servers, f.in_flight), (2, 10));
    let step10 = speed().step_seconds(10);
    assert!(close(f.seconds, 100.0 * 200.0 * step10 / 10.0));
    assert_eq!(e.bound_by, "qwen3-8b");
    assert!(close(e.wall_seconds, g.seconds));
}

#[test]
fn a_pilot_fills_in_and_stated_figures_win_over_it() {
    let e = of(stated(50.0, 0.25, 0.02), None);
    let g = e.models[1].generation.as_ref().unwrap();
    assert_eq!(g.answer_tokens, figure(50.0, Source::Stated));
    assert_eq!(
        g.repair_calls.get(&Mode::All),
        Some(&figure(0.5, Source::Stated))
    );
    // Self-repair phases keep a quarter of each shard's window in flight: ceil(4 x 0.25).
    let base = 200.0 * 50.0 * speed().step_seconds(8) / 8.0;
    let repair = 100.0 * 50.0 * speed().step_seconds(2) / 2.0;
    assert!(close(g.seconds, base + 2.0 * repair));
    let cpu = e.cpu.as_ref().unwrap();
    assert_eq!(cpu.scored, 3 * 200 * 4);
    assert!(close(cpu.seconds, 2400.0 * 0.02 / 4.0));

    let mut pilot = Pilot {
        run: "pilot".into(),
        ..Pilot::default()
    };
    pilot.models.insert(
        "qwen3-8b".into(),
        PilotModel {
            answer_tokens: Some(80.0),
            calls_per_example: [(Mode::Base, 1.0), (Mode::SelfRepair, 1.5)].into(),
        },
    );
    pilot.cpu_seconds = [(Mode::Base, 0.01), (Mode::All, 0.05)].into();
    let only_tokens = Stated {
        answer_tokens: Some(50.0),
        ..Stated::default()
    };
    let e = estimate(
        &sweep(),
        &[100, 100],
        &speeds(),
        FLEET,
        only_tokens,
        Some(&pilot),
    )
    .unwrap();
    let g = e.models[1].generation.as_ref().unwrap();
    assert_eq!(g.answer_tokens, figure(50.0, Source::Stated));
    assert_eq!(
        g.repair_calls.get(&Mode::SelfRepair),
        Some(&figure(0.5, Source::Pilot))
    );
    assert_eq!(
        g.repair_calls.get(&Mode::All),
        Some(&figure(2.0, Source::Bound)),
        "a mode the pilot did not run is bounded"
    );
    assert!(e.cpu.is_none(), "the pilot has no CPU figure for repair");
    let g = of(Stated::default(), Some(&pilot)).models[1]
        .generation
        .clone()
        .unwrap();
    assert_eq!(g.answer_tokens, figure(80.0, Source::Pilot));
    pilot.cpu_seconds = Mode::PAPER.iter().map(|&m| (m, 0.01)).collect();
    let e = of(Stated::default(), Some(&pilot));
    assert_eq!(e.pilot.as_deref(), Some("pilot"));
    let cpu = e.cpu.unwrap();
    assert!(cpu
        .seconds_per_example
        .values()
        .all(|f| f.source == Source::Pilot));
    assert!(close(cpu.seconds, 2400.0 * 0.01 / 4.0));
}

#[test]
fn the_cpu_bounds_the_wall_when_it_is_the_longer() {
    let e = of(stated(1.0, 0.0, 10.0), None);
    let cpu = e.cpu.as_ref().unwrap();
    assert_eq!(e.bound_by, "cpu");
    assert!(close(e.wall_seconds, cpu.seconds));
    assert!(e.generation_seconds < e.wall_seconds);
}

#[test]
fn a_model_without_a_speed_is_named() {
    let mut s = speeds();
    s.remove("factscore-phi");
    let e = estimate(&sweep(), &[10, 10], &s, FLEET, Stated::default(), None).unwrap_err();
    assert!(e.contains("factscore-phi") && e.contains("--server"), "{e}");
}

#[test]
fn afc_jobs_join_their_decomposers_queues() {
    let text = format!(
        "{SWEEP}\n[afc]\njudge = \"qwen3-8b\"\n[[afc.datasets]]\nid = \"covid\"\npath = \"c.jsonl\"\n"
    );
    let sweep =
        crate::sweep::parse(&text, Path::new("sweeps/x.toml"), Path::new("sweeps")).unwrap();
    let afc = sweep.afc.clone().unwrap();
    let lens = [60, 5];
    let mut c = counts(&sweep, &lens);
    let before: Vec<u64> = c.models.iter().map(|m| m.jobs).collect();
    let aggregations = c.aggregation_jobs;
    add_afc(&mut c, &sweep, &[21]);
    let shards = 21u64.div_ceil(u64::from(sweep.shard_size));
    for (m, b) in c.models.iter().zip(&before) {
        let more = if afc.decomposers.contains(&m.model) {
            shards * 3
        } else {
            0
        };
        assert_eq!(m.jobs, b + more, "{}", m.model);
    }
    let a = c.afc.as_ref().unwrap();
    assert_eq!(
        (a.claims, a.settings, a.jobs),
        (21, 3, afc.decomposers.len() as u64 * shards * 3)
    );
    assert_eq!(
        c.aggregation_jobs,
        aggregations + afc.decomposers.len() as u64 * 3
    );
}
