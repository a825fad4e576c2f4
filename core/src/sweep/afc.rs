//! `[afc]`: downstream fact-checking (PAPER.md "AFC"), the paper's last table. A judge
//! model reads each claim of the AFC datasets against its evidence, whole (`none`) or
//! split by each decomposer under the CREDENCE prompt (`credence`, in
//! `decomposition_mode`) or the FActScore prompt (`factscore`), one job per decomposer x
//! AFC dataset x setting x shard:
//!
//! ```toml
//! [afc]
//! judge = "qwen3-8b"                          # a [[models]] name with an LLM backend
//! settings = ["none", "factscore", "credence"] # the default: all three
//! decomposition_mode = "all"                  # the default
//! decomposers = ["qwen3-8b"]                  # default: every CREDENCE-prompt LLM model
//! max_new_tokens = 64                         # the judge's answer limit (default 64)
//!
//! [[afc.datasets]]
//! id = "covidfact"
//! path = "../datasets/afc-covidfact.jsonl"    # `credence dataset build afc-covidfact`
//! ```
//!
//! A sweep with `[afc]` may have no `[[datasets]]`: it then runs the AFC jobs alone.

use super::{DatasetSpec, ModelBackend, ModelSpec, PromptKind, SweepError, Validator};
use crate::afc::AfcSetting;
use crate::domain::Mode;
use serde::{Deserialize, Serialize};
use std::path::Path;
use toml::Spanned;

/// The judge's answer limit when the sweep gives none: "LABEL SCORE" is a few tokens, and
/// a model that explains itself first still ends within it.
pub const DEFAULT_JUDGE_MAX_NEW_TOKENS: u32 = 64;

/// The validated `[afc]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AfcSpec {
    /// The judge: a model of the sweep with an LLM backend.
    pub judge: String,
    /// The settings, in the order given.
    pub settings: Vec<AfcSetting>,
    /// The mode the `credence` setting's sub-claims come from.
    pub decomposition_mode: Mode,
    /// The decomposers (models of the sweep with an LLM backend and the CREDENCE prompt).
    pub decomposers: Vec<String>,
    /// The judge's answer limit.
    pub max_new_tokens: u32,
    /// The AFC datasets.
    pub datasets: Vec<DatasetSpec>,
}

impl AfcSpec {
    /// The id an AFC job's configuration carries in place of a dataset id: the AFC
    /// dataset and the setting, `covidfact@credence` (`@` cannot occur in a dataset id,
    /// so it never meets a decomposition dataset's configuration).
    #[must_use]
    pub fn config_dataset(dataset: &str, setting: AfcSetting) -> String {
        format!("{dataset}@{setting}")
    }

