//! Every per-example metric of a job, computed in one place: each distinct text of the
//! job (sources and claims) is parsed once, each distinct claim and reference embedded
//! once through the embedding cache, then each example's claims are verified
//! ([`Verifier`]) and scored (Jaccard-F1, Semantic-F1 and its ablations, EPR, AVR,
//! n_viol, RR, verify_ok, self-containment, MC). What is computed needs no store: the
//! cache comes in as a narrow trait object.

use crate::embed::{self, CachedEncoder, EmbedError, EncoderOptions, Precision};
use crate::pipeline::repair::{RepairError, RepairTools, RuleRepair, RuleRepairConfig};
use crate::pipeline::verify::{Verifier, VerifierConfig, VerifierReport};
use credence_core::domain::ExampleMetrics;
use credence_core::domain::{Stage, StageTimes};
use credence_core::matching::semantic::{
    semantic_f1, semantic_f1_hungarian, semantic_f1_tanimoto, semantic_f1_thresholded, CosineMatrix,
};
use credence_core::matching::soft_f1::{jaccard_f1, SoftF1};
use credence_core::sweep::{EncoderPrecision, EncoderSpec, NlpSpec, VerifierSettings};
use credence_core::{Claim, Example};
use credence_infra::cache::EmbeddingCache;
use credence_nlp::{Doc, Nlp, NlpError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The cosine below which the thresholded Semantic-F1 ablation counts a match as 0
/// (PAPER.md "Metrics": τ = 0.90).
pub const SEMANTIC_THRESHOLD: f64 = 0.90;

/// One example to score: its source sentence, one mode's claims and the references.
#[derive(Debug, Clone, Copy)]
pub struct ScoringInput<'a> {
    /// The input sentence S.
    pub source: &'a str,
    /// The claims to score.
    pub claims: &'a [Claim],
    /// The reference claims.
    pub references: &'a [String],
}

impl<'a> ScoringInput<'a> {
    /// One input per example: its source and references with its claims in `claims`.
    pub fn of_examples(examples: &'a [Example], claims: &'a [Vec<Claim>]) -> Vec<Self> {
        examples
            .iter()
            .zip(claims)
            .map(|(e, c)| ScoringInput {
                source: &e.text,
                claims: c,
                references: &e.references,
            })
            .collect()
    }
}

/// The metrics of one example and the verifier's report they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// Every per-example metric the job could compute.
    pub metrics: ExampleMetrics,
    /// The verifier's report on the claims.
    pub report: VerifierReport,
}

/// Seconds spent per scoring stage on a shard.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageSeconds {
    /// Parsing the distinct sources and claims.
    pub parse: f64,
    /// Embedding the distinct claims and references (cache lookups included).
    pub embed: f64,
    /// Verifying and computing the metrics.
    pub verify: f64,
}

/// The scored examples of a shard, in order, and what each stage cost.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredShard {
    /// One per input.
    pub examples: Vec<Scored>,
    /// Seconds per stage (never stored with results: rows stay deterministic).
    pub seconds: StageSeconds,
    /// Seconds per example and stage: parsing and embedding (done for the shard at
    /// once) in even shares, verifying and the metrics as each example took them.
    pub times: Vec<StageTimes>,
    /// The parse of every source and claim text scored, so the tiers and their
    /// re-scoring parse only the texts they make ([`Scorer::score_with`]).
    pub docs: HashMap<String, Doc>,
}

/// Why scoring failed.
#[derive(Debug, thiserror::Error)]
pub enum ScoringError {
    /// Embedding the claims or references failed.
    #[error("embeddings: {0}")]
    Embed(#[from] EmbedError),
    /// The parsing task panicked or was cancelled.
    #[error("parser task: {0}")]
    Parse(String),
    /// The verifier's report could not be serialised.
    #[error("verifier report: {0}")]
    Report(String),
}

impl ScoringError {
    /// Whether the embedding cache's store was unreachable (retry the job in place).
    pub fn is_transient(&self) -> bool {
        matches!(self, ScoringError::Embed(EmbedError::Cache(e)) if e.is_transient())
    }
}

/// The parser or encoder of a sweep could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScorerLoadError {
    /// The parser (`[nlp]`).
    #[error("loading the parser: {0}")]
    Nlp(#[from] NlpError),
    /// The encoder (`[encoder]`).
    #[error("loading encoder {preset:?}: {source}")]
    Encoder {
        /// The encoder's preset.
        preset: String,
        /// Why.
        source: Box<EmbedError>,
    },
}

impl Scorer {
    /// The scorer of a one-sentence command: the parser, the verifier and rule tier with
    /// `settings` (a sweep's `[verifier]`, or the defaults), and the encoder preset
    /// `encoder` (a folder under the models folder) unless `None`.
    pub fn for_one_sentence(
        encoder: Option<&str>,
        settings: &VerifierSettings,
    ) -> Result<Scorer, ScorerLoadError> {
        let encoder = encoder.map(|preset| EncoderSpec {
            preset: preset.to_string(),
            path: None,
            batch_size: 64,
            precision: None,
        });
        Scorer::load(&NlpSpec::default(), encoder.as_ref(), settings)
    }

