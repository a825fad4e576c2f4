//! Tokenizers of local models: a folder's `tokenizer.json` (the `tokenizers` crate), or
//! one built from a GGUF file's metadata, which ships none:
//! - `tokenizer.ggml.model = "gpt2"` (SmolLM2, Qwen3, Llama 3): byte-level BPE from the
//!   token list and merges, with the pre-tokenizer that `tokenizer.ggml.pre` names (for
//!   `smollm`, digits split one by one);
//! - `tokenizer.ggml.model = "llama"` (Gemma 3, Phi-3): SentencePiece, merged by token
//!   score the way llama.cpp does it, with byte fallback.
//!
//! Control and user-defined tokens of the vocabulary are matched in the text before
//! anything else, so a chat template's `<|im_start|>` or `<start_of_turn>` becomes its own
//! id. Ids are checked against llama.cpp's in `worker/tests/llm_local.rs`.

use super::weights::LoadError;
use candle_core::quantized::gguf_file::Value;
use std::collections::{BinaryHeap, HashMap};
use std::path::Path;

/// GGUF token types (llama.cpp's `llama_token_type`).
const TYPE_CONTROL: i32 = 3;
const TYPE_USER_DEFINED: i32 = 4;
const TYPE_BYTE: i32 = 6;

/// A model's tokenizer.
pub enum Tokenizer {
    /// `tokenizers`' pipeline (tokenizer.json, or BPE built from GGUF).
    Hf(Box<tokenizers::Tokenizer>),
    /// SentencePiece from GGUF.
    Spm(Box<Spm>),
}

impl Tokenizer {
    /// Reads `tokenizer.json`.
    pub fn from_file(path: &Path) -> Result<Self, LoadError> {
        let t = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| LoadError::new(path, format!("cannot read the tokenizer: {e}")))?;
        Ok(Tokenizer::Hf(Box::new(t)))
    }

    /// Builds the tokenizer a GGUF file's metadata describes.
    pub fn from_gguf(path: &Path, md: &HashMap<String, Value>) -> Result<Self, LoadError> {
        let err = |m: String| LoadError::new(path, m);
        let strings = |key: &str| -> Result<Vec<String>, LoadError> {
            let v = md
                .get(key)
                .ok_or_else(|| err(format!("GGUF metadata has no {key}")))?;
            v.to_vec()
                .map_err(|e| err(format!("{key}: {e}")))?
                .iter()
                .map(|x| {
                    x.to_string()
                        .cloned()
                        .map_err(|e| err(format!("{key}: {e}")))
                })
                .collect()
        };
        let tokens = strings("tokenizer.ggml.tokens")?;
        let types: Vec<i32> = match md.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| err(format!("tokenizer.ggml.token_type: {e}")))?
                .iter()
                .map(|x| x.to_i32().unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        let model = md
            .get("tokenizer.ggml.model")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str)
            .unwrap_or("");
        match model {
            "gpt2" => {
                let merges = strings("tokenizer.ggml.merges")?;
                let pre = md
                    .get("tokenizer.ggml.pre")
                    .and_then(|v| v.to_string().ok())
                    .map(String::as_str)
                    .unwrap_or("default");
                bpe(&tokens, &types, &merges, pre)
                    .map(|t| Tokenizer::Hf(Box::new(t)))
                    .map_err(|e| err(format!("building the BPE tokenizer: {e}")))
            }
            "llama" => {
                let scores: Vec<f32> = match md.get("tokenizer.ggml.scores") {
                    Some(v) => v
                        .to_vec()
                        .map_err(|e| err(format!("tokenizer.ggml.scores: {e}")))?
                        .iter()
                        .map(|x| x.to_f32().unwrap_or(0.0))
                        .collect(),
                    None => vec![0.0; tokens.len()],
                };
                let add_space_prefix = md
                    .get("tokenizer.ggml.add_space_prefix")
                    .and_then(|v| v.to_bool().ok())
                    .unwrap_or(true);
                Ok(Tokenizer::Spm(Box::new(Spm::new(
                    tokens,
                    scores,
                    types,
                    add_space_prefix,
                ))))
            }
            other => Err(err(format!(
                "tokenizer.ggml.model {other:?} is not supported (gpt2 and llama are)"
            ))),
        }
    }

    /// Ids of `text`, special tokens written in it included, without BOS.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        match self {
            Tokenizer::Hf(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| e.to_string()),
            Tokenizer::Spm(s) => Ok(s.encode(text)),
        }
    }

    /// The text of generated ids, control tokens left out.
    pub fn decode(&self, ids: &[u32]) -> Result<String, String> {
        match self {
            Tokenizer::Hf(t) => t.decode(ids, true).map_err(|e| e.to_string()),
            Tokenizer::Spm(s) => Ok(s.decode(ids)),
        }
    }

    /// The id of a token written as `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        match self {
            Tokenizer::Hf(t) => t.token_to_id(text),
            Tokenizer::Spm(s) => s.ids.get(text).copied(),
        }
    }

    /// The text of token `id`.
    pub fn token(&self, id: u32) -> Option<String> {
        match self {
            Tokenizer::Hf(t) => t.id_to_token(id),
            Tokenizer::Spm(s) => s.tokens.get(id as usize).cloned(),
        }
    }

    /// Tokens in the vocabulary (added tokens included).
    pub fn vocab_size(&self) -> usize {
        match self {
            Tokenizer::Hf(t) => t.get_vocab_size(true),
            Tokenizer::Spm(s) => s.tokens.len(),
        }
    }
}

