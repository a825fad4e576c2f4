//! The AFC pages of a run with `[afc]`: `/afc` lists the claims judged, one row per
//! decomposer and claim with each setting's verdict and score beside the gold label
//! (filters: decomposer, AFC dataset, a setting wrong, a setting right, settings that
//! disagree; all in the URL); `/afc/claim` shows one claim with its evidence and, per
//! setting, the (sub-)claims the judge read with each label and score.

use super::list::select;
use super::page::{esc, figure, page};
use super::query::given;
use credence_core::afc::{AfcSetting, NliLabel};
use credence_core::domain::Verdict;
use credence_core::sweep::AfcSpec;
use credence_infra::store::browse::afc::{AfcCell, AfcClaim, AfcListed, AfcPage, AfcQuery};
use serde::{Deserialize, Serialize};

/// Claims per page.
pub const PER_PAGE: u64 = 50;

/// The AFC list's state, as written in the URL (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AfcState {
    /// A decomposer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decomposer: Option<String>,
    /// An AFC dataset id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// A setting whose verdict is wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrong: Option<String>,
    /// A setting whose verdict is right.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub right: Option<String>,
    /// `1`: only claims whose settings disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagree: Option<String>,
    /// 1-based.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u64>,
}

impl AfcState {
    /// The state read from a URL's query string.
    pub fn parse(query: Option<&str>) -> Result<AfcState, String> {
        serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| format!("the URL's query cannot be read: {e}"))
    }

    /// The state as a query string (`a=b&c=d`, without `?`).
    pub fn encode(&self) -> String {
        serde_urlencoded::to_string(self).unwrap_or_default()
    }

    /// The 1-based page.
    pub fn page(&self) -> u64 {
        self.page.unwrap_or(1).max(1)
    }

    /// Checks the state against the run's `[afc]` and makes it the query of its page;
    /// the error names the field and what it may be.
    pub fn query(&self, run: &str, afc: &AfcSpec) -> Result<AfcQuery, String> {
        let decomposer = given(&self.decomposer).map(str::to_string);
        if let Some(d) = &decomposer {
            if !afc.decomposers.contains(d) {
                return Err(format!(
                    "decomposer={d:?}: the run has no such decomposer (it has {})",
                    afc.decomposers.join(", ")
                ));
            }
        }
        let dataset = given(&self.dataset).map(str::to_string);
        if let Some(d) = &dataset {
            if !afc.datasets.iter().any(|s| &s.id == d) {
                let ids: Vec<&str> = afc.datasets.iter().map(|s| s.id.as_str()).collect();
                return Err(format!(
                    "dataset={d:?}: the run has no such AFC dataset (it has {})",
                    ids.join(", ")
                ));
            }
        }
        let run_setting = |field: &str, value: &Option<String>| match given(value) {
            None => Ok(None),
            Some(s) => match s.parse::<AfcSetting>() {
                Ok(setting) if afc.settings.contains(&setting) => Ok(Some(setting)),
                _ => Err(format!(
                    "{field}={s:?}: expected one of the run's settings ({})",
                    settings_list(afc)
                )),
            },
        };
        let disagree = match given(&self.disagree) {
            None | Some("0") => false,
            Some("1") => true,
            Some(other) => return Err(format!("disagree={other:?}: expected 1 or 0")),
        };
        Ok(AfcQuery {
            run: run.to_string(),
            decomposer,
            dataset,
            wrong: run_setting("wrong", &self.wrong)?,
            right: run_setting("right", &self.right)?,
            disagree,
            offset: (self.page() - 1) * PER_PAGE,
            limit: PER_PAGE,
        })
    }

    fn with_page(&self, page: u64) -> AfcState {
        AfcState {
            page: Some(page),
            ..self.clone()
        }
    }
}

