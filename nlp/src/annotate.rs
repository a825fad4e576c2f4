//! [`Nlp`]: loads the pipeline folder and runs tokenizer → tok2vec → tagger → parser →
//! attribute ruler → NER on batches of docs. Matrix work is stacked over every token of
//! a batch; batches run in parallel on the rayon pool.

use super::arc_eager::{arc_moves, load_moves, ArcEagerState, ArcMove};
use super::attribute_ruler::{AttributeRuler, RulerToken};
use super::biluo::{biluo_moves, BiluoMove, BiluoState};
use super::doc::{Doc, Entity, FeatureIds, Token};
use super::layers::{argmax, Linear};
use super::lexeme::{Lexeme, NormTable};
use super::model_dir::{read_checked, ModelFiles, SENTER_FILE};
use super::msgpack::{self, Value};
use super::parser_model::{ParserNetwork, Precomputed, TransitionState};
use super::thinc::ThincModel;
use super::tok2vec::{FeatureColumn, Tok2Vec};
use super::tokenizer::{RawToken, Tokenizer};
use super::tree::deprojectivize;
use super::NlpError;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Entries after which the lexeme cache starts over, bounding its memory.
const LEXEME_CACHE_LIMIT: usize = 100_000;

/// Tokens per stacked batch: enough rows for GEMM to run at full speed.
const BATCH_TOKENS: usize = 2048;

/// Moves with their labels interned: `(move, label index)`, plus the label strings.
#[derive(Debug, Clone)]
struct ActionTable<M> {
    moves: Vec<(M, u16)>,
    labels: Vec<String>,
}

impl<M: Copy> ActionTable<M> {
    fn new(moves: Vec<(M, String)>) -> Self {
        let mut labels: Vec<String> = Vec::new();
        let moves = moves
            .into_iter()
            .map(|(m, l)| {
                let idx = labels.iter().position(|x| *x == l).unwrap_or_else(|| {
                    labels.push(l);
                    labels.len() - 1
                });
                (m, idx as u16)
            })
            .collect();
        ActionTable { moves, labels }
    }
}

/// The loaded en_core_web_sm pipeline. Cheap to share across threads (`&Nlp`).
pub struct Nlp {
    tokenizer: Tokenizer,
    norms: NormTable,
    tok2vec: Tok2Vec,
    tagger: Linear,
    tag_labels: Vec<String>,
    parser: ParserNetwork,
    parser_actions: ActionTable<ArcMove>,
    ner: ParserNetwork,
    ner_actions: ActionTable<BiluoMove>,
    ruler: AttributeRuler,
    /// The sentence recognizer, when loaded ([`Nlp::load_with_senter`]).
    senter: Option<Senter>,
    /// Lexical attributes of token texts already seen, shared by all threads (like
    /// spaCy's vocab).
    lexemes: Mutex<HashMap<String, Arc<Lexeme>>>,
}

/// spaCy's `senter`: its tok2vec and the softmax over I / S.
struct Senter {
    tok2vec: Tok2Vec,
    softmax: Linear,
}

impl Senter {
    /// The sentences of one prepared doc from its tokvecs.
    fn sentences(&self, p: &Prepared<'_>, tokvecs: &[f32]) -> Vec<String> {
        let n = p.tokens.len();
        if n == 0 {
            return Vec::new();
        }
        let scores = self.softmax.forward(tokvecs, n);
        // spaCy's `SentenceRecognizer.set_annotations`: label 1 (S) starts a sentence;
        // `Doc.sents` always starts one at the first token.
        let starts: Vec<usize> = (0..n)
            .filter(|&i| i == 0 || argmax(&scores[i * 2..i * 2 + 2]) == Some(1))
            .collect();
        // Token offsets are in code points; slice the text by byte offsets.
        let bytes: Vec<usize> = p.text.char_indices().map(|(b, _)| b).collect();
        let at = |cp: usize| bytes.get(cp).copied().unwrap_or(p.text.len());
        let end_of = |t: &RawToken| at(t.idx + t.text.chars().count());
        starts
            .iter()
            .enumerate()
            .map(|(k, &s)| {
                let last = starts.get(k + 1).map_or(n, |&next| next) - 1;
                p.text[at(p.tokens[s].idx)..end_of(&p.tokens[last])].to_string()
            })
            .collect()
    }
}

