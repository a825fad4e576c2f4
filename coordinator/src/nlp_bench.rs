//! `credence nlp bench`: the spaCy port's throughput on a set of texts, stage by stage
//! (tokenizer alone, tokenizer + tagger, the whole pipeline), on one thread pool.

use anyhow::bail;
use credence_nlp::Nlp;
use std::time::Instant;

/// What one bench measured.
#[derive(Debug, Clone, PartialEq)]
pub struct NlpBench {
    /// Texts run (the input repeated until it held enough words).
    pub texts: usize,
    /// Whitespace-separated words in them.
    pub words: usize,
    /// Tokens the pipeline made of them.
    pub tokens: usize,
    /// Threads of the pool.
    pub threads: usize,
    /// `(stage, seconds)`: the tokenizer, tokenizer + tagger, the full pipeline.
    pub stages: Vec<(&'static str, f64)>,
}

/// `texts` repeated, in order, until they hold at least `min_words` words (at least once).
pub fn repeated<'a>(texts: &[&'a str], min_words: usize) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut words = 0;
    loop {
        for t in texts {
            out.push(*t);
            words += t.split_whitespace().count();
        }
        if words >= min_words || words == 0 {
            return out;
        }
    }
}

/// Times each stage of `nlp` on `texts` inside `pool`. The three runs must agree on the
/// token count.
pub fn run(nlp: &Nlp, texts: &[&str], pool: &rayon::ThreadPool) -> anyhow::Result<NlpBench> {
    if texts.is_empty() {
        bail!("no texts to time");
    }
    let words = texts.iter().map(|t| t.split_whitespace().count()).sum();
    let t = Instant::now();
    let tokens: usize = pool
        .install(|| nlp.tokenize_batch(texts))
        .iter()
        .map(Vec::len)
        .sum();
    let tokenize_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let tagged: usize = pool
        .install(|| nlp.tag_batch(texts))
        .iter()
        .map(Vec::len)
        .sum();
    let tag_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let docs = pool.install(|| nlp.analyze_batch(texts));
    let full_s = t.elapsed().as_secs_f64();
    let parsed: usize = docs.iter().map(|d| d.tokens.len()).sum();
    if tagged != tokens || parsed != tokens {
        bail!("token counts differ between stages: {tokens} / {tagged} / {parsed}");
    }
    Ok(NlpBench {
        texts: texts.len(),
        words,
        tokens,
        threads: pool.current_num_threads(),
        stages: vec![
            ("tokenizer", tokenize_s),
            ("tokenizer+tagger", tag_s),
            ("full pipeline", full_s),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_repeat_until_they_hold_the_words_asked_for() {
        let texts = ["one two", "three"];
        assert_eq!(repeated(&texts, 0), ["one two", "three"]);
        assert_eq!(repeated(&texts, 3), ["one two", "three"]);
        assert_eq!(
            repeated(&texts, 4),
            ["one two", "three", "one two", "three"]
        );
        // Texts without words cannot reach the count: they run once.
        assert_eq!(repeated(&[""], 10), [""]);
    }
}