/// The split regex llama.cpp uses for a `tokenizer.ggml.pre` value, `None` for GPT-2's
/// own (ByteLevel's built-in pattern).
fn pre_regex(pre: &str) -> Option<&'static str> {
    const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    match pre {
        "llama-bpe" | "llama3" | "smaug-bpe" => Some(LLAMA3),
        "qwen2" | "qwen35" => Some(QWEN2),
        _ => None,
    }
}

fn bpe(
    tokens: &[String],
    types: &[i32],
    merges: &[String],
    pre: &str,
) -> Result<tokenizers::Tokenizer, String> {
    use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
    use tokenizers::models::bpe::BPE;
    use tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use tokenizers::pre_tokenizers::digits::Digits;
    use tokenizers::pre_tokenizers::sequence::Sequence;
    use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
    use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior};

    let vocab: tokenizers::models::bpe::Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), i as u32))
        .collect();
    let merges: Vec<(String, String)> = merges
        .iter()
        .map(|m| {
            m.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .ok_or_else(|| format!("merge {m:?} is not two tokens"))
        })
        .collect::<Result<_, _>>()?;
    let model = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .ignore_merges(pre_regex(pre).is_some_and(|r| r.contains("{1,3}")))
        .build()
        .map_err(|e| e.to_string())?;
    let mut t = tokenizers::Tokenizer::new(model);
    let pre_tokenizer: PreTokenizerWrapper = match (pre, pre_regex(pre)) {
        (_, Some(regex)) => Sequence::new(vec![
            Split::new(
                SplitPattern::Regex(regex.into()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| e.to_string())?
            .into(),
            ByteLevel::new(false, false, false).into(),
        ])
        .into(),
        ("smollm", None) => Sequence::new(vec![
            Digits::new(true).into(),
            ByteLevel::new(false, false, true).into(),
        ])
        .into(),
        (_, None) => ByteLevel::new(false, false, true).into(),
    };
    t.with_pre_tokenizer(Some(pre_tokenizer));
    t.with_decoder(Some(ByteLevelDecoder::default()));
    t.add_special_tokens(
        tokens
            .iter()
            .zip(types)
            .filter(|(_, &ty)| ty == TYPE_CONTROL || ty == TYPE_USER_DEFINED)
            .map(|(tok, &ty)| AddedToken::from(tok.clone(), ty == TYPE_CONTROL)),
    )
    .map_err(|e| format!("adding the special tokens: {e}"))?;
    Ok(t)
}

/// SentencePiece (BPE by score) as llama.cpp's `llm_tokenizer_spm` runs it.
pub struct Spm {
    tokens: Vec<String>,
    scores: Vec<f32>,
    types: Vec<i32>,
    ids: HashMap<String, u32>,
    /// Control and user-defined tokens, longest first: split out of the text before
    /// SentencePiece sees it.
    specials: Vec<(String, u32)>,
    byte_ids: [Option<u32>; 256],
    add_space_prefix: bool,
}

/// A candidate merge of two adjacent symbols.
#[derive(PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Highest score first; on a tie, the leftmost pair.
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A run of text being merged: a byte range of the escaped text, linked to neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

impl Spm {
    fn new(tokens: Vec<String>, scores: Vec<f32>, types: Vec<i32>, add_space_prefix: bool) -> Self {
        let ids: HashMap<String, u32> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let mut specials: Vec<(String, u32)> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter(|(_, (t, &ty))| {
                (ty == TYPE_CONTROL || ty == TYPE_USER_DEFINED) && !t.is_empty()
            })
            .map(|(i, (t, _))| (t.clone(), i as u32))
            .collect();
        specials.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        let mut byte_ids = [None; 256];
        for (i, (t, &ty)) in tokens.iter().zip(&types).enumerate() {
            if ty == TYPE_BYTE {
                if let Some(hex) = t.strip_prefix("<0x").and_then(|h| h.strip_suffix('>')) {
                    if let Ok(b) = u8::from_str_radix(hex, 16) {
                        byte_ids[b as usize] = Some(i as u32);
                    }
                }
            }
        }
        Spm {
            tokens,
            scores,
            types,
            ids,
            specials,
            byte_ids,
            add_space_prefix,
        }
    }