/// An arc-eager parse driven through the parser's action table.
struct Parse<'a> {
    state: ArcEagerState,
    moves: &'a [(ArcMove, u16)],
}

impl TransitionState for Parse<'_> {
    fn is_final(&self) -> bool {
        self.state.is_final()
    }

    fn context(&self, ids: &mut [isize]) {
        let mut ctx = [-1; 8];
        self.state.context(&mut ctx);
        ids.iter_mut().zip(ctx).for_each(|(o, v)| *o = v);
    }

    fn valid_actions(&self, valid: &mut [bool]) {
        // Validity depends only on the move kind, so test each kind once.
        let ok = [
            ArcMove::Shift,
            ArcMove::Reduce,
            ArcMove::Left,
            ArcMove::Right,
            ArcMove::Break,
        ]
        .map(|k| self.state.valid(k));
        for (v, (m, _)) in valid.iter_mut().zip(self.moves) {
            *v = ok[*m as usize];
        }
    }

    fn apply_action(&mut self, action: usize) {
        let (m, label) = self.moves[action];
        self.state.apply(m, label);
    }

    fn force_final(&mut self) {
        self.state.force_final();
    }
}

/// A BILUO entity recognition driven through the NER's action table.
struct Recognition<'a> {
    state: BiluoState<'a>,
    actions: &'a ActionTable<BiluoMove>,
}

impl TransitionState for Recognition<'_> {
    fn is_final(&self) -> bool {
        self.state.is_final()
    }

    fn context(&self, ids: &mut [isize]) {
        let mut ctx = [-1; 3];
        self.state.context(&mut ctx);
        ids.iter_mut().zip(ctx).for_each(|(o, v)| *o = v);
    }

    fn valid_actions(&self, valid: &mut [bool]) {
        let labels = &self.actions.labels;
        for (v, &(m, l)) in valid.iter_mut().zip(&self.actions.moves) {
            *v = self.state.valid(m, l, labels[usize::from(l)].is_empty());
        }
    }

    fn apply_action(&mut self, action: usize) {
        let (m, label) = self.actions.moves[action];
        self.state.apply(m, label);
    }

    fn force_final(&mut self) {
        self.state.force_final();
    }
}

/// What a doc takes from its batch's stacked computations.
struct BatchView<'b> {
    tags: Vec<String>,
    parser: &'b Precomputed,
    ner: &'b Precomputed,
    /// The doc's first row in the batch.
    offset: usize,
}

/// A tokenized doc waiting for the networks.
struct Prepared<'t> {
    text: &'t str,
    tokens: Vec<RawToken>,
    lexemes: Vec<Arc<Lexeme>>,
}

fn decode<'a>(files: &'a ModelFiles, name: &str) -> Result<Value<'a>, NlpError> {
    msgpack::decode(files.bytes(name)).map_err(|source| NlpError::Msgpack {
        file: name.to_string(),
        source,
    })
}

fn format_error(file: &str, field: &str, message: impl Into<String>) -> NlpError {
    NlpError::Format {
        file: file.to_string(),
        field: field.to_string(),
        message: message.into(),
    }
}

