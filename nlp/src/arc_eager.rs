//! The dependency parser's arc-eager transition system with a sentence-break move
//! (SPEC §8.1–8.4): the action table, the parse state, validity and effects.

use super::msgpack::Value;
use super::NlpError;
use std::collections::HashMap;

/// The kind of a transition; the label is carried separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ArcMove {
    Shift,
    Reduce,
    Left,
    Right,
    Break,
}

/// Reads a `moves` file: `{"moves": JSON {action: {label: freq}}}`, ordered by action,
/// then by (freq, label) descending, negative frequencies last. `skip` drops actions.
pub fn load_moves(
    file: &str,
    data: &Value<'_>,
    skip: impl Fn(u8, &str) -> bool,
) -> Result<Vec<(u8, String)>, NlpError> {
    let bad = |message: String| NlpError::Format {
        file: file.to_string(),
        field: "moves".into(),
        message,
    };
    let text = data
        .get("moves")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("missing or not a string".into()))?;
    let table: HashMap<String, HashMap<String, i64>> =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let mut actions: Vec<(&String, &HashMap<String, i64>)> = table.iter().collect();
    actions.sort_by(|a, b| a.0.cmp(b.0));
    let mut moves: Vec<(u8, String)> = Vec::new();
    let mut negative = Vec::new();
    for (action, freqs) in actions {
        let action: u8 = action
            .parse()
            .map_err(|_| bad(format!("action {action:?} is not a number")))?;
        let mut items: Vec<(i64, &String)> = freqs.iter().map(|(l, &f)| (f, l)).collect();
        items.sort_by(|a, b| b.cmp(a));
        for (f, label) in items {
            if f < 0 {
                negative.push((f, label.clone(), action));
                continue;
            }
            if skip(action, label) {
                continue;
            }
            if !moves.iter().any(|(a, l)| *a == action && l == label) {
                moves.push((action, label.clone()));
            }
        }
    }
    negative.sort_by(|a, b| b.cmp(a));
    for (_, label, action) in negative {
        if !moves.iter().any(|(a, l)| *a == action && *l == label) {
            moves.push((action, label));
        }
    }
    Ok(moves)
}

/// Converts the numeric actions of `parser/moves` to [`ArcMove`]s.
pub fn arc_moves(raw: Vec<(u8, String)>, file: &str) -> Result<Vec<(ArcMove, String)>, NlpError> {
    raw.into_iter()
        .map(|(a, l)| {
            let m = match a {
                0 => ArcMove::Shift,
                1 => ArcMove::Reduce,
                2 => ArcMove::Left,
                3 => ArcMove::Right,
                4 => ArcMove::Break,
                _ => {
                    return Err(NlpError::Format {
                        file: file.to_string(),
                        field: "moves".into(),
                        message: format!("unknown arc-eager action {a}"),
                    })
                }
            };
            Ok((m, l))
        })
        .collect()
}

/// The parse state of one doc.
#[derive(Debug, Clone)]
pub struct ArcEagerState {
    n: usize,
    stack: Vec<usize>,
    rebuffer: Vec<usize>,
    b_i: usize,
    pub heads: Vec<isize>,
    pub labels: Vec<u16>,
    left_arcs: Vec<Vec<usize>>,
    right_arcs: Vec<Vec<usize>>,
    unshiftable: Vec<bool>,
    sent_starts: Vec<bool>,
}

impl ArcEagerState {
    /// A fresh state: token 0 is the only preset sentence start.
    pub fn new(n: usize) -> Self {
        ArcEagerState {
            n,
            stack: Vec::new(),
            rebuffer: Vec::new(),
            b_i: 0,
            heads: vec![-1; n],
            labels: vec![0; n],
            left_arcs: vec![Vec::new(); n],
            right_arcs: vec![Vec::new(); n],
            unshiftable: vec![false; n],
            sent_starts: vec![false; n],
        }
    }

    fn s(&self, i: usize) -> isize {
        if i < self.stack.len() {
            self.stack[self.stack.len() - 1 - i] as isize
        } else {
            -1
        }
    }

    fn b(&self, i: usize) -> isize {
        if i < self.rebuffer.len() {
            return self.rebuffer[self.rebuffer.len() - 1 - i] as isize;
        }
        let b = self.b_i + (i - self.rebuffer.len());
        if b < self.n {
            b as isize
        } else {
            -1
        }
    }

    fn buffer_length(&self) -> usize {
        self.n - self.b_i + self.rebuffer.len()
    }

