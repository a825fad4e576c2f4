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

/// A layer's output buffer, taken from (and given back on drop to) a small pool of the
/// thread's earlier buffers: a batch's products are megabytes (the parser's precomputed
/// lower layer ~8 MB), and a fresh allocation each time costs page faults and zeroing.
pub struct Buffer {
    buf: Vec<f32>,
    len: usize,
}

/// Buffers a thread keeps for reuse.
const POOLED: usize = 8;

thread_local! {
    static POOL: std::cell::RefCell<Vec<Vec<f32>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Buffer {
    /// `len` values, stale (whatever the buffer last held) where it was reused, so the
    /// caller writes every value before reading it.
    pub fn stale(len: usize) -> Buffer {
        let mut buf = POOL
            .with(|p| {
                let mut pool = p.borrow_mut();
                // The smallest buffer that holds `len` values, else the largest (grown
                // below), so a small request does not take a big buffer.
                let fits = (0..pool.len())
                    .filter(|&i| pool[i].len() >= len)
                    .min_by_key(|&i| pool[i].len());
                let best = fits.or_else(|| (0..pool.len()).max_by_key(|&i| pool[i].len()))?;
                Some(pool.swap_remove(best))
            })
            .unwrap_or_default();
        if buf.len() < len {
            // A quarter more than asked: batches differ in size by a few tokens, and a
            // buffer grown to each new maximum would be reallocated (copied) again and
            // again.
            buf.clear();
            buf.resize(len + len / 4, 0.0);
        }
        Buffer { buf, len }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[..self.len]
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[..self.len]
    }
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({} values)", self.len)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        // A thread being torn down has no pool left; the buffer is then freed.
        let _ = POOL.try_with(|p| {
            let mut pool = p.borrow_mut();
            if pool.len() < POOLED {
                pool.push(buf);
            }
        });
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
/// kernels where there, else [`matmul_bt`]. Writes every value of `out`.
fn product(
    a: &[f32],
    m: usize,
    k: usize,
    w: &[f32],
    n: usize,
    packed: Option<&Packed>,
    out: &mut [f32],
) {
    match packed {
        Some(p) if m > 0 => kernels::matmul(&a[..m * k], m, &p.0, None, Epilogue::None, out),
        _ => matmul_bt(a, m, k, w, n, out),
    }
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
    pub fn forward(&self, x: &[f32], rows: usize) -> Buffer {
        let mut y = Buffer::stale(rows * self.n_out);
        self.forward_into(x, rows, &mut y);
        y
    }

    /// [`Linear::forward`] into `y` (rows × n_out), every value written.
    pub fn forward_into(&self, x: &[f32], rows: usize, y: &mut [f32]) {
        let packed = self.packed.as_ref();
        product(x, rows, self.n_in, &self.w, self.n_out, packed, y);
        if packed.is_none() {
            for row in y.chunks_exact_mut(self.n_out) {
                for (v, b) in row.iter_mut().zip(&self.b) {
                    *v += b;
                }
            }
        }
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
    pub fn product(&self, a: &[f32], m: usize) -> Buffer {
        let mut out = Buffer::stale(m * self.n);
        product(
            a,
            m,
            self.k,
            &self.w,
            self.n,
            self.packed.as_ref(),
            &mut out,
        );
        out
    }
}

/// Maxout: a Linear to n_out·n_pieces followed by the max over each unit's pieces.
/// thinc stores W as (n_out, n_pieces, n_in) and b as (n_out, n_pieces); [`Maxout::new`]
/// reorders them piece-major, (n_pieces, n_out, n_in), so that each piece of a row's
/// output is a contiguous run of n_out values and the max over pieces is an elementwise
/// max of runs (the same values, so the same result).
#[derive(Debug, Clone)]
pub struct Maxout {
    /// The piece-major layer: output column `p·n_out + o` is piece p of unit o.
    pub linear: Linear,
    pub n_pieces: usize,
}

impl Maxout {
    /// The layer from thinc's W (n_out × n_pieces × n_in) and b (n_out × n_pieces).
    pub fn new(w: Vec<f32>, b: Vec<f32>, n_out: usize, n_pieces: usize, n_in: usize) -> Self {
        let n_pieces = n_pieces.max(1);
        Maxout {
            linear: Linear::new(
                piece_major(&w, n_out, n_pieces, n_in),
                piece_major(&b, n_out, n_pieces, 1),
                n_out * n_pieces,
                n_in,
            ),
            n_pieces,
        }
    }

    pub fn n_out(&self) -> usize {
        self.linear.n_out / self.n_pieces
    }

    /// The layer on `rows` rows of `x` into `out` (rows × n_out), with `pieces` (rows × n_out ·
    /// n_pieces) for the linear layer's output; every value of both is written.
    pub fn forward_into(&self, x: &[f32], rows: usize, pieces: &mut [f32], out: &mut [f32]) {
        self.linear.forward_into(x, rows, pieces);
        let n_out = self.n_out();
        for (o, row) in out
            .chunks_exact_mut(n_out)
            .zip(pieces.chunks_exact(self.linear.n_out))
        {
            max_pieces(row, o);
        }
    }
}

/// Reorders `x` of shape (units, pieces, width) to (pieces, units, width).
pub fn piece_major(x: &[f32], units: usize, pieces: usize, width: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for p in 0..pieces {
        for u in 0..units {
            let at = (u * pieces + p) * width;
            out.extend_from_slice(&x[at..at + width]);
        }
    }
    out
}

/// `out[o] = max over p of pieces[p·n + o]` for piece-major `pieces` (n = `out.len()`),
/// folded from −∞ in piece order like thinc's maxout.
pub fn max_pieces(pieces: &[f32], out: &mut [f32]) {
    let n = out.len();
    out.fill(f32::NEG_INFINITY);
    for piece in pieces.chunks_exact(n) {
        for (o, &v) in out.iter_mut().zip(piece) {
            *o = o.max(v);
        }
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
        // The squared deviations of a row; on the stack at the widths en_core_web_sm
        // has (96), as the embedding cache normalises single rows.
        let (mut stack, mut heap) = ([0.0f32; PAIRWISE_BLOCK], Vec::new());
        let sq = if n <= PAIRWISE_BLOCK {
            &mut stack[..n]
        } else {
            heap.resize(n, 0.0);
            &mut heap[..]
        };
        for row in x.chunks_exact_mut(n) {
            let mean = numpy_sum(row) / n as f32;
            for (s, v) in sq.iter_mut().zip(row.iter()) {
                *s = (v - mean) * (v - mean);
            }
            let var = numpy_sum(sq) / n as f32;
            let inv = (var + 1e-8).powf(-0.5);
            for ((v, g), b) in row.iter_mut().zip(&self.g).zip(&self.b) {
                *v = (*v - mean) * inv * g + b;
            }
        }
    }
}

/// The longest run NumPy sums without splitting it in two (`PW_BLOCKSIZE`).
const PAIRWISE_BLOCK: usize = 128;

/// The f32 sum of a contiguous run in NumPy's order (`pairwise_sum` in its loops: eight
/// running sums over strides of 8, joined as a tree, then the tail in order; runs over
/// 128 split in two at a multiple of 8), so a row's mean and variance round as thinc's
/// `X.mean(axis=1)` and `X.var(axis=1)` do. The eight sums vectorise.
pub fn numpy_sum(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |s, v| s + v);
    }
    if n > PAIRWISE_BLOCK {
        let half = n / 2 - (n / 2) % 8;
        return numpy_sum(&a[..half]) + numpy_sum(&a[half..]);
    }
    let mut r = [0.0f32; 8];
    r.copy_from_slice(&a[..8]);
    let body = n - n % 8;
    for chunk in a[8..body].chunks_exact(8) {
        for (r, v) in r.iter_mut().zip(chunk) {
            *r += v;
        }
    }
    let mut sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for v in &a[body..] {
        sum += v;
    }
    sum
}

/// seq2col with window 1 for selected rows: row i becomes `[x(i−1), x(i), x(i+1)]`,
/// with zeros outside its block. Each range is `(first, end, block_start, block_end)`:
/// rows `first..end` of the block `block_start..block_end` (a padded doc of a batch).
/// `out` receives the selected rows in order (every value written).
pub fn seq2col_rows(
    x: &[f32],
    width: usize,
    ranges: &[(usize, usize, usize, usize)],
    out: &mut [f32],
) {
    let rows: usize = ranges.iter().map(|r| r.1 - r.0).sum();
    assert_eq!(out.len(), rows * 3 * width, "seq2col output size");
    let mut k = 0;
    for &(first, end, block_start, block_end) in ranges {
        for i in first..end {
            let o = &mut out[k * 3 * width..(k + 1) * 3 * width];
            if i > block_start {
                o[..width].copy_from_slice(&x[(i - 1) * width..i * width]);
            } else {
                o[..width].fill(0.0);
            }
            o[width..2 * width].copy_from_slice(&x[i * width..(i + 1) * width]);
            if i + 1 < block_end {
                o[2 * width..].copy_from_slice(&x[(i + 1) * width..(i + 2) * width]);
            } else {
                o[2 * width..].fill(0.0);
            }
            k += 1;
        }
    }
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
        let mut y = vec![f32::NAN; 15];
        seq2col_rows(&x, 1, &[(0, 2, 0, 2), (2, 5, 2, 5)], &mut y);
        assert_eq!(
            y,
            vec![0., 1., 2., 1., 2., 0., 0., 3., 4., 3., 4., 5., 4., 5., 0.]
        );
        let mut y = vec![f32::NAN; 3];
        seq2col_rows(&x, 1, &[(3, 4, 2, 5)], &mut y);
        assert_eq!(y, vec![3., 4., 5.]);
    }

    /// `x[i] = ((7919·i mod 1000) − 500) · 10^(i mod 5) / 7` in f32, as NumPy makes it.
    fn ragged(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 10f32.powi((i % 5) as i32) / 7.0)
            .collect()
    }

    #[test]
    fn sums_round_as_numpy_does() {
        // NumPy 2 (`x.reshape(1, -1).sum(axis=1)`, `.mean(axis=1)`, `.var(axis=1)`) on
        // `ragged(n)`: the bits of its sum, mean and variance. A sequential sum gives
        // 0xc993ac6d for 96 and 0xc8a0036c for 300.
        for (n, sum, mean, var) in [
            (5, 0x488f4f52u32, 0x47654bb6u32, 0x500d248fu32),
            (96, 0xc993ac6b, 0xc644e5e4, 0x50ed1624),
            (300, 0xc8a00364, 0xc4888b6d, 0x50ff2b83),
        ] {
            let x = ragged(n);
            assert_eq!(numpy_sum(&x).to_bits(), sum, "sum of {n}");
            let mu = numpy_sum(&x) / n as f32;
            assert_eq!(mu.to_bits(), mean, "mean of {n}");
            let sq: Vec<f32> = x.iter().map(|v| (v - mu) * (v - mu)).collect();
            assert_eq!(
                (numpy_sum(&sq) / n as f32).to_bits(),
                var,
                "variance of {n}"
            );
        }
    }

    #[test]
    fn layer_norm_uses_numpy_moments() {
        let x = ragged(96);
        let norm = LayerNorm {
            g: vec![1.0; 96],
            b: vec![0.0; 96],
        };
        let mut y = x.clone();
        norm.forward_in_place(&mut y);
        let (mu, var) = (f32::from_bits(0xc644e5e4), f32::from_bits(0x50ed1624));
        let inv = (var + 1e-8).powf(-0.5);
        for (got, v) in y.iter().zip(&x) {
            assert_eq!(got.to_bits(), ((v - mu) * inv).to_bits());
        }
    }

    #[test]
    fn maxout_takes_each_units_max_over_its_pieces() {
        // thinc's layout: W (2 units, 3 pieces, 1 input), b (2, 3); x = 1.
        let w = vec![1.0, 5.0, 2.0, -1.0, -3.0, -2.0];
        let b = vec![0.0, 0.0, 4.0, 0.0, 0.0, 0.0];
        let m = Maxout::new(w, b, 2, 3, 1);
        let (mut pieces, mut out) = (vec![f32::NAN; 6], vec![f32::NAN; 2]);
        m.forward_into(&[1.0], 1, &mut pieces, &mut out);
        assert_eq!(out, vec![6.0, -1.0]);
        assert_eq!(
            piece_major(&[1., 2., 3., 4., 5., 6.], 3, 2, 1),
            vec![1., 3., 5., 2., 4., 6.]
        );
    }

    #[test]
    fn pooled_buffers_are_reused_best_fit() {
        let big = Buffer::stale(1000);
        let small = Buffer::stale(10);
        let (big_ptr, small_ptr) = (big.as_ptr(), small.as_ptr());
        drop(big);
        drop(small);
        // The smallest pooled buffer that fits, not the biggest.
        let again = Buffer::stale(8);
        assert_eq!(again.as_ptr(), small_ptr);
        assert_eq!(again.len(), 8);
        let other = Buffer::stale(900);
        assert_eq!(other.as_ptr(), big_ptr);
    }

    #[test]
    fn argmax_takes_the_first_maximum() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0]), Some(1));
        assert_eq!(argmax(&[]), None);
    }
}
