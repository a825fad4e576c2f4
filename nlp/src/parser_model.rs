//! `spacy.TransitionBasedParser.v2` (SPEC §7): tokvec projection, the precomputed
//! lower layer (one GEMM over all tokens), and per-state maxout hidden + upper layer.
//! Shared by the dependency parser and the NER (which also owns its tok2vec).

use super::layers::{max_pieces, piece_major, Buffer, Linear, Weights};
use super::thinc::ThincModel;
use super::tok2vec::Tok2Vec;
use super::NlpError;

/// Largest hidden width × pieces the per-state buffer holds (128 in en_core_web_sm).
const MAX_SLOT: usize = 512;

/// Actions the upper layer scores at once, one per vector lane.
const LANES: usize = 8;

/// The network of a transition-based component.
#[derive(Debug, Clone)]
pub struct ParserNetwork {
    /// The component's own tok2vec (the NER's copy); `None` reads the shared one.
    pub tok2vec: Option<Tok2Vec>,
    projection: Linear,
    /// (nF·nO·nP) × nI.
    lower_w: Weights,
    /// nO·nP.
    lower_b: Vec<f32>,
    /// nF × (nO·nP): the vector of a missing state token, per slot.
    lower_pad: Vec<f32>,
    n_features: usize,
    n_pieces: usize,
    upper: Linear,
    /// The upper layer's weights by blocks of [`LANES`] actions: block, input, action
    /// (zero weights past the last action).
    upper_blocks: Vec<[f32; LANES]>,
}

/// The precomputed lower-layer inputs of a batch's tokens: tokens × nF × (nO·nP).
#[derive(Debug)]
pub struct Precomputed {
    values: Buffer,
    slot: usize,
    n_features: usize,
}

impl ParserNetwork {
    /// Reads `parser/model` or `ner/model`; `own_tok2vec` for the NER.
    pub fn from_model(model: &ThincModel, own_tok2vec: bool) -> Result<Self, NlpError> {
        let bad = |field: &str, message: String| NlpError::Format {
            file: model.file.clone(),
            field: field.to_string(),
            message,
        };
        let root = model.node(0)?;
        let lower_i = *root
            .refs
            .get("lower")
            .ok_or_else(|| bad("nodes[0].refs.lower", "missing".into()))?;
        let upper_i = *root
            .refs
            .get("upper")
            .ok_or_else(|| bad("nodes[0].refs.upper", "missing".into()))?;
        let lower = model.node(lower_i)?;
        let upper = model.linear(model.node(upper_i)?)?;
        let projections: Vec<_> = model
            .nodes
            .iter()
            .filter(|n| n.name == "linear" && n.index != upper_i)
            .collect();
        let [projection] = projections[..] else {
            return Err(bad(
                "linear",
                format!("{} projection layers, expected 1", projections.len()),
            ));
        };
        let projection = model.linear(projection)?;
        let dims = lower
            .params
            .get("W")
            .map(|a| a.shape.clone())
            .unwrap_or_default();
        let [nf, no, np, ni] = dims[..] else {
            return Err(bad(
                "precomputable_affine.W",
                format!("shape {dims:?}, expected 4-D"),
            ));
        };
        if ni != projection.n_out || upper.n_in != no || no * np > MAX_SLOT {
            return Err(bad(
                "precomputable_affine",
                "layer widths do not chain".into(),
            ));
        }
        let tok2vec = if own_tok2vec {
            let t = Tok2Vec::from_model(model)?;
            if t.width() != projection.n_in {
                return Err(bad(
                    "tok2vec",
                    "width differs from the projection input".into(),
                ));
            }
            Some(t)
        } else {
            None
        };
        // Each slot piece-major ((nP, nO) instead of thinc's (nO, nP)), so the max over
        // a state's pieces is an elementwise max of runs of nO values.
        let lower_w = model.param(lower, "W", &[nf, no, np, ni])?;
        let lower_pad = model.param(lower, "pad", &[1, nf, no, np])?;
        let slots = |x: &[f32], width: usize| -> Vec<f32> {
            x.chunks_exact(no * np * width)
                .flat_map(|slot| piece_major(slot, no, np, width))
                .collect()
        };
        Ok(ParserNetwork {
            tok2vec,
            lower_w: Weights::new(slots(&lower_w, ni), nf * no * np, ni),
            lower_b: piece_major(&model.param(lower, "b", &[no, np])?, no, np, 1),
            lower_pad: slots(&lower_pad, 1),
            n_features: nf,
            n_pieces: np,
            upper_blocks: action_blocks(&upper),
            projection,
            upper,
        })
    }

    /// Number of actions the upper layer scores.
    pub fn n_actions(&self) -> usize {
        self.upper.n_out
    }

    /// Number of state tokens a state feeds in (8 parser, 3 NER).
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Projects the tokvecs (tokens × width) of a whole batch and precomputes the
    /// lower layer, one GEMM each.
    pub fn precompute(&self, tokvecs: &[f32], n_tokens: usize) -> Precomputed {
        let hidden = self.projection.forward(tokvecs, n_tokens);
        let slot = self.lower_b.len();
        debug_assert_eq!(self.lower_w.n, self.n_features * slot);
        debug_assert_eq!(self.lower_w.k, self.projection.n_out);
        let values = self.lower_w.product(&hidden, n_tokens);
        Precomputed {
            values,
            slot,
            n_features: self.n_features,
        }
    }

