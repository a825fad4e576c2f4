//! Chat prompts rendered with the model's own template (`tokenizer.chat_template` in GGUF
//! metadata, `chat_template` in `tokenizer_config.json` or `chat_template.jinja`) through
//! minijinja with Python string methods, as Hugging Face's `apply_chat_template` does:
//! `add_generation_prompt=True`, and `enable_thinking=False` for Qwen3.

use super::super::{ChatMessage, Role};
use minijinja::{context, Environment, Error, ErrorKind};

/// Most instructions one rendering may run: a real template renders a chat in a few
/// thousand, a hostile or broken one that loops (`{% for i in range(10**9) %}`) stops with
/// an error instead of holding the model's thread forever.
pub const TEMPLATE_FUEL: u64 = 10_000_000;

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
        env.set_fuel(Some(TEMPLATE_FUEL));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_renders_the_chat() {
        let t = ChatTemplate::new(
            "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}\
             {% if add_generation_prompt %}<assistant>{% endif %}",
            "<s>",
            "</s>",
        )
        .unwrap();
        let out = t
            .render(&[ChatMessage::system("Split."), ChatMessage::user("A and B.")])
            .unwrap();
        assert_eq!(out, "<system>Split.<user>A and B.<assistant>");
    }

    #[test]
    fn a_looping_template_runs_out_of_fuel_instead_of_hanging() {
        // A billion iterations (nested so no one range is large): minutes of work at
        // least, without the limit.
        let t = ChatTemplate::new(
            "{% for i in range(100000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
            "",
            "",
        )
        .unwrap();
        let started = std::time::Instant::now();
        let err = t.render(&[ChatMessage::user("x")]).unwrap_err();
        assert!(err.contains("fuel"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
    }
}
