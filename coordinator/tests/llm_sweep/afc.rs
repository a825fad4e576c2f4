//! Downstream fact-checking in both engines (issue 30): a sweep with `[afc]` and no
//! decomposition dataset, whose one model both decomposes (CREDENCE prompt in `repair`
//! mode, and the FActScore prompt) and judges, behind a local OpenAI-compatible server
//! whose judgements follow a rule this test knows. The stored judgements and compound
//! verdicts, and the accuracy, macro-F1 and AUC that `credence report --table afc`
//! prints, equal what this test computes on its own; each (claim, evidence) prompt is sent
//! once, and running the sweep again sends nothing. A prompt the judge refuses for its
//! content counts as an answer with no label and is recorded as the claim's error.

use super::llm_server::{decompose_answer, LlmServer, Reply};
use super::support::Cluster;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const EVIDENCE: &str = "The stations logged the weather.";
const FACTSCORE_ASK: &str = "Please breakdown the following sentence into independent facts: ";

/// The judge's rule on one claim: (label, score), `None` for an answer with no label
/// (or, for an "overlong" claim, a request the server refuses).
fn rule(claim: &str) -> Option<(&'static str, f64)> {
    if claim.contains("overlong") {
        None
    } else if claim.contains("snow") {
        Some(("CONTRADICT", -0.7))
    } else if claim.contains("maybe") {
        None
    } else if claim.contains("rain") {
        Some(("SUPPORT", 0.8))
    } else {
        Some(("NEUTRAL", 0.1))
    }
}

/// The server: judgements by [`rule`], CREDENCE decompositions split at "and"/"but",
/// FActScore decompositions the same parts as bullets plus one hedged fact.
fn script(_: usize, user: &str) -> Reply {
    if let Some(rest) = user.strip_prefix("EVIDENCE: ") {
        let claim = rest.split("\nCLAIM: ").nth(1).unwrap_or_default();
        if claim.contains("overlong") {
            return Reply::Status(400, "maximum context length exceeded".into(), None);
        }
        return Reply::Answer(match rule(claim) {
            Some((label, score)) => format!("{label} {score}"),
            None => "I cannot tell.".into(),
        });
    }
    if let Some(at) = user.rfind(FACTSCORE_ASK) {
        let target = &user[at + FACTSCORE_ASK.len()..];
        let mut bullets: Vec<String> = decompose_answer(target)
            .lines()
            .map(|l| format!("- {l}"))
            .collect();
        bullets.push("- It maybe happened.".into());
        return Reply::Answer(bullets.join("\n"));
    }
    Reply::Decompose
}

/// One claim of the test's AFC dataset.
struct Claim {
    id: String,
    text: String,
    support: bool,
}

fn claims(n: usize) -> Vec<Claim> {
    (0..n)
        .map(|i| Claim {
            id: format!("c{i:02}"),
            text: match i % 4 {
                0 => format!("Station {i} saw rain and the river {i} rose."),
                1 => format!(
                    "Station {i} saw rain, and town {i} saw rain and the field {i} stayed dry."
                ),
                2 => format!("Station {i} saw snow and town {i} saw rain."),
                _ if i == 7 => format!("Station {i} sent an overlong report of rain."),
                _ => format!("Station {i} maybe saw rain."),
            },
            support: i % 3 == 0,
        })
        .collect()
}

fn write_afc(dir: &Path, claims: &[Claim]) -> PathBuf {
    let mut data = String::new();
    for c in claims {
        let line = serde_json::json!({
            "id": c.id, "text": c.text,
            "label": if c.support { "SUPPORT" } else { "REFUTE" },
            "evidence": [EVIDENCE], "meta": {"source": "test"},
        });
        data.push_str(&format!("{line}\n"));
    }
    let path = dir.join("rainfact.jsonl");
    std::fs::write(&path, data).expect("AFC dataset");
    path
}

fn write_afc_sweep(dir: &Path, name: &str, base_url: &str, data: &Path) -> PathBuf {
    let sweep = dir.join(format!("{name}.toml"));
    std::fs::write(
        &sweep,
        format!(
            "[sweep]\nname = \"{name}\"\nshard_size = 5\n\n[bootstrap]\nresamples = 300\n\n\
             [[models]]\nname = \"llm\"\npreset = \"openai\"\nbase_url = \"{base_url}\"\n\
             api_model = \"test-model\"\nmax_new_tokens = 256\n\n\
             [afc]\njudge = \"llm\"\ndecomposition_mode = \"repair\"\nmax_new_tokens = 16\n\n\
             [[afc.datasets]]\nid = \"rainfact\"\npath = \"{}\"\n",
            data.display()
        ),
    )
    .expect("sweep");
    sweep
}

/// A stored claim of one setting: its verdict, score and judged (claim, label, score).
struct Stored {
    verdict: String,
    score: f64,
    n_subclaims: usize,
    judged: Vec<(String, String, f64)>,
}

