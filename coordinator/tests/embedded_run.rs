//! End-to-end tests of `credence run` on the embedded engine: the real binary, a real
//! SQLite file, the shipped sample, and crashes (SIGKILL, Ctrl-C) in the middle.

mod common;

use common::{my_turn, sql, stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn credence() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_credence"));
    c.env("RUST_LOG", "warn");
    c
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run_sweep(sweep: &Path, db: &Path, extra: &[&str]) -> Output {
    credence()
        .arg("run")
        .arg(sweep)
        .arg("--db")
        .arg(db)
        .args(extra)
        .output()
        .expect("running credence")
}

/// How many of the shipped sample's examples the demo test runs. SmolLM2 on the CPU is
/// most of the test's time (about 4 s an example on a 2-core Zen 5), and the first 8
/// examples already give every table of the report figures (both gate decisions, split
/// claims, self-repair calls: on them the gate kept 6 and opened 18 lists, the rule tier
/// split 12 and SmolLM2's self_repair made 16 calls); the README's command runs all 42.
const DEMO_EXAMPLES: usize = 8;

/// examples/demo.toml, unchanged, beside the first [`DEMO_EXAMPLES`] lines of
/// examples/sample.jsonl (the sweep names its dataset relative to itself).
fn demo_on_part_of_the_sample(dir: &Path) -> PathBuf {
    let sample = std::fs::read_to_string(workspace().join("examples/sample.jsonl")).unwrap();
    assert!(sample.lines().count() >= 30, "the shipped sample shrank");
    let part: String = sample
        .lines()
        .take(DEMO_EXAMPLES)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join("sample.jsonl"), part).unwrap();
    let sweep = dir.join("demo.toml");
    std::fs::copy(workspace().join("examples/demo.toml"), &sweep).unwrap();
    sweep
}

