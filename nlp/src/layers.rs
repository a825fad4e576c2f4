//! The thinc layers en_core_web_sm uses at inference (Linear, Maxout, LayerNorm,
//! seq2col), each computed for all rows of a batch with one matrix product: on a CPU
//! with AVX2 and FMA against weights packed once at load (`credence_kernels::gemm`, the
//! encoder's kernels), elsewhere with the `gemm` crate.

use credence_kernels::gemm::{self as kernels, Epilogue, PackedWeights};

/// `out (m×n) = a (m×k) · bᵀ` for row-major `a` and row-major `b` of shape (n×k).
///
/// # Panics
/// If a slice is shorter than its shape says (a programming error, not an input error).
pub fn matmul_bt(a: &[f32], m: usize, k: usize, b: &[f32], n: usize, out: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= n * k && out.len() >= m * n);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        out[..m * n].fill(0.0);
        return;
    }
    // SAFETY: the assert above guarantees every index the strides address is in bounds:
    // dst (i, j) at i*n + j < m*n, lhs (i, l) at i*k + l < m*k, rhs (l, j) at j*k + l < n*k.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            k as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// A dense layer `y = x · Wᵀ + b`, W of shape (n_out, n_in).
#[derive(Debug, Clone)]
pub struct Linear {
    pub w: Vec<f32>,
    pub b: Vec<f32>,
    pub n_out: usize,
    pub n_in: usize,
    /// W and b packed for [`kernels::matmul`] where the CPU runs it.
    packed: Option<Packed>,
}

/// Weights packed once at load for the shared kernels.
#[derive(Clone)]
struct Packed(std::sync::Arc<PackedWeights>);

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Packed")
    }
}

/// `w` (n × k, row-major, as thinc stores a layer) packed for [`kernels::matmul`] with
/// `bias`, or `None` where the CPU lacks AVX2 and FMA.
fn pack_rows(w: &[f32], n: usize, k: usize, bias: Vec<f32>) -> Option<Packed> {
    if !kernels::supported() || n == 0 || k == 0 {
        return None;
    }
    let mut transposed = vec![0.0f32; k * n];
    for (j, row) in w.chunks_exact(k).enumerate() {
        for (i, &v) in row.iter().enumerate() {
            transposed[i * n + j] = v;
        }
    }
    Some(Packed(std::sync::Arc::new(PackedWeights::new(
        &transposed,
        k,
        n,
        bias,
    ))))
}

/// `out (m×n) = a (m×k) · wᵀ` (+ the packed bias) for `w` of shape (n×k): the packed
/// kernels where there, else [`matmul_bt`].
fn product(
    a: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
    packed: Option<&Packed>,
) -> Vec<f32> {
    let mut y = vec![0.0; m * n];
    match packed {
        Some(p) if m > 0 => kernels::matmul(&a[..m * k], m, &p.0, None, Epilogue::None, &mut y),
        _ => matmul_bt(a, m, k, w, n, &mut y),
    }
    y
}

impl Linear {
    /// The layer with weights `w` (n_out × n_in) and bias `b` (n_out).
    pub fn new(w: Vec<f32>, b: Vec<f32>, n_out: usize, n_in: usize) -> Self {
        let packed = pack_rows(&w, n_out, n_in, b.clone());
        Linear {
            w,
            b,
            n_out,
            n_in,
            packed,
        }
    }

    /// Applies the layer to `rows` rows of `x` (rows × n_in), returning rows × n_out.
    pub fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let mut y = product(
            x,
            rows,
            self.n_in,
            &self.w,
            self.n_out,
            self.packed.as_ref(),
        );
        if self.packed.is_none() {
            for row in y.chunks_exact_mut(self.n_out) {
                for (v, b) in row.iter_mut().zip(&self.b) {
                    *v += b;
                }
            }
        }
        y
    }
}

/// A weight matrix without bias (n × k), packed once where the CPU runs the packed
/// kernels: `a · Wᵀ` for the parser's precomputed lower layer.
#[derive(Debug, Clone)]
pub struct Weights {
    pub w: Vec<f32>,
    pub n: usize,
    pub k: usize,
    packed: Option<Packed>,
}