    pub fn is_final(&self) -> bool {
        self.stack.is_empty() && self.buffer_length() == 0
    }

    fn is_sent_start(&self, w: isize) -> bool {
        // The doc-level preset is 1 for token 0 only; `cannot_sent_start` never holds.
        w >= 0 && (w as usize) < self.n && (w == 0 || self.sent_starts[w as usize])
    }

    /// The k-th most recently attached child (1-based) in `arcs[head]`.
    fn nth_child(arcs: &[Vec<usize>], head: isize, k: usize) -> isize {
        if head < 0 || k < 1 {
            return -1;
        }
        arcs[head as usize]
            .iter()
            .rev()
            .nth(k - 1)
            .map_or(-1, |&c| c as isize)
    }

    /// The 8 state tokens: `[B0, B1, S0, S1, S2, L(B0,1), L(S0,1), R(S0,1)]`.
    pub fn context(&self, out: &mut [isize; 8]) {
        let (b0, s0) = (self.b(0), self.s(0));
        *out = [
            b0,
            self.b(1),
            s0,
            self.s(1),
            self.s(2),
            Self::nth_child(&self.left_arcs, b0, 1),
            Self::nth_child(&self.left_arcs, s0, 1),
            Self::nth_child(&self.right_arcs, s0, 1),
        ];
    }

    /// Validity by move kind (labels do not matter).
    pub fn valid(&self, m: ArcMove) -> bool {
        let depth = self.stack.len();
        let blen = self.buffer_length();
        let b0 = self.b(0);
        match m {
            ArcMove::Shift => {
                depth == 0
                    || (blen >= 2
                        && !self.is_sent_start(b0)
                        && !(b0 >= 0 && self.unshiftable[b0 as usize]))
            }
            ArcMove::Reduce => depth > 0,
            ArcMove::Left | ArcMove::Right => depth > 0 && blen > 0 && !self.is_sent_start(b0),
            ArcMove::Break => {
                let b1 = self.b(1);
                blen >= 2 && b1 == b0 + 1 && !self.is_sent_start(b1)
            }
        }
    }

    fn push(&mut self) {
        let b0 = match self.rebuffer.pop() {
            Some(t) => t,
            None => {
                self.b_i += 1;
                self.b_i - 1
            }
        };
        self.stack.push(b0);
    }

    fn add_arc(&mut self, head: usize, child: usize, label: u16) {
        let old = self.heads[child];
        if old >= 0 {
            let arcs = if old as usize > child {
                &mut self.left_arcs[old as usize]
            } else {
                &mut self.right_arcs[old as usize]
            };
            // spaCy only removes the arc when it is the last one (its non-last branch
            // edits a copy); never observed otherwise.
            if arcs.last() == Some(&child) {
                arcs.pop();
            }
        }
        if head > child {
            self.left_arcs[head].push(child);
        } else {
            self.right_arcs[head].push(child);
        }
        self.heads[child] = head as isize;
        self.labels[child] = label;
    }

    /// Performs a (valid) move with label index `label`.
    pub fn apply(&mut self, m: ArcMove, label: u16) {
        match m {
            ArcMove::Shift => self.push(),
            ArcMove::Reduce => {
                let Some(&s0) = self.stack.last() else { return };
                if self.heads[s0] >= 0 || self.stack.len() == 1 {
                    self.stack.pop();
                } else {
                    self.stack.pop();
                    self.unshiftable[s0] = true;
                    self.rebuffer.push(s0);
                }
            }
            ArcMove::Left => {
                let (b0, Some(&s0)) = (self.b(0), self.stack.last()) else {
                    return;
                };
                if b0 < 0 {
                    return;
                }
                self.add_arc(b0 as usize, s0, label);
                self.unshiftable[b0 as usize] = false;
                self.stack.pop();
            }
            ArcMove::Right => {
                let (b0, Some(&s0)) = (self.b(0), self.stack.last()) else {
                    return;
                };
                if b0 < 0 {
                    return;
                }
                self.add_arc(s0, b0 as usize, label);
                self.push();
            }
            ArcMove::Break => {
                let b1 = self.b(1);
                if b1 >= 0 {
                    self.sent_starts[b1 as usize] = true;
                }
            }
        }
    }

    /// Ends the parse when no move is valid (spaCy's force-final; never observed).
    pub fn force_final(&mut self) {
        self.stack.clear();
        self.rebuffer.clear();
        self.b_i = self.n;
    }
}
