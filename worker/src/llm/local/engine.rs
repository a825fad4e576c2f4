//! The thread that owns a local model and serves every request sent to it.
//!
//! Continuous batching: a request is admitted as soon as a slot is free (up to
//! `max_batch`), its prompt is run alone (the prefill, which yields its first token),
//! and from then on each step decodes one token for every sequence in flight in one
//! forward pass. A sequence leaves the batch at its end-of-turn token or its limit and
//! is answered at once; nothing of it stays behind (each has its own KV cache).
//! Decoding is greedy (the lowest id wins a tie), so an answer depends only on its
//! prompt: the same prompt gives the same bytes alone or in any batch, in any process
//! (tested in `worker/tests/llm_local.rs`).
//!
//! Prefix reuse: the keys and values of the last few prompts are kept after their
//! prefill, and a new prompt that starts with the same tokens (a prompt template's
//! instructions and examples, ~900 of a self-repair prompt's ~1,000 tokens) copies them
//! and runs only the rest. A position's keys and values depend only on the tokens up to
//! it, and on the CPU every row of a product is computed alone, so the answer is the
//! same bytes as without reuse (tested in `worker/tests/llm_device.rs` and
//! `worker/tests/llm_local.rs`).

use super::model::SeqCache;
use super::weights::LoadError;
use super::{LocalModel, LocalSettings};
use crate::llm::{ChatMessage, GenerateError};
use candle_core::Tensor;
use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Mutex;
use std::time::Instant;

/// A generation asked of the engine.
pub struct EngineRequest {
    /// The chat.
    pub messages: Vec<ChatMessage>,
    /// Generation limit.
    pub max_new_tokens: usize,
    /// Generate exactly `max_new_tokens`, through end-of-turn tokens (benchmarks).
    pub ignore_eos: bool,
    /// Where the answer goes.
    pub reply: tokio::sync::oneshot::Sender<Result<Generation, EngineError>>,
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// The model wrote an end-of-turn token.
    Stop,
    /// `max_new_tokens` were generated.
    Length,
    /// The model's context is full.
    Context,
}

/// A finished generation.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The generated text (end-of-turn token excluded).
    pub text: String,
    /// The generated ids (end-of-turn token excluded).
    pub ids: Vec<u32>,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Of those, the leading ones whose keys and values came from an earlier prompt.
    pub reused_tokens: usize,
    /// Seconds of the prompt's forward pass (which gives the first token).
    pub prefill_seconds: f64,
    /// Seconds from the first token to the last.
    pub decode_seconds: f64,
    /// Why it ended.
    pub finish: Finish,
}

/// A generation that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    /// The prompt does not fit the model's context.
    PromptTooLong {
        /// Tokens in the prompt.
        tokens: usize,
        /// The model's context.
        context: usize,
    },
    /// The prompt could not be rendered or tokenized.
    Prompt(String),
    /// The forward pass failed.
    Model(String),
}

impl EngineError {
    /// The generation seam's error: a prompt problem is the example's; a failing model
    /// also (it fails the same way on every retry).
    pub fn into_generate_error(self, endpoint: &str) -> GenerateError {
        match self {
            EngineError::PromptTooLong { tokens, context } => GenerateError::Rejected {
                endpoint: endpoint.to_string(),
                status: 413,
                message: format!("prompt of {tokens} tokens does not fit the context of {context}"),
            },
            EngineError::Prompt(m) | EngineError::Model(m) => GenerateError::Malformed {
                endpoint: endpoint.to_string(),
                message: m,
            },
        }
    }
}

/// A running engine: its request channel.
pub struct Engine {
    tx: Mutex<Sender<EngineRequest>>,
}

impl Engine {
    /// Loads the model on a new thread and starts serving; returns when the model is
    /// loaded, or with the load's error.
    pub fn start(settings: LocalSettings, max_batch: usize) -> Result<Self, LoadError> {
        let (tx, rx) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let path = settings.path.clone();
        std::thread::Builder::new()
            .name("credence-llm".into())
            .spawn(move || {
                let model = match LocalModel::load(&settings) {
                    Ok(m) => {
                        let _ = ready_tx.send(Ok(()));
                        m
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                // A panic in a forward pass (a bug, or a model file that got past the
                // load's checks) fails the requests in flight (their answer channels
                // close) and serving starts over; an engine thread that died would leave
                // a loaded-looking backend that fails every later job.
                while let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
                    || serve(&model, &rx, max_batch.max(1)),
                )) {
                    let message = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("a panic");
                    tracing::error!(%message, "the model's forward pass panicked; its requests fail and the engine goes on");
                }
            })
            .map_err(|e| LoadError::new(&path, format!("cannot start the model thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Engine { tx: Mutex::new(tx) }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(LoadError::new(
                &path,
                "the model thread stopped while loading",
            )),
        }
    }

