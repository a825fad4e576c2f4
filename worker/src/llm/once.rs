//! Every generation exactly once per sweep (ARCHITECTURE.md invariant). A generation is
//! keyed by (model fingerprint, prompt version + rendered messages, decoding parameters)
//! in the store's generation cache. Before calling the model, a caller takes the key's
//! lease in the store; whoever holds it generates, stores the completion and gives the
//! lease back, while every other caller, in this process or on another worker, waits
//! for the cache entry. So the four mode jobs of one example, running at once on four
//! workers, make one base generation between them, and a rerun makes none. The holder
//! renews its lease every third of its term while the model works, so a lease is short
//! (a minute) however long a generation takes: a holder that dies loses it within the
//! minute, and the next caller takes the generation over.

use super::{ChatRequest, GenerateError, Generator};
use credence_infra::cache::{CachedGeneration, GenerationCache, TokenUsage};
use credence_infra::observe::{CacheKind, JobObserver, LlmRequest};
use credence_infra::store::StoreError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A generator behind the generation cache and its leases.
pub struct GenerateOnce {
    generator: Arc<dyn Generator>,
    /// Callers in this process wait here for a key that is being generated, instead of
    /// polling the store.
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// How often a caller looks again while another process holds the lease.
    poll: Duration,
    /// How long a lease lasts unless renewed.
    lease_ttl: Duration,
    /// Completions made while the store could not take them, by gate key: the job that
    /// asked fails for the outage and is retried in place, and its retry stores and
    /// returns the completion kept here instead of asking the model again.
    unstored: Mutex<HashMap<String, Generated>>,
}

/// A lease's term: renewed every third of it while the model works.
const LEASE_TTL: Duration = Duration::from_secs(60);

/// A completion and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The completion.
    pub text: String,
    /// Whether it came from the cache (no model call in this process).
    pub cached: bool,
    /// Token counts of a fresh generation.
    pub usage: TokenUsage,
    /// Seconds the model took to generate it, also when it came from the cache (what it
    /// cost then; 0 when the cache did not record it).
    pub seconds: f64,
    /// Attempts that failed before a fresh generation succeeded.
    pub retries: u32,
    /// Whether a fresh generation stopped at `max_new_tokens` (false from the cache:
    /// the generation that filled it was counted then).
    pub hit_limit: bool,
}

impl Generated {
    fn cached(hit: CachedGeneration) -> Self {
        Generated {
            text: hit.completion,
            cached: true,
            usage: TokenUsage::default(),
            seconds: hit.seconds.unwrap_or(0.0),
            retries: 0,
            hit_limit: false,
        }
    }

    /// Reports this generation of `model` to `observer`: a generation-cache hit, or a
    /// miss and the model request it took (tokens, seconds, retries).
    pub fn report(&self, observer: &dyn JobObserver, model: &str) {
        if self.cached {
            observer.cache(CacheKind::Generation, 1, 0);
            return;
        }
        observer.cache(CacheKind::Generation, 0, 1);
        observer.llm_request(
            model,
            LlmRequest {
                prompt_tokens: self.usage.prompt_tokens.map_or(0, u64::from),
                generated_tokens: self.usage.completion_tokens.map_or(0, u64::from),
                seconds: self.seconds,
                retries: u64::from(self.retries),
                hit_limit: self.hit_limit,
            },
        );
    }
}