fn settings_list(afc: &AfcSpec) -> String {
    afc.settings
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The AFC list's address for `state`.
pub fn afc_href(state: &AfcState) -> String {
    let q = state.encode();
    if q.is_empty() {
        "/afc".into()
    } else {
        format!("/afc?{q}")
    }
}

/// The link to a claim's page, keeping the list's state for the way back.
fn claim_href(state: &AfcState, dataset: &str, decomposer: &str, id: &str) -> String {
    let key = serde_urlencoded::to_string([("ds", dataset), ("dec", decomposer), ("id", id)])
        .unwrap_or_default();
    let list = state.encode();
    if list.is_empty() {
        format!("/afc/claim?{key}")
    } else {
        format!("/afc/claim?{key}&{list}")
    }
}

/// A verdict, green where it is the gold label and red where it is not.
fn verdict_html(verdict: Verdict, gold: Verdict) -> String {
    let class = if verdict == gold { "good" } else { "bad" };
    format!("<span class=\"{class}\">{}</span>", verdict.as_str())
}

fn filters(afc: &AfcSpec, state: &AfcState) -> String {
    let decomposers: Vec<(&str, &str)> = afc
        .decomposers
        .iter()
        .map(|d| (d.as_str(), d.as_str()))
        .collect();
    let datasets: Vec<(&str, &str)> = afc
        .datasets
        .iter()
        .map(|d| (d.id.as_str(), d.id.as_str()))
        .collect();
    let settings: Vec<(&str, &str)> = afc
        .settings
        .iter()
        .map(|s| (s.as_str(), s.as_str()))
        .collect();
    let mut out = String::from("<form class=\"filters\" method=\"get\" action=\"/afc\">");
    for (name, label, current, options) in [
        ("decomposer", "decomposer", &state.decomposer, &decomposers),
        ("dataset", "AFC dataset", &state.dataset, &datasets),
        ("wrong", "wrong in setting", &state.wrong, &settings),
        ("right", "right in setting", &state.right, &settings),
        (
            "disagree",
            "settings",
            &state.disagree,
            &vec![("1", "disagree")],
        ),
    ] {
        out.push_str(&select(name, label, current.as_deref(), options));
    }
    out.push_str("<noscript><button>apply</button></noscript></form>");
    out
}

fn cell_html(cell: Option<&AfcCell>, gold: Verdict) -> String {
    let Some(c) = cell else {
        return "<td class=\"first\"></td><td></td><td></td>".into();
    };
    let subs = if c.fell_back {
        "<span class=\"tag warn\" title=\"empty decomposition: judged whole\">whole</span>"
            .to_string()
    } else {
        c.n_subclaims.to_string()
    };
    format!(
        "<td class=\"first\" data-verdict=\"{}\">{}</td><td>{}</td><td>{subs}</td>",
        c.verdict.as_str(),
        verdict_html(c.verdict, gold),
        figure(Some(c.score), 2)
    )
}

fn row(state: &AfcState, r: &AfcListed, settings: &[AfcSetting]) -> String {
    let href = claim_href(state, &r.dataset, &r.decomposer, &r.example_id);
    let mut out = format!(
        "<tr data-id=\"{id}\" data-decomposer=\"{decomposer}\" data-dataset=\"{dataset}\">\
         <td class=\"key\">{dataset}</td><td class=\"key\">{decomposer}</td>\
         <td class=\"key\"><a href=\"{href}\">{id}</a></td>\
         <td class=\"text\"><div title=\"{text}\">{text}</div></td><td>{gold}</td>",
        id = esc(&r.example_id),
        decomposer = esc(&r.decomposer),
        dataset = esc(&r.dataset),
        href = esc(&href),
        text = esc(&r.text),
        gold = r.gold.as_str(),
    );
    for s in settings {
        out.push_str(&cell_html(r.settings.get(s), r.gold));
    }
    out.push_str("</tr>\n");
    out
}

/// The AFC list page of `run` for `state` with its page of rows.
pub fn render_list(run: &str, afc: &AfcSpec, state: &AfcState, rows: &AfcPage) -> String {
    let settings = &afc.settings;
    let mut body = filters(afc, state);
    let pages = rows.total.div_ceil(PER_PAGE).max(1);
    let mut nav = format!(
        "<nav class=\"pages\"><span id=\"count\">{} claim{} · page {} of {pages}</span>",
        rows.total,
        if rows.total == 1 { "" } else { "s" },
        state.page()
    );
    if state.page() > 1 {
        nav.push_str(&format!(
            "<a rel=\"prev\" href=\"{}\">← previous page</a>",
            esc(&afc_href(&state.with_page(state.page() - 1)))
        ));
    }
    if state.page() < pages {
        nav.push_str(&format!(
            "<a rel=\"next\" href=\"{}\">next page →</a>",
            esc(&afc_href(&state.with_page(state.page() + 1)))
        ));
    }
    nav.push_str("</nav>");
    body.push_str(&nav);
    body.push_str("<table class=\"list\" id=\"claims\"><thead><tr><th colspan=\"5\"></th>");
    for s in settings {
        body.push_str(&format!("<th class=\"mode\" colspan=\"3\">{s}</th>"));
    }
    body.push_str(
        "</tr><tr><th class=\"key\">dataset</th><th class=\"key\">decomposer</th>\
         <th class=\"key\">id</th><th class=\"key\">claim</th><th>gold</th>",
    );
    for _ in settings {
        body.push_str("<th class=\"first\">verdict</th><th>score</th><th>subs</th>");
    }
    body.push_str("</tr></thead><tbody>\n");
    for r in &rows.rows {
        body.push_str(&row(state, r, settings));
    }
    body.push_str("</tbody></table>\n");
    if rows.rows.is_empty() {
        body.push_str("<p class=\"muted\" id=\"empty\">No claim matches these filters.</p>");
    }
    body.push_str(&nav.replace("id=\"count\"", "class=\"count\""));
    body.push_str(
        "<p class=\"muted\">Each setting's verdict (green: the gold label), its score in \
         [-1, 1] and the sub-claims the judge read (whole: an empty decomposition, judged \
         as one claim). none judges the claim whole; factscore and credence split it first.</p>",
    );
    page(
        &format!("credence view: {run}: AFC"),
        run,
        "<a href=\"/\">examples</a><span>AFC claims</span>",
        &body,
    )
}

/// The claim page: the claim, its gold label and evidence, and each setting's reading.
pub fn render_claim(run: &str, claim: &AfcClaim, state: &AfcState) -> String {
    let mut body = format!(
        "<h1 id=\"claim\">{}</h1>\
         <p class=\"figures\">{} · claim {} of its dataset · gold <b id=\"gold\">{}</b> · \
         decomposer {}</p>",
        esc(&claim.text),
        esc(&claim.dataset),
        claim.position + 1,
        claim.gold.label.as_str(),
        esc(&claim.decomposer),
    );
    if claim.decomposers.len() > 1 {
        body.push_str("<p class=\"figures\">other decomposers: ");
        for d in claim.decomposers.iter().filter(|d| **d != claim.decomposer) {
            body.push_str(&format!(
                "<a class=\"decomposer\" href=\"{}\">{}</a> ",
                esc(&claim_href(state, &claim.dataset, d, &claim.example_id)),
                esc(d)
            ));
        }
        body.push_str("</p>");
    }
    body.push_str("<section><h2>Evidence</h2><ol class=\"refs\" id=\"evidence\">");
    for e in &claim.gold.evidence {
        body.push_str(&format!("<li>{}</li>", esc(e)));
    }
    body.push_str("</ol></section>");
    let columns = claim.readings.len().max(1);
    body.push_str(&format!(
        "<section><h2>Settings</h2><div class=\"modes\" style=\"grid-template-columns:repeat({columns},minmax(0,1fr))\">"
    ));
    for r in &claim.readings {
        let mut notes = Vec::new();
        if r.fell_back {
            notes.push("<span class=\"tag warn\">empty decomposition: judged whole</span>".into());
        }
        if r.unparsable > 0 {
            notes.push(format!(
                "<span class=\"tag warn\">{} answer{} without a label</span>",
                r.unparsable,
                if r.unparsable == 1 { "" } else { "s" }
            ));
        }
        if let Some(e) = &r.error {
            notes.push(format!("<span class=\"tag warn\">{}</span>", esc(e)));
        }
        body.push_str(&format!(
            "<div class=\"mode\" data-setting=\"{setting}\"><h3>{setting}</h3>\
             <div class=\"figures\">verdict {verdict} · score {score} · {subs} sub-claim{s} \
             (mode {mode}) · {calls} LLM call{c} · judge {judge}</div>{notes}<ol class=\"claims\">",
            setting = r.setting,
            verdict = verdict_html(r.verdict, claim.gold.label),
            score = figure(Some(r.score), 3),
            subs = r.n_subclaims,
            s = if r.n_subclaims == 1 { "" } else { "s" },
            mode = esc(&r.mode),
            calls = r.llm_calls,
            c = if r.llm_calls == 1 { "" } else { "s" },
            judge = esc(&r.judge),
            notes = notes.join(" "),
        ));
        for j in &r.judged {
            let class = match j.label {
                NliLabel::Support => "good",
                NliLabel::Contradict => "bad",
                NliLabel::Neutral => "muted",
            };
            let unparsable = if j.unparsable {
                " <span class=\"tag warn\">no label in the answer</span>"
            } else {
                ""
            };
            body.push_str(&format!(
                "<li>{} <span class=\"tag {class}\" data-label=\"{label}\">{label} {score}</span>{unparsable}</li>",
                esc(&j.claim),
                label = j.label.as_str(),
                score = figure(Some(j.score), 2),
            ));
        }
        body.push_str("</ol></div>");
    }
    body.push_str("</div></section>");
    let up = afc_href(state);
    body.push_str(&format!(
        "<p><a rel=\"up\" href=\"{}\">back to the AFC claims</a></p>",
        esc(&up)
    ));
    page(
        &format!("credence view: {run}: {}", claim.example_id),
        run,
        &format!(
            "<a href=\"/\">examples</a><a href=\"{}\">AFC claims</a><span>{} × {}</span>",
            esc(&up),
            esc(&claim.dataset),
            esc(&claim.decomposer)
        ),
        &body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_round_trips_through_the_url() {
        let state = AfcState::parse(Some(
            "decomposer=m&wrong=credence&right=none&disagree=1&page=2",
        ))
        .unwrap();
        assert_eq!(state.page(), 2);
        assert_eq!(AfcState::parse(Some(&state.encode())).unwrap(), state);
        assert_eq!(afc_href(&AfcState::default()), "/afc");
        assert_eq!(
            claim_href(&AfcState::default(), "d s", "m", "x&1"),
            "/afc/claim?ds=d+s&dec=m&id=x%261"
        );
        assert!(AfcState::parse(Some("page=x")).is_err());
    }
}