    /// Queues a request.
    pub fn submit(&self, request: EngineRequest) -> Result<(), String> {
        self.tx
            .lock()
            .map_err(|_| "the model's queue is poisoned".to_string())?
            .send(request)
            .map_err(|_| "the model's thread stopped".to_string())
    }
}

/// A sequence in flight.
struct Slot {
    cache: SeqCache,
    ids: Vec<u32>,
    last: u32,
    prompt_tokens: usize,
    reused_tokens: usize,
    max_new: usize,
    ignore_eos: bool,
    prefill_seconds: f64,
    decode_started: Instant,
    finish: Option<Finish>,
    reply: tokio::sync::oneshot::Sender<Result<Generation, EngineError>>,
}

impl Slot {
    /// Takes a generated token; decides whether the sequence is done.
    fn push(&mut self, token: u32, stops: &[u32], context: usize) {
        if !self.ignore_eos && stops.contains(&token) {
            self.finish = Some(Finish::Stop);
            return;
        }
        self.ids.push(token);
        self.last = token;
        if self.ids.len() >= self.max_new {
            self.finish = Some(Finish::Length);
        } else if self.cache.len() >= context {
            self.finish = Some(Finish::Context);
        }
    }

    fn answer(self, model: &LocalModel) {
        let result = model
            .tokenizer
            .decode(&self.ids)
            .map_err(EngineError::Prompt)
            .map(|text| Generation {
                text,
                ids: self.ids,
                prompt_tokens: self.prompt_tokens,
                reused_tokens: self.reused_tokens,
                prefill_seconds: self.prefill_seconds,
                decode_seconds: self.decode_started.elapsed().as_secs_f64(),
                finish: self.finish.unwrap_or(Finish::Length),
            });
        let _ = self.reply.send(result);
    }
}

/// The greedy choice of each row of `[n, vocab]` logits (NaN never wins; ties go to the
/// lowest id).
fn argmax_rows(logits: &Tensor) -> candle_core::Result<Vec<u32>> {
    let rows = logits.to_vec2::<f32>()?;
    Ok(rows
        .iter()
        .map(|row| {
            let mut best = 0usize;
            let mut best_v = f32::NEG_INFINITY;
            for (i, &v) in row.iter().enumerate() {
                if v > best_v {
                    best = i;
                    best_v = v;
                }
            }
            best as u32
        })
        .collect())
}

/// How many prompts' keys and values are kept for prefix reuse: a sweep alternates
/// between a few prompt templates (decomposition, self-repair).
const KEPT_PROMPTS: usize = 4;

/// The keys and values of the last [`KEPT_PROMPTS`] prompts, most recent first.
struct Prefixes {
    kept: VecDeque<(Vec<u32>, SeqCache)>,
}

impl Prefixes {
    /// A cache to prefill `ids` into: a copy of the longest prefix that a kept prompt
    /// shares with it (never the whole prompt: its last token must run to give logits),
    /// or an empty one. Returns the cache and the positions it holds.
    fn start(&mut self, ids: &[u32], layers: usize) -> candle_core::Result<(SeqCache, usize)> {
        let shared = |kept: &[u32]| {
            let n = kept.iter().zip(ids).take_while(|(a, b)| a == b).count();
            n.min(ids.len() - 1)
        };
        let best = (0..self.kept.len())
            .map(|i| (shared(&self.kept[i].0), i))
            .max_by_key(|&(n, i)| (n, std::cmp::Reverse(i)));
        match best {
            Some((n, i)) if n > 0 => {
                let entry = self.kept.remove(i).expect("an index of kept");
                let cache = entry.1.prefix(n)?;
                self.kept.push_front(entry);
                Ok((cache, n))
            }
            _ => Ok((SeqCache::new(layers), 0)),
        }
    }