#[test]
fn demo_sweep_fills_the_store_and_reruns_without_work() {
    let _turn = my_turn();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("credence.db");
    let sweep = demo_on_part_of_the_sample(dir.path());
    let first = run_sweep(&sweep, &db, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let n_examples = DEMO_EXAMPLES;
    let rows: usize = sql(&db, "select count(*) from example_metrics")
        .parse()
        .unwrap();
    assert_eq!(rows, n_examples * 3 * 4);
    let table = stdout(&first);
    // 3 decomposers x 1 dataset x 4 modes, plus header and rule.
    assert_eq!(
        table.lines().filter(|l| l.contains(" sample ")).count(),
        12,
        "{table}"
    );
    assert!(
        stderr(&first).contains("0 already done"),
        "{}",
        stderr(&first)
    );

    let second = run_sweep(&sweep, &db, &[]);
    assert!(second.status.success());
    assert_eq!(stdout(&second), table);
    assert!(
        stderr(&second).contains(", 0 run now"),
        "{}",
        stderr(&second)
    );
    assert_eq!(
        sql(&db, "select count(*) from example_metrics"),
        rows.to_string()
    );
    // Each mode's rows name the pipeline behind them: the rule tier for `repair`, the
    // gate and the rule tier for `all` (and SmolLM2's one self-repair call after it), the
    // LLM tier for SmolLM2's `self_repair`, and nothing for the baselines' `self_repair`,
    // which needs an LLM they do not have.
    let versions = |model: &str| {
        sql(
            &db,
            &format!(
                "select group_concat(mode || ':' || pipeline_version, ',') from \
                 (select distinct mode, pipeline_version from predictions \
                  where model = '{model}' order by mode)"
            ),
        )
    };
    assert_eq!(
        versions("sentence-split"),
        "all:gate+rule-1,base:base,repair:rule-1,self_repair:none"
    );
    let smollm2 = versions("smollm2-135m");
    assert!(
        smollm2.contains("self_repair:self-repair-v1")
            && smollm2.contains("all:gate+rule-1+self-repair-v1")
            && smollm2.contains("base:base"),
        "{smollm2}"
    );
    // SmolLM2 was called: one base decomposition per example, and self-repair calls.
    let calls: usize = sql(
        &db,
        "select coalesce(sum(llm_calls), 0) from predictions where model = 'smollm2-135m' \
         and mode = 'self_repair'",
    )
    .parse()
    .unwrap();
    assert!(calls > 0, "SmolLM2 made no self-repair call");
    // The repair mode split some of the sentence splitter's compound claims, and says so.
    assert_ne!(
        sql(
            &db,
            "select count(*) from predictions where mode = 'repair' and repair_json like '%\"split\"%'"
        ),
        "0"
    );
    // `all` opened the gate for the failing bases only, and kept the passing ones.
    let gate = |decision: &str| {
        sql(
            &db,
            &format!(
                "select count(*) from predictions where mode = 'all' and repair_json like '%\"gate\":\"{decision}\"%'"
            ),
        )
    };
    assert_ne!(gate("kept"), "0");
    assert_ne!(gate("opened"), "0");

    the_report_prints_every_table_in_every_format(&db, dir.path());
    the_view_browses_the_run_in_chromium(&db);
}

fn report(db: &Path, args: &[&str]) -> String {
    let out = credence()
        .args(["report", "demo", "--db"])
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// `credence report` on the finished demo: every table in Markdown, LaTeX (which
/// pdflatex compiles), CSV and JSON, with figures that match the stored aggregates.
fn the_report_prints_every_table_in_every_format(db: &Path, dir: &Path) {
    let md = report(db, &["--format", "md"]);
    for title in [
        "### Results on sample",
        "### Seconds per example by mode",
        "### Semantic-F1 vs Jaccard-F1 on sample",
        "### Baselines on sample",
        "### Matching ablation on sample",
        "### RR at each tau_dup on sample",
        "### Rule repair passes over the base claims (3 passes)",
        "### Gating false negatives",
        "### Paired comparisons on sample",
    ] {
        assert!(md.contains(title), "{title} missing:\n{md}");
    }
    assert!(!md.contains("Not available"), "{md}");
    // The timing table's LLM calls per example (PAPER.md asks for the rate per mode): one
    // base call for SmolLM2, more in self_repair where the LLM tier was called, none for
    // the sentence splitter.
    let timing = md
        .split("### Seconds per example by mode")
        .nth(1)
        .and_then(|rest| rest.split("###").next())
        .unwrap();
    let calls = |model: &str, mode: &str| -> f64 {
        let prefix = format!("| {model} | {mode} |");
        let line = timing
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no timing line {prefix}:\n{timing}"));
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        cells
            .last()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{line}"))
    };
    assert_eq!(calls("smollm2-135m", "base"), 1.0);
    assert!(calls("smollm2-135m", "self_repair") > 1.0, "{timing}");
    assert_eq!(calls("sentence-split", "all"), 0.0);
    // The main table's AVR of the sentence splitter's repair mode, as stored, with its
    // interval, in bold (repair lowers AVR).
    let stored = sql(
        db,
        "select printf('%.3f [%.3f, %.3f]', mean, ci_low, ci_high) from aggregates \
         where model = 'sentence-split' and mode = 'repair' and metric = 'avr'",
    );
    assert!(
        md.lines()
            .any(|l| l.starts_with("| sentence-split | repair |")
                && l.contains(&format!("**{stored}**"))),
        "{stored}:\n{md}"
    );

    let json: serde_json::Value = serde_json::from_str(&report(db, &["--format", "json"])).unwrap();
    let tables = json["tables"].as_object().unwrap();
    // Every table family, each with its figures.
    for (name, list) in tables {
        for t in list.as_array().unwrap() {
            assert!(t["unavailable"].is_null(), "{name}: {t}");
            assert!(!t["rows"].as_array().unwrap().is_empty(), "{name}: {t}");
        }
    }
    assert_eq!(tables.len(), 9, "{:?}", tables.keys());
    assert_eq!(json["tables"]["main"][0]["columns"][2], "Semantic-F1");
    assert_eq!(
        json["tables"]["main"][0]["rows"].as_array().unwrap().len(),
        12
    );

    let csv = report(db, &["--format", "csv", "--table", "gating"]);
    assert!(csv.starts_with("table,dataset,row,column,value,ci_low,ci_high,bold\n"));
    assert!(
        csv.lines().skip(1).all(|l| l.starts_with("gating,")),
        "{csv}"
    );

    the_html_report_renders_its_plots(&report(db, &["--format", "html"]), dir);
    // With the view's address, each figure of a model x mode table links to its examples.
    let linked = report(
        db,
        &[
            "--format",
            "html",
            "--table",
            "main",
            "--view-addr",
            "127.0.0.1:8321",
        ],
    );
    assert!(
        linked.contains(
            "href=\"http://127.0.0.1:8321/?dataset=sample&amp;model=smollm2-135m&amp;mode=repair&amp;sort=semantic_f1.repair&amp;dir=asc\""
        ),
        "{linked}"
    );
    // 3 models x 4 modes x 5 figures.
    assert_eq!(linked.matches("<a href=").count(), 3 * 4 * 5, "{linked}");

    let tex = report(db, &["--format", "latex"]);
    let file = dir.join("report.tex");
    std::fs::write(&file, tex).unwrap();
    let pdf = Command::new("pdflatex")
        .args([
            "-interaction=nonstopmode",
            "-halt-on-error",
            "-output-directory",
        ])
        .arg(dir)
        .arg(&file)
        .output()
        .expect("pdflatex is installed by scripts/setup");
    assert!(
        pdf.status.success() && dir.join("report.pdf").exists(),
        "{}",
        String::from_utf8_lossy(&pdf.stdout)
    );
}

/// Examples in [`big_sweep`]: 120 shards of 3, 960 jobs (2 models x 4 modes), so that the
/// kills below (after 50 to 180 jobs) land mid-run, while a whole run stays short.
const BIG: usize = 360;

/// A larger sweep over generated sentences, so that a kill lands mid-run.
fn big_sweep(dir: &Path, name: &str) -> PathBuf {
    let mut lines = String::new();
    for i in 0..BIG {
        lines.push_str(&format!(
            "{{\"id\": \"x{i}\", \"text\": \"The plant in town {i} closed in {y} and {n} workers lost their jobs because demand fell.\", \"references\": [\"The plant in town {i} closed in {y}.\", \"{n} workers lost their jobs.\", \"Demand fell.\"]}}\n",
            y = 1950 + i % 70,
            n = 10 + i
        ));
    }
    std::fs::write(dir.join("big.jsonl"), lines).unwrap();
    let sweep = dir.join(format!("{name}.toml"));
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"{name}\"\nshard_size = 3\n\n[[models]]\nname = \"split\"\nbackend = \"sentence-split\"\n\n[[models]]\nname = \"oracle\"\nbackend = \"conjunction-oracle\"\n\n[[datasets]]\nid = \"big\"\npath = \"big.jsonl\"\n"
        ),
    )
    .unwrap();
    sweep
}

