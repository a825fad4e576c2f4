//! The analysed document: tokens with tags, dependencies and entities, the helpers the
//! verifier uses (children, subjects, conjuncts, subtrees, entity lookup), and the
//! golden-record JSON layout of `credence nlp parse`.

use serde::{Deserialize, Serialize};

/// spaCy string ids of a token's lexical features (tok2vec inputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureIds {
    pub norm: u64,
    pub prefix: u64,
    pub suffix: u64,
    pub shape: u64,
}

/// One token, as spaCy's `Token` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    /// Position in the doc.
    pub i: usize,
    pub text: String,
    /// Offset in the text in Unicode code points.
    pub idx: usize,
    /// Followed by one absorbed ASCII space.
    pub ws: bool,
    /// Fine-grained (Penn) tag.
    pub tag: String,
    /// Universal POS tag (from the attribute ruler).
    pub pos: String,
    pub dep: String,
    /// Absolute index of the head (a root is its own head).
    pub head: usize,
    pub morph: String,
    pub sent_start: bool,
    /// `B`, `I` or `O`.
    pub ent_iob: String,
    /// Entity label, empty outside entities.
    pub ent_type: String,
    pub norm: String,
    pub shape: String,
    pub prefix: String,
    pub suffix: String,
    pub ids: FeatureIds,
    /// Sum of the token's shared tok2vec row (a debugging aid for parity checks).
    pub t2v_sum: f32,
    #[serde(skip)]
    pub lower: String,
    #[serde(skip)]
    pub is_space: bool,
}

/// A named entity: token span `[start, end)` and code-point span `[start_char, end_char)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entity {
    pub start: usize,
    pub end: usize,
    pub start_char: usize,
    pub end_char: usize,
    pub label: String,
    pub text: String,
}

/// The analysis of one text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Doc {
    pub text: String,
    pub tokens: Vec<Token>,
    pub ents: Vec<Entity>,
}

/// One line of `credence nlp parse` output (the golden file's record layout).
#[derive(Debug, Clone, Serialize)]
pub struct DocRecord<'a> {
    pub id: &'a serde_json::Value,
    pub text: &'a str,
    pub tokens: &'a [Token],
    pub ents: &'a [Entity],
    pub sents: Vec<[usize; 2]>,
}

impl Doc {
    /// Sentences as token spans `[start, end)`.
    pub fn sents(&self) -> Vec<[usize; 2]> {
        let mut out: Vec<[usize; 2]> = Vec::new();
        for t in &self.tokens {
            match out.last_mut() {
                Some(last) if !t.sent_start => last[1] = t.i + 1,
                _ => out.push([t.i, t.i + 1]),
            }
        }
        out
    }

    /// The record written by `credence nlp parse` for this doc.
    pub fn record<'a>(&'a self, id: &'a serde_json::Value) -> DocRecord<'a> {
        DocRecord {
            id,
            text: &self.text,
            tokens: &self.tokens,
            ents: &self.ents,
            sents: self.sents(),
        }
    }

    /// Direct dependents of token `i`, left to right.
    pub fn children(&self, i: usize) -> impl Iterator<Item = &Token> + '_ {
        self.tokens.iter().filter(move |t| t.head == i && t.i != i)
    }

    /// Subjects of a verb: children labelled `nsubj` or `nsubjpass`.
    pub fn subjects(&self, verb: usize) -> Vec<&Token> {
        self.children(verb)
            .filter(|t| t.dep == "nsubj" || t.dep == "nsubjpass")
            .collect()
    }

    /// The conjunct chain of token `i` (spaCy's `Token.conjuncts`): tokens linked to
    /// it by `conj` arcs, following the chain down from its first conjunct.
    pub fn conjuncts(&self, i: usize) -> Vec<usize> {
        let Some(tok) = self.tokens.get(i) else {
            return Vec::new();
        };
        let mut first = i;
        let mut head = tok;
        for _ in 0..self.tokens.len() {
            if head.dep != "conj" || head.head == head.i {
                break;
            }
            first = head.head;
            head = &self.tokens[first];
        }
        let mut out = Vec::new();
        let mut frontier = vec![first];
        while let Some(t) = frontier.pop() {
            for c in self.children(t).filter(|c| c.dep == "conj") {
                if out.contains(&c.i) {
                    continue;
                }
                out.push(c.i);
                frontier.push(c.i);
            }
        }
        if first != i {
            out.push(first);
        }
        out.retain(|&t| t != i);
        out.sort_unstable();
        out
    }

    /// The token span `[start, end)` of the subtree rooted at `i` (the tree is
    /// projective after decoding, so the subtree is contiguous).
    pub fn subtree_span(&self, i: usize) -> (usize, usize) {
        let (mut lo, mut hi) = (i, i);
        let mut seen = vec![false; self.tokens.len()];
        let mut stack = vec![i];
        while let Some(t) = stack.pop() {
            for c in self.children(t) {
                if std::mem::replace(&mut seen[c.i], true) {
                    continue;
                }
                lo = lo.min(c.i);
                hi = hi.max(c.i);
                stack.push(c.i);
            }
        }
        (lo, hi + 1)
    }

    /// The entity covering token `i`, if any.
    pub fn entity_at(&self, i: usize) -> Option<&Entity> {
        self.ents.iter().find(|e| e.start <= i && i < e.end)
    }

    /// Entities overlapping the code-point span `[start_char, end_char)`.
    pub fn entities_in(&self, start_char: usize, end_char: usize) -> Vec<&Entity> {
        self.ents
            .iter()
            .filter(|e| e.start_char < end_char && start_char < e.end_char)
            .collect()
    }

    /// The sentence of token `i` as a token span.
    pub fn sentence_of(&self, i: usize) -> Option<[usize; 2]> {
        self.sents().into_iter().find(|s| s[0] <= i && i < s[1])
    }
}
