//! Hand-built docs for unit tests: only the fields the verifier reads are real.

use credence_nlp::{Doc, Entity, FeatureIds, Token};

/// A doc of space-separated tokens from (text, dep, head) triples, without entities.
pub(crate) fn doc(tokens: &[(&str, &str, usize)]) -> Doc {
    doc_with_ents(tokens, &[])
}

/// Like [`doc`], with entities given as (label, start token, end token).
pub(crate) fn doc_with_ents(tokens: &[(&str, &str, usize)], ents: &[(&str, usize, usize)]) -> Doc {
    let mut text = String::new();
    let mut toks = Vec::new();
    for (i, &(word, dep, head)) in tokens.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        let idx = text.chars().count();
        text.push_str(word);
        toks.push(Token {
            i,
            text: word.to_string(),
            idx,
            ws: i + 1 < tokens.len(),
            tag: String::new(),
            pos: String::new(),
            dep: dep.to_string(),
            head,
            morph: String::new(),
            sent_start: i == 0,
            ent_iob: "O".into(),
            ent_type: String::new(),
            norm: word.to_lowercase(),
            shape: String::new(),
            prefix: String::new(),
            suffix: String::new(),
            ids: FeatureIds {
                norm: 0,
                prefix: 0,
                suffix: 0,
                shape: 0,
            },
            t2v_sum: 0.0,
            lower: word.to_lowercase(),
            is_space: false,
        });
    }
    let ents = ents
        .iter()
        .map(|&(label, start, end)| {
            let start_char = toks[start].idx;
            let end_char = toks[end - 1].idx + toks[end - 1].text.chars().count();
            Entity {
                start,
                end,
                start_char,
                end_char,
                label: label.to_string(),
                text: text
                    .chars()
                    .skip(start_char)
                    .take(end_char - start_char)
                    .collect(),
            }
        })
        .collect();
    Doc {
        text,
        tokens: toks,
        ents,
    }
}
