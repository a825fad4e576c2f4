//! `spacy.Tok2Vec.v2` (SPEC §5): MultiHashEmbed over lexical feature columns, the
//! embedding reducer, and four residual maxout CNN layers over padded docs. A batch of
//! docs is stacked into one matrix so each layer is a single GEMM; every doc keeps its
//! own pad rows, so its output does not depend on its neighbours.

use super::hashing::hashembed_words;
use super::layers::{seq2col, LayerNorm, Maxout};
use super::thinc::{Attr, ThincModel};
use super::NlpError;

/// A lexical attribute used as a tok2vec input column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureColumn {
    Norm,
    Prefix,
    Suffix,
    Shape,
    Spacy,
    IsSpace,
}

impl FeatureColumn {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "NORM" => FeatureColumn::Norm,
            "PREFIX" => FeatureColumn::Prefix,
            "SUFFIX" => FeatureColumn::Suffix,
            "SHAPE" => FeatureColumn::Shape,
            "SPACY" => FeatureColumn::Spacy,
            "IS_SPACE" => FeatureColumn::IsSpace,
            _ => return None,
        })
    }
}

/// One HashEmbed table: each feature id selects 4 rows by MurmurHash3, summed.
#[derive(Debug, Clone)]
struct HashEmbed {
    table: Vec<f32>,
    rows: usize,
    seed: u32,
    column: usize,
}

/// The token-to-vector network of one component (shared tok2vec, or the NER's copy).
#[derive(Debug, Clone)]
pub struct Tok2Vec {
    pub columns: Vec<FeatureColumn>,
    embeds: Vec<HashEmbed>,
    reducer: Maxout,
    reducer_norm: LayerNorm,
    cnn: Vec<(Maxout, LayerNorm)>,
    pad: usize,
    width: usize,
}