impl Weights {
    /// `w` of shape (n × k).
    pub fn new(w: Vec<f32>, n: usize, k: usize) -> Self {
        let packed = pack_rows(&w, n, k, vec![0.0; n]);
        Weights { w, n, k, packed }
    }

    /// `a (m×k) · Wᵀ`, m × n.
    pub fn product(&self, a: &[f32], m: usize) -> Vec<f32> {
        product(a, m, self.k, &self.w, self.n, self.packed.as_ref())
    }
}

/// Maxout: a Linear to n_out·n_pieces followed by the max over each unit's pieces.
/// W is (n_out, n_pieces, n_in), b is (n_out, n_pieces).
#[derive(Debug, Clone)]
pub struct Maxout {
    pub linear: Linear,
    pub n_pieces: usize,
}

impl Maxout {
    pub fn n_out(&self) -> usize {
        self.linear.n_out / self.n_pieces
    }

    pub fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let y = self.linear.forward(x, rows);
        y.chunks_exact(self.n_pieces)
            .map(|pieces| pieces.iter().copied().fold(f32::NEG_INFINITY, f32::max))
            .collect()
    }
}

/// Layer normalisation per row: `(x − μ) / sqrt(σ² + 1e-8) · G + b`.
#[derive(Debug, Clone)]
pub struct LayerNorm {
    pub g: Vec<f32>,
    pub b: Vec<f32>,
}

impl LayerNorm {
    pub fn forward_in_place(&self, x: &mut [f32]) {
        let n = self.g.len();
        for row in x.chunks_exact_mut(n) {
            let mean = row.iter().sum::<f32>() / n as f32;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
            let inv = (var + 1e-8).powf(-0.5);
            for ((v, g), b) in row.iter_mut().zip(&self.g).zip(&self.b) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

/// seq2col with window 1 for selected rows: row i becomes `[x(i−1), x(i), x(i+1)]`,
/// with zeros outside its block. Each range is `(first, end, block_start, block_end)`:
/// rows `first..end` of the block `block_start..block_end` (a padded doc of a batch).
/// The output holds the selected rows in order.
pub fn seq2col_rows(x: &[f32], width: usize, ranges: &[(usize, usize, usize, usize)]) -> Vec<f32> {
    let rows: usize = ranges.iter().map(|r| r.1 - r.0).sum();
    let mut out = vec![0.0; rows * 3 * width];
    let mut k = 0;
    for &(first, end, block_start, block_end) in ranges {
        for i in first..end {
            let o = &mut out[k * 3 * width..(k + 1) * 3 * width];
            if i > block_start {
                o[..width].copy_from_slice(&x[(i - 1) * width..i * width]);
            }
            o[width..2 * width].copy_from_slice(&x[i * width..(i + 1) * width]);
            if i + 1 < block_end {
                o[2 * width..].copy_from_slice(&x[(i + 1) * width..(i + 2) * width]);
            }
            k += 1;
        }
    }
    out
}

/// Dot product with 8 independent partial sums, so it vectorises (a plain `sum` is
/// one sequential f32 chain).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// Index of the first maximum (numpy `argmax` tie-break); `None` for an empty slice.
pub fn argmax(xs: &[f32]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, &v) in xs.iter().enumerate() {
        if best.is_none_or(|b| v > xs[b]) {
            best = Some(i);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_matches_naive_product() {
        let (m, k, n) = (5, 7, 3);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut out = vec![9.0; m * n];
        matmul_bt(&a, m, k, &b, n, &mut out);
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|l| a[i * k + l] * b[j * k + l]).sum();
                assert!((out[i * n + j] - want).abs() < 1e-5, "({i},{j})");
            }
        }
    }

    #[test]
    fn seq2col_zeroes_block_edges() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y = seq2col_rows(&x, 1, &[(0, 2, 0, 2), (2, 5, 2, 5)]);
        assert_eq!(
            y,
            vec![0., 1., 2., 1., 2., 0., 0., 3., 4., 3., 4., 5., 4., 5., 0.]
        );
        assert_eq!(seq2col_rows(&x, 1, &[(3, 4, 2, 5)]), vec![3., 4., 5.]);
    }

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), Some(1));
        assert_eq!(argmax(&[]), None);
    }
}
