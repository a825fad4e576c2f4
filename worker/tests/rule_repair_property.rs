//! Theorem T1 as a property over real claim lists (PAPER.md "Convergence"): one pass of
//! the rule tier never raises n_viol, never raises RR and never lowers EPR. The claim lists are the two no-model decomposers' outputs on ClaimDecompBench-1000
//! (AG News) and WikiSplitBench-1000, built from `../shared/data`: 4,000 lists, verified
//! and repaired with the real parser and all-MiniLM-L6-v2, through the SQLite embedding
//! cache a sweep uses.

use crate::common;

use credence_core::builders::{self, Benchmark, BuildOptions};
use credence_core::domain::{Example, Mode};
use credence_core::sweep::{EncoderSpec, NlpSpec, VerifierSettings};
use credence_infra::cache::NoCache;
use credence_infra::observe::NoObserver;
use credence_infra::store::sqlite::SqliteStore;
use credence_worker::decompose::ConjunctionOracle;
use credence_worker::pipeline::modes::ModeRunner;
use credence_worker::pipeline::scoring::{Scorer, ScoringInput};

fn corpus(name: &str) -> Option<std::path::PathBuf> {
    common::require(common::shared_data().join(name), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_rule_pass_never_worsens_n_viol_duplicates_or_epr() {
    let (Some(nlp), Some(ag), Some(wiki)) = (
        common::model_dir(),
        corpus("ag_news_csv"),
        corpus("wiki-split"),
    ) else {
        return;
    };
    let Some(minilm) = common::require(
        common::models_dir().join("all-MiniLM-L6-v2"),
        "all-MiniLM-L6-v2",
    ) else {
        return;
    };
    let oracle = ConjunctionOracle::new();
    let mut sources: Vec<Example> = Vec::new();
    for (bench, dir) in [
        (Benchmark::ClaimDecomp1000, &ag),
        (Benchmark::WikiSplit1000, &wiki),
    ] {
        let built = builders::build(bench, dir, &BuildOptions::default(), &oracle)
            .expect("the benchmark builds");
        sources.extend(built.examples);
    }
    // Each source twice: once split into sentences (the rule splitter), once by the
    // conjunction oracle.
    let mut examples = Vec::new();
    let mut lists: Vec<Vec<String>> = Vec::new();
    for ex in &sources {
        for claims in [
            credence_core::sentences::split_sentences(&ex.text)
                .into_iter()
                .filter_map(credence_worker::decompose::as_claim)
                .collect::<Vec<_>>(),
            oracle.split(&ex.text),
        ] {
            examples.push(Example {
                references: Vec::new(),
                ..ex.clone()
            });
            lists.push(claims);
        }
    }
    assert!(lists.len() >= 4000, "{} claim lists", lists.len());

    let scorer = Scorer::load(
        &NlpSpec { path: Some(nlp) },
        Some(&EncoderSpec {
            preset: "all-MiniLM-L6-v2".into(),
            path: Some(minilm),
            batch_size: 64,
            precision: None,
        }),
        &VerifierSettings::default(),
    )
    .expect("the scorer loads");
    let inputs = ScoringInput::of_examples(&examples, &lists);
    // The embedding cache a sweep scores through (its SQLite store): the rule tier then
    // embeds only the claims it writes, as in a run, instead of every list again.
    let dir = tempfile::tempdir().unwrap();
    let cache = SqliteStore::open(&dir.path().join("cache.db"))
        .await
        .expect("the cache opens");
    let before = scorer.score(&cache, &inputs).await.expect("scoring");
    let runner = ModeRunner {
        scorer: &scorer,
        embeddings: &cache,
        generations: &NoCache,
        llm: None,
        observer: &NoObserver,
        model: "",
    };
    let after = runner
        .run(Mode::Repair, &examples, &lists, before.clone())
        .await
        .expect("the rule tier");
    let mut broken = Vec::new();
    let mut changed = 0;
    for (i, (b, a)) in before
        .examples
        .iter()
        .zip(&after.scored.examples)
        .enumerate()
    {
        let (rb, ra) = (&b.report, &a.report);
        let rr = |r: &credence_worker::pipeline::verify::VerifierReport| {
            r.repetition.as_ref().map_or(0.0, |x| x.rr)
        };
        if after.claims[i] != lists[i] {
            changed += 1;
        }
        if ra.n_viol > rb.n_viol
            || rr(ra) > rr(rb) + 1e-12
            || ra.entities.epr < rb.entities.epr - 1e-12
        {
            broken.push(format!(
                "{:?}\n  before {:?} (n_viol {}, RR {}, EPR {})\n  after  {:?} (n_viol {}, RR {}, EPR {})",
                examples[i].text,
                lists[i],
                rb.n_viol,
                rr(rb),
                rb.entities.epr,
                after.claims[i],
                ra.n_viol,
                rr(ra),
                ra.entities.epr
            ));
        }
    }
    println!(
        "{} claim lists, {changed} changed by one rule pass, {} counterexamples",
        lists.len(),
        broken.len()
    );
    assert!(changed > 100, "the tier did something: {changed}");
    assert!(
        broken.is_empty(),
        "{} counterexamples to T1:\n{}",
        broken.len(),
        broken.join("\n")
    );
}