fn wait_for_done_jobs(db: &Path, at_least: usize, child: &mut std::process::Child) {
    let start = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("credence ended ({status}) before it could be interrupted");
        }
        if db.exists() {
            let out = Command::new("sqlite3")
                .arg(db)
                .arg("select count(*) from jobs where state = 'done'")
                .output()
                .unwrap();
            let n: usize = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or(0);
            if n >= at_least {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no progress within 2 minutes"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn metrics_dump(db: &Path) -> String {
    sql(
        db,
        "select model, dataset, mode, example_id, n_claims, printf('%.17g', jaccard_f1) from example_metrics order by 1,2,3,4",
    )
}

#[test]
fn sigkill_mid_run_then_rerun_gives_the_same_results_without_duplicates() {
    let _turn = my_turn();
    let dir = tempfile::tempdir().unwrap();
    let sweep = big_sweep(dir.path(), "crash");
    let reference_db = dir.path().join("reference.db");
    let reference = run_sweep(&sweep, &reference_db, &["--quiet"]);
    assert!(reference.status.success(), "{}", stderr(&reference));
    let total_jobs: usize = sql(&reference_db, "select count(*) from jobs")
        .parse()
        .unwrap();

    let db = dir.path().join("killed.db");
    let mut kills = 0;
    for round in 0..3 {
        let mut child = credence()
            .arg("run")
            .arg(&sweep)
            .arg("--db")
            .arg(&db)
            .args(["--quiet", "--workers", "2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let done: usize = if db.exists() {
            sql(&db, "select count(*) from jobs where state = 'done'")
                .parse()
                .unwrap()
        } else {
            0
        };
        wait_for_done_jobs(&db, done + 50 + round * 10, &mut child);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        let done_now: usize = sql(&db, "select count(*) from jobs where state = 'done'")
            .parse()
            .unwrap();
        assert!(done_now < total_jobs, "the run finished before the kill");
    }
    assert_eq!(kills, 3);
    let rerun = run_sweep(&sweep, &db, &["--quiet"]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert_eq!(
        stdout(&rerun).lines().next(),
        stdout(&reference).lines().next()
    );
    assert_eq!(
        stdout(&rerun).replace(&db.display().to_string(), "DB"),
        stdout(&reference).replace(&reference_db.display().to_string(), "DB")
    );
    assert_eq!(metrics_dump(&db), metrics_dump(&reference_db));
    assert_eq!(
        sql(&db, "select count(*) from jobs where state <> 'done'"),
        "0"
    );
}

#[test]
fn ctrl_c_stops_cleanly_and_rerun_continues() {
    let _turn = my_turn();
    let dir = tempfile::tempdir().unwrap();
    let sweep = big_sweep(dir.path(), "interrupt");
    let db = dir.path().join("int.db");
    let mut child = credence()
        .arg("run")
        .arg(&sweep)
        .arg("--db")
        .arg(&db)
        .args(["--quiet", "--workers", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_done_jobs(&db, 20, &mut child);
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("run the same command again to continue"));
    let rerun = run_sweep(&sweep, &db, &["--quiet"]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert_eq!(
        sql(&db, "select count(*) from jobs where state <> 'done'"),
        "0"
    );
    assert_eq!(
        sql(&db, "select count(*) from example_metrics"),
        (BIG * 2 * 4).to_string()
    );
}

#[test]
fn invalid_inputs_fail_with_one_line_and_write_nothing() {
    let _turn = my_turn();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ok.jsonl"),
        "{\"id\": \"a\", \"text\": \"A and B.\", \"references\": [\"A.\"]}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("bad.jsonl"), "{\"id\": \"a\", \"text\": \"A.\", \"references\": [\"A.\"]}\n{\"id\": \"a\", \"text\": \"B.\", \"references\": [\"B.\"]}\n").unwrap();
    let cases = [
        ("[sweep]\nname = \"v\"\nmodes = [\"fix\"]\n[[models]]\nname = \"m\"\nbackend = \"sentence-split\"\n[[datasets]]\nid = \"d\"\npath = \"ok.jsonl\"\n", "v.toml:3:10: unknown mode \"fix\"; expected base, repair, self_repair, all"),
        ("[sweep]\nname = \"v\"\n[[models]]\nname = \"m\"\nbackend = \"sentence-split\"\n[[datasets]]\nid = \"d\"\npath = \"bad.jsonl\"\n", "bad.jsonl:2: duplicate id \"a\" (first used on line 1)"),
        ("[sweep]\nname = \"v\"\n[[models]]\nname = \"m\"\nbackend = \"sentence-split\"\n[[datasets]]\nid = \"d\"\npath = \"missing.jsonl\"\n", "missing.jsonl: No such file or directory"),
        ("[sweep]\nname = \"v\"\n[[models]]\nname = \"m\"\nbackend = \"gguf\"\npath = \"x.gguf\"\n[[datasets]]\nid = \"d\"\npath = \"ok.jsonl\"\n", "x.gguf: no such GGUF file"),
    ];
    for (text, want) in cases {
        let sweep = dir.path().join("v.toml");
        std::fs::write(&sweep, text).unwrap();
        let db = dir.path().join("never.db");
        let out = run_sweep(&sweep, &db, &[]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains(want), "want {want:?} in {err:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(!db.exists(), "a failed validation created the database");
        assert!(
            err.matches("(os error").count() <= 1,
            "the I/O reason is said twice: {err}"
        );
    }
    let out = run_sweep(
        &dir.path().join("absent.toml"),
        &dir.path().join("never.db"),
        &[],
    );
    let err = stderr(&out);
    assert!(
        err.contains("absent.toml: No such file or directory"),
        "{err}"
    );
    assert_eq!(err.matches("(os error").count(), 1, "{err}");
}

/// The timing table's input, seconds per example and stage beside the results, and the
/// table with the paper's `verify` line (base plus the verifier) from the `base` jobs.
#[test]
fn the_timing_table_has_a_line_per_model_and_mode() {
    let _turn = my_turn();
    let dir = tempfile::tempdir().unwrap();
    let demo = std::fs::read_to_string(workspace().join("examples/baselines.toml")).unwrap();
    let sample = workspace().join("examples/sample.jsonl");
    let sweep_text = demo
        .replace(
            "modes = [\"base\", \"repair\", \"self_repair\", \"all\"]",
            "modes = [\"base\", \"repair\"]",
        )
        .replace("name = \"baselines\"", "name = \"timed\"")
        .replace(
            "path = \"sample.jsonl\"",
            &format!("path = {:?}", sample.display().to_string()),
        );
    assert!(
        sweep_text.contains("modes = [\"base\", \"repair\"]") && sweep_text.contains("timed"),
        "examples/baselines.toml changed shape"
    );
    let sweep = dir.path().join("timed.toml");
    std::fs::write(&sweep, sweep_text).unwrap();
    let db = dir.path().join("timed.db");
    let run = run_sweep(&sweep, &db, &[]);
    assert!(run.status.success(), "{}", stderr(&run));

    // Every example has its decompose, parse, embed, verify and metrics seconds in both
    // modes, and the repair mode its repair seconds.
    let n: usize = sql(&db, "select count(*) from predictions where mode = 'base'")
        .parse()
        .unwrap();
    assert!(n >= 60, "{n}");
    for stage in ["decompose", "parse", "embed", "verify", "metrics"] {
        assert_eq!(
            sql(
                &db,
                &format!(
                    "select count(*) from stage_seconds where stage = '{stage}' and seconds > 0"
                )
            ),
            (2 * n).to_string(),
            "{stage}"
        );
    }
    assert_eq!(
        sql(
            &db,
            "select count(*) from stage_seconds where stage = 'repair' and mode = 'repair'"
        ),
        n.to_string()
    );

    let out = credence()
        .args(["report", "timed", "--timing", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let table: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let table = table.as_array().unwrap();
    // 2 models x (base, verify, repair), each over every example of the model.
    assert_eq!(table.len(), 6, "{table:?}");
    for line in table {
        assert_eq!(line["examples"].as_u64(), Some((n / 2) as u64), "{line}");
        assert!(line["mean"].as_f64().unwrap() > 0.0, "{line}");
    }
    let mean = |model: &str, mode: &str| {
        table
            .iter()
            .find(|l| l["model"] == model && l["mode"] == mode)
            .and_then(|l| l["mean"].as_f64())
            .unwrap_or_else(|| panic!("no {model} {mode} line: {table:?}"))
    };
    for model in ["sentence-split", "conjunction-oracle"] {
        // The same base rows: verify is base plus its parse, embed and verify seconds.
        assert!(mean(model, "base") < mean(model, "verify"), "{model}");
    }
    let text = credence()
        .args(["report", "timed", "--timing", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = stdout(&text);
    assert!(text.starts_with("model "), "{text}");
    assert_eq!(text.lines().count(), 7, "{text}");

    audits_agree_with_the_stored_modes(&db, n);
}

/// The sweep file's `[verifier] advcl_requires_subject` key reaches the stored metrics:
/// a participial adjunct ("saying she was tired", an `advcl` without a subject) is a
/// boundary node by default and none with the key set.
#[test]
fn the_advcl_requires_subject_key_reaches_the_stored_avr() {
    let _turn = my_turn();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("one.jsonl"),
        "{\"id\": \"a\", \"text\": \"She smiled, saying she was tired.\", \"references\": [\"She smiled.\"]}\n",
    )
    .unwrap();
    let avr = |key: &str| {
        let sweep = dir.path().join(format!("advcl-{key}.toml"));
        std::fs::write(
            &sweep,
            format!(
                "[sweep]\nname = \"advcl\"\nmodes = [\"base\"]\n\n[verifier]\n{key}\n\n\
                 [[models]]\nname = \"sentence-split\"\nbackend = \"sentence-split\"\n\n\
                 [[datasets]]\nid = \"one\"\npath = \"one.jsonl\"\n"
            ),
        )
        .unwrap();
        let db = dir.path().join(format!("advcl-{}.db", key.len()));
        let run = run_sweep(&sweep, &db, &[]);
        assert!(run.status.success(), "{key}: {}", stderr(&run));
        sql(
            &db,
            "select group_concat(m, ',') from (select metric || '=' || value as m \
             from metric_values where metric in ('avr', 'n_viol') order by metric)",
        )
    };
    assert_eq!(avr("advcl_requires_subject = true"), "avr=0.0,n_viol=0.0");
    assert_eq!(avr("advcl_requires_subject = false"), "avr=1.0,n_viol=1.0");
}

/// `credence audit` on the finished base + repair run: the convergence audit's first pass
/// is the repair mode again (one pass, the same parser, encoder and settings), the tier's
/// guard keeps n_viol and EPR from getting worse, and the gating table counts the
/// examples whose repair claims equal their base claims.
fn audits_agree_with_the_stored_modes(db: &Path, n: usize) {
    let out = credence()
        .args([
            "audit",
            "convergence",
            "timed",
            "--passes",
            "3",
            "--json",
            "--db",
        ])
        .arg(db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        let model = row["model"].as_str().unwrap();
        assert_eq!(row["n"].as_u64(), Some((n / 2) as u64), "{model}");
        let passes = row["per_pass"].as_array().unwrap();
        assert_eq!(passes.len(), 4, "{model}");
        for (pass, mode) in [(0, "base"), (1, "repair")] {
            for metric in ["avr", "epr", "rr", "semantic_f1"] {
                let stored: f64 = sql(
                    db,
                    &format!(
                        "select avg({metric}) from results where model = '{model}' and mode = '{mode}'"
                    ),
                )
                .parse()
                .unwrap();
                let audited = passes[pass][metric].as_f64().unwrap();
                assert!(
                    (stored - audited).abs() < 1e-6,
                    "{model} pass {pass} {metric}: audit {audited} vs stored {mode} {stored}"
                );
            }
        }
        assert_eq!(row["t1"]["n_viol_rose"].as_u64(), Some(0), "{row}");
        assert_eq!(row["t1"]["epr_fell"].as_u64(), Some(0), "{row}");
        let fixed: u64 = row["fixed_points"]["examples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum();
        let not_reached = row["fixed_points"]["not_reached"].as_u64().unwrap();
        assert_eq!(fixed + not_reached, (n / 2) as u64, "{row}");
        assert!(row["p2_better"].as_u64().is_some(), "{row}");
    }
    let text = credence()
        .args(["audit", "convergence", "timed", "--passes", "2", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(text.status.success(), "{}", stderr(&text));
    let text = stdout(&text);
    assert!(text.contains("overall P2 better: "), "{text}");

    let out = credence()
        .args(["audit", "gating", "timed", "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let overall = rows.as_array().unwrap().last().unwrap().clone();
    assert!(overall["model"].is_null(), "{overall}");
    assert_eq!(overall["n"].as_u64(), Some(n as u64));
    let gated: f64 = sql(
        db,
        "select count(*) from predictions b join predictions r
           on r.run_id = b.run_id and r.model = b.model and r.example_id = b.example_id
         where b.mode = 'base' and r.mode = 'repair' and r.claims_json = b.claims_json",
    )
    .parse()
    .unwrap();
    assert!(
        (overall["gated"].as_f64().unwrap() - gated / n as f64).abs() < 1e-9,
        "{overall}"
    );
}

/// The HTML report is one file that needs nothing from the network, and headless
/// Chromium renders its plots: a screenshot is taken, and the rendered page holds the
/// plots' SVG elements with their drawn marks and labels.
fn the_html_report_renders_its_plots(html: &str, dir: &Path) {
    assert!(html.starts_with("<!DOCTYPE html>"), "{}", &html[..100]);
    assert!(!html.contains(" src=") && !html.contains(" href=") && !html.contains("<script"));
    // 5 metrics by model x mode, and 5 forest plots of mode - base.
    assert_eq!(html.matches("<svg class=\"plot\"").count(), 10);
    let page = dir.join("report.html");
    std::fs::write(&page, html).unwrap();
    let chromium = |args: &[&str]| {
        let out = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .args(args)
            .arg(format!("file://{}", page.display()))
            .output()
            .expect("chromium is installed by scripts/setup");
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let shot = dir.join("report.png");
    chromium(&[
        "--window-size=1300,2000",
        &format!("--screenshot={}", shot.display()),
    ]);
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    let dom = stdout(&chromium(&["--dump-dom"]));
    assert_eq!(dom.matches("<svg class=\"plot\"").count(), 10, "{dom}");
    // Drawn error bars (lines and circles) and axis labels naming the configurations.
    assert!(dom.matches("<circle").count() >= 10 * 6, "{dom}");
    assert!(dom.contains("sentence-split / repair"), "{dom}");
    assert!(dom.contains("<h3>Results on sample</h3>"), "{dom}");
}

/// Headless Chromium's `args` on `url`; its standard output.
fn chromium_on(url: &str, args: &[&str]) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("chromium is installed by scripts/setup");
    assert!(out.status.success(), "{url}: {}", stderr(&out));
    stdout(&out)
}

/// A page as Chromium rendered it (its DOM after the page's script ran), and its
/// screenshot at `shot`.
fn rendered(url: &str, shot: &Path, height: u32) -> String {
    chromium_on(
        url,
        &[
            &format!("--window-size=1440,{height}"),
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{}: {} bytes",
        shot.display(),
        png.len()
    );
    chromium_on(url, &["--dump-dom"])
}

/// Text as Chromium writes it in a dumped DOM's text nodes.
fn dom_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `credence view` on the finished demo, in headless Chromium: the list loads with a row
/// per example and model, a filter and a sort change its rows as the store says they
/// should, and an example page shows each mode's claims, the rule tier's steps and
/// SmolLM2's raw completion. Screenshots of each page are kept under the target
/// directory (`CARGO_TARGET_TMPDIR/view`).
fn the_view_browses_the_run_in_chromium(db: &Path) {
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("view");
    std::fs::create_dir_all(&shots).unwrap();
    let addr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let mut child = credence()
        .args(["view", "demo", "--addr", &addr, "--db"])
        .arg(db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::net::TcpStream::connect(&addr).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("credence view ended ({status}): {err}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "credence view did not listen in 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let base = format!("http://{addr}");
    let checks = std::panic::catch_unwind(|| {
        // The list: every example of every model.
        let list = rendered(&format!("{base}/"), &shots.join("list.png"), 1000);
        let all = common::listed_rows(&list);
        assert_eq!(all.len(), DEMO_EXAMPLES * 3, "{list}");
        assert!(
            list.contains(&format!("{} examples", DEMO_EXAMPLES * 3)),
            "{list}"
        );
        // A filter: base claims with an atomicity boundary, as many as the store has.
        let filtered = common::listed_rows(&rendered(
            &format!("{base}/?mode=base&check=non_atomic"),
            &shots.join("list-non-atomic.png"),
            1000,
        ));
        let expected: usize = sql(
            db,
            "select count(*) from example_metrics where mode = 'base' and n_viol > 0",
        )
        .parse()
        .unwrap();
        assert_eq!(filtered.len(), expected);
        assert!(0 < expected && expected < all.len(), "{expected}");
        // A sort: base's Semantic-F1 from the lowest, as the store orders it.
        let sorted = common::listed_rows(&rendered(
            &format!("{base}/?sort=semantic_f1.base&dir=asc"),
            &shots.join("list-sorted.png"),
            1000,
        ));
        assert_eq!(sorted.len(), all.len());
        assert_ne!(sorted, all);
        let lowest = sql(
            db,
            "select model || '/' || example_id from example_metrics where mode = 'base' \
             order by semantic_f1, dataset, model, example_id limit 1",
        );
        assert_eq!(sorted[0], lowest);

        // An example SmolLM2 decomposed and the rule tier split.
        let id = sql(
            db,
            "select example_id from predictions where model = 'smollm2-135m' and mode = 'repair' \
             and repair_json like '%\"split\"%' order by example_id limit 1",
        );
        assert!(!id.is_empty(), "no SmolLM2 example the rule tier split");
        let at = all
            .iter()
            .position(|r| *r == format!("smollm2-135m/{id}"))
            .unwrap();
        let page = rendered(
            &format!("{base}/example?ds=sample&md=smollm2-135m&id={id}&at={at}"),
            &shots.join("example.png"),
            2400,
        );
        for mode in ["base", "repair", "self_repair", "all"] {
            assert!(
                page.contains(&format!("data-mode=\"{mode}\"")),
                "{mode}: {page}"
            );
            let claims: Vec<String> = serde_json::from_str(&sql(
                db,
                &format!(
                    "select claims_json from predictions where model = 'smollm2-135m' \
                     and mode = '{mode}' and example_id = '{id}'"
                ),
            ))
            .unwrap();
            let block = page
                .split(&format!("data-mode=\"{mode}\""))
                .nth(1)
                .unwrap()
                .split("class=\"mode\"")
                .next()
                .unwrap();
            // Each claim is shown, its words perhaps split by a boundary mark.
            let text = block
                .replace("<mark class=\"boundary\"", "\u{0}")
                .split('\u{0}')
                .map(|s| {
                    s.split_once('>')
                        .map_or(s, |(_, rest)| rest)
                        .replace("</mark>", "")
                })
                .collect::<String>();
            for claim in &claims {
                assert!(text.contains(&dom_text(claim)), "{mode}: {claim}\n{block}");
            }
        }
        assert!(page.contains("<b>split</b> claim"), "{page}");
        assert!(page.contains("id=\"completion\""), "{page}");
        assert!(page.contains("self-repair answer (raw)"), "{page}");
        assert!(page.contains("rel=\"next\""), "{page}");
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(panic) = checks {
        std::panic::resume_unwind(panic);
    }
}

/// `GET /metrics` from a local address, raw HTTP/1.0 (the body, or `None` while nothing
/// answers).
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// The sum of a family's samples whose line starts with `prefix` (name and labels).
fn sample_sum(body: &str, prefix: &str) -> f64 {
    body.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `credence run --metrics-addr` serves the job path's families while the embedded run
/// works: jobs and examples done, seconds per stage, job seconds, up.
#[test]
fn the_embedded_run_serves_prometheus_metrics() {
    let _turn = my_turn();
    let dir = tempfile::tempdir().unwrap();
    let sweep = big_sweep(dir.path(), "watched");
    let db = dir.path().join("watched.db");
    let addr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let mut child = credence()
        .arg("run")
        .arg(&sweep)
        .arg("--db")
        .arg(&db)
        .args(["--quiet", "--workers", "2", "--metrics-addr", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let body = loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("credence ended ({status}) before its metrics were scraped");
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no jobs counted in 120 s"
        );
        if let Some(body) = scrape(&addr) {
            if sample_sum(&body, "credence_jobs_total{") >= 20.0 {
                break body;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(sample_sum(&body, "credence_worker_up") == 1.0, "{body}");
    assert!(
        sample_sum(&body, "credence_examples_processed_total{") >= 20.0 * 3.0,
        "{body}"
    );
    for stage in ["decompose", "parse", "verify", "metrics", "store"] {
        assert!(
            body.lines()
                .any(|l| l.starts_with("credence_stage_seconds_count{")
                    && l.contains(&format!("stage=\"{stage}\""))
                    && !l.ends_with(" 0")),
            "no {stage} seconds:\n{body}"
        );
    }
    assert!(
        sample_sum(&body, "credence_job_seconds_count{") >= 20.0,
        "{body}"
    );
}
