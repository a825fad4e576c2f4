//! The index matrix: B resamples, with replacement, of the positions `0..n` of one
//! dataset's examples, and the resampled means of metric vectors over it.
//!
//! There is one matrix per (seed, dataset, n), shared by every configuration (model x
//! mode) of that dataset, so a difference between two configurations is resampled on the
//! same example ids: every comparison is paired. The matrix is a pure function of
//! (seed, dataset id, n) (see [`super::rng`]): any process, in either engine, on any
//! thread count, rebuilds it bit for bit, so it is never stored; `credence stats
//! indices` exports it for outside checks.
//!
//! It is never held in memory either: [`IndexMatrix::resampled_means`] regenerates each
//! row (n draws, in L1) and adds the rows of the metric matrix it picks, for every metric
//! at once. Each resampled mean is summed in row order, one row at a time, so the result
//! does not depend on how rows are split between threads.
//!
//! ```
//! use credence_core::stats::{Bootstrap, IndexMatrix};
//! let m = IndexMatrix::new(&Bootstrap { resamples: 1000, seed: 42 }, "sample", 5);
//! let x = [1.0, 2.0, 3.0, 4.0, 5.0];
//! let means = m.resampled_means(&[&x]);
//! assert_eq!(means[0].len(), 1000);
//! assert!(means[0].iter().all(|&v| (1.0..=5.0).contains(&v)));
//! ```

#[cfg(doc)]
use super::rng::UniformIndex;
use super::rng::{row_seed, stream_key, SplitMix64};
use super::Bootstrap;
use rayon::prelude::*;

/// The B x n resample indices of one dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexMatrix {
    key: u64,
    n: usize,
    resamples: usize,
}

/// Metric columns added per pass over a row's indices (two AVX2 registers per row).
const TILE: usize = 8;
/// Rows summed together, so that independent additions hide the adder's latency.
const ROWS_AT_ONCE: usize = 4;
/// Rows per parallel task.
const ROWS_PER_TASK: usize = 64;

impl IndexMatrix {
    /// The matrix of `dataset` (its id in the sweep) with `n` examples.
    pub fn new(boot: &Bootstrap, dataset: &str, n: usize) -> Self {
        assert!(
            n > 0 && n <= u32::MAX as usize,
            "resampling needs 1..=2^32-1 examples"
        );
        IndexMatrix {
            key: stream_key(boot.seed, dataset, n),
            n,
            resamples: boot.resamples,
        }
    }

    /// Examples per resample.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Number of resamples B.
    pub fn resamples(&self) -> usize {
        self.resamples
    }

    /// Writes row `b` (n indices into `0..n`) to `out`: the draws of
    /// [`UniformIndex`] seeded with [`row_seed`], two per 64-bit output.
    pub fn fill_row(&self, b: usize, out: &mut [u32]) {
        let out = &mut out[..self.n];
        let mut rng = SplitMix64::new(row_seed(self.key, b));
        let n = self.n as u64;
        let threshold = (self.n as u32).wrapping_neg() % self.n as u32;
        let mut i = 0;
        // Fast path: both halves of a draw accepted (all but ~n / 2^31 of draws).
        while i + 2 <= out.len() {
            let x = rng.next_u64();
            let m0 = (x & 0xffff_ffff).wrapping_mul(n);
            let m1 = (x >> 32).wrapping_mul(n);
            if (m0 as u32) >= threshold && (m1 as u32) >= threshold {
                let pair: &mut [u32; 2] = (&mut out[i..i + 2]).try_into().expect("two slots");
                *pair = [(m0 >> 32) as u32, (m1 >> 32) as u32];
                i += 2;
            } else {
                for m in [m0, m1] {
                    if (m as u32) >= threshold && i < out.len() {
                        out[i] = (m >> 32) as u32;
                        i += 1;
                    }
                }
            }
        }
        if i < out.len() {
            // The last index of an odd row (or after a rejection): the same stream of
            // 32-bit halves as UniformIndex, so its first half comes next.
            loop {
                let x = rng.next_u64();
                let mut done = false;
                for m in [(x & 0xffff_ffff).wrapping_mul(n), (x >> 32).wrapping_mul(n)] {
                    if (m as u32) >= threshold && i < out.len() {
                        out[i] = (m >> 32) as u32;
                        i += 1;
                    }
                    done = i == out.len();
                }
                if done {
                    break;
                }
            }
        }
    }

    /// The whole matrix, row-major (B x n); for export and tests.
    pub fn to_vec(&self) -> Vec<u32> {
        let mut out = vec![0u32; self.resamples * self.n];
        out.par_chunks_mut(self.n)
            .enumerate()
            .for_each(|(b, row)| self.fill_row(b, row));
        out
    }

