//! The list's state as the URL holds it (`?dataset=&model=&mode=&check=&worse=&sort=&dir=
//! &page=`), checked once against the run into an [`ExampleQuery`], and written back into
//! links. Every link of the view carries it, so a shared URL shows the same rows and the
//! back button restores them.

use credence_core::domain::{ExampleMetrics, Mode};
use credence_core::sweep::SweepSpec;
use credence_infra::store::browse::{Check, ExampleQuery, SortKey};
use serde::{Deserialize, Serialize};

/// Examples per page.
pub const PER_PAGE: u64 = 50;

/// The metrics the list shows per mode and can filter on "worse than base", with their
/// column headings.
pub const METRIC_COLUMNS: [(&str, &str); 5] = [
    ("semantic_f1", "SF1"),
    ("epr", "EPR"),
    ("avr", "AVR"),
    ("rr", "RR"),
    ("verify_ok", "ok"),
];

/// The list's state, as written in the URL (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListState {
    /// A dataset id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// A model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// A failing check ([`Check`] name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// A metric on which the mode is worse than base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worse: Option<String>,
    /// `position`, `id`, `METRIC.MODE`, `llm_calls.MODE` or `seconds.MODE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    /// `asc` or `desc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// 1-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u64>,
}

/// An empty URL field is no filter (what a form's "any" option sends).
pub(super) fn given(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl ListState {
    /// The state read from a URL's query string.
    pub fn parse(query: Option<&str>) -> Result<ListState, String> {
        serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| format!("the URL's query cannot be read: {e}"))
    }

    /// The state as a query string (`a=b&c=d`, without `?`).
    pub fn encode(&self) -> String {
        serde_urlencoded::to_string(self).unwrap_or_default()
    }

    /// A copy with another value of one field (and page 1 unless the page is what
    /// changes).
    pub fn with(&self, change: impl FnOnce(&mut ListState)) -> ListState {
        let mut next = self.clone();
        next.page = None;
        change(&mut next);
        next
    }

    /// The 1-based page.
    pub fn page(&self) -> u64 {
        self.page.unwrap_or(1).max(1)
    }

    /// The mode filtered on, if any.
    pub fn mode(&self) -> Option<Mode> {
        given(&self.mode).and_then(|m| m.parse().ok())
    }

    /// Checks the state against the run and makes it a query for `offset`, `limit`
    /// rows; the error names the field and what it may be.
    pub fn query(
        &self,
        run: &str,
        spec: &SweepSpec,
        offset: u64,
        limit: u64,
    ) -> Result<ExampleQuery, String> {
        let dataset = given(&self.dataset).map(str::to_string);
        if let Some(d) = &dataset {
            if !spec.datasets.iter().any(|s| &s.id == d) {
                return Err(format!(
                    "dataset={d:?}: the run has no such dataset (it has {})",
                    list(spec.datasets.iter().map(|s| s.id.as_str()))
                ));
            }
        }
        let model = given(&self.model).map(str::to_string);
        if let Some(m) = &model {
            if !spec.models.iter().any(|s| &s.name == m) {
                return Err(format!(
                    "model={m:?}: the run has no such model (it has {})",
                    list(spec.models.iter().map(|s| s.name.as_str()))
                ));
            }
        }
        let modes = &spec.modes;
        let mode = match given(&self.mode) {
            None => None,
            Some(m) => Some(run_mode(m, modes).map_err(|e| format!("mode={m:?}: {e}"))?),
        };
        let check = match given(&self.check) {
            None => None,
            Some(c) => Some(Check::from_name(c).ok_or_else(|| {
                format!(
                    "check={c:?}: expected one of {}",
                    list(Check::ALL.iter().map(|c| c.as_str()))
                )
            })?),
        };
        let worse_than_base = match given(&self.worse) {
            None => None,
            Some(w) => {
                if !METRIC_COLUMNS.iter().any(|(m, _)| *m == w) {
                    return Err(format!(
                        "worse={w:?}: expected one of {}",
                        list(METRIC_COLUMNS.iter().map(|(m, _)| *m))
                    ));
                }
                if !modes.contains(&Mode::Base) {
                    return Err(format!(
                        "worse={w:?}: the run has no base mode to compare with"
                    ));
                }
                Some(w.to_string())
            }
        };
        let sort = match given(&self.sort) {
            None | Some("position") => SortKey::Position,
            Some("id") => SortKey::ExampleId,
            Some(s) => {
                let bad = |why: String| format!("sort={s:?}: {why}");
                let (column, m) = s.split_once('.').ok_or_else(|| {
                    bad("expected position, id, METRIC.MODE, llm_calls.MODE or seconds.MODE".into())
                })?;
                let m = run_mode(m, modes).map_err(bad)?;
                match column {
                    "llm_calls" => SortKey::LlmCalls(m),
                    "seconds" => SortKey::Seconds(m),
                    metric if ExampleMetrics::def(metric).is_some() => SortKey::Metric {
                        metric: metric.to_string(),
                        mode: m,
                    },
                    other => return Err(bad(format!("{other:?} is not a metric"))),
                }
            }
        };
        let descending = match given(&self.dir) {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(d) => return Err(format!("dir={d:?}: expected asc or desc")),
        };
        // The mode whose prediction stands for a listed example: the filtered one, else
        // base under "worse than base" (compared with every mode), else the sorted one
        // (each then reads its own row).
        let sorted_mode = match &sort {
            SortKey::Metric { mode, .. } | SortKey::LlmCalls(mode) | SortKey::Seconds(mode) => {
                Some(*mode)
            }
            SortKey::Position | SortKey::ExampleId => None,
        };
        let anchor = mode
            .or(worse_than_base.as_ref().map(|_| Mode::Base))
            .or(sorted_mode)
            .or_else(|| modes.first().copied())
            .ok_or("the run has no modes")?;
        Ok(ExampleQuery {
            run: run.to_string(),
            dataset,
            model,
            mode,
            anchor,
            check,
            worse_than_base,
            sort,
            descending,
            offset,
            limit,
        })
    }

    /// The sort column's URL value and whether it is descending.
    pub fn sorted_by(&self) -> (String, bool) {
        (
            given(&self.sort).unwrap_or("position").to_string(),
            given(&self.dir) == Some("desc"),
        )
    }
}

/// A mode the run has.
fn run_mode(name: &str, modes: &[Mode]) -> Result<Mode, String> {
    let mode: Mode = name.parse().map_err(|e| format!("{e}"))?;
    if modes.contains(&mode) {
        Ok(mode)
    } else {
        Err(format!(
            "the run has no {name} mode (it has {})",
            list(modes.iter().map(|m| m.as_str()))
        ))
    }
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_round_trips_through_the_url() {
        let state = ListState::parse(Some(
            "dataset=sample&mode=repair&check=pronoun&sort=semantic_f1.base&dir=desc&page=3",
        ))
        .unwrap();
        assert_eq!(state.page(), 3);
        assert_eq!(ListState::parse(Some(&state.encode())).unwrap(), state);
        // Changing a filter goes back to page 1.
        assert_eq!(state.with(|s| s.check = None).page, None);
        assert_eq!(state.sorted_by(), ("semantic_f1.base".into(), true));
        assert!(ListState::parse(Some("page=x")).is_err());
    }
}
