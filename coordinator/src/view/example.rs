//! The example page: the source with its entities marked, the references, each mode's
//! claims side by side (atomicity boundaries, duplicates, pronouns, the best reference
//! match and what changed against base), the rule tier's steps, and the raw completions
//! (the base decomposition and the self-repair answer) from the generation cache.

use super::diff::{diff, words_html, Edit};
use super::list::{example_href, list_href};
use super::lookup::{cosine, decode, extras, Decoded, Extras};
use super::page::{esc, figure, page};
use super::query::ListState;
use super::Viewer;
use credence_core::domain::Mode;
use credence_infra::store::browse::StoredExample;
use credence_worker::pipeline::repair::llm::SelfRepairOutcome;
use credence_worker::pipeline::repair::RepairAction;
use credence_worker::pipeline::verify::SourceEntity;

/// `text` with the character ranges `marks` (start, end, tooltip) wrapped in
/// `<mark class=...>`; overlapping marks after the first are dropped.
fn marked(text: &str, marks: &mut [(usize, usize, String, String)]) -> String {
    marks.sort_by_key(|m| (m.0, m.1));
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut at = 0;
    for (start, end, class, title) in marks.iter() {
        let (start, end) = (*start, (*end).min(chars.len()));
        if start < at || start >= end {
            continue;
        }
        out.push_str(&esc(&chars[at..start].iter().collect::<String>()));
        out.push_str(&format!(
            "<mark class=\"{class}\" title=\"{}\">{}</mark>",
            esc(title),
            esc(&chars[start..end].iter().collect::<String>())
        ));
        at = end;
    }
    out.push_str(&esc(&chars[at.min(chars.len())..]
        .iter()
        .collect::<String>()));
    out
}