    /// Builds the scorer a sweep describes: its parser (`[nlp]`), its verifier settings,
    /// and its encoder (`[encoder]`, if any) behind the embedding cache.
    pub fn load(
        nlp: &NlpSpec,
        encoder: Option<&EncoderSpec>,
        settings: &VerifierSettings,
    ) -> Result<Scorer, ScorerLoadError> {
        let nlp = Arc::new(credence_nlp::Nlp::load(crate::embed::locate(
            credence_nlp::PIPELINE_NAME,
            nlp.path.as_deref(),
        ))?);
        let encoder = match encoder {
            None => None,
            Some(spec) => {
                let options = EncoderOptions {
                    batch_size: spec.batch_size as usize,
                    precision: match spec.precision {
                        None => Precision::F32,
                        Some(EncoderPrecision::Bf16) => Precision::Bf16,
                    },
                    ..EncoderOptions::default()
                };
                let encoder = embed::load_encoder(&spec.preset, spec.path.as_deref(), options)
                    .map_err(|source| ScorerLoadError::Encoder {
                        preset: spec.preset.clone(),
                        source: Box::new(source),
                    })?;
                Some(Arc::new(CachedEncoder::new(Arc::new(encoder))))
            }
        };
        let v = settings;
        let verifier = Verifier::new(VerifierConfig {
            tau_dup: v.tau_dup,
            min_epr: v.min_epr,
            advcl_requires_subject: v.advcl_requires_subject,
            ner_labels: v.ner_labels.clone(),
        });
        let rule_repair = RuleRepair::new(RuleRepairConfig {
            max_iterations: v.max_iterations,
            ..RuleRepairConfig::default()
        });
        Ok(Scorer {
            nlp,
            verifier,
            encoder,
            rule_repair,
            max_llm_calls: v.max_llm_calls,
            keep_if_not_worse: v.keep_if_not_worse,
        })
    }
}

/// What scoring needs besides the examples: the parser, the verifier, and (when the
/// sweep has an encoder) the encoder behind its cache.
pub struct Scorer {
    /// The dependency parser and NER.
    pub nlp: Arc<Nlp>,
    /// The verifier with the sweep's settings.
    pub verifier: Verifier,
    /// The sweep's encoder, for Semantic-F1 and redundancy; `None` leaves those metrics
    /// (and verify_ok, which needs redundancy) unset.
    pub encoder: Option<Arc<CachedEncoder>>,
    /// The rule tier with the sweep's `max_iterations`.
    pub rule_repair: RuleRepair,
    /// LLM self-repair calls per example (the paper deploys 1; 0 turns the tier off).
    pub max_llm_calls: u32,
    /// Keep the LLM tier's input when its answer fails more checks.
    pub keep_if_not_worse: bool,
}

impl Scorer {
    /// Scores every example, in order, with the seconds spent per stage.
    pub async fn score(
        &self,
        cache: &dyn EmbeddingCache,
        inputs: &[ScoringInput<'_>],
    ) -> Result<ScoredShard, ScoringError> {
        self.score_with(cache, inputs, HashMap::new()).await
    }

    /// [`Scorer::score`] with the parses in `docs` taken as they are: only the texts
    /// it lacks are parsed (the returned shard holds them all).
    pub async fn score_with(
        &self,
        cache: &dyn EmbeddingCache,
        inputs: &[ScoringInput<'_>],
        docs: HashMap<String, Doc>,
    ) -> Result<ScoredShard, ScoringError> {
        let clock = Instant::now();
        let docs = self.parse_missing(inputs, docs).await?;
        let parse = clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let vectors = match &self.encoder {
            None => None,
            Some(encoder) => Some(embed_distinct(encoder, cache, inputs).await?),
        };
        let embed = clock.elapsed().as_secs_f64();
        let clock = Instant::now();
        let share = |seconds: f64| seconds / inputs.len().max(1) as f64;
        let mut times = Vec::with_capacity(inputs.len());
        let examples = inputs
            .iter()
            .map(|input| {
                let mut t = StageTimes::default();
                t.add(Stage::Parse, share(parse));
                t.add(Stage::Embed, share(embed));
                let verifying = Instant::now();
                let claim_docs: Vec<Doc> = input
                    .claims
                    .iter()
                    .map(|c| docs[c.as_str()].clone())
                    .collect();
                let cosines = vectors.as_ref().map(|v| {
                    let claims: Vec<&[f32]> = input
                        .claims
                        .iter()
                        .map(|c| v[c.as_str()].as_slice())
                        .collect();
                    let refs: Vec<&[f32]> = input
                        .references
                        .iter()
                        .map(|r| v[r.as_str()].as_slice())
                        .collect();
                    (
                        CosineMatrix::new(&claims, &claims),
                        CosineMatrix::new(&claims, &refs),
                    )
                });
                let report = self.verifier.verify(
                    &docs[input.source],
                    &claim_docs,
                    cosines.as_ref().map(|(cc, _)| cc),
                );
                t.add(Stage::Verify, verifying.elapsed().as_secs_f64());
                let measuring = Instant::now();
                let mut metrics = verifier_metrics(input.claims.len(), &report);
                set_soft_f1(
                    &mut metrics,
                    Variant::Jaccard,
                    jaccard_f1(input.claims, input.references),
                );
                if let Some((_, refs)) = &cosines {
                    set_semantic_metrics(&mut metrics, refs);
                }
                t.add(Stage::Metrics, measuring.elapsed().as_secs_f64());
                times.push(t);
                Scored { metrics, report }
            })
            .collect();
        Ok(ScoredShard {
            examples,
            seconds: StageSeconds {
                parse,
                embed,
                verify: clock.elapsed().as_secs_f64(),
            },
            times,
            docs,
        })
    }

    /// `docs` with each distinct source and claim text it lacks parsed once, on a
    /// blocking thread.
    async fn parse_missing(
        &self,
        inputs: &[ScoringInput<'_>],
        mut docs: HashMap<String, Doc>,
    ) -> Result<HashMap<String, Doc>, ScoringError> {
        let mut texts: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for input in inputs {
            for t in std::iter::once(input.source).chain(input.claims.iter().map(String::as_str)) {
                if !docs.contains_key(t) && seen.insert(t) {
                    texts.push(t.to_string());
                }
            }
        }
        if texts.is_empty() {
            return Ok(docs);
        }
        let nlp = self.nlp.clone();
        let parsed = tokio::task::spawn_blocking(move || {
            let parsed = nlp.analyze_batch(&texts);
            texts.into_iter().zip(parsed).collect::<Vec<_>>()
        })
        .await
        .map_err(|e| ScoringError::Parse(e.to_string()))?;
        docs.extend(parsed);
        Ok(docs)
    }

    /// The parses of `texts`, from `docs` where it has them, the rest parsed here (on
    /// this thread) and added to it.
    pub fn docs_of(&self, docs: &mut HashMap<String, Doc>, texts: &[String]) -> Vec<Doc> {
        let missing: Vec<&String> = texts
            .iter()
            .filter(|t| !docs.contains_key(t.as_str()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !missing.is_empty() {
            let parsed = self.nlp.analyze_batch(&missing);
            docs.extend(missing.into_iter().cloned().zip(parsed));
        }
        texts.iter().map(|t| docs[t.as_str()].clone()).collect()
    }
}

/// Each distinct claim and reference embedded once, through the cache.
async fn embed_distinct(
    encoder: &CachedEncoder,
    cache: &dyn EmbeddingCache,
    inputs: &[ScoringInput<'_>],
) -> Result<HashMap<String, Vec<f32>>, EmbedError> {
    let mut texts: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for input in inputs {
        for t in input.claims.iter().chain(input.references) {
            if seen.insert(t.as_str()) {
                texts.push(t.clone());
            }
        }
    }
    let vectors = encoder.embed(cache, &texts).await?;
    Ok(texts.into_iter().zip(vectors).collect())
}

/// The metrics that follow from the verifier's report.
fn verifier_metrics(n_claims: usize, report: &VerifierReport) -> ExampleMetrics {
    let epr = report.entities.epr;
    let unresolved: std::collections::BTreeSet<usize> =
        report.self_containment.iter().map(|f| f.claim).collect();
    ExampleMetrics {
        n_claims: Some(n_claims as u32),
        n_entities: Some(report.entities.entities.len() as u32),
        epr: Some(epr),
        epr_tier1: Some(report.entities.epr_tier1),
        epr_tier2: Some(report.entities.epr_tier2),
        avr: Some(report.avr),
        n_viol: Some(report.n_viol),
        dup_count: report.repetition.as_ref().map(|r| r.dup_count),
        rr: report.repetition.as_ref().map(|r| r.rr),
        verify_ok: report.verify_ok,
        n_unresolved: Some(unresolved.len() as u32),
        mc: Some(report.modality.mc),
        interference: Some(report.avr == 0.0 && epr < 1.0),
        ..ExampleMetrics::default()
    }
}

/// Which soft-F1 a precision / recall / F1 triple belongs to.
#[derive(Clone, Copy)]
enum Variant {
    Jaccard,
    Semantic,
    Hungarian,
    Thresholded,
    Tanimoto,
}

fn set_soft_f1(m: &mut ExampleMetrics, variant: Variant, s: SoftF1) {
    let (p, r, f) = match variant {
        Variant::Jaccard => (&mut m.jaccard_p, &mut m.jaccard_r, &mut m.jaccard_f1),
        Variant::Semantic => (&mut m.semantic_p, &mut m.semantic_r, &mut m.semantic_f1),
        Variant::Hungarian => (
            &mut m.semantic_hungarian_p,
            &mut m.semantic_hungarian_r,
            &mut m.semantic_hungarian_f1,
        ),
        Variant::Thresholded => (
            &mut m.semantic_thresholded_p,
            &mut m.semantic_thresholded_r,
            &mut m.semantic_thresholded_f1,
        ),
        Variant::Tanimoto => (
            &mut m.semantic_tanimoto_p,
            &mut m.semantic_tanimoto_r,
            &mut m.semantic_tanimoto_f1,
        ),
    };
    (*p, *r, *f) = (Some(s.precision), Some(s.recall), Some(s.f1));
}

/// Semantic-F1 and its ablations from the claims x references cosine matrix.
fn set_semantic_metrics(m: &mut ExampleMetrics, cos: &CosineMatrix) {
    set_soft_f1(m, Variant::Semantic, semantic_f1(cos));
    set_soft_f1(m, Variant::Hungarian, semantic_f1_hungarian(cos));
    set_soft_f1(
        m,
        Variant::Thresholded,
        semantic_f1_thresholded(cos, SEMANTIC_THRESHOLD),
    );
    set_soft_f1(m, Variant::Tanimoto, semantic_f1_tanimoto(cos));
}

/// The parser and the encoder (through a cache) of a [`Scorer`], for the rule tier.
pub struct ScorerTools<'a> {
    scorer: &'a Scorer,
    cache: &'a dyn EmbeddingCache,
}

impl Scorer {
    /// The scorer's parser and encoder as the rule tier's tools.
    pub fn tools<'a>(&'a self, cache: &'a dyn EmbeddingCache) -> ScorerTools<'a> {
        ScorerTools {
            scorer: self,
            cache,
        }
    }
}

#[async_trait::async_trait]
impl RepairTools for ScorerTools<'_> {
    async fn parse(&self, texts: &[String]) -> Result<Vec<Doc>, RepairError> {
        let nlp = self.scorer.nlp.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || nlp.analyze_batch(&texts))
            .await
            .map_err(|e| RepairError::Parse(e.to_string()))
    }

    async fn embed(&self, texts: &[String]) -> Result<Option<Vec<Vec<f32>>>, RepairError> {
        match &self.scorer.encoder {
            None => Ok(None),
            Some(encoder) => encoder
                .embed(self.cache, texts)
                .await
                .map(Some)
                .map_err(|e| RepairError::Embed(e.to_string())),
        }
    }
}