/// Rows of `SELECT example_id, setting, verdict, score, n_subclaims, judged FROM
/// afc_examples`, tab-separated, as either engine prints them.
fn parse_rows(text: &str) -> HashMap<(String, String), Stored> {
    text.lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 6, "{line}");
            let judged: Vec<serde_json::Value> = serde_json::from_str(f[5]).expect("judged JSON");
            let judged = judged
                .iter()
                .map(|j| {
                    (
                        j["claim"].as_str().unwrap().to_string(),
                        j["label"].as_str().unwrap().to_string(),
                        j["score"].as_f64().unwrap(),
                    )
                })
                .collect();
            (
                (f[0].to_string(), f[1].to_string()),
                Stored {
                    verdict: f[2].to_string(),
                    score: f[3].parse().unwrap(),
                    n_subclaims: f[4].parse().unwrap(),
                    judged,
                },
            )
        })
        .collect()
}

/// Claims whose judge refused a prompt (c07's, in each setting), recorded with why.
const REFUSED_SQL: &str =
    "SELECT count(*) FROM afc_results WHERE error LIKE 'judge:%' AND example_id = 'c07'";

const ROWS_SQL: &str = "SELECT example_id || '\t' || setting || '\t' || verdict || '\t' || score \
     || '\t' || n_subclaims || '\t' || judged FROM afc_examples ORDER BY example_id, setting";

/// The sub-claims the test expects for a setting whose decomposition it can predict.
fn expected_claims(setting: &str, text: &str) -> Vec<String> {
    let parts: Vec<String> = decompose_answer(text).lines().map(String::from).collect();
    match setting {
        "none" => vec![text.to_string()],
        _ => {
            let mut facts = parts;
            facts.push("It maybe happened.".into());
            facts
        }
    }
}

/// PAPER.md's verdict: whole, SUPPORT iff the judge says SUPPORT; decomposed, SUPPORT
/// iff SUPPORT sub-claims are a strict majority; the score the mean.
fn verdict_of(judged: &[(String, String, f64)], whole: bool) -> (bool, f64) {
    let supports = judged.iter().filter(|j| j.1 == "SUPPORT").count();
    let mean = judged.iter().map(|j| j.2).sum::<f64>() / judged.len() as f64;
    if whole {
        (judged[0].1 == "SUPPORT", judged[0].2)
    } else {
        (2 * supports > judged.len(), mean)
    }
}

/// Accuracy, macro-F1 and AUC (every positive-negative pair, a tie a half).
fn metrics(gold: &[bool], pred: &[(bool, f64)]) -> [f64; 3] {
    let n = gold.len() as f64;
    let acc = gold.iter().zip(pred).filter(|(g, p)| **g == p.0).count() as f64 / n;
    let f1 = |label: bool| {
        let tp = gold
            .iter()
            .zip(pred)
            .filter(|(g, p)| **g == label && p.0 == label)
            .count();
        let fp = gold
            .iter()
            .zip(pred)
            .filter(|(g, p)| **g != label && p.0 == label)
            .count();
        let fn_ = gold
            .iter()
            .zip(pred)
            .filter(|(g, p)| **g == label && p.0 != label)
            .count();
        if tp == 0 {
            0.0
        } else {
            2.0 * tp as f64 / (2 * tp + fp + fn_) as f64
        }
    };
    let (mut wins, mut pairs) = (0.0, 0.0);
    for (g1, p1) in gold.iter().zip(pred) {
        for (g2, p2) in gold.iter().zip(pred) {
            if *g1 && !*g2 {
                pairs += 1.0;
                wins += if p1.1 > p2.1 {
                    1.0
                } else if p1.1 == p2.1 {
                    0.5
                } else {
                    0.0
                };
            }
        }
    }
    [acc, (f1(true) + f1(false)) / 2.0, wins / pairs]
}

