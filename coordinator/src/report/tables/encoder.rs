//! The encoder-sensitivity table: Semantic-F1 of two runs of the same examples scored
//! with different encoders.

use super::*;

pub(super) fn encoder_name(spec: &SweepSpec) -> String {
    spec.encoder
        .as_ref()
        .map_or("no encoder".into(), |e| e.preset.clone())
}

/// Semantic-F1 of this run against another run of the same examples with another
/// encoder (the paper's Appendix on encoder sensitivity): Pearson's r and Spearman's rho
/// over the examples both scored, the share of model pairs whose order by mean
/// Semantic-F1 is the same in both runs (per dataset and mode), and the mean offset of
/// the other run.
pub(super) fn encoder_sensitivity(
    spec: &SweepSpec,
    outputs: &[StoredOutput],
    (other_run, other_spec, other): (&str, &SweepSpec, &[StoredOutput]),
) -> TableOutcome {
    use credence_core::stats::correlation::{pearson, spearman};
    let title = format!(
        "Encoder sensitivity of Semantic-F1: {} (this run) vs {} ({other_run})",
        encoder_name(spec),
        encoder_name(other_spec)
    );
    type Key<'a> = (&'a str, &'a str, Mode, &'a str);
    fn key(o: &StoredOutput) -> Key<'_> {
        (
            o.model.as_str(),
            o.dataset.as_str(),
            o.mode,
            o.example_id.as_str(),
        )
    }
    let theirs: HashMap<Key<'_>, f64> = other
        .iter()
        .filter_map(|o| Some((key(o), o.semantic_f1?)))
        .collect();
    let pairs: Vec<(Key<'_>, f64, f64)> = outputs
        .iter()
        .filter_map(|o| Some((key(o), o.semantic_f1?, *theirs.get(&key(o))?)))
        .collect();
    if pairs.len() < 2 {
        return unavailable(
            "encoder_sensitivity",
            None,
            title,
            "the two runs share fewer than two examples with Semantic-F1 (same models, datasets and modes?)".into(),
        );
    }
    let (mine, other_values): (Vec<f64>, Vec<f64>) = pairs.iter().map(|(_, a, b)| (*a, *b)).unzip();
    // Mean Semantic-F1 per (dataset, mode, model) in each run, over the paired examples.
    let mut means: HashMap<(&str, Mode, &str), (f64, f64, usize)> = HashMap::new();
    for ((model, dataset, mode, _), a, b) in &pairs {
        let e = means
            .entry((*dataset, *mode, *model))
            .or_insert((0.0, 0.0, 0));
        e.0 += a;
        e.1 += b;
        e.2 += 1;
    }
    let mut preserved = 0;
    let mut total = 0;
    let mut groups: Vec<(&str, Mode)> = means.keys().map(|(d, m, _)| (*d, *m)).collect();
    groups.sort();
    groups.dedup();
    for (dataset, mode) in groups {
        let models: Vec<(f64, f64)> = means
            .iter()
            .filter(|((d, m, _), _)| *d == dataset && *m == mode)
            .map(|(_, (a, b, n))| (a / *n as f64, b / *n as f64))
            .collect();
        for i in 0..models.len() {
            for j in (i + 1)..models.len() {
                total += 1;
                let order = |x: f64, y: f64| x.partial_cmp(&y);
                preserved +=
                    usize::from(order(models[i].0, models[j].0) == order(models[i].1, models[j].1));
            }
        }
    }
    let n = pairs.len();
    let offset = other_values
        .iter()
        .zip(&mine)
        .map(|(b, a)| b - a)
        .sum::<f64>()
        / n as f64;
    TableOutcome::Table(Table {
        name: "encoder_sensitivity",
        decomposer: None,
        dataset: None,
        title,
        columns: ["Encoder", "n", "Pearson r", "Spearman rho", "Rank preservation", "Mean offset (pp)"]
            .map(String::from)
            .to_vec(),
        rows: vec![vec![
            Cell::Text(encoder_name(other_spec)),
            Cell::number(n as f64, 0),
            pearson(&mine, &other_values).map_or(Cell::Missing, |r| Cell::number(r, 3)),
            spearman(&mine, &other_values).map_or(Cell::Missing, |r| Cell::number(r, 3)),
            if total == 0 {
                Cell::Missing
            } else {
                Cell::Text(format!(
                    "{preserved}/{total} ({:.1}%)",
                    100.0 * preserved as f64 / total as f64
                ))
            },
            Cell::number(100.0 * offset, 1),
        ]],
        note: Some("Per-example Semantic-F1 of the other run against this run's on the same examples, models and modes. Rank preservation: model pairs, per dataset and mode, whose order by mean Semantic-F1 is the same in both runs. Mean offset: the other run minus this run, in points.".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(encoder: &str) -> SweepSpec {
        let toml = format!(
            "[sweep]\nname = \"r\"\nmodes = [\"base\"]\n[encoder]\npreset = \"{encoder}\"\n\
             [[models]]\nname = \"a\"\nbackend = \"sentence-split\"\n\
             [[models]]\nname = \"b\"\nbackend = \"conjunction-oracle\"\n\
             [[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n"
        );
        credence_core::sweep::parse(
            &toml,
            std::path::Path::new("t.toml"),
            std::path::Path::new("."),
        )
        .expect("a valid sweep")
    }

    fn outputs(values: &[(&str, f64)]) -> Vec<StoredOutput> {
        values
            .iter()
            .enumerate()
            .map(|(i, (model, f1))| StoredOutput {
                model: model.to_string(),
                dataset: "d".into(),
                mode: Mode::Base,
                example_id: format!("e{}", i % 3),
                text: "S.".into(),
                references: Vec::new(),
                claims: Vec::new(),
                llm_calls: 0,
                avr: None,
                epr: None,
                rr: None,
                n_viol: None,
                verify_ok: None,
                later_cos: None,
                semantic_f1: Some(*f1),
            })
            .collect()
    }

    #[test]
    fn encoder_sensitivity_correlates_paired_examples_and_counts_kept_ranks() {
        let mine = outputs(&[
            ("a", 0.9),
            ("a", 0.8),
            ("a", 0.7),
            ("b", 0.6),
            ("b", 0.5),
            ("b", 0.4),
        ]);
        // The other encoder scores 5 points lower and keeps a above b.
        let lower: Vec<(&str, f64)> = [
            ("a", 0.85),
            ("a", 0.75),
            ("a", 0.65),
            ("b", 0.55),
            ("b", 0.45),
            ("b", 0.35),
        ]
        .to_vec();
        let other = outputs(&lower);
        let TableOutcome::Table(t) = encoder_sensitivity(
            &spec("all-MiniLM-L6-v2"),
            &mine,
            ("o", &spec("bge-large-en-v1.5"), &other),
        ) else {
            panic!("no table");
        };
        assert!(
            t.title
                .contains("all-MiniLM-L6-v2 (this run) vs bge-large-en-v1.5 (o)"),
            "{}",
            t.title
        );
        let row = &t.rows[0];
        assert_eq!(
            row[1],
            Cell::Number {
                value: 6.0,
                digits: 0
            }
        );
        assert!(matches!(row[2], Cell::Number { value, .. } if (value - 1.0).abs() < 1e-12));
        assert!(matches!(row[3], Cell::Number { value, .. } if (value - 1.0).abs() < 1e-12));
        assert_eq!(row[4], Cell::Text("1/1 (100.0%)".into()));
        assert!(matches!(row[5], Cell::Number { value, .. } if (value + 5.0).abs() < 1e-9));

        // An encoder that puts b above a breaks the one pair's order.
        let flipped = outputs(&[
            ("a", 0.2),
            ("a", 0.3),
            ("a", 0.1),
            ("b", 0.9),
            ("b", 0.8),
            ("b", 0.7),
        ]);
        let TableOutcome::Table(t) =
            encoder_sensitivity(&spec("x"), &mine, ("o", &spec("y"), &flipped))
        else {
            panic!("no table");
        };
        assert_eq!(t.rows[0][4], Cell::Text("0/1 (0.0%)".into()));
        assert!(matches!(t.rows[0][2], Cell::Number { value, .. } if value < 0.0));
        // Nothing in common: the table says so.
        assert!(matches!(
            encoder_sensitivity(&spec("x"), &mine, ("o", &spec("y"), &[])),
            TableOutcome::Unavailable { .. }
        ));
    }
}