    /// Whether a configuration's dataset id is an AFC configuration's
    /// ([`AfcSpec::config_dataset`]).
    #[must_use]
    pub fn is_config_dataset(dataset: &str) -> bool {
        dataset.contains('@')
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAfc {
    judge: Option<Spanned<String>>,
    settings: Option<Spanned<Vec<Spanned<String>>>>,
    decomposition_mode: Option<Spanned<String>>,
    decomposers: Option<Spanned<Vec<Spanned<String>>>>,
    max_new_tokens: Option<Spanned<i64>>,
    datasets: Option<Spanned<Vec<Spanned<RawAfcDataset>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAfcDataset {
    id: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
}

fn is_llm(m: &ModelSpec) -> bool {
    matches!(
        m.backend,
        ModelBackend::Gguf { .. } | ModelBackend::Safetensors { .. } | ModelBackend::Openai { .. }
    )
}

impl Validator<'_> {
    pub(super) fn afc(
        &self,
        raw: Spanned<RawAfc>,
        models: &[ModelSpec],
        datasets: &[DatasetSpec],
        base: &Path,
    ) -> Result<AfcSpec, SweepError> {
        let span = raw.span();
        let raw = raw.into_inner();
        let llm_names = || {
            let names: Vec<&str> = models
                .iter()
                .filter(|m| is_llm(m))
                .map(|m| m.name.as_str())
                .collect();
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        };
        let judge = raw
            .judge
            .ok_or_else(|| self.err(span.clone(), "[afc] is missing field \"judge\""))?;
        match models.iter().find(|m| &m.name == judge.get_ref()) {
            Some(m) if is_llm(m) => {}
            Some(m) => {
                return Err(self.err(
                    judge.span(),
                    format!(
                        "judge {:?} is a {} model; the judge must be an LLM (gguf, safetensors, openai): {}",
                        m.name,
                        m.backend.name(),
                        llm_names()
                    ),
                ))
            }
            None => {
                return Err(self.err(
                    judge.span(),
                    format!(
                        "judge {:?} is not a model of the sweep; its LLM models: {}",
                        judge.get_ref(),
                        llm_names()
                    ),
                ))
            }
        }
        let settings = match raw.settings {
            None => AfcSetting::ALL.to_vec(),
            Some(list) => {
                if list.get_ref().is_empty() {
                    return Err(self.err(
                        list.span(),
                        "settings is empty; expected some of none, credence, factscore",
                    ));
                }
                let mut out = Vec::new();
                for s in list.into_inner() {
                    let setting: AfcSetting = s
                        .get_ref()
                        .parse()
                        .map_err(|e: String| self.err(s.span(), e))?;
                    if out.contains(&setting) {
                        return Err(self.err(
                            s.span(),
                            format!(
                                "setting {setting:?} listed twice",
                                setting = setting.as_str()
                            ),
                        ));
                    }
                    out.push(setting);
                }
                out
            }
        };
        let decomposition_mode = match raw.decomposition_mode {
            None => Mode::All,
            Some(m) => m
                .get_ref()
                .parse()
                .map_err(|e: crate::domain::UnknownMode| self.err(m.span(), e.to_string()))?,
        };
        let decomposers = match raw.decomposers {
            None => {
                let all: Vec<String> = models
                    .iter()
                    .filter(|m| is_llm(m) && m.prompt == PromptKind::Credence)
                    .map(|m| m.name.clone())
                    .collect();
                if all.is_empty() {
                    return Err(self.err(
                        span.clone(),
                        "[afc] has no decomposer: the sweep has no LLM model with the CREDENCE prompt",
                    ));
                }
                all
            }
            Some(list) => {
                if list.get_ref().is_empty() {
                    return Err(self.err(list.span(), "decomposers is empty"));
                }
                let mut out: Vec<String> = Vec::new();
                for d in list.into_inner() {
                    let m = models
                        .iter()
                        .find(|m| &m.name == d.get_ref())
                        .ok_or_else(|| {
                            self.err(
                                d.span(),
                                format!(
                                "decomposer {:?} is not a model of the sweep; its LLM models: {}",
                                d.get_ref(),
                                llm_names()
                            ),
                            )
                        })?;
                    if !is_llm(m) || m.prompt != PromptKind::Credence {
                        return Err(self.err(
                            d.span(),
                            format!(
                                "decomposer {:?} must be an LLM with the CREDENCE prompt (the factscore setting asks the same model with the FActScore prompt)",
                                m.name
                            ),
                        ));
                    }
                    if out.contains(&m.name) {
                        return Err(
                            self.err(d.span(), format!("decomposer {:?} listed twice", m.name))
                        );
                    }
                    out.push(m.name.clone());
                }
                out
            }
        };
        let max_new_tokens = match raw.max_new_tokens {
            None => DEFAULT_JUDGE_MAX_NEW_TOKENS,
            Some(n) => self.positive(&n, "max_new_tokens", 32_768)?,
        };
        let raw_sets = raw.datasets.ok_or_else(|| {
            self.err(
                span.clone(),
                "[afc] has no [[afc.datasets]]; build one with `credence dataset build afc-covidfact`",
            )
        })?;
        if raw_sets.get_ref().is_empty() {
            return Err(self.err(raw_sets.span(), "[afc] datasets is empty"));
        }
        let mut afc_datasets: Vec<DatasetSpec> = Vec::new();
        for d in raw_sets.into_inner() {
            let dspan = d.span();
            let d = d.into_inner();
            let id =
                d.id.ok_or_else(|| self.err(dspan.clone(), "AFC dataset is missing field \"id\""))?;
            self.identifier(&id, "AFC dataset id")?;
            if afc_datasets
                .iter()
                .chain(datasets)
                .any(|x| &x.id == id.get_ref())
            {
                return Err(self.err(
                    id.span(),
                    format!("dataset id {:?} used twice (AFC and decomposition datasets share one namespace)", id.get_ref()),
                ));
            }
            let p = d.path.ok_or_else(|| {
                self.err(
                    dspan,
                    format!("AFC dataset {:?} is missing field \"path\"", id.get_ref()),
                )
            })?;
            if p.get_ref().trim().is_empty() {
                return Err(self.err(p.span(), "AFC dataset path is empty"));
            }
            afc_datasets.push(DatasetSpec {
                id: id.into_inner(),
                path: base.join(p.into_inner()),
            });
        }
        Ok(AfcSpec {
            judge: judge.into_inner(),
            settings,
            decomposition_mode,
            decomposers,
            max_new_tokens,
            datasets: afc_datasets,
        })
    }
}
