//! What a worker checks of a message before it runs anything. A queue message is input
//! from the network: anyone who can publish to the broker can write one. The plan in the
//! store is the truth, so a job message must be exactly a planned job (its key the
//! content key of its fields, and the row under that key the same job), and an
//! aggregation message must name a configuration whose jobs are all done. A message that
//! fails is dead-lettered once with the reason; it never reaches the store's job rows,
//! the model cache or a metric label.

use credence_core::job::ConfigRef;
use credence_core::job::{content_key, Job};
use credence_infra::store::{Store, StoreError};

/// Why a message is refused: the dead-letter reason, stable text for people and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The key is not the content key of the message's own fields.
    KeyMismatch,
    /// No job is planned under the key (an unknown run, model, dataset or shard).
    NotPlanned,
    /// A job is planned under the key, but with other fields.
    FieldsDiffer(&'static str),
    /// An aggregation of a configuration that is unknown or not finished.
    ConfigNotFinished,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::KeyMismatch => write!(f, "forged: key does not match fields"),
            Refused::NotPlanned => write!(
                f,
                "forged: no planned job has this key (unknown run, model, dataset or shard)"
            ),
            Refused::FieldsDiffer(field) => write!(
                f,
                "forged: field {field} differs from the planned job with this key"
            ),
            Refused::ConfigNotFinished => write!(
                f,
                "forged: aggregation of a configuration that is unknown or not finished"
            ),
        }
    }
}

/// Checks a job message against the plan: `Ok(Err(_))` when it is refused, `Err` when
/// the store could not be asked.
pub(crate) async fn check_job(
    store: &dyn Store,
    job: &Job,
) -> Result<Result<(), Refused>, StoreError> {
    if content_key(job) != job.key {
        return Ok(Err(Refused::KeyMismatch));
    }
    let Some(planned) = store.planned_job(&job.key).await? else {
        return Ok(Err(Refused::NotPlanned));
    };
    Ok(match differing_field(&planned, job) {
        Some(field) => Err(Refused::FieldsDiffer(field)),
        None => Ok(()),
    })
}

/// Checks an aggregation message: its configuration exists and every job of it is done
/// (the only state in which a worker or the reaper publishes one).
pub(crate) async fn check_aggregation(
    store: &dyn Store,
    config: &ConfigRef,
) -> Result<Result<(), Refused>, StoreError> {
    Ok(if store.config_finished(config).await? {
        Ok(())
    } else {
        Err(Refused::ConfigNotFinished)
    })
}

/// The first field in which two jobs differ. With matching content keys they cannot,
/// short of a store written by something other than the planner; checked anyway, since
/// this check is what stands between the network and the job rows.
fn differing_field(planned: &Job, job: &Job) -> Option<&'static str> {
    let fields: [(&'static str, bool); 11] = [
        ("run_id", planned.run_id == job.run_id),
        ("model", planned.model == job.model),
        (
            "model_fingerprint",
            planned.model_fingerprint == job.model_fingerprint,
        ),
        ("dataset", planned.dataset == job.dataset),
        ("dataset_hash", planned.dataset_hash == job.dataset_hash),
        ("mode", planned.mode == job.mode),
        ("shard", planned.shard == job.shard),
        ("start", planned.start == job.start),
        ("len", planned.len == job.len),
        (
            "config_version",
            planned.config_version == job.config_version,
        ),
        ("afc", planned.afc == job.afc),
    ];
    fields.iter().find(|(_, same)| !same).map(|(name, _)| *name)
}
