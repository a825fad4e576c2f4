//! Python's `difflib.SequenceMatcher(None, a, b).ratio()`, ported exactly over Unicode
//! code points.
//!
//! Jaccard-F1 takes `max(Jaccard, ratio)` as its similarity, and the paper computed the
//! ratio with CPython's difflib, so this port reproduces CPython's algorithm step by step
//! rather than an "equivalent" longest-common-substring search: the same `b2j` index, the
//! same autojunk heuristic (when `b` has at least 200 elements, every element occurring
//! more than `len(b) / 100 + 1` times is "popular" and left out of the index), the same
//! tie-breaking in `find_longest_match` (earliest `i`, then earliest `j`), and the same
//! extension of a match over popular elements afterwards. Each of these changes which
//! blocks are found, hence the ratio. `isjunk` is always `None` here, so no element is
//! junk and CPython's second, junk-only extension pass never moves; it is left out.
//!
//! Elements are `char`s (code points), as in Python 3 `str`: a combining accent or each
//! part of an emoji ZWJ sequence is its own element. Parity with CPython 3.11 is checked
//! against `tests/fixtures/difflib_ratio.jsonl`.

use std::collections::HashMap;

/// Sequences at least this long get CPython's autojunk treatment of popular elements.
const AUTOJUNK_MIN_LEN: usize = 200;

/// CPython's `SequenceMatcher(None, a, b).ratio()`: `2 * M / T`, where `M` is the number of
/// code points in matching blocks and `T` is the total number of code points in `a` and
/// `b`; 1.0 when both are empty.
///
/// The measure is not symmetric, as in Python: autojunk looks only at `b`, and ties are
/// broken by position in `a` first.
///
/// ```
/// use credence_core::matching::difflib::ratio;
///
/// assert_eq!(ratio("abcd", "bcde"), 0.75);
/// assert_eq!(ratio("", ""), 1.0);
/// assert_eq!(ratio("abc", ""), 0.0);
/// ```
#[must_use]
pub fn ratio(a: &str, b: &str) -> f64 {
    SequenceMatcher::new(a, b).ratio()
}

/// A matching block: `a[a..a + size] == b[b..b + size]`, indices in code points.
/// Field order gives CPython's tuple ordering `(i, j, k)` for sorting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Match {
    /// Start of the block in `a`.
    pub a: usize,
    /// Start of the block in `b`.
    pub b: usize,
    /// Length of the block.
    pub size: usize,
}

/// CPython's `difflib.SequenceMatcher` with `isjunk=None` and `autojunk=True`, over the
/// code points of two strings.
///
/// ```
/// use credence_core::matching::difflib::{Match, SequenceMatcher};
///
/// let matcher = SequenceMatcher::new("abxcd", "abcd");
/// assert_eq!(
///     matcher.matching_blocks(),
///     vec![
///         Match { a: 0, b: 0, size: 2 },
///         Match { a: 3, b: 2, size: 2 },
///         Match { a: 5, b: 4, size: 0 },
///     ]
/// );
/// ```
#[derive(Debug, Clone)]
pub struct SequenceMatcher {
    a: Vec<char>,
    b: Vec<char>,
    /// Positions of each non-popular element of `b`, ascending (CPython's `b2j`).
    b2j: HashMap<char, Vec<usize>>,
}

impl SequenceMatcher {
    /// Indexes `b` (CPython's `__chain_b`), dropping popular elements when `b` has at
    /// least 200 code points.
    #[must_use]
    pub fn new(a: &str, b: &str) -> Self {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut b2j: HashMap<char, Vec<usize>> = HashMap::new();
        for (j, &elt) in b.iter().enumerate() {
            b2j.entry(elt).or_default().push(j);
        }
        if b.len() >= AUTOJUNK_MIN_LEN {
            let ntest = b.len() / 100 + 1;
            b2j.retain(|_, positions| positions.len() <= ntest);
        }
        Self { a, b, b2j }
    }

