//! `spacy.Tok2Vec.v2` (SPEC §5): MultiHashEmbed over lexical feature columns, the
//! embedding reducer, and four residual maxout CNN layers over padded docs. A batch of
//! docs is stacked into one matrix so each layer is a single GEMM; every doc keeps its
//! own pad rows, so its output does not depend on its neighbours.

use super::hashing::hashembed_words;
use super::layers::{matmul_bt, max_pieces, seq2col_rows, Buffer, LayerNorm, Maxout};
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
    /// The table projected through its slice of the embed reducer's weights:
    /// rows × (reducer outputs · pieces), so embedding + reducer is a gather-add.
    projected: Vec<f32>,
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
    /// The embedding stage's output per distinct feature row (see [`EmbedCache`]).
    cache: EmbedCache,
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
                        // The raw table until the reducer is known (projected below).
                        projected: model.param(node, "E", &[rows, width])?,
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
        if columns.len() > MAX_COLUMNS {
            return Err(bad(
                "extract_features.columns",
                format!("{} columns, at most {MAX_COLUMNS}", columns.len()),
            ));
        }
        let pad = pad.ok_or_else(|| bad("with_array(residual…).pad", "missing".into()))?;
        embeds.sort_by_key(|e| e.column);
        if embeds.len() != columns.len() || embeds.iter().enumerate().any(|(i, e)| e.column != i) {
            return Err(bad(
                "hashembed",
                format!("{} tables for {} columns", embeds.len(), columns.len()),
            ));
        }
        // The embed reducer, then one residual layer per depth: 4 in the shared tok2vec
        // and the NER's, 2 in the senter's.
        if maxouts.len() < 2 || maxouts.len() != norms.len() {
            return Err(bad(
                "maxout",
                format!(
                    "{} maxout / {} layernorm layers, expected the same number, at least 2",
                    maxouts.len(),
                    norms.len()
                ),
            ));
        }
        let width = maxouts[0].n_out();
        let in_width: usize = embeds.iter().map(|e| e.projected.len() / e.rows).sum();
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
        // (Σ rows)·Wᵀ = Σ (row·Wᵀ): project each table once through its column block of
        // the reducer's weights. Rounding differs from the concat-then-GEMM order by
        // ~1e-6 like any BLAS; the parity checks cover it.
        let n_out = reducer.linear.n_out;
        let mut off = 0;
        for e in &mut embeds {
            let ew = e.projected.len() / e.rows;
            let block: Vec<f32> = reducer
                .linear
                .w
                .chunks_exact(in_width)
                .flat_map(|row| row[off..off + ew].iter().copied())
                .collect();
            let mut projected = vec![0.0; e.rows * n_out];
            matmul_bt(&e.projected, e.rows, ew, &block, n_out, &mut projected);
            e.projected = projected;
            off += ew;
        }
        Ok(Tok2Vec {
            columns,
            embeds,
            reducer,
            reducer_norm,
            cnn: maxouts.zip(norms).collect(),
            pad,
            width,
            cache: EmbedCache::default(),
        })
    }

    /// Output width (96 for en_core_web_sm).
    pub fn width(&self) -> usize {
        self.width
    }

    /// The embedding stage for one token's feature ids `tok` into `row` (width): the
    /// projected table rows gathered and added, the bias, the max over each unit's
    /// pieces, then the reducer's LayerNorm. `acc` holds the pieces.
    fn embed(&self, tok: &[u64], acc: &mut [f32], row: &mut [f32]) {
        let n_out = self.reducer.linear.n_out;
        acc.fill(0.0);
        for e in &self.embeds {
            for word in hashembed_words(tok[e.column], e.seed) {
                let r = (word as usize) % e.rows;
                for (a, v) in acc.iter_mut().zip(&e.projected[r * n_out..(r + 1) * n_out]) {
                    *a += v;
                }
            }
        }
        for (a, b) in acc.iter_mut().zip(&self.reducer.linear.b) {
            *a += b;
        }
        max_pieces(acc, row);
        self.reducer_norm.forward_in_place(row);
    }

    /// Runs the network on a batch of docs. `features[d]` holds doc d's feature ids,
    /// row-major (tokens × columns). Returns every doc's tokvecs (tokens × width), in
    /// order and contiguous.
    pub fn forward(&self, features: &[Vec<u64>]) -> TokVecs {
        let n_cols = self.columns.len();
        let w = self.width;
        let p = self.pad;
        let lens: Vec<usize> = features.iter().map(|f| f.len() / n_cols.max(1)).collect();
        // Each doc is a block of its rows with `pad` zero rows before and after.
        let rows: usize = lens.iter().map(|n| n + 2 * p).sum();
        let mut h = Buffer::stale(rows * w);
        // Embedding + reducer: gather-add the projected rows, add the bias, take the max
        // over each unit's pieces, then normalise each doc's rows.
        // A token's row after this stage depends on its feature ids alone, and most
        // tokens of a text repeat earlier ones: rows come from the cache, and only new
        // feature rows are computed (and kept).
        let mut acc = vec![0.0f32; self.reducer.linear.n_out];
        let mut cache = self.cache.lock();
        let mut block = 0;
        for (feats, &n) in features.iter().zip(&lens) {
            h[block * w..(block + p) * w].fill(0.0);
            let doc = &mut h[(block + p) * w..(block + p + n) * w];
            for (tok, row) in feats.chunks_exact(n_cols).zip(doc.chunks_exact_mut(w)) {
                let mut key = [0u64; MAX_COLUMNS];
                key[..n_cols].copy_from_slice(tok);
                if let Some(&at) = cache.index.get(&key) {
                    row.copy_from_slice(&cache.rows[at * w..(at + 1) * w]);
                    continue;
                }
                self.embed(tok, &mut acc, row);
                cache.insert(key, row);
            }
            h[(block + p + n) * w..(block + n + 2 * p) * w].fill(0.0);
            block += n + 2 * p;
        }
        drop(cache);
        // Layer l only needs rows within (depth − 1 − l) of a real token: rows further
        // out influence no real token's final vector, so they are not computed. Each
        // computed row sees exactly the inputs it would in the full padded array.
        let depth = self.cnn.len();
        let mut ranges = Vec::with_capacity(lens.len());
        for (l, (maxout, norm)) in self.cnn.iter().enumerate() {
            let margin = p.min(depth - 1 - l.min(depth - 1));
            ranges.clear();
            let mut block = 0;
            for &n in &lens {
                let lo = block + p - margin;
                ranges.push((lo, lo + n + 2 * margin, block, block + n + 2 * p));
                block += n + 2 * p;
            }
            let computed: usize = ranges.iter().map(|r| r.1 - r.0).sum();
            let mut cols = Buffer::stale(computed * 3 * w);
            seq2col_rows(&h, w, &ranges, &mut cols);
            let mut pieces = Buffer::stale(computed * maxout.linear.n_out);
            let mut y = Buffer::stale(computed * w);
            maxout.forward_into(&cols, computed, &mut pieces, &mut y);
            norm.forward_in_place(&mut y);
            let mut src = 0;
            for &(lo, hi, _, _) in &ranges {
                for (a, b) in h[lo * w..hi * w].iter_mut().zip(&y[src * w..]) {
                    *a += b;
                }
                src += hi - lo;
            }
        }
        let total: usize = lens.iter().sum();
        let mut values = Buffer::stale(total * w);
        let mut starts = Vec::with_capacity(lens.len() + 1);
        let (mut block, mut start) = (0, 0);
        for &n in &lens {
            starts.push(start);
            values[start * w..(start + n) * w]
                .copy_from_slice(&h[(block + p) * w..(block + p + n) * w]);
            start += n;
            block += n + 2 * p;
        }
        starts.push(total);
        TokVecs {
            values,
            starts,
            width: w,
        }
    }
}

