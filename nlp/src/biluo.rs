//! The NER's BILUO transition system (SPEC §9): action table, state, validity and
//! effects. Entities never start on whitespace or cross a parser sentence start.

use super::NlpError;

/// The kind of an entity transition; the label is carried separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BiluoMove {
    Begin,
    In,
    Last,
    Unit,
    Out,
}

/// Converts the numeric actions of `ner/moves` (MISSING and labelled OUT already
/// dropped) to [`BiluoMove`]s.
pub fn biluo_moves(
    raw: Vec<(u8, String)>,
    file: &str,
) -> Result<Vec<(BiluoMove, String)>, NlpError> {
    raw.into_iter()
        .map(|(a, l)| {
            let m = match a {
                1 => BiluoMove::Begin,
                2 => BiluoMove::In,
                3 => BiluoMove::Last,
                4 => BiluoMove::Unit,
                5 => BiluoMove::Out,
                _ => {
                    return Err(NlpError::Format {
                        file: file.to_string(),
                        field: "moves".into(),
                        message: format!("unknown BILUO action {a}"),
                    })
                }
            };
            Ok((m, l))
        })
        .collect()
}

/// One entity under construction: token span `[start, end)`, `end` unset while open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenEntity {
    pub start: usize,
    pub end: Option<usize>,
    /// Index of the label in the component's label list.
    pub label: u16,
}

/// The NER state of one doc.
#[derive(Debug, Clone)]
pub struct BiluoState<'a> {
    n: usize,
    b_i: usize,
    sent_start: &'a [bool],
    is_space: &'a [bool],
    pub ents: Vec<OpenEntity>,
}

impl<'a> BiluoState<'a> {
    /// `sent_start` from the parser and `is_space` per token.
    pub fn new(sent_start: &'a [bool], is_space: &'a [bool]) -> Self {
        BiluoState {
            n: sent_start.len(),
            b_i: 0,
            sent_start,
            is_space,
            ents: Vec::new(),
        }
    }

    pub fn is_final(&self) -> bool {
        self.b_i >= self.n
    }

    fn open(&self) -> Option<&OpenEntity> {
        self.ents.last().filter(|e| e.end.is_none())
    }

    /// `[B0, E0, B0−1 if an entity is open]`, −1 for none.
    pub fn context(&self, out: &mut [isize; 3]) {
        let b0 = if self.b_i < self.n {
            self.b_i as isize
        } else {
            -1
        };
        let e0 = self.open().map_or(-1, |e| e.start as isize);
        *out = [b0, e0, if b0 >= 0 && e0 >= 0 { b0 - 1 } else { -1 }];
    }

    /// Whether B1 exists and starts a sentence.
    fn next_starts_sentence(&self) -> bool {
        self.b_i + 1 < self.n && self.sent_start[self.b_i + 1]
    }

    /// Validity of a move with label index `label` (`label_empty` for the "" label).
    pub fn valid(&self, m: BiluoMove, label: u16, label_empty: bool) -> bool {
        let blen = self.n - self.b_i.min(self.n);
        if blen == 0 {
            return false;
        }
        let b0_space = self.is_space[self.b_i];
        let open = self.open();
        match m {
            BiluoMove::Begin => {
                open.is_none()
                    && blen >= 2
                    && !label_empty
                    && !self.next_starts_sentence()
                    && !b0_space
            }
            BiluoMove::In => {
                blen >= 2
                    && !label_empty
                    && open.is_some_and(|e| e.label == label)
                    && !self.next_starts_sentence()
            }
            BiluoMove::Last => !label_empty && open.is_some_and(|e| e.label == label),
            BiluoMove::Unit => !label_empty && open.is_none() && !b0_space,
            BiluoMove::Out => open.is_none(),
        }
    }

    /// Performs a (valid) move; every move consumes one token.
    pub fn apply(&mut self, m: BiluoMove, label: u16) {
        let b0 = self.b_i;
        match m {
            BiluoMove::Begin => self.ents.push(OpenEntity {
                start: b0,
                end: None,
                label,
            }),
            BiluoMove::Last => {
                if let Some(e) = self.ents.last_mut() {
                    e.end = Some(b0 + 1);
                }
            }
            BiluoMove::Unit => self.ents.push(OpenEntity {
                start: b0,
                end: Some(b0 + 1),
                label,
            }),
            BiluoMove::In | BiluoMove::Out => {}
        }
        self.b_i += 1;
    }

    pub fn force_final(&mut self) {
        self.b_i = self.n;
    }
}