    /// Scores every action for a state given its token ids (−1 = none), which index
    /// the doc starting at row `offset` of the batch.
    pub fn scores(
        &self,
        pre: &Precomputed,
        offset: usize,
        ids: &[isize],
        hidden: &mut Vec<f32>,
        out: &mut [f32],
    ) {
        let slot = pre.slot;
        let mut u = [0.0f32; MAX_SLOT];
        let u = &mut u[..slot];
        for (f, &id) in ids.iter().enumerate().take(pre.n_features) {
            let src = if id >= 0 {
                let t = offset + id as usize;
                let start = (t * pre.n_features + f) * slot;
                &pre.values[start..start + slot]
            } else {
                &self.lower_pad[f * slot..(f + 1) * slot]
            };
            for (a, b) in u.iter_mut().zip(src) {
                *a += b;
            }
        }
        for (a, b) in u.iter_mut().zip(&self.lower_b) {
            *a += b;
        }
        hidden.resize(slot / self.n_pieces, 0.0);
        max_pieces(u, hidden);
        self.upper_scores(hidden, out);
    }

    /// `out = upper(hidden)`, [`LANES`] actions at a time, one per vector lane, so no
    /// action needs a horizontal sum: per action, partial sum k takes inputs k, k+8, ...
    /// by fused multiply-adds; the eight are joined in order, then the inputs past the
    /// last multiple of 8, then the bias.
    fn upper_scores(&self, hidden: &[f32], out: &mut [f32]) {
        let n_in = hidden.len();
        let body = n_in - n_in % 8;
        for ((w, scores), bias) in self
            .upper_blocks
            .chunks_exact(n_in)
            .zip(out.chunks_mut(LANES))
            .zip(self.upper.b.chunks(LANES))
        {
            let mut lanes = [[0.0f32; LANES]; 8];
            for (x, w) in hidden[..body].chunks_exact(8).zip(w.chunks_exact(8)) {
                for ((lane, &x), w) in lanes.iter_mut().zip(x).zip(w) {
                    for (acc, w) in lane.iter_mut().zip(w) {
                        *acc = x.mul_add(*w, *acc);
                    }
                }
            }
            let mut sum = [-0.0f32; LANES];
            for lane in &lanes {
                for (s, v) in sum.iter_mut().zip(lane) {
                    *s += v;
                }
            }
            let mut tail = [-0.0f32; LANES];
            for (&x, w) in hidden[body..].iter().zip(&w[body..]) {
                for (t, w) in tail.iter_mut().zip(w) {
                    *t = x.mul_add(*w, *t);
                }
            }
            for (((o, s), t), b) in scores.iter_mut().zip(sum).zip(tail).zip(bias) {
                *o = s + t + b;
            }
        }
    }
}

/// The upper layer's weights by blocks of [`LANES`] actions (block, input, action),
/// zero past the last action.
fn action_blocks(upper: &Linear) -> Vec<[f32; LANES]> {
    let n_in = upper.n_in;
    let blocks = upper.n_out.div_ceil(LANES);
    let mut out = vec![[0.0f32; LANES]; blocks * n_in];
    for (a, row) in upper.w.chunks_exact(n_in).enumerate() {
        for (i, &v) in row.iter().enumerate() {
            out[(a / LANES) * n_in + i][a % LANES] = v;
        }
    }
    out
}

/// A transition system's state as greedy decoding drives it.
pub trait TransitionState {
    fn is_final(&self) -> bool;
    /// The state's token ids, one per feature slot of the network (−1 = none).
    fn context(&self, ids: &mut [isize]);
    /// Marks which of the component's actions are valid now.
    fn valid_actions(&self, valid: &mut [bool]);
    fn apply_action(&mut self, action: usize);
    /// Ends decoding when no action is valid (spaCy's force-final; never observed).
    fn force_final(&mut self);
}

impl ParserNetwork {
    /// Greedy decoding: applies the first best-scoring valid action until the state is
    /// final. The state's ids index the doc starting at row `offset` of `pre`.
    pub fn decode(&self, pre: &Precomputed, offset: usize, state: &mut impl TransitionState) {
        let n = self.n_actions();
        let mut ids = vec![-1isize; self.n_features];
        let mut hidden = Vec::new();
        let (mut scores, mut valid) = (vec![0.0; n], vec![false; n]);
        while !state.is_final() {
            state.context(&mut ids);
            self.scores(pre, offset, &ids, &mut hidden, &mut scores);
            state.valid_actions(&mut valid);
            match greedy_step(&scores, &valid) {
                Some(action) => state.apply_action(action),
                None => {
                    tracing::warn!("no valid transition; state forced final");
                    state.force_final();
                }
            }
        }
    }
}

/// One greedy decoding step: the first best-scoring valid action (strict `>` scan),
/// `None` when no action is valid (the caller then forces the state final).
pub fn greedy_step(scores: &[f32], valid: &[bool]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, (&s, &ok)) in scores.iter().zip(valid).enumerate() {
        if ok && best.is_none_or(|b| s > scores[b]) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::super::layers::argmax;
    use super::*;

    #[test]
    fn greedy_step_skips_invalid_and_keeps_first_max() {
        assert_eq!(greedy_step(&[5.0, 1.0, 1.0], &[false, true, true]), Some(1));
        assert_eq!(greedy_step(&[5.0], &[false]), None);
        assert_eq!(argmax(&[0.5, 0.5]), Some(0));
    }
}