/// The tokvecs of a batch of docs: every doc's tokens × width, contiguous in doc order.
#[derive(Debug)]
pub struct TokVecs {
    values: Buffer,
    /// The first token of each doc, then the total.
    starts: Vec<usize>,
    width: usize,
}

impl TokVecs {
    /// Every token of the batch (tokens × width).
    pub fn all(&self) -> &[f32] {
        &self.values
    }

    /// Doc d's tokvecs (its tokens × width).
    pub fn doc(&self, d: usize) -> &[f32] {
        &self.values[self.starts[d] * self.width..self.starts[d + 1] * self.width]
    }

    /// Each doc's tokvecs in order.
    pub fn docs(&self) -> impl Iterator<Item = &[f32]> {
        (0..self.starts.len() - 1).map(|d| self.doc(d))
    }
}

/// Most feature columns a tok2vec reads (the [`FeatureColumn`]s).
const MAX_COLUMNS: usize = 6;

/// Feature rows the embedding cache keeps before it starts over: ~440 bytes each at
/// width 96 with its key, ~9 MB per tok2vec (en_core_web_sm has two, the shared one and
/// the NER's). A text's tokens are mostly among the commonest few thousand.
const EMBED_CACHE_ROWS: usize = 20_000;

/// The embedding stage's output (after the reducer's LayerNorm) per distinct feature
/// row: a pure function of the ids, computed once and copied after (the same values,
/// as every row is computed alone). A batch takes the lock once.
#[derive(Default)]
struct EmbedCache(std::sync::Mutex<CachedRows>);

#[derive(Default)]
struct CachedRows {
    index: rustc_hash::FxHashMap<[u64; MAX_COLUMNS], usize>,
    rows: Vec<f32>,
}

impl CachedRows {
    fn insert(&mut self, key: [u64; MAX_COLUMNS], row: &[f32]) {
        if self.index.len() >= EMBED_CACHE_ROWS {
            self.index.clear();
            self.rows.clear();
        }
        self.index.insert(key, self.rows.len() / row.len());
        self.rows.extend_from_slice(row);
    }
}

impl EmbedCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, CachedRows> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A clone starts with an empty cache.
impl Clone for EmbedCache {
    fn clone(&self) -> Self {
        EmbedCache::default()
    }
}

impl std::fmt::Debug for EmbedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmbedCache({} rows)", self.lock().index.len())
    }
}
