//! A BERT checkpoint's `config.json`: the fields the encoder reads, in Hugging Face's
//! names. Everything else in the file (dropout rates, initialiser range, pad id) is
//! training-time detail and ignored.

use serde::Deserialize;

/// The feed-forward activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum Activation {
    /// GELU with the exact error function (`"gelu"`, BERT's and MiniLM's).
    #[serde(rename = "gelu")]
    Gelu,
    /// GELU's tanh approximation (`"gelu_new"`, `"gelu_pytorch_tanh"`, and candle's
    /// spelling `"geluapproximate"`).
    #[serde(
        rename = "gelu_new",
        alias = "gelu_pytorch_tanh",
        alias = "geluapproximate"
    )]
    GeluTanh,
    /// `"relu"`.
    #[serde(rename = "relu")]
    Relu,
}

/// The shape of a BERT-family encoder.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    /// Only `"absolute"` (the default) is implemented.
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
    pub model_type: Option<String>,
}

fn absolute() -> String {
    "absolute".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINILM: &str = r#"{
      "_name_or_path": "nreimers/MiniLM-L6-H384-uncased",
      "architectures": ["BertModel"],
      "attention_probs_dropout_prob": 0.1,
      "gradient_checkpointing": false,
      "hidden_act": "gelu",
      "hidden_dropout_prob": 0.1,
      "hidden_size": 384,
      "initializer_range": 0.02,
      "intermediate_size": 1536,
      "layer_norm_eps": 1e-12,
      "max_position_embeddings": 512,
      "model_type": "bert",
      "num_attention_heads": 12,
      "num_hidden_layers": 6,
      "pad_token_id": 0,
      "position_embedding_type": "absolute",
      "transformers_version": "4.8.2",
      "type_vocab_size": 2,
      "use_cache": true,
      "vocab_size": 30522
    }"#;

    #[test]
    fn minilm_config_reads_with_its_training_fields_ignored() {
        let c: BertConfig = serde_json::from_str(MINILM).unwrap();
        assert_eq!(
            (
                c.vocab_size,
                c.hidden_size,
                c.num_hidden_layers,
                c.num_attention_heads
            ),
            (30522, 384, 6, 12)
        );
        assert_eq!(
            (c.intermediate_size, c.max_position_embeddings),
            (1536, 512)
        );
        assert_eq!((c.type_vocab_size, c.layer_norm_eps), (2, 1e-12));
        assert_eq!(c.hidden_act, Activation::Gelu);
        assert_eq!(c.position_embedding_type, "absolute");
        assert_eq!(c.model_type.as_deref(), Some("bert"));
    }

    #[test]
    fn activations_read_in_hugging_face_and_candle_spellings() {
        for (name, act) in [
            ("gelu", Activation::Gelu),
            ("gelu_new", Activation::GeluTanh),
            ("gelu_pytorch_tanh", Activation::GeluTanh),
            ("geluapproximate", Activation::GeluTanh),
            ("relu", Activation::Relu),
        ] {
            let got: Activation = serde_json::from_str(&format!("\"{name}\"")).unwrap();
            assert_eq!(got, act, "{name}");
        }
        assert!(serde_json::from_str::<Activation>("\"swish\"").is_err());
    }

    #[test]
    fn a_missing_size_is_an_error_that_names_the_field() {
        let text = MINILM.replace("\"hidden_size\": 384,", "");
        let err = serde_json::from_str::<BertConfig>(&text).unwrap_err();
        assert!(err.to_string().contains("hidden_size"), "{err}");
    }
}
