//! The model x mode tables of a dataset's stored means: the main table, Semantic-F1
//! against Jaccard-F1, the baselines and the matching ablation.

use super::*;

pub(super) fn main(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Results on {dataset}");
    let columns = main_metrics();
    let metrics: Vec<&str> = columns.iter().map(|m| m.metric).collect();
    if !lookup.has(dataset, &metrics) {
        return unavailable(
            "main",
            Some(dataset),
            title,
            "the run has no aggregates for this dataset".into(),
        );
    }
    let rows = model_mode_rows(lookup, dataset, &model_names(spec), &spec.modes, &columns);
    let note = format!(
        "{} verify% is the share of examples passing all three checks. Bold: the best of each model's modes.",
        means_note(&metrics)
    );
    model_mode_table("main", dataset, title, &columns, &[], rows, note)
}

pub(super) fn semantic_vs_jaccard(
    spec: &SweepSpec,
    lookup: &Lookup<'_>,
    dataset: &str,
) -> TableOutcome {
    let title = format!("Semantic-F1 vs Jaccard-F1 on {dataset}");
    let metrics = ["semantic_f1", "jaccard_f1"].map(col);
    if !lookup.has(dataset, &["semantic_f1"]) {
        return unavailable(
            "semantic_vs_jaccard",
            Some(dataset),
            title,
            "the run has no Semantic-F1 (its sweep has no [encoder])".into(),
        );
    }
    let mut rows = model_mode_rows(lookup, dataset, &model_names(spec), &spec.modes, &metrics);
    for row in &mut rows {
        let gap = match (&row[2], &row[3]) {
            (Cell::Estimate { mean: s, .. }, Cell::Estimate { mean: j, .. }) => Cell::Number {
                value: s - j,
                digits: 3,
            },
            _ => Cell::Missing,
        };
        row.push(gap);
    }
    let note = means_note(&["semantic_f1", "jaccard_f1"]);
    let gap = ["Semantic - Jaccard"];
    model_mode_table(
        "semantic_vs_jaccard",
        dataset,
        title,
        &metrics,
        &gap,
        rows,
        note,
    )
}

pub(super) fn baselines(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Baselines on {dataset}");
    let models: Vec<&str> = spec
        .models
        .iter()
        .filter(|m| is_baseline(spec, &m.name))
        .map(|m| m.name.as_str())
        .collect();
    if models.is_empty() {
        return unavailable(
            "baselines",
            Some(dataset),
            title,
            "the run has no baseline (sentence-split, conjunction-oracle or a FActScore-prompt model)".into(),
        );
    }
    let mut metrics = main_metrics().to_vec();
    metrics.push(col("parse_failed"));
    let rows = model_mode_rows(lookup, dataset, &models, &[Mode::Base], &metrics);
    if rows.is_empty() {
        return unavailable(
            "baselines",
            Some(dataset),
            title,
            "the run has no base-mode aggregates for its baselines".into(),
        );
    }
    let note = format!(
        "{} Parse failures: FActScore answers with no \"- \" bullet, scored as empty lists.",
        means_note(&main_metrics().map(|m| m.metric))
    );
    model_mode_table("baselines", dataset, title, &metrics, &[], rows, note)
}

pub(super) fn matching(spec: &SweepSpec, lookup: &Lookup<'_>, dataset: &str) -> TableOutcome {
    let title = format!("Matching ablation on {dataset}");
    // Four views of one quantity, compared across columns rather than modes: nothing
    // is bold.
    let metrics = [
        col("semantic_f1").as_view("Unconstrained"),
        col("semantic_hungarian_f1").as_view("Hungarian"),
        col("semantic_thresholded_f1").as_view("Thresholded (0.90)"),
        col("semantic_tanimoto_f1").as_view("Tanimoto"),
    ];
    if !lookup.has(dataset, &["semantic_hungarian_f1"]) {
        return unavailable(
            "matching",
            Some(dataset),
            title,
            "the run has no Semantic-F1 ablations (its sweep has no [encoder])".into(),
        );
    }
    let rows = model_mode_rows(lookup, dataset, &model_names(spec), &spec.modes, &metrics);
    let note = "Semantic-F1 under each matching: average-max (the paper's), one-to-one Hungarian, counting only cosines >= 0.90, and Tanimoto similarity cos / (2 - cos). Means over examples with 95% percentile bootstrap intervals.".into();
    model_mode_table("matching", dataset, title, &metrics, &[], rows, note)
}

/// The sweep's models, in its order.
fn model_names(spec: &SweepSpec) -> Vec<&str> {
    spec.models.iter().map(|m| m.name.as_str()).collect()
}

/// A model x mode table of `dataset`: the Model and Mode columns, one per metric, then
/// the `extra` columns its rows carry at their end.
fn model_mode_table(
    name: &'static str,
    dataset: &str,
    title: String,
    metrics: &[MetricColumn],
    extra: &[&str],
    rows: Vec<Vec<Cell>>,
    note: String,
) -> TableOutcome {
    let mut columns = headings(&["Model", "Mode"], metrics);
    columns.extend(extra.iter().map(|c| c.to_string()));
    TableOutcome::Table(Table {
        name,
        decomposer: None,
        dataset: Some(dataset.into()),
        title,
        columns,
        rows,
        note: Some(note),
    })
}