    /// The B resampled means of each column (each of length n, in dataset order):
    /// `out[c][b]` = mean of `columns[c][idx[b][i]]` over i.
    pub fn resampled_means(&self, columns: &[&[f64]]) -> Vec<Vec<f64>> {
        let n = self.n;
        for c in columns {
            assert_eq!(c.len(), n, "a column's length is not the matrix's n");
        }
        // Tile-major copy of the columns: tile t holds n rows of TILE values.
        let tiles = columns.len().div_ceil(TILE);
        let mut packed = vec![0.0f64; tiles * n * TILE];
        for (c, col) in columns.iter().enumerate() {
            let (t, j) = (c / TILE, c % TILE);
            for (i, &v) in col.iter().enumerate() {
                packed[(t * n + i) * TILE + j] = v;
            }
        }
        let blocks: Vec<Vec<[f64; TILE]>> = (0..self.resamples.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .map(|block| {
                let rows = block * ROWS_PER_TASK..((block + 1) * ROWS_PER_TASK).min(self.resamples);
                self.block_sums(rows, &packed, tiles)
            })
            .collect();
        let scale = 1.0 / n as f64;
        let mut out: Vec<Vec<f64>> = columns
            .iter()
            .map(|_| Vec::with_capacity(self.resamples))
            .collect();
        for block in &blocks {
            // A block holds, per row, `tiles` sums of TILE columns each.
            for row in block.chunks_exact(tiles) {
                for (c, col) in out.iter_mut().enumerate() {
                    col.push(row[c / TILE][c % TILE] * scale);
                }
            }
        }
        out
    }

    /// Column sums of the rows `rows`, per row `tiles` arrays of TILE sums.
    fn block_sums(
        &self,
        rows: std::ops::Range<usize>,
        packed: &[f64],
        tiles: usize,
    ) -> Vec<[f64; TILE]> {
        let n = self.n;
        let mut idx = vec![0u32; ROWS_AT_ONCE * n];
        let mut out = vec![[0.0; TILE]; rows.len() * tiles];
        let first = rows.start;
        let mut b = rows.start;
        while b < rows.end {
            let k = (rows.end - b).min(ROWS_AT_ONCE);
            for r in 0..k {
                self.fill_row(b + r, &mut idx[r * n..(r + 1) * n]);
            }
            for t in 0..tiles {
                let tile = &packed[t * n * TILE..(t + 1) * n * TILE];
                let sums = if k == ROWS_AT_ONCE {
                    sum_rows::<ROWS_AT_ONCE>(&idx, n, tile)
                } else {
                    let mut s = [[0.0; TILE]; ROWS_AT_ONCE];
                    for r in 0..k {
                        s[r] = sum_rows::<1>(&idx[r * n..(r + 1) * n], n, tile)[0];
                    }
                    s
                };
                for r in 0..k {
                    out[(b + r - first) * tiles + t] = sums[r];
                }
            }
            b += k;
        }
        out
    }
}

/// For R rows of n indices (row-major in `idx`), the sums of the tile's TILE columns over
/// each row's indices, each summed in index order.
#[inline(always)]
fn sum_rows<const R: usize>(idx: &[u32], n: usize, tile: &[f64]) -> [[f64; TILE]; R] {
    let mut acc = [[0.0f64; TILE]; R];
    let rows: [&[u32]; R] = std::array::from_fn(|r| &idx[r * n..(r + 1) * n]);
    assert!(tile.len() >= n * TILE && rows.iter().all(|r| r.len() >= n));
    for i in 0..n {
        for r in 0..R {
            // SAFETY: i < n <= rows[r].len(); an index from `fill_row` is
            // (u32 * n) >> 32 < n, and the tile holds n rows of TILE values.
            let at = unsafe { *rows[r].get_unchecked(i) } as usize;
            debug_assert!(at < n, "index {at} outside the dataset of {n}");
            let x = unsafe { &*(tile.as_ptr().add(at * TILE) as *const [f64; TILE]) };
            for j in 0..TILE {
                acc[r][j] += x[j];
            }
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot(resamples: usize) -> Bootstrap {
        Bootstrap {
            resamples,
            seed: 42,
        }
    }

    #[test]
    fn rows_are_in_range_and_rebuilt_identically() {
        let m = IndexMatrix::new(&boot(50), "d", 7);
        let a = m.to_vec();
        assert_eq!(a.len(), 350);
        assert!(a.iter().all(|&i| i < 7));
        assert_eq!(a, IndexMatrix::new(&boot(50), "d", 7).to_vec());
        // A smaller B is a prefix of a larger one.
        assert_eq!(a[..70], IndexMatrix::new(&boot(10), "d", 7).to_vec()[..]);
        assert_ne!(a, IndexMatrix::new(&boot(50), "e", 7).to_vec());
    }

    #[test]
    fn rows_are_the_uniform_index_stream() {
        use crate::stats::rng::UniformIndex;
        for n in [1usize, 2, 3, 7, 1000, 3_000_000_000] {
            let m = IndexMatrix::new(&boot(3), "d", n);
            for b in 0..3 {
                let len = n.min(101);
                let mut row = vec![0u32; n.min(1 << 20)];
                if n > 1 << 20 {
                    // Too large to fill: compare the generator alone on a short prefix.
                    let mut u = UniformIndex::new(row_seed(m.key, b), n as u32);
                    assert!((0..len).all(|_| (u.next_index() as usize) < n));
                    continue;
                }
                m.fill_row(b, &mut row);
                let mut u = UniformIndex::new(row_seed(m.key, b), n as u32);
                let expected: Vec<u32> = (0..n).map(|_| u.next_index()).collect();
                assert_eq!(row, expected, "n {n} row {b}");
            }
        }
    }

    #[test]
    fn means_equal_the_obvious_gather() {
        let n = 13;
        let m = IndexMatrix::new(&boot(37), "d", n);
        let cols: Vec<Vec<f64>> = (0..11)
            .map(|c| {
                (0..n)
                    .map(|i| ((i * 7 + c * 3) % 17) as f64 / 16.0)
                    .collect()
            })
            .collect();
        let refs: Vec<&[f64]> = cols.iter().map(|c| c.as_slice()).collect();
        let got = m.resampled_means(&refs);
        let idx = m.to_vec();
        for (c, col) in cols.iter().enumerate() {
            for b in 0..37 {
                let mut s = 0.0;
                for &i in &idx[b * n..(b + 1) * n] {
                    s += col[i as usize];
                }
                assert_eq!(got[c][b].to_bits(), (s * (1.0 / n as f64)).to_bits());
            }
        }
    }
}
