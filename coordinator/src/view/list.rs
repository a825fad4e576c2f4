//! The list page: a page of the run's examples (one row per example and model), its
//! filters as a form whose fields are the URL's, and each mode's figures as columns
//! whose headings sort.

use super::page::{esc, figure, page};
use super::query::{ListState, METRIC_COLUMNS, PER_PAGE};
use credence_core::domain::{ExampleMetrics, Mode};
use credence_core::sweep::SweepSpec;
use credence_infra::store::browse::{Check, ExamplePage, ListedExample, ModeCells};

/// The link to an example's page, with `index`, its row in the list `state` (0-based,
/// over the whole list), when it is one of the list's rows.
pub fn example_href(
    state: &ListState,
    index: Option<u64>,
    dataset: &str,
    model: &str,
    id: &str,
) -> String {
    let mut key = vec![
        ("ds", dataset.to_string()),
        ("md", model.to_string()),
        ("id", id.to_string()),
    ];
    if let Some(i) = index {
        key.push(("at", i.to_string()));
    }
    let at = serde_urlencoded::to_string(key).unwrap_or_default();
    let list = state.encode();
    if list.is_empty() {
        format!("/example?{at}")
    } else {
        format!("/example?{at}&{list}")
    }
}

/// The list's address for `state`.
pub fn list_href(state: &ListState) -> String {
    let q = state.encode();
    if q.is_empty() {
        "/".into()
    } else {
        format!("/?{q}")
    }
}

/// A filter's drop-down: "any" (no filter), then `options` as (URL value, text).
pub(super) fn select<V: AsRef<str>, T: AsRef<str>>(
    name: &str,
    label: &str,
    current: Option<&str>,
    options: &[(V, T)],
) -> String {
    let mut out = format!(
        "<label>{label}<select name=\"{name}\" id=\"f-{name}\"><option value=\"\">any</option>"
    );
    for (value, text) in options {
        let selected = if current == Some(value.as_ref()) {
            " selected"
        } else {
            ""
        };
        out.push_str(&format!(
            "<option value=\"{}\"{selected}>{}</option>",
            esc(value.as_ref()),
            esc(text.as_ref())
        ));
    }
    out.push_str("</select></label>");
    out
}

fn filters(spec: &SweepSpec, state: &ListState) -> String {
    let pairs = |items: Vec<String>| -> Vec<(String, String)> {
        items.into_iter().map(|s| (s.clone(), s)).collect()
    };
    let (sort, descending) = state.sorted_by();
    let mut out = String::from("<form class=\"filters\" method=\"get\" action=\"/\">");
    out.push_str(&select(
        "dataset",
        "dataset",
        state.dataset.as_deref(),
        &pairs(spec.datasets.iter().map(|d| d.id.clone()).collect()),
    ));
    out.push_str(&select(
        "model",
        "model",
        state.model.as_deref(),
        &pairs(spec.models.iter().map(|m| m.name.clone()).collect()),
    ));
    out.push_str(&select(
        "mode",
        "mode (checks apply to it)",
        state.mode.as_deref(),
        &pairs(spec.modes.iter().map(|m| m.as_str().to_string()).collect()),
    ));
    out.push_str(&select(
        "check",
        "failing check",
        state.check.as_deref(),
        &Check::ALL
            .iter()
            .map(|c| (c.as_str().to_string(), c.as_str().replace('_', " ")))
            .collect::<Vec<_>>(),
    ));
    if spec.modes.contains(&Mode::Base) {
        out.push_str(&select(
            "worse",
            "mode worse than base on",
            state.worse.as_deref(),
            &METRIC_COLUMNS
                .iter()
                .map(|(m, _)| (m.to_string(), heading(m)))
                .collect::<Vec<_>>(),
        ));
    }
    // The sort survives a filter change.
    out.push_str(&format!(
        "<input type=\"hidden\" name=\"sort\" value=\"{}\"><input type=\"hidden\" name=\"dir\" value=\"{}\">",
        esc(&sort),
        if descending { "desc" } else { "asc" }
    ));
    out.push_str("<noscript><button>apply</button></noscript></form>");
    out
}

fn heading(metric: &str) -> String {
    ExampleMetrics::def(metric).map_or(metric.to_string(), |d| d.presentation.heading.to_string())
}

/// A sortable heading: a link that sorts by `key`, descending first for a figure, and
/// flips the direction when it already sorts by it.
fn sort_heading(state: &ListState, key: &str, text: &str, class: &str) -> String {
    let (current, descending) = state.sorted_by();
    let (dir, arrow) = if current == key {
        (
            if descending { "asc" } else { "desc" },
            if descending { " ▼" } else { " ▲" },
        )
    } else {
        (
            if key == "position" || key == "id" {
                "asc"
            } else {
                "desc"
            },
            "",
        )
    };
    let next = state.with(|s| {
        s.sort = Some(key.to_string());
        s.dir = Some(dir.to_string());
    });
    format!(
        "<th class=\"{class}\"><a href=\"{}\" data-sort=\"{}\">{}{arrow}</a></th>",
        esc(&list_href(&next)),
        esc(key),
        esc(text)
    )
}

