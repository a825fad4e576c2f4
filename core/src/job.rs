//! Jobs: the unit of work on the queue (one model x dataset x mode x shard), their
//! content keys, planning a sweep into jobs, and the versioned message that carries them.

use crate::afc::AfcSetting;
use crate::domain::Mode;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Version of the job message schema; a worker dead-letters messages of other versions.
pub const MESSAGE_VERSION: u32 = 1;

/// One model x dataset x mode x shard of a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Job {
    /// Content key: sha256 over everything that determines the job's results.
    pub key: String,
    /// The run (sweep name) the job belongs to.
    pub run_id: String,
    /// Model name as written in the sweep file.
    pub model: String,
    /// Fingerprint of the model's weights and decoding settings.
    pub model_fingerprint: String,
    /// Dataset id as written in the sweep file.
    pub dataset: String,
    /// sha256 of the dataset file.
    pub dataset_hash: String,
    /// The mode this job runs.
    pub mode: Mode,
    /// Shard index within model x dataset x mode.
    pub shard: u32,
    /// Position of the shard's first example in the dataset.
    pub start: u32,
    /// Number of examples in the shard.
    pub len: u32,
    /// Hash of the settings that change results (prompt, verifier, encoder, pipeline).
    pub config_version: String,
    /// For a downstream fact-checking job, its AFC dataset, setting and judge; `None`
    /// for a decomposition job (whose message and key are then as before AFC existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afc: Option<AfcTask>,
}

/// What makes a job a downstream fact-checking (AFC) job: one decomposer (the job's
/// model) x AFC dataset x setting, judged by one judge. Its `dataset` is the
/// configuration's id, `<AFC dataset>@<setting>`
/// ([`crate::sweep::AfcSpec::config_dataset`]), so that each setting is a configuration
/// of its own; its `mode` is the sweep's AFC decomposition mode for `credence` and
/// `base` for the others.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AfcTask {
    /// The AFC dataset's id in the sweep.
    pub dataset: String,
    /// How claims are put to the judge.
    pub setting: AfcSetting,
    /// The judge's model name in the sweep.
    pub judge: String,
    /// The judge's fingerprint (its generator's and the NLI prompt's version).
    pub judge_fingerprint: String,
}

/// The AFC part of a plan: what [`plan_afc`] needs beyond the decomposers and datasets.
#[derive(Debug, Clone)]
pub struct AfcPlan<'a> {
    /// The settings, in order.
    pub settings: &'a [AfcSetting],
    /// The `credence` setting's mode.
    pub decomposition_mode: Mode,
    /// The judge's name.
    pub judge: &'a str,
    /// The judge's fingerprint.
    pub judge_fingerprint: &'a str,
}

/// Plans the AFC jobs of a run in a stable order: decomposer, AFC dataset, setting,
/// shard. `datasets` carries the AFC datasets' own ids.
pub fn plan_afc(
    run_id: &str,
    decomposers: &[PlannedModel],
    datasets: &[PlannedDataset],
    afc: &AfcPlan<'_>,
    shard_size: u32,
    config_version: &str,
) -> Vec<Job> {
    let mut jobs = Vec::new();
    for ds in datasets {
        for &setting in afc.settings {
            let mode = match setting {
                AfcSetting::Credence => afc.decomposition_mode,
                AfcSetting::None | AfcSetting::Factscore => Mode::Base,
            };
            let config = PlannedDataset {
                id: crate::sweep::AfcSpec::config_dataset(&ds.id, setting),
                ..ds.clone()
            };
            let task = AfcTask {
                dataset: ds.id.clone(),
                setting,
                judge: afc.judge.to_string(),
                judge_fingerprint: afc.judge_fingerprint.to_string(),
            };
            for mut job in plan(
                run_id,
                decomposers,
                &[config],
                &[mode],
                shard_size,
                config_version,
            ) {
                job.afc = Some(task.clone());
                job.key = content_key(&job);
                jobs.push(job);
            }
        }
    }
    // Decomposer first, as [`plan`] orders jobs.
    let order: Vec<&str> = decomposers.iter().map(|m| m.name.as_str()).collect();
    jobs.sort_by_key(|j| order.iter().position(|m| *m == j.model));
    jobs
}

/// What the planner needs to know of a model.
#[derive(Debug, Clone)]
pub struct PlannedModel {
    /// Model name from the sweep.
    pub name: String,
    /// Fingerprint of weights and decoding settings.
    pub fingerprint: String,
}

/// What the planner needs to know of a dataset.
#[derive(Debug, Clone)]
pub struct PlannedDataset {
    /// Dataset id from the sweep.
    pub id: String,
    /// sha256 of the file.
    pub hash: String,
    /// Number of examples.
    pub len: u32,
}