    /// Splits `text` at special tokens, longest tokens first (llama.cpp's partition).
    fn partition<'a>(&self, text: &'a str) -> Vec<Result<u32, &'a str>> {
        let mut parts: Vec<Result<u32, &'a str>> = vec![Err(text)];
        for (special, id) in &self.specials {
            if !text.contains(special.as_str()) {
                continue;
            }
            let mut next = Vec::with_capacity(parts.len() + 2);
            for part in parts {
                match part {
                    Err(raw) if raw.contains(special.as_str()) => {
                        let mut rest = raw;
                        while let Some(at) = rest.find(special.as_str()) {
                            if at > 0 {
                                next.push(Err(&rest[..at]));
                            }
                            next.push(Ok(*id));
                            rest = &rest[at + special.len()..];
                        }
                        if !rest.is_empty() {
                            next.push(Err(rest));
                        }
                    }
                    other => next.push(other),
                }
            }
            parts = next;
        }
        parts
    }

    fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        let mut prev_special = true;
        for part in self.partition(text) {
            match part {
                Ok(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Err(raw) => {
                    let mut s = String::with_capacity(raw.len() + 3);
                    if self.add_space_prefix && prev_special {
                        s.push(' ');
                    }
                    s.push_str(raw);
                    let escaped = s.replace(' ', "\u{2581}");
                    self.encode_piece(&escaped, &mut out);
                    prev_special = false;
                }
            }
        }
        out
    }

    fn lookup(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    fn encode_piece(&self, text: &str, out: &mut Vec<u32>) {
        let mut symbols: Vec<Symbol> = Vec::new();
        for (i, (start, c)) in text.char_indices().enumerate() {
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: i.checked_sub(1),
                next: None,
            });
            if i > 0 {
                symbols[i - 1].next = Some(i);
            }
        }
        let mut queue = BinaryHeap::new();
        let mut merged_from: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        let try_add =
            |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize, right: usize| {
                let (l, r) = (symbols[left], symbols[right]);
                let piece = &text[l.start..r.start + r.len];
                if let Some(id) = self.lookup(piece) {
                    queue.push(Bigram {
                        score: self.scores.get(id as usize).copied().unwrap_or(0.0),
                        left,
                        right,
                        len: piece.len(),
                    });
                }
            };
        for i in 1..symbols.len() {
            try_add(&mut queue, &symbols, i - 1, i);
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            // Stale: one side was merged away or grew since this pair was queued.
            if l.len == 0 || r.len == 0 || l.len + r.len != b.len || l.next != Some(b.right) {
                continue;
            }
            merged_from.insert((l.start, b.len), (l.len, r.len));
            symbols[b.left].len += r.len;
            symbols[b.left].next = r.next;
            symbols[b.right].len = 0;
            if let Some(n) = r.next {
                symbols[n].prev = Some(b.left);
            }
            if let Some(p) = symbols[b.left].prev {
                try_add(&mut queue, &symbols, p, b.left);
            }
            if let Some(n) = symbols[b.left].next {
                try_add(&mut queue, &symbols, b.left, n);
            }
        }
        let mut i = if symbols.is_empty() { None } else { Some(0) };
        while let Some(at) = i {
            let s = symbols[at];
            self.resegment(text, s.start, s.len, &merged_from, out);
            i = s.next;
        }
    }

    fn resegment(
        &self,
        text: &str,
        start: usize,
        len: usize,
        merged_from: &HashMap<(usize, usize), (usize, usize)>,
        out: &mut Vec<u32>,
    ) {
        let piece = &text[start..start + len];
        if let Some(id) = self.lookup(piece) {
            out.push(id);
            return;
        }
        if let Some(&(l, r)) = merged_from.get(&(start, len)) {
            self.resegment(text, start, l, merged_from, out);
            self.resegment(text, start + l, r, merged_from, out);
            return;
        }
        for b in piece.bytes() {
            if let Some(id) = self.byte_ids[b as usize] {
                out.push(id);
            } else if let Some(unk) = self.lookup("<unk>") {
                out.push(unk);
            }
        }
    }

    fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            let i = id as usize;
            let (Some(t), Some(&ty)) = (self.tokens.get(i), self.types.get(i)) else {
                continue;
            };
            match ty {
                TYPE_CONTROL => {}
                TYPE_BYTE => {
                    if let Some(b) = t
                        .strip_prefix("<0x")
                        .and_then(|h| h.strip_suffix('>'))
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                    {
                        bytes.push(b);
                    }
                }
                _ => bytes.extend_from_slice(t.replace('\u{2581}', " ").as_bytes()),
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        match (self.add_space_prefix, text.strip_prefix(' ')) {
            (true, Some(rest)) => rest.to_string(),
            _ => text,
        }
    }
}
