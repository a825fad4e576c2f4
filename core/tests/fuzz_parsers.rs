//! Fuzzing on stable Rust of the parsers that read what others wrote: the job-message
//! decoder (queue messages), the sweep TOML parser with its validation, and the dataset
//! JSONL loader. Each test starts from its committed seed corpus
//! (`tests/fuzz/corpus/<target>/`), then for a time budget mutates corpus files with a
//! seeded RNG (bit flips, interesting bytes, truncation, duplication, splicing between
//! files, tokens such as `1e400`, `-0`, huge integers and deep nesting) and calls the
//! real parser on each input. An input fails the test when the parser panics or takes
//! longer than [`INPUT_LIMIT`]; it is saved with its seed under
//! `target/tmp/fuzz-crashes/<target>/` and replayed first by every later run. Each input
//! is written there before it runs, so one that kills the process (a stack overflow) is
//! kept too.
//!
//! Budget per target: `CREDENCE_FUZZ_SECS` seconds, else 15 under CI (`CI` set, as
//! `scripts/test` does), else 3. A longer run (also in ARCHITECTURE.md):
//! `CREDENCE_FUZZ_SECS=1800 cargo test --release -p credence-core --test fuzz_parsers`.
//! `CREDENCE_FUZZ_SEED=N` repeats a run's inputs (each run prints its seed).

#[path = "support/skip.rs"]
mod skip;