    /// Longest matching block in `a[alo..ahi]` and `b[blo..bhi]`, CPython's
    /// `find_longest_match`: of all maximal blocks the one starting earliest in `a`, then
    /// earliest in `b`, found among non-popular elements and then extended over any equal
    /// neighbours (popular ones included). `Match { a: alo, b: blo, size: 0 }` when nothing
    /// matches.
    #[must_use]
    pub fn find_longest_match(&self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> Match {
        self.find_longest_match_with(&mut RunLengths::new(self.b.len()), alo, ahi, blo, bhi)
    }

    fn find_longest_match_with(
        &self,
        runs: &mut RunLengths,
        alo: usize,
        ahi: usize,
        blo: usize,
        bhi: usize,
    ) -> Match {
        let (a, b) = (&self.a, &self.b);
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0);
        for (i, elt) in a.iter().enumerate().take(ahi).skip(alo) {
            if let Some(positions) = self.b2j.get(elt) {
                let first = positions.partition_point(|&j| j < blo);
                for &j in &positions[first..] {
                    if j >= bhi {
                        break;
                    }
                    let k = runs.extend(j);
                    // Strictly greater: the earliest (i, j) keeps a tie.
                    if k > bestsize {
                        (besti, bestj, bestsize) = (i + 1 - k, j + 1 - k, k);
                    }
                }
            }
            runs.next_row();
        }
        runs.clear();

        // Popular elements are absent from b2j, so a block can continue through them.
        while besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1] {
            (besti, bestj, bestsize) = (besti - 1, bestj - 1, bestsize + 1);
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && a[besti + bestsize] == b[bestj + bestsize]
        {
            bestsize += 1;
        }
        Match {
            a: besti,
            b: bestj,
            size: bestsize,
        }
    }

    /// CPython's `get_matching_blocks`: blocks found by recursing on both sides of each
    /// longest match, sorted, adjacent blocks merged, ending with the sentinel
    /// `Match { a: len(a), b: len(b), size: 0 }`.
    #[must_use]
    pub fn matching_blocks(&self) -> Vec<Match> {
        let (la, lb) = (self.a.len(), self.b.len());
        let mut runs = RunLengths::new(lb);
        let mut queue = vec![(0, la, 0, lb)];
        let mut blocks = Vec::new();
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let m = self.find_longest_match_with(&mut runs, alo, ahi, blo, bhi);
            if m.size > 0 {
                blocks.push(m);
                if alo < m.a && blo < m.b {
                    queue.push((alo, m.a, blo, m.b));
                }
                if m.a + m.size < ahi && m.b + m.size < bhi {
                    queue.push((m.a + m.size, ahi, m.b + m.size, bhi));
                }
            }
        }
        blocks.sort_unstable();

        let mut merged = Vec::with_capacity(blocks.len() + 1);
        let mut current = Match {
            a: 0,
            b: 0,
            size: 0,
        };
        for block in blocks {
            if current.a + current.size == block.a && current.b + current.size == block.b {
                current.size += block.size;
            } else {
                if current.size > 0 {
                    merged.push(current);
                }
                current = block;
            }
        }
        if current.size > 0 {
            merged.push(current);
        }
        merged.push(Match {
            a: la,
            b: lb,
            size: 0,
        });
        merged
    }

    /// `2 * M / T` over [`Self::matching_blocks`]; 1.0 when both sequences are empty.
    #[must_use]
    pub fn ratio(&self) -> f64 {
        let total = self.a.len() + self.b.len();
        if total == 0 {
            return 1.0;
        }
        let matches: usize = self.matching_blocks().iter().map(|m| m.size).sum();
        // Same operation order as CPython (`2.0 * matches / length`), so the same rounding.
        2.0 * matches as f64 / total as f64
    }
}

/// CPython's rolling `j2len` / `newj2len` dictionaries as two dense arrays: slot `j + 1`
/// holds the length of the match ending at `b[j]` on the current row of `a`, slot 0 stands
/// for "before b". Only touched slots are reset, so a row costs what CPython's dict costs.
struct RunLengths {
    prev: Vec<usize>,
    next: Vec<usize>,
    prev_touched: Vec<usize>,
    next_touched: Vec<usize>,
}

impl RunLengths {
    fn new(lb: usize) -> Self {
        Self {
            prev: vec![0; lb + 1],
            next: vec![0; lb + 1],
            prev_touched: Vec::new(),
            next_touched: Vec::new(),
        }
    }

    /// Records a match at `b[j]` on the current row and returns its run length.
    fn extend(&mut self, j: usize) -> usize {
        let k = self.prev[j] + 1;
        self.next[j + 1] = k;
        self.next_touched.push(j + 1);
        k
    }