    /// Keeps a prefilled prompt's keys and values.
    fn keep(&mut self, ids: Vec<u32>, cache: &SeqCache) -> candle_core::Result<()> {
        // A kept prompt that this one extends is superseded by it.
        self.kept
            .retain(|(kept, _)| !(kept.len() <= ids.len() && ids.starts_with(kept)));
        self.kept.push_front((ids, cache.prefix(cache.len())?));
        self.kept.truncate(KEPT_PROMPTS);
        Ok(())
    }
}

/// Renders, tokenizes and prefills a request; `None` when it is already answered.
fn admit(model: &LocalModel, request: EngineRequest, prefixes: &mut Prefixes) -> Option<Slot> {
    let started = Instant::now();
    let context = model.model.context_length();
    let ids = match model.prompt_ids(&request.messages) {
        Ok(ids) => ids,
        Err(e) => {
            let _ = request.reply.send(Err(EngineError::Prompt(e)));
            return None;
        }
    };
    if ids.len() > context || ids.is_empty() {
        let _ = request.reply.send(Err(EngineError::PromptTooLong {
            tokens: ids.len(),
            context,
        }));
        return None;
    }
    let mut slot = Slot {
        cache: SeqCache::new(0),
        ids: Vec::new(),
        last: 0,
        prompt_tokens: ids.len(),
        reused_tokens: 0,
        max_new: request.max_new_tokens,
        ignore_eos: request.ignore_eos,
        prefill_seconds: 0.0,
        decode_started: started,
        finish: None,
        reply: request.reply,
    };
    if slot.max_new == 0 {
        slot.finish = Some(Finish::Length);
        slot.answer(model);
        return None;
    }
    let logits = prefixes
        .start(&ids, model.model.config.layers)
        .and_then(|(cache, reused)| {
            slot.cache = cache;
            slot.reused_tokens = reused;
            model
                .model
                .forward(&[ids[reused..].to_vec()], &mut [&mut slot.cache])
        })
        .and_then(|l| argmax_rows(&l))
        .and_then(|next| prefixes.keep(ids, &slot.cache).map(|()| next));
    match logits {
        Ok(next) => {
            slot.prefill_seconds = started.elapsed().as_secs_f64();
            slot.decode_started = Instant::now();
            slot.push(next[0], &model.stops, context);
            if slot.finish.is_some() {
                slot.answer(model);
                None
            } else {
                Some(slot)
            }
        }
        Err(e) => {
            let _ = slot.reply.send(Err(EngineError::Model(e.to_string())));
            None
        }
    }
}

fn serve(model: &LocalModel, rx: &Receiver<EngineRequest>, max_batch: usize) {
    let context = model.model.context_length();
    let mut active: Vec<Slot> = Vec::new();
    let mut prefixes = Prefixes {
        kept: VecDeque::new(),
    };
    loop {
        while active.len() < max_batch {
            let request = if active.is_empty() {
                match rx.recv() {
                    Ok(r) => r,
                    Err(_) => return,
                }
            } else {
                match rx.try_recv() {
                    Ok(r) => r,
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                }
            };
            if request.reply.is_closed() {
                continue;
            }
            if let Some(slot) = admit(model, request, &mut prefixes) {
                active.push(slot);
            }
        }
        // A caller that gave up (its future was dropped) frees its slot.
        active.retain(|s| !s.reply.is_closed());
        if active.is_empty() {
            continue;
        }
        let tokens: Vec<Vec<u32>> = active.iter().map(|s| vec![s.last]).collect();
        let mut caches: Vec<&mut SeqCache> = active.iter_mut().map(|s| &mut s.cache).collect();
        let step = model
            .model
            .forward(&tokens, &mut caches)
            .and_then(|l| argmax_rows(&l));
        match step {
            Ok(next) => {
                for (slot, token) in active.iter_mut().zip(next) {
                    slot.push(token, &model.stops, context);
                }
            }
            Err(e) => {
                let message = e.to_string();
                for slot in active.drain(..) {
                    let _ = slot.reply.send(Err(EngineError::Model(message.clone())));
                }
                continue;
            }
        }
        let mut still = Vec::with_capacity(active.len());
        for slot in active.drain(..) {
            if slot.finish.is_some() {
                slot.answer(model);
            } else {
                still.push(slot);
            }
        }
        active = still;
    }
}