/// Plans the jobs of a run in a stable order: model, dataset, mode, shard.
pub fn plan(
    run_id: &str,
    models: &[PlannedModel],
    datasets: &[PlannedDataset],
    modes: &[Mode],
    shard_size: u32,
    config_version: &str,
) -> Vec<Job> {
    let shard_size = shard_size.max(1);
    let mut jobs = Vec::new();
    for model in models {
        for ds in datasets {
            for &mode in modes {
                let mut start = 0;
                let mut shard = 0;
                while start < ds.len {
                    let len = shard_size.min(ds.len - start);
                    let mut job = Job {
                        key: String::new(),
                        run_id: run_id.to_string(),
                        model: model.name.clone(),
                        model_fingerprint: model.fingerprint.clone(),
                        dataset: ds.id.clone(),
                        dataset_hash: ds.hash.clone(),
                        mode,
                        shard,
                        start,
                        len,
                        config_version: config_version.to_string(),
                        afc: None,
                    };
                    job.key = content_key(&job);
                    jobs.push(job);
                    start += len;
                    shard += 1;
                }
            }
        }
    }
    jobs
}

/// The content key of a job (DESIGN.md invariant 1). Every field that can change the
/// job's results is hashed, with separators so that no two field lists collide.
pub fn content_key(job: &Job) -> String {
    let mut h = Sha256::new();
    for part in [
        "credence-job-v1",
        &job.run_id,
        &job.model,
        &job.model_fingerprint,
        &job.dataset,
        &job.dataset_hash,
        job.mode.as_str(),
        &job.shard.to_string(),
        &job.start.to_string(),
        &job.len.to_string(),
        &job.config_version,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    // A decomposition job's key is what it was before AFC jobs existed.
    if let Some(afc) = &job.afc {
        for part in [
            "afc",
            &afc.dataset,
            afc.setting.as_str(),
            &afc.judge,
            &afc.judge_fingerprint,
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
    }
    hex::encode(h.finalize())
}

/// A message on the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Message {
    /// Decompose, verify, repair and score one shard.
    Job {
        /// Schema version ([`MESSAGE_VERSION`]).
        v: u32,
        /// The job.
        job: Job,
    },
    /// Compute the aggregates of one finished model x dataset x mode of a run.
    Aggregate {
        /// Schema version ([`MESSAGE_VERSION`]).
        v: u32,
        /// Run id.
        run_id: String,
        /// Model name.
        model: String,
        /// Dataset id.
        dataset: String,
        /// Mode.
        mode: Mode,
    },
}

impl Message {
    /// Wraps a job in a message of the current version.
    pub fn job(job: Job) -> Self {
        Message::Job {
            v: MESSAGE_VERSION,
            job,
        }
    }

    /// Reads a message body off the queue. The version is read first, so a message of
    /// another version is named as such rather than as malformed.
    ///
    /// ```
    /// use credence_core::job::{DecodeError, Message};
    /// let e = Message::decode(br#"{"kind":"job","v":9}"#).unwrap_err();
    /// assert_eq!(e, DecodeError::Version(9));
    /// ```
    pub fn decode(body: &[u8]) -> Result<Message, DecodeError> {
        #[derive(Deserialize)]
        struct VersionProbe {
            v: Option<u32>,
        }
        let malformed = |e: serde_json::Error| DecodeError::Malformed(e.to_string());
        let probe: VersionProbe = serde_json::from_slice(body).map_err(malformed)?;
        match probe.v {
            Some(MESSAGE_VERSION) => serde_json::from_slice(body).map_err(malformed),
            Some(v) => Err(DecodeError::Version(v)),
            None => Err(DecodeError::NoVersion),
        }
    }
}

/// Why a queue message cannot be read (the worker dead-letters it with this reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON, or not the shape of a message.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// No version field.
    #[error("malformed message: no version field \"v\"")]
    NoVersion,
    /// A version this build does not read.
    #[error("unknown message version {0}; this worker reads version {MESSAGE_VERSION}")]
    Version(u32),
}

/// One model x dataset x mode of a run: the unit the aggregates are computed over.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConfigRef {
    /// Run id.
    pub run_id: String,
    /// Model name.
    pub model: String,
    /// Dataset id.
    pub dataset: String,
    /// Mode.
    pub mode: Mode,
}

