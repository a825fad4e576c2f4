//! `bench/contention.py` (issue 32's shared-machine benchmark), run over a stand-in for a
//! credence bench command: a Python one-liner that prints one JSON line per setting with
//! fixed rates. The script's quiet, loaded (beside busy processes at nice 10) and paired
//! runs each see those rates, so its figures are known: the loaded share 1, the pair's
//! sum twice the quiet rate, its rows in the settings' numeric order (32 before 128);
//! and a command that fails stops it with its exit status.

use super::workspace;
use std::process::{Command, Output};

/// Prints the rates of two settings, then exits with `status`.
fn stand_in(status: i32) -> String {
    format!(
        "import json, sys\n\
         print('a log line, not JSON')\n\
         print(json.dumps({{'batch_size': 32, 'sentences_per_s': 100.0, 'other': 7}}))\n\
         print(json.dumps({{'batch_size': 128, 'sentences_per_s': 40.0}}))\n\
         sys.exit({status})\n"
    )
}

fn contention(status: i32) -> Output {
    Command::new("python3")
        .arg(workspace().join("bench/contention.py"))
        .args([
            "--label",
            "t",
            "--key",
            "batch_size",
            "--rates",
            "sentences_per_s",
        ])
        .args([
            "--busy",
            "1",
            "--json",
            "--",
            "python3",
            "-c",
            &stand_in(status),
        ])
        .output()
        .expect("python3 runs")
}

#[test]
fn the_contention_benchmark_compares_quiet_loaded_and_paired_rates() {
    let out = contention(0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("the JSON line");
    let v: serde_json::Value = serde_json::from_str(last).expect(last);
    assert_eq!(v["label"], "t");
    assert_eq!(v["busy"], 1);
    let figures = v["figures"].as_array().expect("figures");
    let got: Vec<(i64, f64, f64, f64, f64, f64)> = figures
        .iter()
        .map(|f| {
            assert_eq!(f["rate"], "sentences_per_s");
            let n = |k: &str| f[k].as_f64().unwrap_or_else(|| panic!("{k} in {f}"));
            (
                f["setting"].as_i64().expect("setting"),
                n("quiet"),
                n("loaded"),
                n("loaded_share"),
                n("pair"),
                n("pair_share"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (32, 100.0, 100.0, 1.0, 200.0, 2.0),
            (128, 40.0, 40.0, 1.0, 80.0, 2.0)
        ]
    );
    // The table names each setting with its shares.
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    "t",
                    "128",
                    "sentences_per_s",
                    "40.0",
                    "40.0",
                    "1.00",
                    "80.0",
                    "2.00"
                ]),
        "{stdout}"
    );
}

#[test]
fn a_failing_command_stops_the_contention_benchmark_with_its_status() {
    let out = contention(3);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("exited with 3"), "{stderr}");
}
