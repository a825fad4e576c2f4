//! Chat prompts rendered with the model's own template (`tokenizer.chat_template` in GGUF
//! metadata, `chat_template` in `tokenizer_config.json` or `chat_template.jinja`) through
//! minijinja with Python string methods, as Hugging Face's `apply_chat_template` does:
//! `add_generation_prompt=True`, and `enable_thinking=False` for Qwen3.

use super::super::{ChatMessage, Role};
use minijinja::{context, Environment, Error, ErrorKind};

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    /// Compiles `source`; `bos` and `eos` are the texts of the model's BOS and EOS tokens.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self, String> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> Result<String, Error> {
                Err(Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        // Llama 3's template prints today's date; a fixed one keeps prompts (and the
        // generation cache) the same from day to day.
        env.add_function("strftime_now", |_format: String| "26 Jul 2024".to_string());
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| format!("the chat template does not compile: {e}"))?;
        Ok(ChatTemplate {
            env,
            bos: bos.to_string(),
            eos: eos.to_string(),
        })
    }

    /// The prompt for `messages`, ending where the assistant's answer begins.
    pub fn render(&self, messages: &[ChatMessage]) -> Result<String, String> {
        let messages: Vec<_> = messages
            .iter()
            .map(|m| {
                let role = match m.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                context! { role => role, content => m.content.as_str() }
            })
            .collect();
        let template = self.env.get_template("chat").map_err(|e| e.to_string())?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => true,
                enable_thinking => false,
                bos_token => self.bos.as_str(),
                eos_token => self.eos.as_str(),
            })
            .map_err(|e| format!("rendering the chat template: {e:#}"))
    }
}

/// The prompt of a model without a chat template (a base model): the messages' texts,
/// each followed by a blank line, the way a completion prompt is written.
pub fn plain(messages: &[ChatMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(m.content.trim_end());
        out.push_str("\n\n");
    }
    out
}
