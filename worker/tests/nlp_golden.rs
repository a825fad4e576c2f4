//! Parity of `nlp::Nlp` with real spaCy 3.8 on the 268 golden records of
//! `../shared/data/spacy-golden/en_core_web_sm-golden.jsonl` (made by
//! `../shared/nlp/reference_numpy/eval/make_golden.py`): tokenization, feature ids,
//! tags, POS, morphology, heads, labels, sentence starts and entities, all identical.

use crate::common;

use credence_nlp::{Doc, Nlp};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct GoldIds {
    norm: u64,
    prefix: u64,
    suffix: u64,
    shape: u64,
}

#[derive(Deserialize)]
struct GoldToken {
    text: String,
    idx: usize,
    ws: bool,
    tag: String,
    pos: String,
    dep: String,
    head: usize,
    morph: String,
    sent_start: bool,
    ent_iob: String,
    ent_type: String,
    norm: String,
    shape: String,
    prefix: String,
    suffix: String,
    ids: GoldIds,
    t2v_sum: f32,
}

#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct GoldEntity {
    start: usize,
    end: usize,
    start_char: usize,
    end_char: usize,
    label: String,
    text: String,
}

#[derive(Deserialize)]
struct GoldRecord {
    id: u64,
    text: String,
    tokens: Vec<GoldToken>,
    ents: Vec<GoldEntity>,
    sents: Vec<[usize; 2]>,
}

/// Per-field agreement counts and the first few differences.
#[derive(Default)]
struct Tally {
    checked: BTreeMap<&'static str, usize>,
    wrong: BTreeMap<&'static str, usize>,
    examples: Vec<String>,
}

impl Tally {
    fn check<T: PartialEq + std::fmt::Debug>(
        &mut self,
        field: &'static str,
        id: u64,
        i: usize,
        gold: T,
        ours: T,
    ) {
        *self.checked.entry(field).or_default() += 1;
        if gold != ours {
            *self.wrong.entry(field).or_default() += 1;
            if self.examples.len() < 30 {
                self.examples.push(format!(
                    "record {id} token {i} {field}: spaCy {gold:?}, ours {ours:?}"
                ));
            }
        }
    }
}

fn compare(gold: &GoldRecord, doc: &Doc, tally: &mut Tally) {
    let id = gold.id;
    let gold_toks: Vec<_> = gold.tokens.iter().map(|t| (&t.text, t.idx, t.ws)).collect();
    let our_toks: Vec<_> = doc.tokens.iter().map(|t| (&t.text, t.idx, t.ws)).collect();
    tally.check("tokenization (docs)", id, 0, &gold_toks, &our_toks);
    if gold_toks != our_toks {
        return;
    }
    for (i, (g, t)) in gold.tokens.iter().zip(&doc.tokens).enumerate() {
        tally.check("ids.norm", id, i, g.ids.norm, t.ids.norm);
        tally.check("ids.prefix", id, i, g.ids.prefix, t.ids.prefix);
        tally.check("ids.suffix", id, i, g.ids.suffix, t.ids.suffix);
        tally.check("ids.shape", id, i, g.ids.shape, t.ids.shape);
        tally.check(
            "norm/shape/prefix/suffix",
            id,
            i,
            (&g.norm, &g.shape, &g.prefix, &g.suffix),
            (&t.norm, &t.shape, &t.prefix, &t.suffix),
        );
        tally.check(
            "t2v_sum (±2e-3)",
            id,
            i,
            true,
            (g.t2v_sum - t.t2v_sum).abs() < 2e-3,
        );
        tally.check("tag", id, i, &g.tag, &t.tag);
        tally.check("pos", id, i, &g.pos, &t.pos);
        tally.check("morph", id, i, &g.morph, &t.morph);
        tally.check("head", id, i, g.head, t.head);
        tally.check("dep", id, i, &g.dep, &t.dep);
        tally.check("sent_start", id, i, g.sent_start, t.sent_start);
        tally.check(
            "ent_iob/ent_type",
            id,
            i,
            (&g.ent_iob, &g.ent_type),
            (&t.ent_iob, &t.ent_type),
        );
    }
    let ours: Vec<_> = doc
        .ents
        .iter()
        .map(|e| GoldEntity {
            start: e.start,
            end: e.end,
            start_char: e.start_char,
            end_char: e.end_char,
            label: e.label.clone(),
            text: e.text.clone(),
        })
        .collect();
    tally.check("entities (docs)", id, 0, &gold.ents, &ours);
    tally.check("sents (docs)", id, 0, gold.sents.clone(), doc.sents());
}

#[test]
fn all_golden_records_match_spacy() {
    let (Some(dir), Some(golden)) = (common::model_dir(), common::golden_file()) else {
        return;
    };
    let nlp = Nlp::load(&dir).unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()));
    let text =
        std::fs::read_to_string(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
    let records: Vec<GoldRecord> = text
        .lines()
        .enumerate()
        .map(|(n, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", golden.display(), n + 1))
        })
        .collect();
    assert_eq!(records.len(), 268, "the golden file holds 268 records");
    let texts: Vec<&str> = records.iter().map(|r| r.text.as_str()).collect();
    let docs = nlp.analyze_batch(&texts);
    let mut tally = Tally::default();
    for (gold, doc) in records.iter().zip(&docs) {
        compare(gold, doc, &mut tally);
    }
    // A doc analysed alone equals the same doc analysed in a batch (tok2vec sums may
    // differ in the last bits: GEMM blocking depends on the batch's row count).
    let decisions = |d: &Doc| {
        let mut d = d.clone();
        d.tokens.iter_mut().for_each(|t| t.t2v_sum = 0.0);
        d
    };
    for i in [0, 57, 200] {
        assert_eq!(
            decisions(&nlp.analyze(texts[i])),
            decisions(&docs[i]),
            "record {i}: batch and single differ"
        );
    }
    let summary: Vec<String> = tally
        .checked
        .iter()
        .map(|(f, n)| format!("{f}: {}/{n}", n - tally.wrong.get(f).copied().unwrap_or(0)))
        .collect();
    eprintln!("{}", summary.join("\n"));
    assert!(
        tally.wrong.is_empty(),
        "differences from spaCy:\n{}",
        tally.examples.join("\n")
    );
    assert_eq!(
        tally.checked["tag"], 4256,
        "every golden token was compared"
    );
}