use credence_core::job::{content_key, Message};
use credence_core::{dataset, sweep};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest any one input may take before it counts as a hang (every seed input takes
/// milliseconds; the limit is wide for slow, shared CI machines and debug builds).
const INPUT_LIMIT: Duration = Duration::from_secs(10);
/// Largest input tried: parsers meet bigger files, but a hang or a panic shows at this
/// size already, and smaller inputs mean more of them per second.
const MAX_INPUT: usize = 64 * 1024;

/// Tokens that break parsers more often than random bytes do.
const TOKENS: &[&str] = &[
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "-0.0",
    "0.0",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "18446744073709551616",
    "18446744073709551615",
    "-9223372036854775809",
    "9223372036854775807",
    "4294967296",
    "4294967295",
    "99999999999999999999999999999999999999",
    "0x7fffffff",
    "1.7976931348623157e309",
    "true",
    "null",
    "\"\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"é😀\"",
    "\u{0}",
    "\u{feff}",
    "é",
    "𝔘",
    "\r\n",
    "'''",
    "\"\"\"",
    "[[models]]\nname = \"x\"\n",
    "[[datasets]]\n",
    "[sweep]\n",
    "= ",
    ",",
    "{}",
    "[]",
    "{\"id\":",
    "\"text\": ",
    "\"mode\": \"verify\"",
    "\"v\": 1",
];

/// How long each target runs.
fn budget() -> Duration {
    if let Some(secs) = std::env::var("CREDENCE_FUZZ_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
    {
        return Duration::from_secs_f64(secs);
    }
    Duration::from_secs(if skip::in_ci() { 15 } else { 3 })
}

/// The run's seed: `CREDENCE_FUZZ_SEED`, else the clock.
fn run_seed() -> u64 {
    std::env::var("CREDENCE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        })
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    files.sort();
    let inputs: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
        .collect();
    assert!(!inputs.is_empty(), "{}: an empty corpus", dir.display());
    inputs
}

fn crash_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fuzz-crashes")
        .join(target)
}

/// Where each input is written before it runs: a crash that no unwinding survives (a
/// stack overflow, an allocation failure) leaves its input here.
fn in_flight(target: &str) -> PathBuf {
    crash_dir(target).join("in-flight.input")
}

/// Inputs that failed an earlier run, replayed before anything new; an input left in
/// flight by a run that died is kept among them.
fn saved_crashes(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let left = in_flight(target);
    if left.exists() {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let kept = crash_dir(target).join(format!("died-{stamp}.bin"));
        eprintln!("fuzz {target}: an earlier run died on {}", kept.display());
        let _ = std::fs::rename(&left, &kept);
    }
    let Ok(entries) = std::fs::read_dir(crash_dir(target)) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, Vec<u8>)> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
        .collect();
    out.sort();
    out
}

/// One mutation of `input`, drawing splices from `corpus`.
fn mutate_once(rng: &mut ChaCha8Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    const INTERESTING: &[u8] = &[
        0, 1, 0x7f, 0x80, 0xff, 0xc3, 0xed, 0xf0, b'"', b'\\', b'\n', b'\r', b'{', b'}', b'[',
        b']', b'=', b':', b',', b'#', b'-', b'.', b'e', b'0', b'9', b' ',
    ];
    let at = |rng: &mut ChaCha8Rng, len: usize| rng.random_range(0..=len);
    match rng.random_range(0..9u8) {
        0 if !input.is_empty() => {
            let i = rng.random_range(0..input.len());
            input[i] ^= 1 << rng.random_range(0..8u8);
        }
        1 if !input.is_empty() => {
            let i = rng.random_range(0..input.len());
            input[i] = INTERESTING[rng.random_range(0..INTERESTING.len())];
        }
        2 => {
            let i = at(rng, input.len());
            input.truncate(i);
        }
        3 if !input.is_empty() => {
            let a = rng.random_range(0..input.len());
            let b = rng.random_range(a..=input.len().min(a + 256));
            let chunk = input[a..b].to_vec();
            let i = at(rng, input.len());
            let times = if rng.random_bool(0.1) { 64 } else { 1 };
            for _ in 0..times {
                input.splice(i..i, chunk.iter().copied());
            }
        }
        4 => {
            let other = &corpus[rng.random_range(0..corpus.len())];
            let a = rng.random_range(0..=other.len());
            let b = rng.random_range(a..=other.len());
            let i = at(rng, input.len());
            let j = rng.random_range(i..=input.len());
            input.splice(i..j, other[a..b].iter().copied());
        }
        5 | 6 => {
            let token = TOKENS[rng.random_range(0..TOKENS.len())];
            let i = at(rng, input.len());
            input.splice(i..i, token.bytes());
        }
        7 => {
            // Deep nesting: arrays, objects, inline tables.
            let depth = rng.random_range(1..3000usize);
            let (open, close): (&[u8], &[u8]) = match rng.random_range(0..3u8) {
                0 => (b"[", b"]"),
                1 => (b"{\"a\":", b"}"),
                _ => (b"{a=", b"}"),
            };
            let mut nested = open.repeat(depth);
            if rng.random_bool(0.5) {
                nested.extend(close.repeat(depth));
            }
            let i = at(rng, input.len());
            input.splice(i..i, nested);
        }
        _ if !input.is_empty() => {
            let a = rng.random_range(0..input.len());
            let b = rng.random_range(a..=input.len().min(a + 64));
            input.drain(a..b);
        }
        _ => input.push(rng.random()),
    }
}

/// The input of iteration `seed`: a corpus file with 1 to 8 mutations.
fn generate(seed: u64, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut input = corpus[rng.random_range(0..corpus.len())].clone();
    for _ in 0..rng.random_range(1..=8u32) {
        mutate_once(&mut rng, &mut input, corpus);
    }
    input.truncate(MAX_INPUT);
    input
}

/// What the fuzz thread is doing, for the watchdog.
#[derive(Default)]
struct Current {
    input: Vec<u8>,
    label: String,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

fn save(target: &str, label: &str, input: &[u8], why: &str) -> PathBuf {
    let dir = crash_dir(target);
    std::fs::create_dir_all(&dir).expect("crash folder");
    let path = dir.join(format!("{label}.bin"));
    std::fs::write(&path, input).expect("crash input");
    std::fs::write(dir.join(format!("{label}.txt")), why).expect("crash reason");
    path
}

/// Runs `parse` on the saved crashes, the corpus, then mutated inputs until the budget is
/// spent; fails on the first panic or hang, with the input saved.
fn fuzz(target: &'static str, parse: fn(&[u8])) {
    let corpus = corpus(target);
    let seed = run_seed();
    let budget = budget();
    eprintln!("fuzz {target}: seed {seed}, {budget:?} (CREDENCE_FUZZ_SEED={seed} repeats it)");
    let current = Arc::new(Mutex::new(Current::default()));
    let done = Arc::new(AtomicU64::new(0));
    let started = Arc::new(Mutex::new(Instant::now()));
    std::fs::create_dir_all(crash_dir(target)).expect("crash folder");
    let (cur, count, start) = (current.clone(), done.clone(), started.clone());
    let worker = std::thread::spawn(move || -> Option<(String, Vec<u8>, String)> {
        let replays = saved_crashes(target).into_iter().map(|(p, b)| {
            let name = p
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into());
            (format!("replay-{name}"), b)
        });
        let seeds = corpus
            .iter()
            .enumerate()
            .map(|(i, b)| (format!("corpus-{i}"), b.clone()));
        let mut fixed = replays.chain(seeds);
        let mut master = ChaCha8Rng::seed_from_u64(seed);
        let deadline = Instant::now() + budget;
        loop {
            let (label, input) = match fixed.next() {
                Some(x) => x,
                None if Instant::now() < deadline => {
                    let s = master.next_u64();
                    (format!("seed-{seed}-input-{s}"), generate(s, &corpus))
                }
                None => {
                    let _ = std::fs::remove_file(in_flight(target));
                    return None;
                }
            };
            {
                let mut c = cur.lock().unwrap_or_else(|p| p.into_inner());
                c.input.clone_from(&input);
                c.label.clone_from(&label);
            }
            std::fs::write(in_flight(target), &input).expect("writing the input in flight");
            *start.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
            let outcome = std::panic::catch_unwind(|| parse(&input));
            count.fetch_add(1, Ordering::Relaxed);
            if let Err(p) = outcome {
                let _ = std::fs::remove_file(in_flight(target));
                return Some((label, input, panic_message(p.as_ref())));
            }
        }
    });
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if worker.is_finished() {
            break;
        }
        let took = started.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
        if took > INPUT_LIMIT {
            let c = current.lock().unwrap_or_else(|p| p.into_inner());
            let why = format!("{target}: input {} ran over {INPUT_LIMIT:?}", c.label);
            let path = save(target, &c.label, &c.input, &why);
            // The stuck thread is left behind; the process ends with the failed test.
            panic!("{why}; saved as {}", path.display());
        }
    }
    let n = done.load(Ordering::Relaxed);
    match worker.join() {
        Ok(None) => eprintln!("fuzz {target}: {n} inputs, no panic, none over {INPUT_LIMIT:?}"),
        Ok(Some((label, input, message))) => {
            let why = format!("{target}: input {label} panicked: {message}");
            let path = save(target, &label, &input, &why);
            panic!("{why}; saved as {}", path.display());
        }
        Err(p) => panic!(
            "{target}: the fuzz thread failed: {}",
            panic_message(p.as_ref())
        ),
    }
}