impl ConfigRef {
    /// The configuration a job belongs to.
    pub fn of(job: &Job) -> Self {
        ConfigRef {
            run_id: job.run_id.clone(),
            model: job.model.clone(),
            dataset: job.dataset.clone(),
            mode: job.mode,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn models() -> Vec<PlannedModel> {
        vec![PlannedModel {
            name: "m".into(),
            fingerprint: "f".into(),
        }]
    }

    #[test]
    fn plan_covers_every_example_once_in_stable_order() {
        let ds = [PlannedDataset {
            id: "d".into(),
            hash: "h".into(),
            len: 23,
        }];
        let jobs = plan("r", &models(), &ds, &Mode::PAPER, 10, "c");
        assert_eq!(jobs.len(), 4 * 3);
        for mode in Mode::PAPER {
            let shards: Vec<_> = jobs.iter().filter(|j| j.mode == mode).collect();
            let lens: Vec<u32> = shards.iter().map(|j| j.len).collect();
            assert_eq!(lens, [10, 10, 3]);
            assert_eq!(shards[2].start, 20);
        }
        let again = plan("r", &models(), &ds, &Mode::PAPER, 10, "c");
        assert_eq!(jobs, again);
        let keys: std::collections::HashSet<_> = jobs.iter().map(|j| &j.key).collect();
        assert_eq!(keys.len(), jobs.len());
    }

    #[test]
    fn key_changes_with_any_field() {
        let ds = [PlannedDataset {
            id: "d".into(),
            hash: "h".into(),
            len: 5,
        }];
        let base = plan("r", &models(), &ds, &[Mode::Base], 10, "c")[0].clone();
        let variants = [
            Job {
                run_id: "r2".into(),
                ..base.clone()
            },
            Job {
                model_fingerprint: "g".into(),
                ..base.clone()
            },
            Job {
                dataset_hash: "h2".into(),
                ..base.clone()
            },
            Job {
                mode: Mode::Repair,
                ..base.clone()
            },
            Job {
                config_version: "c2".into(),
                ..base.clone()
            },
            Job {
                len: 4,
                ..base.clone()
            },
        ];
        for v in variants {
            assert_ne!(content_key(&v), base.key);
        }
    }

    #[test]
    fn afc_jobs_are_one_configuration_per_setting_with_keys_of_their_own() {
        let ds = [PlannedDataset {
            id: "covid".into(),
            hash: "h".into(),
            len: 12,
        }];
        let settings = [
            AfcSetting::None,
            AfcSetting::Factscore,
            AfcSetting::Credence,
        ];
        let afc = AfcPlan {
            settings: &settings,
            decomposition_mode: Mode::All,
            judge: "j",
            judge_fingerprint: "jf",
        };
        let jobs = plan_afc("r", &models(), &ds, &afc, 5, "c");
        assert_eq!(jobs.len(), 3 * 3);
        let configs: Vec<(&str, Mode)> = jobs
            .iter()
            .filter(|j| j.shard == 0)
            .map(|j| (j.dataset.as_str(), j.mode))
            .collect();
        assert_eq!(
            configs,
            [
                ("covid@none", Mode::Base),
                ("covid@factscore", Mode::Base),
                ("covid@credence", Mode::All)
            ]
        );
        let keys: std::collections::HashSet<_> = jobs.iter().map(|j| &j.key).collect();
        assert_eq!(keys.len(), jobs.len());
        assert!(jobs.iter().all(|j| content_key(j) == j.key));
        // The judge is part of the key.
        let mut other = jobs[0].clone();
        other.afc.as_mut().unwrap().judge_fingerprint = "jf2".into();
        assert_ne!(content_key(&other), jobs[0].key);
        // The message carries the AFC part; a decomposition job's has none.
        let json = serde_json::to_string(&Message::job(jobs[0].clone())).unwrap();
        assert!(
            json.contains(r#""afc":{"dataset":"covid","setting":"none","judge":"j""#),
            "{json}"
        );
        assert_eq!(
            Message::decode(json.as_bytes()).unwrap(),
            Message::job(jobs[0].clone())
        );
        let plain = plan("r", &models(), &ds, &[Mode::Base], 5, "c").remove(0);
        assert!(!serde_json::to_string(&Message::job(plain))
            .unwrap()
            .contains("afc"));
    }

    #[test]
    fn message_is_versioned_json() {
        let ds = [PlannedDataset {
            id: "d".into(),
            hash: "h".into(),
            len: 1,
        }];
        let job = plan("r", &models(), &ds, &[Mode::SelfRepair], 10, "c").remove(0);
        let json = serde_json::to_string(&Message::job(job.clone())).unwrap();
        assert!(json.starts_with(r#"{"kind":"job","v":1,"job":{"#), "{json}");
        let back: Message = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Message::job(job));
    }
}
