//! What every AFC dataset shares once its module has read it (steps 1-3 of
//! [`super`]'s docs): the label protocol, the evidence filter and the seeded limit, each
//! recorded in the funnel.

use super::{AfcDataset, AfcOptions, Source, Split};
use crate::builders::{line_error, sampling, BenchmarkError, Build};
use crate::domain::{AfcExample, Verdict};
use std::collections::{BTreeMap, HashMap};

/// Steps 1-3 of [`super`]'s docs, on the claims a dataset module read.
pub(super) fn protocol_then_sample(
    dataset: AfcDataset,
    file: &str,
    source: Source,
    split: Option<Split>,
    options: &AfcOptions,
) -> Result<Build<AfcExample>, BenchmarkError> {
    let mut built = Build {
        examples: Vec::new(),
        funnel: Vec::new(),
    };
    built.step(format!("claims in {file}"), source.claims.len());
    let protocol = dataset.protocol();
    let mut per_label: BTreeMap<&str, usize> = BTreeMap::new();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    let mut kept = Vec::new();
    for claim in source.claims {
        let Some(&(label, verdict)) = protocol.iter().find(|(l, _)| *l == claim.label) else {
            return Err(line_error(
                &source.path,
                claim.line,
                format!(
                    "field \"label\": {:?} is not one of {}",
                    claim.label,
                    protocol
                        .iter()
                        .map(|(l, _)| *l)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if let Some(first) = first_line_of.insert(claim.id.clone(), claim.line) {
            return Err(line_error(
                &source.path,
                claim.line,
                format!("duplicate id {:?} (first on line {first})", claim.id),
            ));
        }
        *per_label.entry(label).or_default() += 1;
        let Some(verdict) = verdict else {
            continue;
        };
        let mut meta = serde_json::Map::new();
        meta.insert("source".into(), file.into());
        if let Some(split) = split {
            meta.insert("split".into(), split.name().into());
        }
        meta.insert("line".into(), claim.line.into());
        meta.insert("label".into(), claim.label.into());
        meta.extend(claim.meta);
        kept.push(AfcExample {
            id: claim.id,
            text: claim.text,
            label: verdict,
            evidence: claim.evidence,
            meta,
        });
    }
    built.step(
        format!(
            "label protocol: {}",
            describe_protocol(protocol, &per_label)
        ),
        kept.len(),
    );
    kept.retain(|e| !e.evidence.is_empty());
    built.step(
        format!("with evidence text ({})", verdict_counts(&kept)),
        kept.len(),
    );
    if let Some(limit) = options.limit {
        if limit < kept.len() {
            let mut order: Vec<usize> = (0..kept.len()).collect();
            sampling::shuffle(&mut sampling::stream(options.seed, 0), &mut order);
            let mut take = order[..limit].to_vec();
            take.sort_unstable();
            let mut slots: Vec<Option<AfcExample>> = kept.into_iter().map(Some).collect();
            kept = take.iter().filter_map(|&i| slots[i].take()).collect();
            built.step(
                format!(
                    "seeded sample of {limit} (seed {}) ({})",
                    options.seed,
                    verdict_counts(&kept)
                ),
                kept.len(),
            );
        } else {
            built.step(
                format!("all of them (limit {limit} is not below the count)"),
                kept.len(),
            );
        }
    }
    built.examples = kept;
    Ok(built)
}

/// "SUPPORT 727 (true 211, mostly-true 249, half-true 267), REFUTE 556 (...), dropped 0":
/// the source labels met, grouped by the verdict they map to, in protocol order.
fn describe_protocol(
    protocol: &[(&str, Option<Verdict>)],
    per_label: &BTreeMap<&str, usize>,
) -> String {
    let group = |verdict: Option<Verdict>, name: &str| {
        let members: Vec<(&str, usize)> = protocol
            .iter()
            .filter(|(_, v)| *v == verdict)
            .filter_map(|(l, _)| per_label.get(l).map(|&n| (*l, n)))
            .collect();
        let total: usize = members.iter().map(|(_, n)| n).sum();
        if members.is_empty() {
            return format!("{name} 0");
        }
        let parts: Vec<String> = members.iter().map(|(l, n)| format!("{l} {n}")).collect();
        format!("{name} {total} ({})", parts.join(", "))
    };
    format!(
        "{}, {}, {}",
        group(Some(Verdict::Support), "SUPPORT"),
        group(Some(Verdict::Refute), "REFUTE"),
        group(None, "dropped")
    )
}

/// "SUPPORT 124, REFUTE 64".
pub fn verdict_counts(examples: &[AfcExample]) -> String {
    Verdict::ALL
        .iter()
        .map(|&v| format!("{v} {}", examples.iter().filter(|e| e.label == v).count()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builders::afc::{pubhealth, SourceClaim};
    use std::path::PathBuf;

    fn claim(line: usize, label: &str, evidence: &[&str]) -> SourceClaim {
        SourceClaim {
            line,
            id: format!("x-{line}"),
            text: format!("Claim {line}."),
            label: label.into(),
            evidence: evidence.iter().map(|s| s.to_string()).collect(),
            meta: serde_json::Map::new(),
        }
    }

    fn source(claims: Vec<SourceClaim>) -> Source {
        Source {
            path: PathBuf::from("pubhealth/pubhealth_test.csv"),
            claims,
        }
    }

    #[test]
    fn protocol_maps_drops_and_counts_and_refuses_unknown_labels() {
        let claims = vec![
            claim(2, "true", &["E."]),
            claim(3, "mixture", &["E."]),
            claim(4, "false", &["E."]),
            claim(5, "true", &[]),
            claim(6, "unproven", &["E."]),
        ];
        let built = protocol_then_sample(
            AfcDataset::PubHealth,
            pubhealth::FILE,
            source(claims.clone()),
            None,
            &AfcOptions::default(),
        )
        .unwrap();
        let ids: Vec<&str> = built.examples.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["x-2", "x-4"]);
        assert_eq!(built.examples[1].label, Verdict::Refute);
        assert_eq!(built.examples[1].meta["label"], "false");
        assert_eq!(built.examples[1].meta["line"], 4);
        let steps: Vec<(&str, usize)> = built
            .funnel
            .iter()
            .map(|s| (s.step.as_str(), s.remaining))
            .collect();
        assert_eq!(
            steps,
            [
                ("claims in pubhealth/pubhealth_test.csv", 5),
                (
                    "label protocol: SUPPORT 2 (true 2), REFUTE 1 (false 1), dropped 2 (mixture 1, unproven 1)",
                    3
                ),
                ("with evidence text (SUPPORT 1, REFUTE 1)", 2),
            ]
        );

        let mut bad = claims.clone();
        bad[3].label = "pants-fire".into();
        let e = protocol_then_sample(
            AfcDataset::PubHealth,
            pubhealth::FILE,
            source(bad),
            None,
            &AfcOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "pubhealth/pubhealth_test.csv:5: field \"label\": \"pants-fire\" is not one of true, false, mixture, unproven"
        );
        let mut twice = claims;
        twice[2].id = "x-2".into();
        let e = protocol_then_sample(
            AfcDataset::PubHealth,
            pubhealth::FILE,
            source(twice),
            None,
            &AfcOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "pubhealth/pubhealth_test.csv:4: duplicate id \"x-2\" (first on line 2)"
        );
    }

    #[test]
    fn a_limit_takes_a_seeded_subset_in_source_order() {
        let claims: Vec<SourceClaim> = (1..=40)
            .map(|i| claim(i, if i % 3 == 0 { "false" } else { "true" }, &["E."]))
            .collect();
        let run = |seed, limit| {
            let options = AfcOptions {
                seed,
                limit: Some(limit),
                split: None,
            };
            protocol_then_sample(
                AfcDataset::PubHealth,
                pubhealth::FILE,
                source(claims.clone()),
                None,
                &options,
            )
            .unwrap()
        };
        let lines = |b: &Build<AfcExample>| -> Vec<usize> {
            b.examples
                .iter()
                .map(|e| e.meta["line"].as_u64().unwrap() as usize)
                .collect()
        };
        let ten = run(42, 10);
        assert_eq!(ten.examples.len(), 10);
        assert_eq!(lines(&ten), lines(&run(42, 10)));
        assert!(lines(&ten).windows(2).all(|w| w[0] < w[1]));
        assert_ne!(lines(&ten), lines(&run(7, 10)));
        let twenty = lines(&run(42, 20));
        assert!(lines(&ten).iter().all(|l| twenty.contains(l)));
        let last = ten.funnel.last().unwrap();
        assert_eq!(last.remaining, 10);
        assert!(last
            .step
            .starts_with("seeded sample of 10 (seed 42) (SUPPORT "));
        let all = run(42, 40);
        assert_eq!(all.examples.len(), 40);
        assert_eq!(
            all.funnel.last().unwrap().step,
            "all of them (limit 40 is not below the count)"
        );
    }
}
