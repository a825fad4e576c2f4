//! Reading a Hugging Face `config.json` (the fields every architecture file needs, with
//! errors that name the file and the field).

use super::limits::{self, Limit};
use super::weights::LoadError;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A parsed `config.json` (its `text_config` where the checkpoint is multimodal).
pub struct HfConfig {
    /// The file.
    pub path: PathBuf,
    /// The text model's fields.
    pub value: Value,
}

impl HfConfig {
    /// Reads `folder/config.json`.
    pub fn read(folder: &Path) -> Result<Self, LoadError> {
        let path = folder.join("config.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| LoadError::new(&path, format!("cannot read: {e}")))?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| LoadError::new(&path, format!("not valid JSON: {e}")))?;
        let value = match value.get("text_config") {
            Some(text) if text.is_object() => {
                // The multimodal wrapper keeps model_type and a few fields outside.
                let mut merged = text.clone();
                if let (Some(m), Some(outer)) = (merged.as_object_mut(), value.as_object()) {
                    for (k, v) in outer {
                        m.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                }
                merged
            }
            _ => value,
        };
        Ok(HfConfig { path, value })
    }

    /// `model_type`.
    pub fn model_type(&self) -> &str {
        self.value
            .get("model_type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// A field, if present and not null.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }

    /// An unsigned integer, if present.
    pub fn usize_opt(&self, key: &str) -> Result<Option<usize>, LoadError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .map(Some)
                .ok_or_else(|| {
                    LoadError::new(
                        &self.path,
                        format!("field \"{key}\" is {v}, expected an unsigned integer"),
                    )
                }),
        }
    }

    /// A required size within `limit` (the error names the field and the limit).
    pub fn size(&self, key: &str, limit: &Limit) -> Result<usize, LoadError> {
        self.size_opt(key, limit)?
            .ok_or_else(|| LoadError::new(&self.path, format!("field \"{key}\" is missing")))
    }

    /// A size within `limit`, if present.
    pub fn size_opt(&self, key: &str, limit: &Limit) -> Result<Option<usize>, LoadError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(x) => limit.check(&self.path, key, x).map(Some),
                None => Err(LoadError::new(
                    &self.path,
                    format!("field \"{key}\" is {v}, expected an unsigned integer"),
                )),
            },
        }
    }

    /// The head width of a model that does not state it: `hidden / heads`, within
    /// [`limits::HEAD_DIM`].
    pub fn head_dim_of(&self, hidden: usize, heads: usize) -> Result<usize, LoadError> {
        let field = "hidden_size / num_attention_heads";
        limits::HEAD_DIM.check(&self.path, field, (hidden / heads.max(1)) as u64)
    }

    /// A float, if present.
    pub fn f64_opt(&self, key: &str) -> Result<Option<f64>, LoadError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                LoadError::new(
                    &self.path,
                    format!("field \"{key}\" is {v}, expected a number"),
                )
            }),
        }
    }

    /// The rotary base: `rope_theta`, or, as transformers 5 writes a config,
    /// `rope_parameters.rope_theta`.
    pub fn rope_theta(&self) -> Result<Option<f64>, LoadError> {
        if let Some(theta) = self.f64_opt("rope_theta")? {
            return Ok(Some(theta));
        }
        match self
            .get("rope_parameters")
            .and_then(|p| p.get("rope_theta"))
        {
            None => Ok(None),
            Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                LoadError::new(
                    &self.path,
                    format!("field \"rope_parameters.rope_theta\" is {v}, expected a number"),
                )
            }),
        }
    }

    /// A list of floats in `object.key`.
    pub fn floats(&self, object: &Value, key: &str) -> Result<Vec<f32>, LoadError> {
        object
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(|x| x.as_f64().map(|f| f as f32)).collect())
            .ok_or_else(|| {
                LoadError::new(
                    &self.path,
                    format!("field \"rope_scaling.{key}\" is missing or not a list of numbers"),
                )
            })
    }
}
