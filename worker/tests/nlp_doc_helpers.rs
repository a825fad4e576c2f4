//! The `Doc` helpers the verifier uses, against spaCy 3.8.18's answers for one sentence
//! (`Token.children`, `conjuncts`, `left_edge`/`right_edge`, `doc.ents`), recorded with
//! `nlp("Alice and Bob visited Paris and Rome, and the city was praised.")`.

use crate::common;

use credence_nlp::Nlp;

const TEXT: &str = "Alice and Bob visited Paris and Rome, and the city was praised.";

#[test]
fn helpers_agree_with_spacy() {
    let Some(dir) = common::model_dir() else {
        return;
    };
    let nlp = Nlp::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
    let doc = nlp.analyze(TEXT);
    let heads: Vec<usize> = doc.tokens.iter().map(|t| t.head).collect();
    assert_eq!(heads, [3, 0, 0, 3, 3, 4, 4, 3, 3, 10, 12, 12, 3, 12]);

    let children: Vec<usize> = doc.children(3).map(|t| t.i).collect();
    assert_eq!(children, [0, 4, 7, 8, 12]);
    let subjects = |v: usize| doc.subjects(v).iter().map(|t| t.i).collect::<Vec<_>>();
    assert_eq!(subjects(3), [0]);
    assert_eq!(subjects(12), [10], "nsubjpass counts as a subject");

    // spaCy's Token.conjuncts per token.
    let conjuncts: Vec<Vec<usize>> = (0..doc.tokens.len()).map(|i| doc.conjuncts(i)).collect();
    let mut want: Vec<Vec<usize>> = vec![Vec::new(); 14];
    want[0] = vec![2];
    want[2] = vec![0];
    want[3] = vec![12];
    want[4] = vec![6];
    want[6] = vec![4];
    want[12] = vec![3];
    assert_eq!(conjuncts, want);

    // left_edge .. right_edge + 1 per token.
    let spans: Vec<(usize, usize)> = (0..doc.tokens.len()).map(|i| doc.subtree_span(i)).collect();
    assert_eq!(
        spans,
        [
            (0, 3),
            (1, 2),
            (2, 3),
            (0, 14),
            (4, 7),
            (5, 6),
            (6, 7),
            (7, 8),
            (8, 9),
            (9, 10),
            (9, 11),
            (11, 12),
            (9, 14),
            (13, 14)
        ]
    );

    let ents: Vec<(usize, usize, &str, usize, usize)> = doc
        .ents
        .iter()
        .map(|e| (e.start, e.end, e.label.as_str(), e.start_char, e.end_char))
        .collect();
    assert_eq!(
        ents,
        [
            (0, 1, "PERSON", 0, 5),
            (2, 3, "PERSON", 10, 13),
            (4, 5, "GPE", 22, 27),
            (6, 7, "GPE", 32, 36)
        ]
    );
    assert_eq!(doc.entity_at(6).map(|e| e.text.as_str()), Some("Rome"));
    assert!(doc.entity_at(3).is_none());
    let in_span: Vec<&str> = doc
        .entities_in(0, 27)
        .iter()
        .map(|e| e.text.as_str())
        .collect();
    assert_eq!(in_span, ["Alice", "Bob", "Paris"]);
    assert_eq!(doc.sentence_of(5), Some([0, 14]));
}
