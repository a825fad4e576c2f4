//! Exact maximum-weight 1-to-1 assignment on a rectangular matrix of float similarities
//! (the Hungarian method with potentials, O(n² m) for n ≤ m). Used by the Hungarian
//! ablation of Semantic-F1 (PAPER.md "Metrics").

/// The best 1-to-1 matching of the rows and columns of a `rows x cols` matrix: every row
/// (if `rows <= cols`) or every column (otherwise) is matched, and the sum of the matched
/// weights is as large as possible.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    /// Matched `(row, col)` pairs, sorted by row; `min(rows, cols)` of them.
    pub pairs: Vec<(usize, usize)>,
    /// Sum of the weights of the matched pairs.
    pub total: f64,
}

/// Maximum-weight assignment of a `rows x cols` matrix given by `weight(row, col)`.
/// Weights must be finite. An empty side gives an empty assignment.
///
/// ```
/// use credence_core::matching::hungarian::max_weight_assignment;
/// let w = [[0.9, 0.8], [0.85, 0.1], [0.0, 0.2]];
/// let a = max_weight_assignment(3, 2, |i, j| w[i][j]);
/// assert_eq!(a.pairs, vec![(0, 1), (1, 0)]);
/// assert!((a.total - 1.65).abs() < 1e-12);
/// ```
pub fn max_weight_assignment(
    rows: usize,
    cols: usize,
    weight: impl Fn(usize, usize) -> f64,
) -> Assignment {
    if rows == 0 || cols == 0 {
        return Assignment {
            pairs: Vec::new(),
            total: 0.0,
        };
    }
    // The algorithm wants n <= m; transpose when there are more rows than columns.
    let transposed = rows > cols;
    let (n, m) = if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let cost = |i: usize, j: usize| {
        if transposed {
            -weight(j, i)
        } else {
            -weight(i, j)
        }
    };
    let row_of_col = min_cost_assignment(n, m, cost);
    let mut pairs: Vec<(usize, usize)> = row_of_col
        .iter()
        .enumerate()
        .filter_map(|(j, r)| r.map(|i| if transposed { (j, i) } else { (i, j) }))
        .collect();
    pairs.sort_unstable();
    let total = pairs.iter().map(|&(i, j)| weight(i, j)).sum();
    Assignment { pairs, total }
}

/// Minimum-cost assignment of all `n` rows to distinct columns among `m >= n`; returns,
/// for each column, the row assigned to it. Classic shortest-augmenting-path form with
/// row and column potentials (1-based internally, index 0 is the virtual start column).
fn min_cost_assignment(
    n: usize,
    m: usize,
    cost: impl Fn(usize, usize) -> f64,
) -> Vec<Option<usize>> {
    let mut u = vec![0.0f64; n + 1];
    let mut v = vec![0.0f64; m + 1];
    let mut p = vec![0usize; m + 1]; // p[j] = row matched to column j (0 = none)
    let mut way = vec![0usize; m + 1];
    for i in 1..=n {
        p[0] = i;
        let mut j0 = 0usize;
        let mut minv = vec![f64::INFINITY; m + 1];
        let mut used = vec![false; m + 1];
        loop {
            used[j0] = true;
            let i0 = p[j0];
            let mut delta = f64::INFINITY;
            let mut j1 = 0usize;
            for j in 1..=m {
                if used[j] {
                    continue;
                }
                let cur = cost(i0 - 1, j - 1) - u[i0] - v[j];
                if cur < minv[j] {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if minv[j] < delta {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for j in 0..=m {
                if used[j] {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if p[j0] == 0 {
                break;
            }
        }
        // Flip the augmenting path back to the start column.
        loop {
            let j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    (1..=m).map(|j| (p[j] != 0).then(|| p[j] - 1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Best total over every injective map of the smaller side into the larger one.
    fn brute_force(rows: usize, cols: usize, w: &[Vec<f64>]) -> f64 {
        fn go(
            i: usize,
            n: usize,
            m: usize,
            used: &mut Vec<bool>,
            w: &dyn Fn(usize, usize) -> f64,
        ) -> f64 {
            if i == n {
                return 0.0;
            }
            let mut best = f64::NEG_INFINITY;
            for j in 0..m {
                if !used[j] {
                    used[j] = true;
                    best = best.max(w(i, j) + go(i + 1, n, m, used, w));
                    used[j] = false;
                }
            }
            best
        }
        if rows <= cols {
            go(0, rows, cols, &mut vec![false; cols], &|i, j| w[i][j])
        } else {
            go(0, cols, rows, &mut vec![false; rows], &|i, j| w[j][i])
        }
    }

    #[test]
    fn equals_brute_force_on_500_random_rectangular_matrices() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for case in 0..500 {
            let rows = rng.random_range(1..=7);
            let cols = rng.random_range(1..=7);
            // Cosine-like weights in [-1, 1], some cases with many ties.
            let ties = case % 5 == 0;
            let w: Vec<Vec<f64>> = (0..rows)
                .map(|_| {
                    (0..cols)
                        .map(|_| {
                            let x: f64 = rng.random_range(-1.0..1.0);
                            if ties {
                                (x * 2.0).round() / 2.0
                            } else {
                                x
                            }
                        })
                        .collect()
                })
                .collect();
            let a = max_weight_assignment(rows, cols, |i, j| w[i][j]);
            let expected = brute_force(rows, cols, &w);
            assert!(
                (a.total - expected).abs() < 1e-9,
                "case {case} ({rows}x{cols}): hungarian {} brute force {expected}",
                a.total
            );
            assert_eq!(a.pairs.len(), rows.min(cols), "case {case}");
            let mut seen_r = vec![false; rows];
            let mut seen_c = vec![false; cols];
            for &(i, j) in &a.pairs {
                assert!(!seen_r[i] && !seen_c[j], "case {case}: not 1-to-1");
                seen_r[i] = true;
                seen_c[j] = true;
            }
        }
    }

    #[test]
    fn empty_side_is_empty() {
        let a = max_weight_assignment(0, 3, |_, _| 1.0);
        assert!(a.pairs.is_empty());
        assert_eq!(a.total, 0.0);
    }
}
