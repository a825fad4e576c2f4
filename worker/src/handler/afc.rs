//! The AFC job (PAPER.md "AFC"): one decomposer x AFC dataset x setting x shard. The
//! claims are put to the judge whole (`none`), or split first: by the job's model under
//! the CREDENCE prompt and the sweep's AFC decomposition mode (`credence`, the same
//! decomposition, repair tiers and generation cache as a decomposition job of that
//! mode), or by the same model's generator under the FActScore prompt (`factscore`, base
//! mode). Every (claim, evidence) pair goes to the judge ([`NliJudge`]) through the
//! generation cache and its lease, so each is judged once per sweep whoever asks, and a
//! rerun asks nothing. An empty decomposition falls back to judging the claim whole. A
//! judgement the judge cannot make for the claim's own sake (its prompt over the model's
//! context, an unusable answer after every retry) counts as an answer with no label
//! (NEUTRAL, 0) and is recorded as the claim's error; any other failure fails the job.

use super::{decompose_shard, lock, JobError, JobHandler, JobInputs};
use crate::decompose::LlmDecomposer;
use crate::decompose::{DecomposeContext, Decomposer};
use crate::llm::nli::NliJudge;
use crate::llm::once::OnceError;
use crate::llm::PromptKind;
use credence_core::afc::{AfcResult, AfcSetting, JudgedClaim, Judgement};
use credence_core::domain::{AfcGold, Mode};
use credence_core::job::{AfcTask, Job};
use credence_core::sweep::SweepSpec;
use credence_core::Claim;
use credence_infra::cache::Caches;
use credence_infra::observe::JobObserver;
use futures::stream::{FuturesOrdered, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The AFC helpers a handler builds on its loaded models' generators.
#[derive(Default)]
pub(super) struct AfcModels {
    /// Judges by model name.
    judges: Mutex<HashMap<String, Arc<NliJudge>>>,
    /// FActScore-prompt decomposers by the model name whose generator they share.
    factscore: Mutex<HashMap<String, Arc<dyn Decomposer>>>,
}

impl JobHandler {
    /// Computes an AFC job's results.
    pub(super) async fn run_afc(
        &self,
        job: &Job,
        task: &AfcTask,
        inputs: &JobInputs,
        caches: &dyn Caches,
        observer: &dyn JobObserver,
    ) -> Result<Vec<AfcResult>, JobError> {
        let afc_error = |message: String| JobError::Afc {
            key: job.key.clone(),
            message,
        };
        let golds: Vec<AfcGold> = inputs
            .examples
            .iter()
            .map(AfcGold::of)
            .collect::<Result<_, _>>()
            .map_err(afc_error)?;
        let judge = self.judge_for(job, task, &inputs.sweep).await?;
        let n = inputs.examples.len();
        // The sub-claims of each claim, the calls they took and why a claim could not
        // be split. The `none` setting asks the decomposer nothing.
        let (subclaims, mut calls, mut errors): (Vec<Vec<Claim>>, Vec<u32>, Vec<Option<String>>) =
            match task.setting {
                AfcSetting::None => (vec![Vec::new(); n], vec![0; n], vec![None; n]),
                AfcSetting::Credence | AfcSetting::Factscore => {
                    let decomposer = self.checked_decomposer(job, &inputs.sweep).await?;
                    let (decomposer, mode) = match task.setting {
                        AfcSetting::Factscore => {
                            let twin = self
                                .factscore_for(job, &decomposer, &inputs.sweep)
                                .map_err(|message| JobError::Load {
                                    key: job.key.clone(),
                                    model: job.model.clone(),
                                    message: message.to_string(),
                                })?;
                            (twin, Mode::Base)
                        }
                        _ => (decomposer, job.mode),
                    };
                    if mode == Mode::Base {
                        // Base mode runs no tier, and an AFC job reads no score: the
                        // decompositions alone (no parse, no embedding).
                        let context = DecomposeContext {
                            cache: caches,
                            observer,
                            model: &job.model,
                        };
                        let (bases, errors) =
                            decompose_shard(&*decomposer, &inputs.examples, &context).await?;
                        let calls = bases.iter().map(|b| b.llm_calls).collect();
                        (bases.into_iter().map(|b| b.claims).collect(), calls, errors)
                    } else {
                        let in_mode = self
                            .claims_in_mode(job, mode, &*decomposer, inputs, caches, observer)
                            .await?;
                        let calls = in_mode
                            .bases
                            .iter()
                            .zip(&in_mode.outcome.tier_calls)
                            .map(|(b, tier)| b.llm_calls + tier)
                            .collect();
                        (in_mode.outcome.claims, calls, in_mode.errors)
                    }
                }
            };
        // What each claim puts to the judge: its sub-claims, or itself.
        let whole: Vec<bool> = subclaims
            .iter()
            .map(|s| task.setting == AfcSetting::None || s.is_empty())
            .collect();
        let asks: Vec<(usize, String)> = inputs
            .examples
            .iter()
            .enumerate()
            .flat_map(|(i, ex)| {
                if whole[i] {
                    vec![(i, ex.text.clone())]
                } else {
                    subclaims[i].iter().map(|c| (i, c.clone())).collect()
                }
            })
            .collect();
        // As many judgements in flight as the judge's endpoint takes.
        let window = judge.max_in_flight().max(1);
        let mut queued = asks.iter();
        let mut in_flight = FuturesOrdered::new();
        let mut judged: Vec<Vec<JudgedClaim>> = vec![Vec::new(); n];
        loop {
            while in_flight.len() < window {
                let Some((i, claim)) = queued.next() else {
                    break;
                };
                let (judge, evidence) = (&judge, &golds[*i].evidence);
                in_flight.push_back(async move {
                    let judged = judge.judge(caches, claim, evidence).await;
                    (*i, claim, judged)
                });
            }
            let Some((i, claim, outcome)) = in_flight.next().await else {
                break;
            };
            calls[i] += 1;
            let (judgement, unparsable) = match outcome {
                Ok(answer) => (answer.judgement, answer.parse_failed),
                // A request refused for its content (a prompt over the judge's context)
                // or an unusable answer is the claim's: no label, recorded with why.
                Err(OnceError::Generate(e)) if e.is_example_error() => {
                    tracing::warn!(example = %inputs.examples[i].id, error = %e, "judgement not made; counted as an answer with no label");
                    errors[i].get_or_insert_with(|| format!("judge: {e}"));
                    (Judgement::unparsable(), true)
                }
                Err(source) => {
                    return Err(JobError::Judge {
                        key: job.key.clone(),
                        source,
                    })
                }
            };
            judged[i].push(JudgedClaim {
                claim: claim.clone(),
                label: judgement.label,
                score: judgement.score,
                unparsable,
            });
        }
        Ok(inputs
            .examples
            .iter()
            .enumerate()
            .map(|(i, ex)| {
                let compound = AfcResult::verdict_of(&judged[i], whole[i]);
                AfcResult {
                    example_id: ex.id.clone(),
                    gold: golds[i].label,
                    verdict: compound.verdict,
                    score: compound.score,
                    fell_back: task.setting != AfcSetting::None && whole[i],
                    n_subclaims: subclaims[i].len() as u32,
                    llm_calls: calls[i],
                    error: errors[i].clone(),
                    judged: std::mem::take(&mut judged[i]),
                }
            })
            .collect())
    }

    /// The judge of an AFC job, built on the judge model's generator (loaded once per
    /// process, whether or not this worker decomposes with it) and checked against the
    /// fingerprint the job was planned with.
    async fn judge_for(
        &self,
        job: &Job,
        task: &AfcTask,
        sweep: &SweepSpec,
    ) -> Result<Arc<NliJudge>, JobError> {
        let known = lock(&self.afc.judges)
            .get(&task.judge)
            .filter(|j| j.fingerprint() == task.judge_fingerprint)
            .cloned();
        if let Some(judge) = known {
            return Ok(judge);
        }
        let afc = sweep.afc.as_ref().ok_or_else(|| JobError::Afc {
            key: job.key.clone(),
            message: format!("run {:?} has no [afc] section", job.run_id),
        })?;
        let model = self.model_named(job, &task.judge, None, sweep).await?;
        let generator = model.generator().ok_or_else(|| JobError::Load {
            key: job.key.clone(),
            model: task.judge.clone(),
            message: "the judge is not an LLM".into(),
        })?;
        let judge = Arc::new(NliJudge::new(generator, afc.max_new_tokens));
        if judge.fingerprint() != task.judge_fingerprint {
            return Err(JobError::FingerprintMismatch {
                key: job.key.clone(),
                model: task.judge.clone(),
                loaded: judge.fingerprint().to_string(),
                planned: task.judge_fingerprint.clone(),
            });
        }
        lock(&self.afc.judges).insert(task.judge.clone(), judge.clone());
        Ok(judge)
    }

    /// The FActScore-prompt twin of a job's decomposer: the same generator (weights
    /// loaded once), the FActScore prompt, the model's generation limit; or why there is
    /// none.
    fn factscore_for(
        &self,
        job: &Job,
        decomposer: &Arc<dyn Decomposer>,
        sweep: &SweepSpec,
    ) -> Result<Arc<dyn Decomposer>, &'static str> {
        let generator = decomposer
            .generator()
            .ok_or("the factscore setting needs an LLM decomposer")?;
        let expected =
            LlmDecomposer::fingerprint_of(generator.fingerprint(), PromptKind::Factscore);
        let mut twins = lock(&self.afc.factscore);
        if let Some(twin) = twins
            .get(&job.model)
            .filter(|t| t.fingerprint() == expected)
        {
            return Ok(twin.clone());
        }
        let spec = sweep
            .models
            .iter()
            .find(|m| m.name == job.model)
            .ok_or("the run has no such model")?;
        let twin: Arc<dyn Decomposer> = Arc::new(LlmDecomposer::new(
            generator,
            PromptKind::Factscore,
            spec.max_new_tokens,
        ));
        twins.insert(job.model.clone(), twin.clone());
        Ok(twin)
    }
}
