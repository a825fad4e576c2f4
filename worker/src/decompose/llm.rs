//! The LLM decomposer: a prompt ([`crate::llm::prompt`]: CREDENCE or FActScore) rendered
//! for the sentence, one generation through the cache and its lease
//! ([`GenerateOnce`]), and the prompt's parser on the answer.

use super::{DecomposeContext, DecomposeError, Decomposer, Decomposition, LlmHandle};
use crate::llm::once::OnceError;
use crate::llm::{prompt, ChatRequest, GenerateOnce, Generator, PromptKind};
use async_trait::async_trait;
use std::sync::Arc;

/// A decomposer made of a generator, a prompt and its parser.
pub struct LlmDecomposer {
    once: GenerateOnce,
    prompt: PromptKind,
    max_new_tokens: u32,
    fingerprint: String,
}

impl LlmDecomposer {
    /// Decomposes with `generator` under `prompt`, generating at most `max_new_tokens`.
    pub fn new(generator: Arc<dyn Generator>, prompt: PromptKind, max_new_tokens: u32) -> Self {
        let fingerprint = Self::fingerprint_of(generator.fingerprint(), prompt);
        LlmDecomposer {
            once: GenerateOnce::new(generator),
            prompt,
            max_new_tokens,
            fingerprint,
        }
    }

    /// The fingerprint of a decomposer on a generator with this fingerprint: the
    /// prompt's version joins the model's, so a new prompt re-runs the jobs as new
    /// weights do.
    pub fn fingerprint_of(generator_fingerprint: &str, prompt: PromptKind) -> String {
        format!("{generator_fingerprint}+{}", prompt::version(prompt))
    }

    /// The request that asks for the decomposition of `sentence`.
    pub fn request(&self, sentence: &str) -> ChatRequest {
        ChatRequest {
            messages: prompt::messages(self.prompt, sentence),
            max_new_tokens: self.max_new_tokens,
        }
    }
}

#[async_trait]
impl Decomposer for LlmDecomposer {
    fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn max_in_flight(&self) -> usize {
        self.once.generator().max_in_flight()
    }

    /// The self-repair tier's model: only under the CREDENCE prompt. The FActScore-prompt
    /// model is a baseline (PAPER.md "Decided here", added 2026-11-26): its prompt is not
    /// CREDENCE's, so it gets no LLM tier, and its `repair` and `all` run the rule tier
    /// alone while `self_repair` keeps the base.
    fn generator(&self) -> Option<Arc<dyn Generator>> {
        Some(self.once.generator().clone())
    }

    fn llm(&self) -> Option<LlmHandle<'_>> {
        (self.prompt == PromptKind::Credence).then_some(LlmHandle {
            once: &self.once,
            max_new_tokens: self.max_new_tokens,
        })
    }

    async fn decompose(
        &self,
        sentence: &str,
        context: &DecomposeContext<'_>,
    ) -> Result<Decomposition, DecomposeError> {
        let request = self.request(sentence);
        let generated = self
            .once
            .generate(context.cache, prompt::version(self.prompt), &request)
            .await
            .map_err(|e| match e {
                OnceError::Generate(source) => DecomposeError::Generate {
                    model: context.model.to_string(),
                    source,
                },
                OnceError::Cache(e) => DecomposeError::Cache(e),
            })?;
        generated.report(context.observer, context.model);
        let parsed = prompt::parse(self.prompt, &generated.text);
        Ok(Decomposition {
            claims: parsed.claims,
            llm_calls: 1,
            completion: Some(generated.text),
            parse_failed: Some(parsed.parse_failed),
            model_seconds: Some(generated.seconds),
            hit_limit: generated.hit_limit,
        })
    }
}