impl Tok2Vec {
    /// Collects the tok2vec layers of a thinc model in file order: `extract_features`
    /// columns, the `hashembed` tables, the first maxout + layernorm (reducer), then
    /// the CNN layers, and the `pad` of the residual encoder.
    pub fn from_model(model: &ThincModel) -> Result<Self, NlpError> {
        let bad = |field: &str, message: String| NlpError::Format {
            file: model.file.clone(),
            field: field.to_string(),
            message,
        };
        let mut columns = None;
        let mut embeds = Vec::new();
        let mut maxouts = Vec::new();
        let mut norms = Vec::new();
        let mut pad = None;
        for node in &model.nodes {
            match node.name.as_str() {
                "extract_features" if columns.is_none() => {
                    let Some(Attr::Strings(names)) = node.attrs.get("columns") else {
                        return Err(bad("extract_features.columns", "missing".into()));
                    };
                    let cols = names
                        .iter()
                        .map(|n| {
                            FeatureColumn::parse(n)
                                .ok_or_else(|| bad("columns", format!("unknown column {n:?}")))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    columns = Some(cols);
                }
                "hashembed" => {
                    let Some(&[rows, width]) = node.params.get("E").map(|a| a.shape.as_slice())
                    else {
                        return Err(bad(
                            &format!("params[{}].E", node.index),
                            "missing or not 2-D".into(),
                        ));
                    };
                    embeds.push(HashEmbed {
                        table: model.param(node, "E", &[rows, width])?,
                        rows,
                        seed: model.int_attr(node, "seed")? as u32,
                        column: model.int_attr(node, "column")? as usize,
                    });
                }
                "maxout" => maxouts.push(model.maxout(node)?),
                "layernorm" => norms.push(model.layer_norm(node)?),
                n if n.starts_with("with_array(residual") => {
                    pad = Some(model.int_attr(node, "pad")? as usize);
                }
                _ => {}
            }
        }
        let columns = columns.ok_or_else(|| bad("extract_features", "no such node".into()))?;
        let pad = pad.ok_or_else(|| bad("with_array(residual…).pad", "missing".into()))?;
        embeds.sort_by_key(|e| e.column);
        if embeds.len() != columns.len() || embeds.iter().enumerate().any(|(i, e)| e.column != i) {
            return Err(bad(
                "hashembed",
                format!("{} tables for {} columns", embeds.len(), columns.len()),
            ));
        }
        if maxouts.len() != 5 || norms.len() != 5 {
            return Err(bad(
                "maxout",
                format!(
                    "{} maxout / {} layernorm layers, expected 5 / 5",
                    maxouts.len(),
                    norms.len()
                ),
            ));
        }
        let width = maxouts[0].n_out();
        let in_width: usize = embeds.iter().map(|e| e.table.len() / e.rows).sum();
        if maxouts[0].linear.n_in != in_width
            || maxouts[1..]
                .iter()
                .any(|m| m.n_out() != width || m.linear.n_in != 3 * width)
        {
            return Err(bad("maxout", "layer widths do not chain".into()));
        }
        let mut maxouts = maxouts.into_iter();
        let mut norms = norms.into_iter();
        let (reducer, reducer_norm) = (maxouts.next(), norms.next());
        let (Some(reducer), Some(reducer_norm)) = (reducer, reducer_norm) else {
            return Err(bad("maxout", "missing embed reducer".into()));
        };
        Ok(Tok2Vec {
            columns,
            embeds,
            reducer,
            reducer_norm,
            cnn: maxouts.zip(norms).collect(),
            pad,
            width,
        })
    }

    /// Output width (96 for en_core_web_sm).
    pub fn width(&self) -> usize {
        self.width
    }

    /// Runs the network on a batch of docs. `features[d]` holds doc d's feature ids,
    /// row-major (tokens × columns). Returns each doc's tokvecs (tokens × width).
    pub fn forward(&self, features: &[Vec<u64>]) -> Vec<Vec<f32>> {
        let n_cols = self.columns.len();
        let w = self.width;
        let p = self.pad;
        let lens: Vec<usize> = features.iter().map(|f| f.len() / n_cols.max(1)).collect();
        let total: usize = lens.iter().sum();
        // Embed all real tokens of the batch at once.
        let emb_width: usize = self.embeds.iter().map(|e| e.table.len() / e.rows).sum();
        let mut x = vec![0.0f32; total * emb_width];
        let mut row = 0;
        for feats in features {
            for tok in feats.chunks_exact(n_cols) {
                let out = &mut x[row * emb_width..(row + 1) * emb_width];
                let mut off = 0;
                for e in &self.embeds {
                    let ew = e.table.len() / e.rows;
                    let dst = &mut out[off..off + ew];
                    for word in hashembed_words(tok[e.column], e.seed) {
                        let r = (word as usize) % e.rows;
                        for (d, v) in dst.iter_mut().zip(&e.table[r * ew..(r + 1) * ew]) {
                            *d += v;
                        }
                    }
                    off += ew;
                }
                row += 1;
            }
        }
        let mut reduced = self.reducer.forward(&x, total);
        self.reducer_norm.forward_in_place(&mut reduced);
        // Lay the docs out with `pad` zero rows before and after each.
        let blocks: Vec<usize> = lens.iter().map(|n| n + 2 * p).collect();
        let rows: usize = blocks.iter().sum();
        let mut h = vec![0.0f32; rows * w];
        let (mut src, mut dst) = (0, 0);
        for &n in &lens {
            h[(dst + p) * w..(dst + p + n) * w].copy_from_slice(&reduced[src * w..(src + n) * w]);
            src += n;
            dst += n + 2 * p;
        }
        for (maxout, norm) in &self.cnn {
            let cols = seq2col(&h, w, &blocks);
            let mut y = maxout.forward(&cols, rows);
            norm.forward_in_place(&mut y);
            for (a, b) in h.iter_mut().zip(&y) {
                *a += b;
            }
        }
        let mut out = Vec::with_capacity(lens.len());
        let mut start = 0;
        for &n in &lens {
            out.push(h[(start + p) * w..(start + p + n) * w].to_vec());
            start += n + 2 * p;
        }
        out
    }
}
