//! Reading thinc's serialized model files (SPEC §1.1): the parallel `nodes`, `attrs`
//! and `params` arrays, with attrs decoded a second time and params as float32 arrays.

use super::layers::{LayerNorm, Linear, Maxout};
use super::msgpack::{self, F32Array, Value};
use super::NlpError;
use std::collections::HashMap;

/// A decoded attribute value (the few kinds en_core_web_sm stores).
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i128),
    Strings(Vec<String>),
    Other,
}

/// One node of the model tree, in the file's breadth-first order.
#[derive(Debug, Clone)]
pub struct Node {
    pub index: usize,
    pub name: String,
    pub refs: HashMap<String, usize>,
    pub attrs: HashMap<String, Attr>,
    pub params: HashMap<String, F32Array>,
}

/// All nodes of one thinc model file, with the file's name for error messages.
#[derive(Debug, Clone)]
pub struct ThincModel {
    pub file: String,
    pub nodes: Vec<Node>,
}

fn owned_attr(v: &Value<'_>) -> Attr {
    match v {
        Value::Int(i) => Attr::Int(*i),
        Value::Array(items) => items
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map_or(Attr::Other, Attr::Strings),
        _ => Attr::Other,
    }
}

impl ThincModel {
    /// Parses the bytes of a thinc model file named `file` (relative to the model dir).
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Self, NlpError> {
        let bad = |field: String, message: String| NlpError::Format {
            file: file.to_string(),
            field,
            message,
        };
        let root = msgpack::decode(bytes).map_err(|source| NlpError::Msgpack {
            file: file.to_string(),
            source,
        })?;
        let list = |key: &str| {
            root.get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| bad(key.to_string(), "missing or not an array".into()))
        };
        let (nodes, attrs, params) = (list("nodes")?, list("attrs")?, list("params")?);
        if nodes.len() != attrs.len() || nodes.len() != params.len() {
            return Err(bad(
                "nodes".into(),
                format!(
                    "{} nodes, {} attrs, {} params",
                    nodes.len(),
                    attrs.len(),
                    params.len()
                ),
            ));
        }
        let mut out = Vec::with_capacity(nodes.len());
        for (i, ((node, attr), param)) in nodes.iter().zip(attrs).zip(params).enumerate() {
            let name = node
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("nodes[{i}].name"), "missing".into()))?;
            let mut refs = HashMap::new();
            for (k, v) in node.get("refs").and_then(Value::as_map).unwrap_or(&[]) {
                if let (Some(k), Some(v)) = (k.as_str(), v.as_int()) {
                    refs.insert(k.to_string(), v as usize);
                }
            }
            let mut decoded = HashMap::new();
            for (k, v) in attr.as_map().unwrap_or(&[]) {
                let (Some(k), Some(blob)) = (k.as_str(), v.as_bin()) else {
                    continue;
                };
                let v = msgpack::decode(blob).map_err(|source| NlpError::Msgpack {
                    file: format!("{file} attrs[{i}].{k}"),
                    source,
                })?;
                decoded.insert(k.to_string(), owned_attr(&v));
            }
            let mut arrays = HashMap::new();
            for (k, v) in param.as_map().unwrap_or(&[]) {
                let Some(k) = k.as_str() else { continue };
                if matches!(v, Value::Nil) {
                    continue;
                }
                let arr = F32Array::from_value(v)
                    .map_err(|e| bad(format!("params[{i}].{k}"), e.to_string()))?;
                arrays.insert(k.to_string(), arr);
            }
            out.push(Node {
                index: i,
                name: name.to_string(),
                refs,
                attrs: decoded,
                params: arrays,
            });
        }
        Ok(ThincModel {
            file: file.to_string(),
            nodes: out,
        })
    }

    pub fn node(&self, index: usize) -> Result<&Node, NlpError> {
        self.nodes.get(index).ok_or_else(|| NlpError::Format {
            file: self.file.clone(),
            field: format!("nodes[{index}]"),
            message: "no such node".into(),
        })
    }

    /// Parameter `name` of node `node`, checked against the expected shape.
    pub fn param(&self, node: &Node, name: &str, shape: &[usize]) -> Result<Vec<f32>, NlpError> {
        let field = format!("params[{}].{name} ({})", node.index, node.name);
        let arr = node.params.get(name).ok_or_else(|| NlpError::Format {
            file: self.file.clone(),
            field: field.clone(),
            message: "missing".into(),
        })?;
        if arr.shape != shape {
            return Err(NlpError::Format {
                file: self.file.clone(),
                field,
                message: format!("shape {:?}, expected {:?}", arr.shape, shape),
            });
        }
        Ok(arr.data.clone())
    }

    /// An integer attribute of a node.
    pub fn int_attr(&self, node: &Node, name: &str) -> Result<i128, NlpError> {
        match node.attrs.get(name) {
            Some(Attr::Int(i)) => Ok(*i),
            _ => Err(NlpError::Format {
                file: self.file.clone(),
                field: format!("attrs[{}].{name} ({})", node.index, node.name),
                message: "missing or not an integer".into(),
            }),
        }
    }

    fn dims(&self, node: &Node, name: &str) -> Result<Vec<usize>, NlpError> {
        node.params
            .get(name)
            .map(|a| a.shape.clone())
            .ok_or_else(|| NlpError::Format {
                file: self.file.clone(),
                field: format!("params[{}].{name} ({})", node.index, node.name),
                message: "missing".into(),
            })
    }

    /// A `linear` or `softmax` node as a [`Linear`] (W: (nO, nI), b: (nO)).
    pub fn linear(&self, node: &Node) -> Result<Linear, NlpError> {
        let d = self.dims(node, "W")?;
        let (n_out, n_in) = match d[..] {
            [o, i] => (o, i),
            _ => (0, 0),
        };
        Ok(Linear::new(
            self.param(node, "W", &[n_out, n_in])?,
            self.param(node, "b", &[n_out])?,
            n_out,
            n_in,
        ))
    }

    /// A `maxout` node (W: (nO, nP, nI), b: (nO, nP)).
    pub fn maxout(&self, node: &Node) -> Result<Maxout, NlpError> {
        let d = self.dims(node, "W")?;
        let (o, p, i) = match d[..] {
            [o, p, i] => (o, p, i),
            _ => (0, 0, 0),
        };
        Ok(Maxout::new(
            self.param(node, "W", &[o, p, i])?,
            self.param(node, "b", &[o, p])?,
            o,
            p,
            i,
        ))
    }

    /// A `layernorm` node (G, b of the same width).
    pub fn layer_norm(&self, node: &Node) -> Result<LayerNorm, NlpError> {
        let d = self.dims(node, "G")?;
        Ok(LayerNorm {
            g: self.param(node, "G", &d)?,
            b: self.param(node, "b", &d)?,
        })
    }
}
