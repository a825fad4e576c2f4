//! Inputs that must not panic: empty and whitespace-only texts, tabs and newlines, a
//! 50,000-character text, control characters, emoji and combining marks. Each result
//! must be a well-formed doc whose tokens spell the input exactly, as spaCy's do.

use crate::common;

use credence_nlp::{Doc, Nlp};

/// The structural guarantees of a spaCy doc.
fn assert_well_formed(text: &str, doc: &Doc) {
    let mut rebuilt = String::new();
    let mut offset = 0;
    for (i, t) in doc.tokens.iter().enumerate() {
        assert_eq!(t.i, i);
        assert_eq!(t.idx, offset, "token {i} {:?} offset", t.text);
        assert!(!t.text.is_empty(), "token {i} is empty");
        rebuilt.push_str(&t.text);
        offset += t.text.chars().count();
        if t.ws {
            rebuilt.push(' ');
            offset += 1;
        }
        assert!(
            t.head < doc.tokens.len(),
            "token {i} head {} out of range",
            t.head
        );
        assert!(
            !t.tag.is_empty() && !t.pos.is_empty() && !t.dep.is_empty(),
            "token {i} unlabelled"
        );
    }
    assert_eq!(rebuilt, text, "tokens do not spell the input");
    if let Some(first) = doc.tokens.first() {
        assert!(first.sent_start, "the first token starts a sentence");
    }
    for e in &doc.ents {
        assert!(
            e.start < e.end && e.end <= doc.tokens.len(),
            "entity {e:?} out of range"
        );
        let chars: String = text
            .chars()
            .skip(e.start_char)
            .take(e.end_char - e.start_char)
            .collect();
        assert_eq!(chars, e.text, "entity text and offsets disagree");
    }
}

/// Equal docs, except that tok2vec sums may differ in the last bits (GEMM blocking
/// depends on the batch's row count); every decision must be identical.
fn assert_same_analysis(name: &str, a: &Doc, b: &Doc) {
    let strip = |d: &Doc| {
        let mut d = d.clone();
        d.tokens.iter_mut().for_each(|t| t.t2v_sum = 0.0);
        d
    };
    assert_eq!(
        strip(a),
        strip(b),
        "{name}: batch and single analysis differ"
    );
    for (x, y) in a.tokens.iter().zip(&b.tokens) {
        assert!(
            (x.t2v_sum - y.t2v_sum).abs() < 1e-3,
            "{name}: tok2vec differs"
        );
    }
}

#[test]
fn awkward_inputs_give_well_formed_docs() {
    let Some(dir) = common::model_dir() else {
        return;
    };
    let nlp = Nlp::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
    let sentence = "The committee approved the budget on Tuesday, and Dr. Smith (who chairs it) said it's \"fine\". ";
    let long_text: String = sentence
        .repeat(50_000 / sentence.len() + 1)
        .chars()
        .take(50_000)
        .collect();
    let cases: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("one space", " ".into()),
        ("whitespace only", "   \t  \n ".into()),
        (
            "tabs and newlines",
            "\tFirst line.\nSecond\tline\r\n\n  third line\n".into(),
        ),
        (
            "control characters",
            "Null\u{0}byte, bell\u{7} and \u{1c}separators\u{1f} and DEL\u{7f}.".into(),
        ),
        (
            "emoji",
            "Great job 👍🏽!! The family 👨‍👩‍👧 went to Paris 🇫🇷 :) lol:D".into(),
        ),
        (
            "combining marks",
            "Cafe\u{301} de\u{301}ja\u{300} vu, Zoë and नमस्ते x² ①".into(),
        ),
        ("one long word", "x".repeat(5_000)),
        ("punctuation run", "!?.,;:".repeat(300)),
        ("50,000 characters", long_text),
    ];
    let mut singles = Vec::with_capacity(cases.len());
    for (name, text) in &cases {
        let t0 = std::time::Instant::now();
        let doc = nlp.analyze(text);
        assert_well_formed(text, &doc);
        eprintln!(
            "{name}: {} chars, {} tokens, {} entities, {:.2}s",
            text.chars().count(),
            doc.tokens.len(),
            doc.ents.len(),
            t0.elapsed().as_secs_f64()
        );
        singles.push(doc);
    }
    assert!(singles[0].tokens.is_empty(), "the empty text has no tokens");
    assert!(
        singles[2]
            .tokens
            .iter()
            .all(|t| t.pos == "SPACE" && t.tag == "_SP"),
        "whitespace tokens are SPACE/_SP"
    );
    let long = &singles[singles.len() - 1];
    assert!(
        long.tokens.len() > 9_000,
        "the 50,000-character text parses fully"
    );
    assert!(
        long.tokens.iter().filter(|t| t.sent_start).count() > 400,
        "and is split into sentences"
    );
    // The same texts as one parallel batch give the same docs.
    let texts: Vec<&str> = cases.iter().map(|(_, t)| t.as_str()).collect();
    let batch = nlp.analyze_batch(&texts);
    for (((name, _), doc), single) in cases.iter().zip(&batch).zip(&singles) {
        assert_same_analysis(name, doc, single);
    }
}

#[test]
fn a_missing_or_altered_model_file_is_a_clear_error() {
    let Some(dir) = common::model_dir() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let copy = tmp.path().join("en_core_web_sm");
    for (name, _) in credence_nlp::MODEL_FILES {
        let to = copy.join(name);
        std::fs::create_dir_all(to.parent().expect("file has a parent")).expect("mkdir");
        std::fs::copy(dir.join(name), &to).unwrap_or_else(|e| panic!("copying {name}: {e}"));
    }
    assert!(Nlp::load(&copy).is_ok(), "a faithful copy loads");
    std::fs::write(copy.join("tagger/cfg"), b"{}").expect("write");
    let err = Nlp::load(&copy)
        .err()
        .expect("an altered file is rejected")
        .to_string();
    assert!(
        err.contains("tagger/cfg") && err.contains("sha256"),
        "{err}"
    );
    std::fs::remove_file(copy.join("ner/model")).expect("remove");
    let err = Nlp::load(&copy)
        .err()
        .expect("a missing file is rejected")
        .to_string();
    assert!(
        err.contains("ner/model") && err.contains("cannot read"),
        "{err}"
    );
}
