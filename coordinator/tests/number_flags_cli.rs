//! The number flags of the real `credence` binary refuse what would panic or mean
//! nothing (`--grace inf` panicked in `Duration::from_secs_f64` when SIGTERM came): clap
//! rejects the value while parsing, so the command exits 2 with one error line naming
//! the flag, before it connects to anything.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `credence ARGS` with servers that cannot answer, so a flag that is not refused
/// would show as a command that does not exit; (exit code, stderr).
fn credence(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_credence"))
        .args(args)
        .env(
            "CREDENCE_DATABASE_URL",
            "postgres://credence@127.0.0.1:1/none",
        )
        .env("CREDENCE_BROKER_URL", "amqp://guest:guest@127.0.0.1:1/%2f")
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running credence");
    let started = Instant::now();
    while child.try_wait().expect("waiting for credence").is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            child.kill().expect("stopping credence");
            let out = child.wait_with_output().expect("reading credence's stderr");
            panic!(
                "credence {args:?} accepted the value and ran on: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("reading credence's stderr");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_numbers_are_refused_at_parse_time_with_the_flag_named() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = dir.path().join("s.toml");
    std::fs::write(&sweep, "name = \"x\"\n").unwrap();
    let sweep = sweep.to_str().unwrap();
    let worker = ["worker", "--models", "m"];
    let launch = ["sweep", "launch", sweep, "--follow"];
    let serve = ["coordinator", "serve"];
    let status = ["sweep", "status", "x", "--watch"];
    let verify = ["verify", "--source", "A and B.", "--claim", "A."];
    let build = [
        "dataset",
        "build",
        "wikisplit-bench-100",
        "--source",
        "none.tsv",
        "--out",
        "o.jsonl",
    ];
    let cases: Vec<(&[&str], &str, &str)> = vec![
        (&worker, "--grace", "inf"),
        (&worker, "--grace", "NaN"),
        (&worker, "--grace", "-1"),
        (&worker, "--grace", "1e20"),
        (&worker, "--heartbeat", "0"),
        (&worker, "--heartbeat", "inf"),
        (&launch, "--stale-after", "inf"),
        (&launch, "--reap-every", "-3"),
        (&serve, "--lost-after", "1e300"),
        (&status, "--interval", "inf"),
        (&verify, "--tau-dup", "NaN"),
        (&verify, "--min-epr", "1.5"),
        (&build, "--min-entailment", "inf"),
    ];
    for (command, flag, value) in cases {
        // `--flag=value`: `--grace -1` would read -1 as a flag, not as the value.
        let pair = format!("{flag}={value}");
        let mut args = command.to_vec();
        args.push(&pair);
        let (code, stderr) = credence(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(errors.len(), 1, "{args:?}: {stderr}");
        assert!(
            errors[0].contains(flag) && errors[0].contains(value),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn good_numbers_still_parse() {
    // `--help` after the flags: clap parses every value, then prints the help and exits
    // 0, so an accepted value shows as success without connecting anywhere.
    for args in [
        &[
            "worker",
            "--models",
            "m",
            "--grace",
            "0",
            "--heartbeat",
            "0.5",
            "--help",
        ][..],
        &[
            "coordinator",
            "serve",
            "--stale-after",
            "90",
            "--lost-after",
            "1.5",
            "--help",
        ],
        &["verify", "--tau-dup", "0.9", "--min-epr", "1", "--help"],
    ] {
        let (code, stderr) = credence(args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
}
