//! The senter port against real spaCy 3.8: en_core_web_sm with the parser disabled and
//! `senter` enabled (as the paper's sentence-split baseline runs it) on the 268 spaCy
//! golden texts and 600 AG News leads, whose sentence spans `bench/senter_golden.sh`
//! recorded in `worker/tests/fixtures/senter_golden.jsonl`. Every text's sentences must
//! be spaCy's, and the baseline's claims their exact text.

use crate::common;

use credence_nlp::Nlp;
use credence_worker::decompose::SentenceSplit;
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Deserialize)]
struct Golden {
    source: String,
    id: usize,
    sents: Vec<[usize; 2]>,
}

/// The texts of the fixture's sources, by (source, id), read from ../shared/data.
fn corpus_texts() -> Option<HashMap<(String, usize), String>> {
    let data = common::shared_data();
    let golden = common::require(
        data.join("spacy-golden/en_core_web_sm-golden.jsonl"),
        "the spaCy golden records",
    )?;
    let ag = common::require(data.join("ag_news_csv/test.csv"), "AG News test.csv")?;
    let mut texts = HashMap::new();
    for line in std::fs::read_to_string(golden).unwrap().lines() {
        let rec: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = rec["id"].as_u64().unwrap() as usize;
        texts.insert(
            ("spacy-golden".into(), id),
            rec["text"].as_str().unwrap().into(),
        );
    }
    // test.csv: "class","title","description", with "" for a quote inside a field.
    let csv = std::fs::read_to_string(ag).unwrap();
    for (i, line) in csv.lines().enumerate() {
        let fields = csv_fields(line);
        assert_eq!(fields.len(), 3, "test.csv line {}: {line}", i + 1);
        texts.insert(("ag_news_csv".into(), i), fields[2].clone());
    }
    Some(texts)
}

/// The fields of one CSV line whose fields are all quoted.
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    while chars.next() == Some('"') {
        let mut field = String::new();
        while let Some(c) = chars.next() {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    field.push('"');
                } else {
                    break;
                }
            } else {
                field.push(c);
            }
        }
        fields.push(field);
        if chars.next() != Some(',') {
            break;
        }
    }
    fields
}

fn span(text: &str, [start, end]: [usize; 2]) -> String {
    text.chars().skip(start).take(end - start).collect()
}

#[test]
fn senter_finds_spacys_sentences_on_every_golden_text() {
    let (Some(dir), Some(texts)) = (common::model_dir(), corpus_texts()) else {
        return;
    };
    let nlp = Nlp::load_with_senter(&dir).unwrap();
    let fixture = std::fs::read_to_string(
        common::workspace().join("worker/tests/fixtures/senter_golden.jsonl"),
    )
    .unwrap();
    let golden: Vec<Golden> = fixture
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(golden.len(), 868);
    let inputs: Vec<&str> = golden
        .iter()
        .map(|g| texts[&(g.source.clone(), g.id)].as_str())
        .collect();
    let found = nlp.senter_sentences(&inputs).unwrap();
    let mut differ = Vec::new();
    let mut multi = 0;
    for ((g, text), got) in golden.iter().zip(&inputs).zip(&found) {
        let want: Vec<String> = g.sents.iter().map(|&s| span(text, s)).collect();
        multi += usize::from(want.len() > 1);
        if *got != want {
            differ.push(format!("{} {}: {want:?}\n   got {got:?}", g.source, g.id));
        }
    }
    assert!(multi >= 150, "{multi} texts of several sentences");
    assert!(
        differ.is_empty(),
        "{} of {} texts differ:\n{}",
        differ.len(),
        golden.len(),
        differ.join("\n")
    );
    // One at a time gives the same sentences as the batch.
    for (text, got) in inputs.iter().zip(&found).step_by(37) {
        assert_eq!(&nlp.senter_sentences(&[*text]).unwrap()[0], got);
    }
}

#[test]
fn the_sentence_split_baseline_keeps_each_sentences_own_text() {
    let Some(dir) = common::model_dir() else {
        return;
    };
    let split = SentenceSplit::load(&dir).unwrap();
    let text = "tbh the vaccine works.  ngl my arm hurt for 2 days!! but whatever #science";
    let claims = split.split(text).unwrap();
    // spaCy: ['tbh the vaccine works.  ', 'ngl my arm hurt for 2 days!!', 'but whatever #science']
    assert_eq!(
        claims,
        [
            "tbh the vaccine works.",
            "ngl my arm hurt for 2 days!!",
            "but whatever #science"
        ]
    );
    // Each claim is a slice of the text: not capitalised, no full stop added.
    let mut at = 0;
    for c in &claims {
        let found = text[at..]
            .find(c.as_str())
            .unwrap_or_else(|| panic!("{c:?} is not in {text:?}"));
        at += found + c.len();
    }
    assert!(split.split("   ").unwrap().is_empty());
    // Without the senter weights the baseline does not load.
    let empty = tempfile::tempdir().unwrap();
    assert!(SentenceSplit::load(empty.path()).is_err());
}
