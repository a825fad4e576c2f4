//! `[[comparisons]]`: paired comparisons beyond the automatic ones (every mode against
//! `base` and `all` against `repair`, per model and dataset), e.g. one model's `all`
//! against another's `base` on one dataset:
//!
//! ```toml
//! [[comparisons]]
//! a = "qwen3-8b/all"            # MODEL/MODE; the difference is a - b
//! b = "gemini-2.5-flash/base"
//! dataset = "wikisplit-bench-1000"
//! ```

use super::{DatasetSpec, ModelSpec, SweepError, Validator};
use crate::domain::Mode;
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// One model's mode: a side of a comparison.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelMode {
    /// Model name.
    pub model: String,
    /// Mode.
    pub mode: Mode,
}

impl std::fmt::Display for ModelMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.model, self.mode.as_str())
    }
}

/// A comparison named in the sweep: a - b on one dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComparisonSpec {
    /// The system compared.
    pub a: ModelMode,
    /// The baseline.
    pub b: ModelMode,
    /// Dataset id.
    pub dataset: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawComparison {
    a: Option<Spanned<String>>,
    b: Option<Spanned<String>>,
    dataset: Option<Spanned<String>>,
}

impl Validator<'_> {
    fn model_mode(
        &self,
        s: &Spanned<String>,
        models: &[ModelSpec],
        modes: &[Mode],
    ) -> Result<ModelMode, SweepError> {
        let bad = |msg: String| self.err(s.span(), msg);
        let (model, mode) = s
            .get_ref()
            .split_once('/')
            .ok_or_else(|| bad(format!("{:?} is not MODEL/MODE", s.get_ref())))?;
        if !models.iter().any(|m| m.name == model) {
            let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
            return Err(bad(format!(
                "unknown model {model:?}; the sweep has {}",
                names.join(", ")
            )));
        }
        let mode: Mode = mode
            .parse()
            .map_err(|e: crate::domain::UnknownMode| bad(e.to_string()))?;
        if !modes.contains(&mode) {
            return Err(bad(format!(
                "mode {:?} is not among the sweep's modes",
                mode.as_str()
            )));
        }
        Ok(ModelMode {
            model: model.to_string(),
            mode,
        })
    }

    pub(super) fn comparisons(
        &self,
        raw: Option<Vec<Spanned<RawComparison>>>,
        models: &[ModelSpec],
        modes: &[Mode],
        datasets: &[DatasetSpec],
    ) -> Result<Vec<ComparisonSpec>, SweepError> {
        let mut out: Vec<ComparisonSpec> = Vec::new();
        for c in raw.unwrap_or_default() {
            let span = c.span();
            let c = c.into_inner();
            let field = |f: Option<Spanned<String>>, name: &str| {
                f.ok_or_else(|| {
                    self.err(
                        span.clone(),
                        format!("comparison is missing field {name:?}"),
                    )
                })
            };
            let (a, b, d) = (
                field(c.a, "a")?,
                field(c.b, "b")?,
                field(c.dataset, "dataset")?,
            );
            if !datasets.iter().any(|x| &x.id == d.get_ref()) {
                return Err(self.err(
                    d.span(),
                    format!("unknown dataset {:?} in comparison", d.get_ref()),
                ));
            }
            let spec = ComparisonSpec {
                a: self.model_mode(&a, models, modes)?,
                b: self.model_mode(&b, models, modes)?,
                dataset: d.into_inner(),
            };
            if spec.a == spec.b {
                return Err(self.err(b.span(), format!("{} is compared with itself", spec.a)));
            }
            if out.contains(&spec) {
                return Err(self.err(span, "comparison listed twice"));
            }
            out.push(spec);
        }
        Ok(out)
    }
}