fn source_html(text: &str, entities: &[SourceEntity], decoded: &[Decoded<'_>]) -> String {
    let mut marks: Vec<(usize, usize, String, String)> = entities
        .iter()
        .map(|e| {
            let lost: Vec<&str> = decoded
                .iter()
                .filter(|d| {
                    d.report.as_ref().is_some_and(|r| {
                        r.entities
                            .entities
                            .iter()
                            .any(|x| x.span == e.span && !x.preserved)
                    })
                })
                .map(|d| d.out.mode.as_str())
                .collect();
            let class = format!(
                "ent t{}{}",
                e.tier,
                if lost.is_empty() { "" } else { " lost" }
            );
            let title = if lost.is_empty() {
                format!("tier {} {}: kept in every mode", e.tier, e.label)
            } else {
                format!(
                    "tier {} {}: missing in {}",
                    e.tier,
                    e.label,
                    lost.join(", ")
                )
            };
            (e.span[0], e.span[1], class, title)
        })
        .collect();
    marked(text, &mut marks)
}

fn step_html(step: &RepairAction) -> String {
    match step {
        RepairAction::Split {
            pass,
            claim,
            rule,
            parts,
        } => format!(
            "pass {pass} · <b>split</b> claim {} ({}) into {parts}",
            claim + 1,
            esc(&serde_json::to_string(rule)
                .unwrap_or_default()
                .replace('"', "")
                .replace('_', " "))
        ),
        RepairAction::Pronoun {
            pass,
            claim,
            pronoun,
            antecedent,
        } => format!(
            "pass {pass} · <b>pronoun</b> in claim {}: <del>{}</del> → <ins>{}</ins>",
            claim + 1,
            esc(pronoun),
            esc(antecedent)
        ),
        RepairAction::Inject {
            pass,
            claim,
            entity,
            appended,
        } => format!(
            "pass {pass} · <b>inject</b> “{}” into claim {}: <ins>{}</ins>",
            esc(entity),
            claim + 1,
            esc(appended)
        ),
        RepairAction::Dedup {
            pass,
            dropped,
            kept,
            cos,
        } => format!(
            "pass {pass} · <b>dedup</b>: claim {} dropped, a repeat of claim {} (cos {cos:.3})",
            dropped + 1,
            kept + 1
        ),
        RepairAction::RolledBack { pass, reason } => {
            format!("pass {pass} · <b>rolled back</b>: {}", esc(reason))
        }
    }
}

fn outcome_text(o: &SelfRepairOutcome) -> String {
    match o {
        SelfRepairOutcome::Replaced => "the answer replaced the claims".into(),
        SelfRepairOutcome::KeptUnparseable => "the answer held no claim; claims kept".into(),
        SelfRepairOutcome::KeptWorse => "the answer failed more checks; claims kept".into(),
        SelfRepairOutcome::KeptError { error } => {
            format!("no usable answer ({error}); claims kept")
        }
    }
}

/// One claim: its text with boundary words marked, and its findings as tags.
fn claim_html(
    i: usize,
    claim: &str,
    d: &Decoded<'_>,
    extras: &Extras,
    references: &[String],
) -> String {
    let mut tags = Vec::new();
    let mut marks = Vec::new();
    if let Some(r) = &d.report {
        if let Some(a) = r.atomicity.get(i) {
            for b in &a.boundaries {
                let rule = b.rule.as_str();
                match extras.tokens.get(claim).and_then(|t| t.get(b.token_i)) {
                    Some(&(s, e)) => {
                        let word: String = claim.chars().skip(s).take(e - s).collect();
                        marks.push((s, e, "boundary".to_string(), format!("{rule} boundary")));
                        tags.push(format!(
                            "<span class=\"tag warn\">non-atomic: {rule} at “{}”</span>",
                            esc(&word)
                        ));
                    }
                    None => tags.push(format!(
                        "<span class=\"tag warn\">non-atomic: {rule} at token {}</span>",
                        b.token_i
                    )),
                }
            }
        }
        if let Some(rep) = &r.repetition {
            for p in rep.pairs.iter().filter(|p| p.i == i || p.j == i) {
                let other = if p.i == i { p.j } else { p.i };
                tags.push(format!(
                    "<span class=\"tag warn\">duplicate of claim {} (cos {:.3})</span>",
                    other + 1,
                    p.cos
                ));
            }
        }
        for f in r.self_containment.iter().filter(|f| f.claim == i) {
            if let Some(&(s, e)) = extras.tokens.get(claim).and_then(|t| t.get(f.token_i)) {
                marks.push((
                    s,
                    e,
                    "boundary".to_string(),
                    "unresolved pronoun".to_string(),
                ));
            }
            tags.push(format!(
                "<span class=\"tag warn\">pronoun “{}” → {}</span>",
                esc(&f.pronoun),
                esc(&f.antecedent)
            ));
        }
    }
    if let Some(v) = extras.vectors.get(claim) {
        let best = references
            .iter()
            .enumerate()
            .filter_map(|(j, r)| Some((j, cosine(v, extras.vectors.get(r)?)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((j, cos)) = best {
            tags.push(format!(
                "<span class=\"tag ref\" title=\"{}\">best: R{} cos {cos:.3}</span>",
                esc(&references[j]),
                j + 1
            ));
        }
    }
    let added = d.out.mode != Mode::Base && !d.base.iter().any(|b| b == claim);
    format!(
        "<li{}>{}<br>{}</li>",
        if added { " class=\"added\"" } else { "" },
        marked(claim, &mut marks),
        tags.join("")
    )
}

fn mode_html(d: &Decoded<'_>, extras: &Extras, references: &[String]) -> String {
    let out = d.out;
    let m = |name: &str| out.metrics.get(name).copied();
    let mut html = format!(
        "<div class=\"mode\" data-mode=\"{mode}\"><h3>{mode} <span class=\"muted\">{}</span></h3>\
         <div class=\"figures\">SF1 {} · EPR {} · AVR {} · RR {} · {} · {} call{} · {} s</div>",
        esc(&out.pipeline_version),
        figure(m("semantic_f1"), 3),
        figure(m("epr"), 2),
        figure(m("avr"), 2),
        figure(m("rr"), 2),
        match m("verify_ok") {
            Some(v) if v > 0.0 => "<span class=\"good\">passes</span>",
            Some(_) => "<span class=\"bad\">fails</span>",
            None => "unverified",
        },
        out.llm_calls,
        if out.llm_calls == 1 { "" } else { "s" },
        figure(Some(out.stage_seconds.iter().map(|(_, s)| s).sum()), 2),
        mode = out.mode,
    );
    if let Some(e) = &out.error {
        html.push_str(&format!(
            "<p class=\"bad\">Decomposition failed: {}</p>",
            esc(e)
        ));
    }
    if let Some(r) = &d.report {
        let missing: Vec<String> = r
            .entities
            .missing()
            .map(|e| format!("<span class=\"tag warn\">missing {}</span>", esc(&e.text)))
            .collect();
        if !missing.is_empty() {
            html.push_str(&format!("<div>{}</div>", missing.join("")));
        }
    }
    html.push_str("<ol class=\"claims\">");
    for (i, c) in d.claims.iter().enumerate() {
        html.push_str(&claim_html(i, c, d, extras, references));
    }
    html.push_str("</ol>");
    let t = &d.trace;
    let mut steps = Vec::new();
    if let Some(g) = &t.gate {
        steps.push(format!("<b>gate</b>: {}", esc(g)));
    }
    for s in t.rule.iter().flatten() {
        steps.push(step_html(s));
    }
    if t.rule.as_ref().is_some_and(Vec::is_empty) {
        steps.push("the rule tier changed nothing".into());
    }
    if let Some(true) = t.early_exit {
        steps.push("<b>early exit</b>: the rule tier's claims pass".into());
    }
    if let Some(o) = &t.llm {
        steps.push(format!("<b>self-repair</b>: {}", esc(&outcome_text(o))));
    }
    if !steps.is_empty() {
        html.push_str(&format!(
            "<ul class=\"steps\">{}</ul>",
            steps
                .iter()
                .map(|s| format!("<li>{s}</li>"))
                .collect::<String>()
        ));
    }
    if out.mode != Mode::Base && d.claims != d.base {
        let removed: Vec<String> = diff(&d.base, &d.claims)
            .into_iter()
            .filter_map(|e| match e {
                Edit::Removed(i) => {
                    Some(format!("<div class=\"removed\">{}</div>", esc(&d.base[i])))
                }
                _ => None,
            })
            .collect();
        html.push_str("<details class=\"diff\" open><summary>against base</summary>");
        html.push_str(&diff_html(&d.base, &d.claims));
        if !removed.is_empty() {
            html.push_str(&format!(
                "<div class=\"muted\">gone from base:</div>{}",
                removed.join("")
            ));
        }
        html.push_str("</details>");
    }
    if let Some(answer) = extras.repair_answers.get(&out.mode) {
        html.push_str("<details class=\"answer\"><summary>self-repair answer (raw)</summary>");
        match answer {
            Ok(a) => html.push_str(&format!("<pre>{}</pre>", esc(a))),
            Err(e) => html.push_str(&format!("<p class=\"muted\">Not shown: {}.</p>", esc(e))),
        }
        html.push_str("</details>");
    }
    if !out.stage_seconds.is_empty() {
        html.push_str(&format!(
            "<div class=\"figures\">{}</div>",
            out.stage_seconds
                .iter()
                .map(|(s, v)| format!("{} {v:.3} s", esc(s)))
                .collect::<Vec<_>>()
                .join(" · ")
        ));
    }
    html.push_str("</div>");
    html
}

/// The claim lists' diff, a changed claim word by word against the one it replaced.
fn diff_html(base: &[String], claims: &[String]) -> String {
    let edits = diff(base, claims);
    let mut out = String::from("<ol class=\"claims diff\">");
    let mut last_removed: Option<usize> = None;
    for e in edits {
        match e {
            Edit::Same(_, j) => {
                last_removed = None;
                out.push_str(&format!("<li>{}</li>", esc(&claims[j])));
            }
            Edit::Removed(i) => last_removed = Some(i),
            Edit::Added(j) => {
                let from = last_removed.map_or(String::new(), |i| base[i].clone());
                out.push_str(&format!(
                    "<li class=\"added\">{}</li>",
                    words_html(&from, &claims[j])
                ));
            }
        }
    }
    out.push_str("</ol>");
    out
}

/// The neighbours of row `at` of the list `state`: (previous, next) links.
async fn neighbours(
    viewer: &Viewer,
    state: &ListState,
    at: Option<u64>,
    ex: &StoredExample,
) -> (Option<String>, Option<String>) {
    let Some(at) = at else { return (None, None) };
    let offset = at.saturating_sub(1);
    let Ok(query) = state.query(&viewer.run, &viewer.spec, offset, 3) else {
        return (None, None);
    };
    let Ok(page) = viewer.store.example_page(&query).await else {
        return (None, None);
    };
    let here = (at - offset) as usize;
    let is_here = page.rows.get(here).is_some_and(|r| {
        r.dataset == ex.dataset && r.model == ex.model && r.example_id == ex.example_id
    });
    if !is_here {
        return (None, None);
    }
    let link = |i: usize, index: u64| {
        page.rows
            .get(i)
            .map(|r| example_href(state, Some(index), &r.dataset, &r.model, &r.example_id))
    };
    let prev = if here > 0 {
        link(here - 1, at - 1)
    } else {
        None
    };
    (prev, link(here + 1, at + 1))
}

/// The example page, or an error naming what is wrong.
pub async fn render(
    viewer: &Viewer,
    ex: &StoredExample,
    state: &ListState,
    at: Option<u64>,
) -> Result<String, String> {
    let decoded: Vec<Decoded<'_>> = ex.outputs.iter().map(decode).collect::<Result<_, _>>()?;
    let references: Vec<String> = serde_json::from_str(&ex.references_json)
        .map_err(|e| format!("the stored references cannot be read: {e}"))?;
    let extras = extras(viewer, ex, &decoded).await;
    let (prev, next) = neighbours(viewer, state, at, ex).await;
    let mut header = format!(
        "<a rel=\"up\" href=\"{}\">← list</a>",
        esc(&list_href(state))
    );
    match &prev {
        Some(p) => header.push_str(&format!(
            "<a rel=\"prev\" href=\"{}\">‹ previous</a>",
            esc(p)
        )),
        None => header.push_str("<span class=\"muted\">‹ previous</span>"),
    }
    match &next {
        Some(n) => header.push_str(&format!("<a rel=\"next\" href=\"{}\">next ›</a>", esc(n))),
        None => header.push_str("<span class=\"muted\">next ›</span>"),
    }
    let mut body = format!(
        "<h1 id=\"title\">{} · {} · {} <span class=\"muted\">#{}</span></h1>",
        esc(&ex.dataset),
        esc(&ex.model),
        esc(&ex.example_id),
        ex.position + 1
    );
    if ex.models.len() > 1 {
        let others: Vec<String> = ex
            .models
            .iter()
            .map(|m| {
                if *m == ex.model {
                    format!("<b>{}</b>", esc(m))
                } else {
                    // Another model's page is not this row of the list: no index.
                    let href = example_href(state, None, &ex.dataset, m, &ex.example_id);
                    format!("<a href=\"{}\">{}</a>", esc(&href), esc(m))
                }
            })
            .collect();
        body.push_str(&format!("<p>models: {}</p>", others.join(" · ")));
    }
    let entities = decoded
        .iter()
        .find_map(|d| d.report.as_ref())
        .map(|r| r.entities.entities.clone())
        .unwrap_or_default();
    body.push_str(&format!(
        "<section><h2>Source</h2><div class=\"source\" id=\"source\">{}</div>\
         <div class=\"figures\"><mark class=\"ent\">tier 1</mark> <mark class=\"ent t2\">tier 2</mark> \
         <mark class=\"ent lost\">missing in some mode</mark> (hover for the modes)</div></section>",
        source_html(&ex.text, &entities, &decoded)
    ));
    body.push_str("<section><h2>References</h2><ol class=\"refs\" id=\"references\">");
    for r in &references {
        body.push_str(&format!("<li>{}</li>", esc(r)));
    }
    body.push_str("</ol></section>");
    body.push_str(&format!(
        "<section><h2>Claims by mode</h2><div class=\"modes\" style=\"grid-template-columns:repeat({},minmax(0,1fr))\">",
        decoded.len().max(1)
    ));
    for d in &decoded {
        body.push_str(&mode_html(d, &extras, &references));
    }
    body.push_str("</div></section>");
    if let Some(c) = &extras.base_completion {
        body.push_str(&format!(
            "<section><h2>Raw completion (base decomposition)</h2><pre id=\"completion\">{}</pre></section>",
            esc(c)
        ));
    }
    if ex.meta_json != "{}" && !ex.meta_json.is_empty() {
        body.push_str(&format!(
            "<details><summary>metadata</summary><pre>{}</pre></details>",
            esc(&ex.meta_json)
        ));
    }
    for n in &extras.notes {
        body.push_str(&format!("<p class=\"muted\">{}</p>", esc(n)));
    }
    Ok(page(
        &format!("{} · {} · {}", ex.dataset, ex.model, ex.example_id),
        &viewer.run,
        &header,
        &body,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_wrap_characters_and_escape_the_rest() {
        let mut marks = vec![(0, 2, "ent".to_string(), "t".to_string())];
        assert_eq!(
            marked("€5 <b>", &mut marks),
            "<mark class=\"ent\" title=\"t\">€5</mark> &lt;b&gt;"
        );
    }
}