fn cells(cells: Option<&ModeCells>) -> String {
    let Some(c) = cells else {
        return "<td class=\"first\"></td>".to_string()
            + &"<td></td>".repeat(METRIC_COLUMNS.len() + 1);
    };
    let mut out = String::new();
    for (i, (metric, _)) in METRIC_COLUMNS.iter().enumerate() {
        let class = if i == 0 { " class=\"first\"" } else { "" };
        let v = c.metrics.get(*metric).copied();
        let text = match *metric {
            "verify_ok" => match v {
                Some(v) if v > 0.0 => "<span class=\"good\">✓</span>".to_string(),
                Some(_) => "<span class=\"bad\">✗</span>".to_string(),
                None => figure(None, 0),
            },
            "epr" | "avr" | "rr" => figure(v, 2),
            _ => figure(v, 3),
        };
        out.push_str(&format!("<td{class} data-metric=\"{metric}\">{text}</td>"));
    }
    out.push_str(&format!(
        "<td>{}</td><td>{}</td>",
        c.llm_calls,
        figure(c.seconds, 2)
    ));
    out
}

fn row(state: &ListState, index: u64, r: &ListedExample, modes: &[Mode]) -> String {
    let href = example_href(state, Some(index), &r.dataset, &r.model, &r.example_id);
    let error = if r.modes.values().any(|c| c.error.is_some()) {
        " <span class=\"tag warn\">failed</span>"
    } else {
        ""
    };
    let mut out = format!(
        "<tr data-id=\"{id}\" data-model=\"{model}\" data-dataset=\"{dataset}\">\
         <td class=\"key\">{dataset}</td><td class=\"key\">{model}</td>\
         <td class=\"key\"><a href=\"{href}\">{id}</a></td><td class=\"text\"><div title=\"{text}\">{text}</div>{error}</td>",
        id = esc(&r.example_id),
        model = esc(&r.model),
        dataset = esc(&r.dataset),
        href = esc(&href),
        text = esc(&r.text),
    );
    for m in modes {
        out.push_str(&cells(r.modes.get(m)));
    }
    out.push_str("</tr>\n");
    out
}

/// The list page of `run` for `state` with its `page` of rows.
pub fn render(run: &str, spec: &SweepSpec, state: &ListState, rows: &ExamplePage) -> String {
    let modes: Vec<Mode> = match state.mode() {
        Some(m) => vec![m],
        None => spec.modes.clone(),
    };
    let mut body = filters(spec, state);
    let first = (state.page() - 1) * PER_PAGE;
    let pages = rows.total.div_ceil(PER_PAGE).max(1);
    let nav = {
        let mut nav = format!(
            "<nav class=\"pages\"><span id=\"count\">{} example{} · page {} of {pages}</span>",
            rows.total,
            if rows.total == 1 { "" } else { "s" },
            state.page()
        );
        if state.page() > 1 {
            let prev = state.with(|s| s.page = Some(state.page() - 1));
            nav.push_str(&format!(
                "<a rel=\"prev\" href=\"{}\">← previous page</a>",
                esc(&list_href(&prev))
            ));
        }
        if state.page() < pages {
            let next = state.with(|s| s.page = Some(state.page() + 1));
            nav.push_str(&format!(
                "<a rel=\"next\" href=\"{}\">next page →</a>",
                esc(&list_href(&next))
            ));
        }
        nav.push_str("</nav>");
        nav
    };
    body.push_str(&nav);
    body.push_str("<table class=\"list\" id=\"examples\"><thead><tr><th colspan=\"4\"></th>");
    for m in &modes {
        body.push_str(&format!(
            "<th class=\"mode\" colspan=\"{}\">{}</th>",
            METRIC_COLUMNS.len() + 2,
            m.as_str()
        ));
    }
    body.push_str("</tr><tr>");
    body.push_str(&sort_heading(state, "position", "dataset", "key"));
    body.push_str("<th class=\"key\">model</th>");
    body.push_str(&sort_heading(state, "id", "id", "key"));
    body.push_str("<th class=\"key\">source</th>");
    for m in &modes {
        for (i, (metric, short)) in METRIC_COLUMNS.iter().enumerate() {
            let class = if i == 0 { "first" } else { "" };
            body.push_str(&sort_heading(state, &format!("{metric}.{m}"), short, class));
        }
        body.push_str(&sort_heading(state, &format!("llm_calls.{m}"), "calls", ""));
        body.push_str(&sort_heading(state, &format!("seconds.{m}"), "s", ""));
    }
    body.push_str("</tr></thead><tbody>\n");
    for (i, r) in rows.rows.iter().enumerate() {
        body.push_str(&row(state, first + i as u64, r, &modes));
    }
    body.push_str("</tbody></table>\n");
    if rows.rows.is_empty() {
        body.push_str("<p class=\"muted\" id=\"empty\">No example matches these filters.</p>");
    }
    body.push_str(&nav.replace("id=\"count\"", "class=\"count\""));
    body.push_str(
        "<p class=\"muted\">SF1 Semantic-F1 · EPR entity preservation · AVR atomicity violation rate · \
         RR redundancy rate · ok passes the verifier · calls LLM calls · s seconds over the \
         example's timed stages. A check or \"worse than base\" filter looks at the chosen mode, \
         or at any mode when none is chosen.</p>",
    );
    let mut header = match (&state.dataset, &state.model) {
        (Some(d), Some(m)) if !d.is_empty() && !m.is_empty() => {
            format!("<span>{} × {}</span>", esc(d), esc(m))
        }
        _ => String::new(),
    };
    if spec.afc.is_some() {
        header.insert_str(0, "<a href=\"/afc\" id=\"afc-link\">AFC claims</a>");
    }
    page(&format!("credence view: {run}"), run, &header, &body)
}
