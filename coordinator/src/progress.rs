//! Progress bars, one per model x dataset x mode, counting examples.

use credence_core::domain::Mode;
use credence_core::job::Job;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::collections::{HashMap, HashSet};

type ConfigKey = (String, String, Mode);

/// The bars of a run.
pub struct RunProgress {
    bars: HashMap<ConfigKey, ProgressBar>,
    _multi: MultiProgress,
}

impl RunProgress {
    /// Bars for every configuration of `jobs`, already advanced by the finished ones.
    pub fn new(jobs: &[Job], finished: &HashSet<String>) -> Self {
        let multi = MultiProgress::new();
        let style = ProgressStyle::with_template(
            "{prefix:<44} [{bar:30}] {pos:>5}/{len:<5} {per_sec:>10} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let mut bars: HashMap<ConfigKey, ProgressBar> = HashMap::new();
        for job in jobs {
            let key = (job.model.clone(), job.dataset.clone(), job.mode);
            let bar = bars.entry(key).or_insert_with(|| {
                let b = multi.add(ProgressBar::new(0));
                b.set_style(style.clone());
                b.set_prefix(format!("{} / {} / {}", job.model, job.dataset, job.mode));
                b
            });
            bar.inc_length(u64::from(job.len));
            if finished.contains(&job.key) {
                bar.inc(u64::from(job.len));
            }
        }
        RunProgress {
            bars,
            _multi: multi,
        }
    }

    /// Counts a finished job.
    pub fn job_done(&self, job: &Job) {
        if let Some(b) = self
            .bars
            .get(&(job.model.clone(), job.dataset.clone(), job.mode))
        {
            b.inc(u64::from(job.len));
        }
    }

    /// Leaves the bars on screen as they are.
    pub fn finish(&self) {
        for b in self.bars.values() {
            b.abandon();
        }
    }
}