/// A generation that could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OnceError {
    /// The model failed.
    #[error(transparent)]
    Generate(#[from] GenerateError),
    /// The generation cache failed.
    #[error("generation cache: {0}")]
    Cache(#[from] StoreError),
}

impl GenerateOnce {
    /// Puts `generator` behind the cache.
    pub fn new(generator: Arc<dyn Generator>) -> Self {
        GenerateOnce {
            generator,
            gates: Mutex::new(HashMap::new()),
            poll: Duration::from_millis(100),
            lease_ttl: LEASE_TTL,
            unstored: Mutex::new(HashMap::new()),
        }
    }

    /// The same with another lease term (tests take it short).
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl.max(Duration::from_millis(30));
        self
    }

    /// The generator behind it.
    pub fn generator(&self) -> &Arc<dyn Generator> {
        &self.generator
    }

    /// The cache key's prompt part: the prompt's version and the rendered messages.
    pub fn cache_prompt(prompt_version: &str, request: &ChatRequest) -> String {
        // Messages as JSON: unambiguous whatever the texts hold.
        let messages = serde_json::to_string(&request.messages).unwrap_or_default();
        format!("{prompt_version}\n{messages}")
    }

    /// The completion of `request` under `prompt_version`: from the cache, or generated
    /// here (once, whoever else asks at the same time).
    pub async fn generate(
        &self,
        cache: &dyn GenerationCache,
        prompt_version: &str,
        request: &ChatRequest,
    ) -> Result<Generated, OnceError> {
        let fingerprint = self.generator.fingerprint();
        let prompt = Self::cache_prompt(prompt_version, request);
        let params = self.generator.params(request);
        let gate_key = format!("{fingerprint}\n{params}\n{prompt}");
        let gate = self.gate(&gate_key);
        let outcome = {
            let _turn = gate.lock().await;
            let kept = lock(&self.unstored).remove(&gate_key);
            match kept {
                Some(kept) => {
                    self.store_kept(cache, fingerprint, &prompt, &params, &gate_key, kept)
                        .await
                }
                None => {
                    self.generate_locked(cache, fingerprint, &prompt, &params, request, &gate_key)
                        .await
                }
            }
        };
        self.forget_gate(&gate_key, gate);
        outcome
    }

    async fn generate_locked(
        &self,
        cache: &dyn GenerationCache,
        fingerprint: &str,
        prompt: &str,
        params: &str,
        request: &ChatRequest,
        gate_key: &str,
    ) -> Result<Generated, OnceError> {
        let ttl = self.lease_ttl;
        let mut poll = self.poll;
        loop {
            if let Some(hit) = cache.generation(fingerprint, prompt, params).await? {
                return Ok(Generated::cached(hit));
            }
            // A holder per attempt, so that two callers of one process never share one.
            let holder = uuid::Uuid::new_v4().to_string();
            if cache
                .lease_generation(fingerprint, prompt, params, &holder, ttl)
                .await?
            {
                // The holder before us may have stored the completion and released the
                // lease between our lookup and our lease: look once more, now that nobody
                // else can be generating it.
                if let Some(hit) = cache.generation(fingerprint, prompt, params).await? {
                    release(cache, fingerprint, prompt, params, &holder).await?;
                    return Ok(Generated::cached(hit));
                }
                let renew = || async {
                    match cache
                        .lease_generation(fingerprint, prompt, params, &holder, ttl)
                        .await
                    {
                        Ok(true) => {}
                        Ok(false) => tracing::warn!(
                            "a generation lease ran out before it was renewed; another worker may generate the same completion"
                        ),
                        Err(e) => tracing::warn!(error = %e, "renewing a generation lease"),
                    }
                };
                let generated = crate::heartbeat::with_heartbeat(
                    self.generator.generate(request),
                    ttl / 3,
                    renew,
                )
                .await;
                // A NUL cannot be stored by PostgreSQL (text or jsonb) and would fail every
                // write of the example in that engine only: both engines store U+FFFD.
                let generated = generated.map(|mut c| {
                    c.text = storable(c.text);
                    c
                });
                let stored = match &generated {
                    Ok(c) => {
                        let usage = TokenUsage {
                            prompt_tokens: c.prompt_tokens,
                            completion_tokens: c.completion_tokens,
                            seconds: Some(c.elapsed.as_secs_f64()),
                        };
                        cache
                            .put_generation(fingerprint, prompt, params, &c.text, usage)
                            .await
                            .map(|()| usage)
                    }
                    Err(_) => Ok(TokenUsage::default()),
                };
                // Give the lease back even when storing failed: another caller may do
                // better, and a lease left behind only delays it until it runs out.
                let released = release(cache, fingerprint, prompt, params, &holder).await;
                let completion = generated?;
                let made = Generated {
                    text: completion.text,
                    cached: false,
                    usage: TokenUsage::default(),
                    seconds: completion.elapsed.as_secs_f64(),
                    retries: completion.retries,
                    hit_limit: completion.hit_limit,
                };
                let usage = match stored {
                    Ok(usage) => usage,
                    Err(e) => {
                        if e.is_transient() {
                            // The completion cost a model's time: keep it for the retry.
                            let usage = TokenUsage {
                                prompt_tokens: completion.prompt_tokens,
                                completion_tokens: completion.completion_tokens,
                                seconds: Some(made.seconds),
                            };
                            lock(&self.unstored)
                                .insert(gate_key.to_string(), Generated { usage, ..made });
                        }
                        return Err(e.into());
                    }
                };
                released?;
                return Ok(Generated { usage, ..made });
            }
            // Another worker is generating it: look again soon.
            tokio::time::sleep(poll).await;
            poll = (poll * 2).min(Duration::from_secs(2));
        }
    }

    /// Stores a completion kept through a store outage and returns it as made here; kept
    /// again while the store is still unreachable. An entry another process stored
    /// meanwhile wins (`put_generation` leaves it), so every caller sees one completion.
    async fn store_kept(
        &self,
        cache: &dyn GenerationCache,
        fingerprint: &str,
        prompt: &str,
        params: &str,
        gate_key: &str,
        kept: Generated,
    ) -> Result<Generated, OnceError> {
        match cache
            .put_generation(fingerprint, prompt, params, &kept.text, kept.usage)
            .await
        {
            Ok(()) => match cache.generation(fingerprint, prompt, params).await? {
                Some(hit) if hit.completion != kept.text => Ok(Generated::cached(hit)),
                _ => Ok(kept),
            },
            Err(e) => {
                if e.is_transient() {
                    lock(&self.unstored).insert(gate_key.to_string(), kept);
                }
                Err(e.into())
            }
        }
    }

    fn gate(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.gates)
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    /// Drops a key's gate once nobody else holds it, so the map only holds keys in use.
    fn forget_gate(&self, key: &str, gate: Arc<tokio::sync::Mutex<()>>) {
        let mut gates = lock(&self.gates);
        // Two references left: this caller's and the map's.
        if Arc::strong_count(&gate) == 2 {
            gates.remove(key);
        }
    }
}

/// `text` as both stores keep it: each NUL (which PostgreSQL refuses in text and jsonb)
/// becomes U+FFFD, the replacement character.
///
/// ```
/// use credence_worker::llm::once::storable;
/// assert_eq!(storable("a\0b".into()), "a\u{fffd}b");
/// ```
pub fn storable(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{fffd}")
    } else {
        text
    }
}

/// Gives a lease back, trying again while the store is briefly unreachable: a lease
/// left behind makes every other caller of its key wait until it runs out.
async fn release(
    cache: &dyn GenerationCache,
    fingerprint: &str,
    prompt: &str,
    params: &str,
    holder: &str,
) -> Result<(), StoreError> {
    let mut wait = Duration::from_millis(50);
    let mut tries = 0;
    loop {
        match cache
            .release_generation(fingerprint, prompt, params, holder)
            .await
        {
            Err(e) if e.is_transient() && tries < 8 => {
                tracing::warn!(error = %e, "releasing a generation lease; trying again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
                tries += 1;
            }
            other => return other,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section is one map operation.
    m.lock().unwrap_or_else(|p| p.into_inner())
}