/// Checks the stored rows and the reported table against the test's own computation.
fn check(claims: &[Claim], rows: &HashMap<(String, String), Stored>, report: &serde_json::Value) {
    assert_eq!(
        rows.len(),
        claims.len() * 3,
        "one row per claim and setting"
    );
    let gold: Vec<bool> = claims.iter().map(|c| c.support).collect();
    for setting in ["none", "credence", "factscore"] {
        let mut pred = Vec::new();
        for c in claims {
            let s = &rows[&(c.id.clone(), setting.to_string())];
            // Every judgement is the rule's on the claim judged.
            for (claim, label, score) in &s.judged {
                let (want_label, want_score) = rule(claim).unwrap_or(("NEUTRAL", 0.0));
                assert_eq!(
                    (label.as_str(), *score),
                    (want_label, want_score),
                    "{claim}"
                );
            }
            let judged_claims: Vec<String> = s.judged.iter().map(|j| j.0.clone()).collect();
            match setting {
                // The repair tier may reword the model's claims; they are judged as stored.
                "credence" => {
                    assert_eq!(s.n_subclaims, judged_claims.len(), "{}", c.text);
                    assert!(s.n_subclaims >= 1, "{}", c.text);
                }
                _ => assert_eq!(
                    judged_claims,
                    expected_claims(setting, &c.text),
                    "{}",
                    c.text
                ),
            }
            let (support, score) = verdict_of(&s.judged, setting == "none");
            assert_eq!(
                s.verdict,
                if support { "SUPPORT" } else { "REFUTE" },
                "{} {setting}",
                c.id
            );
            assert!((s.score - score).abs() < 1e-9);
            pred.push((support, score));
        }
        let want = metrics(&gold, &pred);
        let cell = report["afc"]["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["setting"] == setting)
            .unwrap_or_else(|| panic!("no {setting} cell in {report}"));
        assert_eq!(cell["n"], claims.len());
        for (k, got) in cell["metrics"].as_array().unwrap().iter().enumerate() {
            let got = got["value"].as_f64().unwrap();
            assert!(
                (got - want[k]).abs() < 1e-9,
                "{setting} metric {k}: {got} vs {}",
                want[k]
            );
        }
    }
    // The settings disagree on these claims, so the table has differences to show.
    let deltas = report["afc"]["deltas"].as_array().unwrap();
    assert_eq!(deltas.len(), 9, "three comparisons x three metrics");
}

/// Each judge prompt that was answered went to the server once (a refused one is not
/// cached, so each setting that needs it asks again).
fn judged_once(server: &LlmServer) -> usize {
    let judges: Vec<(String, usize)> = server
        .per_prompt()
        .into_iter()
        .filter(|(u, _)| u.starts_with("EVIDENCE: ") && !u.contains("overlong"))
        .collect();
    assert!(
        judges.iter().all(|(_, n)| *n == 1),
        "a judge prompt sent twice: {judges:?}"
    );
    judges.len()
}

#[test]
fn afc_verdicts_and_metrics_follow_the_rule_in_the_embedded_engine() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let rt = super::server_runtime();
    let server = rt.block_on(LlmServer::start(Duration::from_millis(5), script));
    let claims = claims(24);
    let data = write_afc(dir.path(), &claims);
    let sweep = write_afc_sweep(dir.path(), "afc", &server.base_url(), &data);
    let db = dir.path().join("afc.db");
    let run = || {
        let out = Command::new(env!("CARGO_BIN_EXE_credence"))
            .arg("run")
            .arg(&sweep)
            .arg("--db")
            .arg(&db)
            .output()
            .expect("running credence run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let printed = run();
    assert!(printed.contains("rainfact"), "the AFC summary: {printed}");
    let judged = judged_once(&server);
    assert!(judged > claims.len());
    let sent = server.requests();
    let rows = Command::new("sqlite3")
        .arg(&db)
        .arg(ROWS_SQL)
        .output()
        .expect("sqlite3");
    let rows = parse_rows(&String::from_utf8_lossy(&rows.stdout));
    let refused = Command::new("sqlite3")
        .arg(&db)
        .arg(REFUSED_SQL)
        .output()
        .expect("sqlite3");
    assert_eq!(String::from_utf8_lossy(&refused.stdout).trim(), "3");
    let report = Command::new(env!("CARGO_BIN_EXE_credence"))
        .args([
            "report", "afc", "--table", "afc", "--format", "json", "--db",
        ])
        .arg(&db)
        .output()
        .expect("credence report");
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).expect("JSON");
    check(&claims, &rows, &report);
    // Again: every job is done and every generation cached.
    run();
    assert_eq!(server.requests(), sent, "a rerun sends nothing");
}

#[test]
fn afc_verdicts_and_metrics_follow_the_rule_in_the_distributed_engine() {
    let Some(mut c) = Cluster::new("afc distributed", false) else {
        return;
    };
    let rt = super::server_runtime();
    let server = rt.block_on(LlmServer::start(Duration::from_millis(5), script));
    let claims = claims(24);
    let data = write_afc(c.dir.path(), &claims);
    let sweep = write_afc_sweep(c.dir.path(), "afc", &server.base_url(), &data);
    c.models = vec!["llm".into()];
    c.ok(&["sweep", "launch", &sweep.display().to_string()]);
    for _ in 0..2 {
        c.spawn_worker(&[]);
    }
    c.wait_settled("afc", Duration::from_secs(180));
    // 24 claims in shards of 5, three settings.
    assert_eq!(c.done_jobs("afc"), 5 * 3);
    judged_once(&server);
    let rows = parse_rows(&c.sql(ROWS_SQL));
    assert_eq!(c.sql_i64(REFUSED_SQL), 3);
    let report: serde_json::Value =
        serde_json::from_str(&c.ok(&["report", "afc", "--table", "afc", "--format", "json"]))
            .expect("JSON");
    check(&claims, &rows, &report);
    let sent = server.requests();
    c.ok(&["sweep", "launch", &sweep.display().to_string()]);
    std::thread::sleep(Duration::from_secs(2));
    c.wait_settled("afc", Duration::from_secs(60));
    assert_eq!(server.requests(), sent, "a relaunch sends nothing");
}