/// The worker's decoder; a decoded job also hashes and survives a round trip.
fn parse_job_message(input: &[u8]) {
    match Message::decode(input) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(message) => {
            if let Message::Job { job, .. } = &message {
                let _ = content_key(job);
            }
            let again = serde_json::to_vec(&message).expect("a decoded message encodes");
            let back = Message::decode(&again).expect("an encoded message decodes");
            assert_eq!(back, message, "the round trip changed the message");
        }
    }
}

/// The sweep parser with its validation; a valid sweep survives the JSON round trip the
/// store gives it.
fn parse_sweep(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    match sweep::parse(&text, Path::new("fuzz.toml"), base) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(spec) => {
            let json = serde_json::to_string(&spec).expect("a valid sweep encodes");
            let back: sweep::SweepSpec = serde_json::from_str(&json).expect("and decodes");
            assert_eq!(back, spec, "the JSON round trip changed the sweep");
        }
    }
}

/// The dataset loader, on a file; a loaded dataset written back loads the same.
fn parse_dataset(input: &[u8]) {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::tempdir().expect("a temporary folder");
    }
    DIR.with(|dir| {
        let path = dir.path().join("fuzz.jsonl");
        std::fs::write(&path, input).expect("writing the input");
        match dataset::load(&path) {
            Err(e) => {
                let _ = e.to_string();
            }
            Ok(loaded) => {
                let mut out = Vec::new();
                dataset::write_jsonl(&mut out, &loaded.examples).expect("writing to memory");
                let again = dir.path().join("again.jsonl");
                std::fs::write(&again, &out).expect("writing the copy");
                let back = dataset::load(&again).expect("a written dataset loads");
                assert_eq!(back.examples, loaded.examples, "the round trip changed it");
            }
        }
    });
}

#[test]
fn job_message_decoder() {
    fuzz("job", parse_job_message);
}

#[test]
fn sweep_parser() {
    fuzz("sweep", parse_sweep);
}

#[test]
fn dataset_loader() {
    fuzz("dataset", parse_dataset);
}

/// The mutator reaches what it is for: from a corpus of one message, seeds make
/// truncated, token-bearing and deeply nested inputs, and a seed makes the same input
/// every time.
#[test]
fn the_mutator_is_seeded_and_varied() {
    let corpus = vec![br#"{"kind":"aggregate","v":1}"#.to_vec()];
    assert_eq!(generate(7, &corpus), generate(7, &corpus));
    let inputs: Vec<Vec<u8>> = (0..2000).map(|s| generate(s, &corpus)).collect();
    let has = |needle: &[u8]| {
        inputs
            .iter()
            .any(|i| i.windows(needle.len()).any(|w| w == needle))
    };
    assert!(inputs.iter().any(|i| i.len() < corpus[0].len() / 2));
    assert!(has(b"1e400") && has(b"18446744073709551616") && has(b"-0"));
    assert!(has(&b"[".repeat(100)) || has(&b"{\"a\":".repeat(100)));
    assert!(inputs.iter().all(|i| i.len() <= MAX_INPUT));
}