impl Nlp {
    /// Loads the pipeline folder (`models/en_core_web_sm`), checking every file's sha256.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, NlpError> {
        let files = ModelFiles::read(dir.as_ref())?;
        let tokenizer = Tokenizer::from_msgpack(&decode(&files, "tokenizer")?)?;
        let lookups = decode(&files, "vocab/lookups.bin")?;
        let mut lexeme_norm = HashMap::new();
        for (k, v) in lookups
            .get("lexeme_norm")
            .and_then(Value::as_map)
            .ok_or_else(|| format_error("vocab/lookups.bin", "lexeme_norm", "missing"))?
        {
            if let (Some(k), Some(v)) = (k.as_int(), v.as_str()) {
                lexeme_norm.insert(k as u64, v.to_string());
            }
        }
        let tok2vec = Tok2Vec::from_model(&ThincModel::parse(
            "tok2vec/model",
            files.bytes("tok2vec/model"),
        )?)?;
        let tagger_model = ThincModel::parse("tagger/model", files.bytes("tagger/model"))?;
        let softmax = tagger_model
            .nodes
            .iter()
            .find(|n| n.name == "softmax")
            .ok_or_else(|| format_error("tagger/model", "softmax", "no such node"))?;
        let tagger = tagger_model.linear(softmax)?;
        #[derive(serde::Deserialize)]
        struct TaggerCfg {
            labels: Vec<String>,
        }
        let cfg: TaggerCfg = serde_json::from_slice(files.bytes("tagger/cfg"))
            .map_err(|e| format_error("tagger/cfg", "labels", e.to_string()))?;
        if cfg.labels.len() != tagger.n_out || tagger.n_in != tok2vec.width() {
            return Err(format_error(
                "tagger/model",
                "softmax.W",
                "does not fit the labels or tok2vec",
            ));
        }
        let parser = ParserNetwork::from_model(
            &ThincModel::parse("parser/model", files.bytes("parser/model"))?,
            false,
        )?;
        let parser_moves = arc_moves(
            load_moves("parser/moves", &decode(&files, "parser/moves")?, |_, _| {
                false
            })?,
            "parser/moves",
        )?;
        let ner = ParserNetwork::from_model(
            &ThincModel::parse("ner/model", files.bytes("ner/model"))?,
            true,
        )?;
        // MISSING (0) moves and OUT with a label are never added (SPEC §9.1).
        let ner_raw = load_moves("ner/moves", &decode(&files, "ner/moves")?, |a, l| {
            a == 0 || (a == 5 && !l.is_empty())
        })?;
        let ner_moves = biluo_moves(ner_raw, "ner/moves")?;
        if parser.n_actions() != parser_moves.len() || parser.n_features() != 8 {
            return Err(format_error(
                "parser/model",
                "upper.W",
                format!(
                    "{} outputs for {} moves",
                    parser.n_actions(),
                    parser_moves.len()
                ),
            ));
        }
        if ner.n_actions() != ner_moves.len() || ner.n_features() != 3 {
            return Err(format_error(
                "ner/model",
                "upper.W",
                format!("{} outputs for {} moves", ner.n_actions(), ner_moves.len()),
            ));
        }
        let ruler = AttributeRuler::from_msgpack(&decode(&files, "attribute_ruler/patterns")?)?;
        tracing::debug!(dir = %dir.as_ref().display(), "en_core_web_sm loaded");
        Ok(Nlp {
            tokenizer,
            norms: NormTable::new(lexeme_norm),
            tok2vec,
            tagger,
            tag_labels: cfg.labels,
            parser,
            parser_actions: ActionTable::new(parser_moves),
            ner,
            ner_actions: ActionTable::new(ner_moves),
            ruler,
            senter: None,
            lexemes: Mutex::new(HashMap::new()),
        })
    }

    /// Loads the pipeline and its sentence recognizer (`senter`, disabled in the
    /// shipped config): spaCy's `spacy.Tagger.v2` over its own width-16 tok2vec, whose
    /// two labels are I(nside) and S(tart) of a sentence.
    pub fn load_with_senter(dir: impl AsRef<Path>) -> Result<Self, NlpError> {
        let mut nlp = Nlp::load(dir.as_ref())?;
        let (name, sha) = SENTER_FILE;
        let bytes = read_checked(dir.as_ref(), name, sha)?;
        let model = ThincModel::parse(name, &bytes)?;
        let tok2vec = Tok2Vec::from_model(&model)?;
        let softmax = model
            .nodes
            .iter()
            .find(|n| n.name == "softmax")
            .ok_or_else(|| format_error(name, "softmax", "no such node"))?;
        let softmax = model.linear(softmax)?;
        if softmax.n_out != 2 || softmax.n_in != tok2vec.width() {
            return Err(format_error(
                name,
                "softmax.W",
                format!(
                    "{} x {}, expected 2 labels over the tok2vec's {}",
                    softmax.n_out,
                    softmax.n_in,
                    tok2vec.width()
                ),
            ));
        }
        nlp.senter = Some(Senter { tok2vec, softmax });
        Ok(nlp)
    }

    /// The sentences the sentence recognizer finds in each text, as spaCy's
    /// `[s.text for s in doc.sents]` with `senter` enabled and no parser: a sentence
    /// runs from a token labelled S (or the first token) to the next, and its text is the
    /// source's own, from its first token to the end of its last (trailing whitespace
    /// excluded). On the current rayon pool, in input order.
    pub fn senter_sentences<S: AsRef<str> + Sync>(
        &self,
        texts: &[S],
    ) -> Result<Vec<Vec<String>>, NlpError> {
        let senter = self.senter.as_ref().ok_or_else(|| {
            format_error(
                SENTER_FILE.0,
                "senter",
                "not loaded (Nlp::load_with_senter loads it)",
            )
        })?;
        Ok(self
            .batches(texts)
            .into_par_iter()
            .map(|docs| {
                let feats: Vec<Vec<u64>> = docs
                    .iter()
                    .map(|p| Self::features(p, &senter.tok2vec.columns))
                    .collect();
                let tokvecs = senter.tok2vec.forward(&feats);
                docs.iter()
                    .zip(tokvecs.docs())
                    .map(|(p, t2v)| senter.sentences(p, t2v))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
            .into_iter()
            .flatten()
            .collect())
    }

    /// The tokenizer alone.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Analyses one text on the calling thread.
    pub fn analyze(&self, text: &str) -> Doc {
        let prepared = self.prepare(text);
        self.run_batch(vec![prepared]).pop().unwrap_or_else(|| Doc {
            text: text.to_string(),
            tokens: Vec::new(),
            ents: Vec::new(),
        })
    }

    /// Analyses many texts on the current rayon pool (all cores by default), in input
    /// order. Every decision equals [`Nlp::analyze`] on each text; only `t2v_sum` may
    /// differ in the last bits (GEMM blocking depends on the batch's row count).
    pub fn analyze_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<Doc> {
        self.batches(texts)
            .into_par_iter()
            .map(|b| self.run_batch(b))
            .collect::<Vec<_>>()
            .into_iter()
            .flatten()
            .collect()
    }

    /// Tokenizes many texts on the current rayon pool.
    pub fn tokenize_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<Vec<RawToken>> {
        texts
            .par_iter()
            .map(|t| self.tokenizer.tokenize(t.as_ref()))
            .collect()
    }

    /// Tokenizer, tok2vec and tagger only: the fine tag of every token (before the
    /// attribute ruler's whitespace fix-ups), for many texts on the current rayon pool.
    pub fn tag_batch<S: AsRef<str> + Sync>(&self, texts: &[S]) -> Vec<Vec<String>> {
        self.batches(texts)
            .into_par_iter()
            .map(|docs| {
                let feats: Vec<Vec<u64>> = docs
                    .iter()
                    .map(|p| Self::features(p, &self.tok2vec.columns))
                    .collect();
                let tokvecs = self.tok2vec.forward(&feats);
                docs.iter()
                    .zip(tokvecs.docs())
                    .map(|(p, t2v)| self.tags(t2v, p.tokens.len()))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
            .into_iter()
            .flatten()
            .collect()
    }

    fn tags(&self, tokvecs: &[f32], n: usize) -> Vec<String> {
        self.tagger
            .forward(tokvecs, n)
            .chunks_exact(self.tagger.n_out)
            .map(|s| argmax(s).map_or_else(String::new, |i| self.tag_labels[i].clone()))
            .collect()
    }

    /// Tokenizes in parallel and groups the docs into batches of about
    /// [`BATCH_TOKENS`] tokens.
    fn batches<'t, S: AsRef<str> + Sync>(&self, texts: &'t [S]) -> Vec<Vec<Prepared<'t>>> {
        let prepared = self.prepare_all(texts);
        let mut batches: Vec<Vec<Prepared<'_>>> = Vec::new();
        let mut size = BATCH_TOKENS;
        for p in prepared {
            if size >= BATCH_TOKENS {
                batches.push(Vec::new());
                size = 0;
            }
            size += p.tokens.len();
            if let Some(b) = batches.last_mut() {
                b.push(p);
            }
        }
        batches
    }

    fn prepare_all<'t, S: AsRef<str> + Sync>(&self, texts: &'t [S]) -> Vec<Prepared<'t>> {
        texts.par_iter().map(|t| self.prepare(t.as_ref())).collect()
    }

    fn lexeme(&self, text: &str) -> Arc<Lexeme> {
        let cache = || self.lexemes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lx) = cache().get(text) {
            return Arc::clone(lx);
        }
        let lx = Arc::new(self.norms.lexeme(text));
        let mut cache = cache();
        if cache.len() >= LEXEME_CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(text.to_string(), Arc::clone(&lx));
        lx
    }

    fn prepare<'t>(&self, text: &'t str) -> Prepared<'t> {
        let tokens = self.tokenizer.tokenize(text);
        let lexemes = tokens.iter().map(|t| self.lexeme(&t.text)).collect();
        Prepared {
            text,
            tokens,
            lexemes,
        }
    }

    fn features(p: &Prepared<'_>, columns: &[FeatureColumn]) -> Vec<u64> {
        let mut out = Vec::with_capacity(p.tokens.len() * columns.len());
        for (t, lx) in p.tokens.iter().zip(&p.lexemes) {
            for c in columns {
                out.push(match c {
                    FeatureColumn::Norm => match t.norm_override.as_deref() {
                        Some(n) if !n.is_empty() => super::hashing::string_id(n),
                        _ => lx.norm_id,
                    },
                    FeatureColumn::Prefix => lx.prefix_id,
                    FeatureColumn::Suffix => lx.suffix_id,
                    FeatureColumn::Shape => lx.shape_id,
                    FeatureColumn::Spacy => u64::from(t.spacy),
                    FeatureColumn::IsSpace => u64::from(lx.is_space),
                });
            }
        }
        out
    }

    fn run_batch(&self, docs: Vec<Prepared<'_>>) -> Vec<Doc> {
        let feats: Vec<Vec<u64>> = docs
            .iter()
            .map(|p| Self::features(p, &self.tok2vec.columns))
            .collect();
        let tokvecs = self.tok2vec.forward(&feats);
        let ner_own = self.ner.tok2vec.as_ref().map(|t2v| {
            let f: Vec<Vec<u64>> = docs
                .iter()
                .map(|p| Self::features(p, &t2v.columns))
                .collect();
            t2v.forward(&f)
        });
        let ner_vecs = ner_own.as_ref().unwrap_or(&tokvecs);
        // Tagger and both lower layers run once over every token of the batch.
        let total: usize = docs.iter().map(|p| p.tokens.len()).sum();
        let all = tokvecs.all();
        let mut tags = self.tags(all, total).into_iter();
        let pre = self.parser.precompute(all, total);
        let ner_pre = self.ner.precompute(ner_vecs.all(), total);
        let mut offset = 0;
        docs.into_iter()
            .zip(tokvecs.docs())
            .map(|(p, t2v)| {
                let n = p.tokens.len();
                let batch = BatchView {
                    tags: tags.by_ref().take(n).collect(),
                    parser: &pre,
                    ner: &ner_pre,
                    offset,
                };
                offset += n;
                self.finish_doc(p, t2v, batch)
            })
            .collect()
    }

    fn parse(&self, pre: &Precomputed, offset: usize, n: usize) -> (Vec<usize>, Vec<String>) {
        let actions = &self.parser_actions;
        let mut run = Parse {
            state: ArcEagerState::new(n),
            moves: &actions.moves,
        };
        self.parser.decode(pre, offset, &mut run);
        let state = run.state;
        let heads = (0..n)
            .map(|i| usize::try_from(state.heads[i]).unwrap_or(i))
            .collect();
        let deps = (0..n)
            .map(|i| {
                if state.heads[i] >= 0 {
                    actions.labels[usize::from(state.labels[i])].clone()
                } else {
                    "ROOT".to_string()
                }
            })
            .collect();
        (heads, deps)
    }

    fn recognize(
        &self,
        pre: &Precomputed,
        offset: usize,
        sent_start: &[bool],
        is_space: &[bool],
    ) -> Vec<(usize, usize, u16)> {
        let mut run = Recognition {
            state: BiluoState::new(sent_start, is_space),
            actions: &self.ner_actions,
        };
        self.ner.decode(pre, offset, &mut run);
        run.state
            .ents
            .iter()
            .filter_map(|e| e.end.map(|end| (e.start, end, e.label)))
            .collect()
    }

    fn finish_doc(&self, p: Prepared<'_>, tokvecs: &[f32], batch: BatchView<'_>) -> Doc {
        let n = p.tokens.len();
        let width = self.tok2vec.width();
        let tags = batch.tags;
        let (mut heads, mut deps) = self.parse(batch.parser, batch.offset, n);
        let is_space: Vec<bool> = p.lexemes.iter().map(|l| l.is_space).collect();
        let sent_start = deprojectivize(&mut heads, &mut deps, &is_space);
        let mut ruled: Vec<RulerToken<'_>> = p
            .lexemes
            .iter()
            .zip(tags)
            .zip(deps)
            .map(|((lx, tag), dep)| RulerToken {
                lower: &lx.lower,
                is_space: lx.is_space,
                tag,
                dep,
                pos: String::new(),
                morph: String::new(),
            })
            .collect();
        self.ruler.apply(&mut ruled);
        let ruled: Vec<(String, String, String, String)> = ruled
            .into_iter()
            .map(|r| (r.tag, r.pos, r.dep, r.morph))
            .collect();
        let ents = self.recognize(batch.ner, batch.offset, &sent_start, &is_space);
        let mut ent_iob = vec!["O"; n];
        let mut ent_type = vec![""; n];
        for &(s, e, label) in &ents {
            let label = self.ner_actions.labels[usize::from(label)].as_str();
            for (k, t) in (s..e).enumerate() {
                ent_iob[t] = if k == 0 { "B" } else { "I" };
                ent_type[t] = label;
            }
        }
        let tokens: Vec<Token> = p
            .tokens
            .into_iter()
            .zip(p.lexemes)
            .zip(ruled)
            .enumerate()
            .map(|(i, ((t, lx), (tag, pos, dep, morph)))| Token {
                i,
                idx: t.idx,
                ws: t.spacy,
                tag,
                pos,
                dep,
                head: heads[i],
                morph: if morph == "_" { String::new() } else { morph },
                sent_start: sent_start[i],
                ent_iob: ent_iob[i].to_string(),
                ent_type: ent_type[i].to_string(),
                norm: t
                    .norm_override
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| lx.norm.clone()),
                ids: FeatureIds {
                    norm: 0,
                    prefix: lx.prefix_id,
                    suffix: lx.suffix_id,
                    shape: lx.shape_id,
                },
                t2v_sum: tokvecs[i * width..(i + 1) * width].iter().sum(),
                shape: lx.shape.clone(),
                prefix: lx.prefix.clone(),
                suffix: lx.suffix.clone(),
                lower: lx.lower.clone(),
                is_space: lx.is_space,
                text: t.text,
            })
            .map(|mut t| {
                t.ids.norm = super::hashing::string_id(&t.norm);
                t
            })
            .collect();
        let chars: Vec<(usize, char)> = p.text.char_indices().collect();
        let byte_at = |cp: usize| chars.get(cp).map_or(p.text.len(), |&(b, _)| b);
        let ents = ents
            .into_iter()
            .map(|(s, e, label)| {
                let start_char = tokens[s].idx;
                let last = &tokens[e - 1];
                let end_char = last.idx + last.text.chars().count();
                Entity {
                    start: s,
                    end: e,
                    start_char,
                    end_char,
                    label: self.ner_actions.labels[usize::from(label)].clone(),
                    text: p.text[byte_at(start_char)..byte_at(end_char)].to_string(),
                }
            })
            .collect();
        Doc {
            text: p.text.to_string(),
            tokens,
            ents,
        }
    }
}
