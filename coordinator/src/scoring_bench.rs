//! The verification-and-metrics benchmark (`credence bench-pipeline`): real examples
//! decomposed by the conjunction oracle, scored shard by shard exactly as a job scores
//! them ([`Scorer`]: parse, embed through the cache, verify, every metric), twice: once
//! with an empty embedding cache (cold) and once with the cache the first pass filled
//! (warm). Reports examples/s and the seconds per stage of each pass.

use anyhow::Context;
use credence_core::dataset;
use credence_core::sweep::{EncoderSpec, NlpSpec, VerifierSettings};
use credence_infra::store::sqlite::SqliteStore;
use credence_worker::decompose::{ConjunctionOracle, DecomposeContext, Decomposer};
use credence_worker::pipeline::scoring::{Scorer, ScoringInput, StageSeconds};
use serde::Serialize;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

/// What to benchmark.
#[derive(Debug, Clone)]
pub struct ScoringBenchOptions {
    /// Dataset files (JSONL); examples whose text was already seen are skipped.
    pub data: Vec<PathBuf>,
    /// Use at most this many examples.
    pub limit: Option<usize>,
    /// Examples per shard (a job's worth).
    pub shard_size: usize,
    /// The encoder for Semantic-F1 and redundancy (`None`: no embedding metrics).
    pub encoder: Option<EncoderSpec>,
    /// The parser.
    pub nlp: NlpSpec,
}

/// One pass over every shard.
#[derive(Debug, Clone, Serialize)]
pub struct PassReport {
    /// Wall seconds of the pass.
    pub seconds: f64,
    /// Examples per second.
    pub examples_per_s: f64,
    /// Seconds parsing.
    pub parse_s: f64,
    /// Seconds embedding (cache lookups and stores included).
    pub embed_s: f64,
    /// Seconds verifying and computing metrics.
    pub verify_s: f64,
}

impl PassReport {
    fn new(seconds: f64, examples: usize, stages: StageSeconds) -> Self {
        PassReport {
            seconds,
            examples_per_s: examples as f64 / seconds,
            parse_s: stages.parse,
            embed_s: stages.embed,
            verify_s: stages.verify,
        }
    }
}

/// What the benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct ScoringBenchReport {
    /// Distinct examples scored per pass.
    pub examples: usize,
    /// Claims the oracle produced for them.
    pub claims: usize,
    /// Seconds the oracle took to decompose them (not part of either pass).
    pub decompose_s: f64,
    /// Rayon threads (RAYON_NUM_THREADS, else every core).
    pub threads: usize,
    /// The pass with an empty embedding cache.
    pub cold: PassReport,
    /// The pass with the cache the cold pass filled.
    pub warm: PassReport,
    /// Share of examples passing the verifier (sanity: the pass computed real values).
    pub verify_rate: Option<f64>,
}

/// Runs the benchmark. Progress goes to standard error.
pub async fn run(opts: &ScoringBenchOptions) -> anyhow::Result<ScoringBenchReport> {
    let mut seen = HashSet::new();
    let mut examples = Vec::new();
    for path in &opts.data {
        let loaded = dataset::load(path).with_context(|| format!("loading {}", path.display()))?;
        examples.extend(
            loaded
                .examples
                .into_iter()
                .filter(|e| seen.insert(e.text.clone())),
        );
    }
    if let Some(n) = opts.limit {
        examples.truncate(n);
    }
    anyhow::ensure!(!examples.is_empty(), "no examples in the given files");
    let oracle = ConjunctionOracle::new();
    let clock = Instant::now();
    let mut claims = Vec::with_capacity(examples.len());
    for e in &examples {
        claims.push(
            oracle
                .decompose(&e.text, &DecomposeContext::standalone())
                .await?
                .claims,
        );
    }
    let decompose_s = clock.elapsed().as_secs_f64();
    let scorer = tokio::task::spawn_blocking({
        let (nlp, encoder) = (opts.nlp.clone(), opts.encoder.clone());
        move || Scorer::load(&nlp, encoder.as_ref(), &VerifierSettings::default())
    })
    .await??;
    let dir = tempfile::tempdir().context("a temporary folder for the cache")?;
    let store = SqliteStore::open(&dir.path().join("cache.db")).await?;
    let inputs = ScoringInput::of_examples(&examples, &claims);
    let mut passes = Vec::new();
    let mut verified = (0usize, 0usize);
    for name in ["cold", "warm"] {
        let mut stages = StageSeconds::default();
        let clock = Instant::now();
        for (i, shard) in inputs.chunks(opts.shard_size.max(1)).enumerate() {
            let scored = scorer.score(&store, shard).await?;
            stages.parse += scored.seconds.parse;
            stages.embed += scored.seconds.embed;
            stages.verify += scored.seconds.verify;
            if name == "warm" {
                for s in &scored.examples {
                    if let Some(ok) = s.metrics.verify_ok {
                        verified = (verified.0 + usize::from(ok), verified.1 + 1);
                    }
                }
            }
            if i % 40 == 39 {
                eprintln!(
                    "bench-pipeline: {name} pass, {} of {} examples",
                    ((i + 1) * opts.shard_size).min(inputs.len()),
                    inputs.len()
                );
            }
        }
        passes.push(PassReport::new(
            clock.elapsed().as_secs_f64(),
            inputs.len(),
            stages,
        ));
    }
    let warm = passes.pop().expect("two passes");
    let cold = passes.pop().expect("two passes");
    Ok(ScoringBenchReport {
        examples: examples.len(),
        claims: claims.iter().map(Vec::len).sum(),
        decompose_s,
        threads: rayon::current_num_threads(),
        cold,
        warm,
        verify_rate: (verified.1 > 0).then(|| verified.0 as f64 / verified.1 as f64),
    })
}