    /// Moves to the next element of `a`: the current row becomes the previous one.
    fn next_row(&mut self) {
        for &slot in &self.prev_touched {
            self.prev[slot] = 0;
        }
        self.prev_touched.clear();
        std::mem::swap(&mut self.prev, &mut self.next);
        std::mem::swap(&mut self.prev_touched, &mut self.next_touched);
    }

    /// Resets both rows for the next search: after [`Self::next_row`] only `prev` is
    /// dirty, and one more call cleans it.
    fn clear(&mut self) {
        self.next_row();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(a: usize, b: usize, size: usize) -> Match {
        Match { a, b, size }
    }

    // Expected values below are CPython 3.11 outputs (difflib docstrings and REPL).

    #[test]
    fn longest_match_prefers_earliest_in_a_then_b() {
        let s = SequenceMatcher::new(" abcd", "abcd abcd");
        assert_eq!(s.find_longest_match(0, 5, 0, 9), m(0, 4, 5));
        let s = SequenceMatcher::new("ab", "c");
        assert_eq!(s.find_longest_match(0, 2, 0, 1), m(0, 0, 0));
        // Two equal-length candidates "ab": the one at a=0 wins, and within it b=0.
        let s = SequenceMatcher::new("abab", "abab");
        assert_eq!(s.find_longest_match(0, 4, 0, 4), m(0, 0, 4));
        let s = SequenceMatcher::new("abxab", "ab");
        assert_eq!(s.find_longest_match(0, 5, 0, 2), m(0, 0, 2));
        let s = SequenceMatcher::new("xab", "abyab");
        assert_eq!(s.find_longest_match(0, 3, 0, 5), m(1, 0, 2));
    }

    #[test]
    fn matching_blocks_merge_and_end_with_sentinel() {
        let s = SequenceMatcher::new("abxcd", "abcd");
        assert_eq!(
            s.matching_blocks(),
            vec![m(0, 0, 2), m(3, 2, 2), m(5, 4, 0)]
        );
        let s = SequenceMatcher::new("qabxcd", "abycdf");
        assert_eq!(
            s.matching_blocks(),
            vec![m(1, 0, 2), m(4, 3, 2), m(6, 6, 0)]
        );
        assert_eq!(
            SequenceMatcher::new("", "").matching_blocks(),
            vec![m(0, 0, 0)]
        );
    }

    #[test]
    fn ratio_matches_cpython_on_small_cases() {
        assert_eq!(ratio("abcd", "bcde"), 0.75);
        assert_eq!(ratio("", ""), 1.0);
        assert_eq!(ratio("", "abc"), 0.0);
        assert_eq!(ratio("abc", ""), 0.0);
        assert_eq!(ratio("same text", "same text"), 1.0);
        // Not symmetric: 0.25 one way, 0.5 the other in CPython.
        assert_eq!(ratio("tide", "diet"), 0.25);
        assert_eq!(ratio("diet", "tide"), 0.5);
    }

    #[test]
    fn ratio_counts_code_points_not_bytes() {
        // "é" precomposed (1 code point) vs "e" + U+0301 (2 code points): "e" is not "é".
        assert_eq!(ratio("caf\u{e9}", "cafe\u{301}"), 2.0 * 3.0 / 9.0);
        assert_eq!(ratio("東京都", "京都"), 0.8);
        assert_eq!(ratio("👍🏽 ok", "👍 ok"), 2.0 * 4.0 / 9.0);
    }

    #[test]
    fn popular_elements_are_dropped_then_reached_by_extension() {
        // b = 200 'x': every element popular, b2j empty, yet CPython's forward extension
        // from (0, 0) still matches the 10 leading 'x' of a.
        let b = "x".repeat(200);
        assert_eq!(ratio(&"x".repeat(10), &b), 20.0 / 210.0);
        // With 199 'x' autojunk is off and the same pair matches fully.
        assert_eq!(ratio(&"x".repeat(10), &"x".repeat(199)), 20.0 / 209.0);
        // a = "y" + 10 'x': nothing non-popular matches, so the search stays at (0, 0)
        // and "y" != "x" stops the extension: ratio 0, though 10 'x' are common.
        assert_eq!(ratio(&format!("y{}", "x".repeat(10)), &b), 0.0);
    }
}
