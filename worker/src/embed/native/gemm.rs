//! Single-precision matrix products against fixed weights, for the encoder's dense
//! layers: `C = A·W + bias`, then optionally a residual row added or an activation
//! applied, while the output tile is still in L1.
//!
//! The weights are packed once at load into the order the inner kernel reads them
//! (panels of [`NR`] columns, row `k` of a panel contiguous), so no call copies or
//! transposes them; only the activations are packed per call, a cost of `1/N` of the
//! arithmetic. The blocking is the classic one (Goto and van de Geijn): a [`KC`]-deep
//! slice of a weight panel stays in L1 while [`MC`] rows of activations stream from L2.
//! The 6×16 kernel keeps twelve 8-lane accumulators in registers and does two fused
//! multiply-adds per loaded weight vector, near this class of CPU's FMA peak.
//!
//! Architecture Invariant: an output row depends only on its own input row and the
//! weights: the blocking is fixed (never derived from the number of rows), every row
//! of a tile runs the same instruction sequence, and the `k` sum is one fused
//! multiply-add chain in ascending order. So a sentence's vector is bit-identical in
//! any batch, which the embedding cache shared between jobs relies on.

use rayon::prelude::*;

/// Rows per kernel tile.
pub(crate) const MR: usize = 6;
/// Columns per kernel tile (two 8-lane vectors).
pub(crate) const NR: usize = 16;
/// Depth of one pass over the weights (a 16 KB slice of a weight panel).
pub(crate) const KC: usize = 256;
/// Activation rows packed per block (96 KB at `KC`, in L2).
pub(crate) const MC: usize = 96;

/// What happens to each output value after `A·W + bias`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Epilogue {
    /// Nothing more.
    None,
    /// The exact (erf) GELU.
    Gelu,
    /// The tanh approximation of GELU.
    GeluTanh,
    /// max(0, x).
    Relu,
}

/// A weight matrix `[k, n]` (input features × output features) with its bias, packed
/// for [`matmul`].
pub(crate) struct PackedWeights {
    k: usize,
    n: usize,
    /// `ceil(n / NR)` panels of `k × NR` values, zero-padded past column `n`.
    panels: Vec<f32>,
    bias: Vec<f32>,
}

impl PackedWeights {
    /// Packs `weights`, row-major `[k, n]`, with `bias` of length `n`.
    pub(crate) fn new(weights: &[f32], k: usize, n: usize, bias: Vec<f32>) -> Self {
        assert_eq!(weights.len(), k * n, "weights are not {k}x{n}");
        assert_eq!(bias.len(), n, "bias is not of length {n}");
        let n_panels = n.div_ceil(NR);
        let mut panels = vec![0.0f32; n_panels * k * NR];
        for (p, panel) in panels.chunks_exact_mut(k * NR).enumerate() {
            let c0 = p * NR;
            let width = NR.min(n - c0);
            for (row, dst) in panel.chunks_exact_mut(NR).enumerate() {
                dst[..width].copy_from_slice(&weights[row * n + c0..row * n + c0 + width]);
            }
        }
        PackedWeights { k, n, panels, bias }
    }

    /// Output features.
    pub(crate) fn n(&self) -> usize {
        self.n
    }
}

/// `out = epilogue(a·W + bias [+ residual])` for row-major `a` of `m × W.k` and `out` of
/// `m × W.n`; `residual`, if given, is `m × W.n` and is added before the epilogue.
/// Blocks of [`MC`] rows run in parallel on the rayon pool.
///
/// Needs a CPU with AVX2 and FMA ([`supported`]); panics otherwise.
pub(crate) fn matmul(
    a: &[f32],
    m: usize,
    w: &PackedWeights,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    out: &mut [f32],
) {
    assert!(supported(), "the native matmul needs AVX2 and FMA");
    assert_eq!(a.len(), m * w.k, "activations are not {m}x{}", w.k);
    assert_eq!(out.len(), m * w.n, "output is not {m}x{}", w.n);
    if let Some(r) = residual {
        assert_eq!(r.len(), m * w.n, "residual is not {m}x{}", w.n);
    }
    let (k, n) = (w.k, w.n);
    out.par_chunks_mut(MC * n)
        .enumerate()
        .for_each(|(block, c)| {
            let r0 = block * MC;
            let rows = c.len() / n;
            let a_block = &a[r0 * k..(r0 + rows) * k];
            let res = residual.map(|r| &r[r0 * n..(r0 + rows) * n]);
            // SAFETY: `supported()` was checked above; the slices have the sizes
            // `block_product` expects (asserted above and derived from them here).
            unsafe { block_product(a_block, rows, w, res, epilogue, c) };
        });
}

/// Whether this CPU can run [`matmul`].
pub(crate) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One block of at most [`MC`] rows: every depth slice, every weight panel, every
/// 6-row tile.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_product(
    a: &[f32],
    rows: usize,
    w: &PackedWeights,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    c: &mut [f32],
) {
    let (k, n) = (w.k, w.n);
    let tiles = rows.div_ceil(MR);
    let mut packed_a = vec![0.0f32; tiles * MR * KC];
    let mut edge = [0.0f32; MR * NR];
    let mut k0 = 0;
    while k0 < k {
        let kc = KC.min(k - k0);
        let first = k0 == 0;
        let last = k0 + kc == k;
        pack_activations(a, rows, k, k0, kc, &mut packed_a);
        for (p, panel) in w.panels.chunks_exact(k * NR).enumerate() {
            let c0 = p * NR;
            let width = NR.min(n - c0);
            let b = panel[k0 * NR..].as_ptr();
            for t in 0..tiles {
                let r0 = t * MR;
                let height = MR.min(rows - r0);
                let a_tile = packed_a[t * MR * kc..].as_ptr();
                if height == MR && width == NR {
                    let dst = c[r0 * n + c0..].as_mut_ptr();
                    kernel_6x16(kc, a_tile, b, dst, n, !first);
                } else {
                    // A partial tile runs the same kernel on a copy, so its values are
                    // bit-identical to those of a full tile.
                    for r in 0..height {
                        let src = &c[(r0 + r) * n + c0..(r0 + r) * n + c0 + width];
                        edge[r * NR..r * NR + width].copy_from_slice(src);
                    }
                    kernel_6x16(kc, a_tile, b, edge.as_mut_ptr(), NR, !first);
                    for r in 0..height {
                        let dst = &mut c[(r0 + r) * n + c0..(r0 + r) * n + c0 + width];
                        dst.copy_from_slice(&edge[r * NR..r * NR + width]);
                    }
                }
                if last {
                    for r in r0..r0 + height {
                        let span = r * n + c0..r * n + c0 + width;
                        finish(
                            &mut c[span.clone()],
                            &w.bias[c0..c0 + width],
                            residual.map(|res| &res[span]),
                            epilogue,
                        );
                    }
                }
            }
        }
        k0 += kc;
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn block_product(
    _a: &[f32],
    _rows: usize,
    _w: &PackedWeights,
    _residual: Option<&[f32]>,
    _epilogue: Epilogue,
    _c: &mut [f32],
) {
    unreachable!("matmul checks supported() first")
}

/// Copies columns `k0..k0+kc` of `rows` activation rows into 6-row tiles, each stored
/// `k`-major (`tile[k][r]`), zero rows past the end.
#[inline(always)]
fn pack_activations(a: &[f32], rows: usize, k: usize, k0: usize, kc: usize, packed: &mut [f32]) {
    for t in 0..rows.div_ceil(MR) {
        let tile = &mut packed[t * MR * kc..(t + 1) * MR * kc];
        for r in 0..MR {
            let row = t * MR + r;
            if row < rows {
                let src = &a[row * k + k0..row * k + k0 + kc];
                for (kk, &v) in src.iter().enumerate() {
                    tile[kk * MR + r] = v;
                }
            } else {
                for kk in 0..kc {
                    tile[kk * MR + r] = 0.0;
                }
            }
        }
    }
}

/// Bias, residual and activation on one finished output row segment.
#[inline(always)]
fn finish(row: &mut [f32], bias: &[f32], residual: Option<&[f32]>, epilogue: Epilogue) {
    for (v, b) in row.iter_mut().zip(bias) {
        *v += b;
    }
    if let Some(res) = residual {
        for (v, r) in row.iter_mut().zip(res) {
            *v += r;
        }
    }
    match epilogue {
        Epilogue::None => {}
        Epilogue::Gelu => super::math::gelu_erf(row),
        Epilogue::GeluTanh => super::math::gelu_tanh(row),
        Epilogue::Relu => {
            for v in row {
                *v = v.max(0.0);
            }
        }
    }
}

/// `C[6×16] (+)= A_tile · B_slice` over `kc` steps: `a` is a packed tile (`a[k*6 + r]`),
/// `b` a panel slice (`b[k*16 + j]`), `c` row-major with row stride `ldc`. With
/// `accumulate` the chain continues from `C`'s values, else it starts at zero.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn kernel_6x16(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the caller passes `a` with kc*6 values, `b` with kc*16 and
    // `c` with 6 rows of 16 at stride `ldc`.
    unsafe {
        // Twelve accumulators, two per row; constant-bound loops over a fixed array, so
        // the compiler unrolls them and keeps every accumulator in a register.
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        if accumulate {
            for (r, row) in acc.iter_mut().enumerate() {
                row[0] = _mm256_loadu_ps(c.add(r * ldc));
                row[1] = _mm256_loadu_ps(c.add(r * ldc + 8));
            }
        }
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for (r, row) in acc.iter_mut().enumerate() {
                let ar = _mm256_broadcast_ss(&*ap.add(r));
                row[0] = _mm256_fmadd_ps(ar, b0, row[0]);
                row[1] = _mm256_fmadd_ps(ar, b1, row[1]);
            }
            ap = ap.add(MR);
            bp = bp.add(NR);
        }
        for (r, row) in acc.iter().enumerate() {
            _mm256_storeu_ps(c.add(r * ldc), row[0]);
            _mm256_storeu_ps(c.add(r * ldc + 8), row[1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random matrix in [-1, 1).
    fn matrix(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    fn reference(a: &[f32], m: usize, w: &[f32], k: usize, n: usize, bias: &[f32]) -> Vec<f64> {
        let mut out = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k)
                    .map(|p| a[i * k + p] as f64 * w[p * n + j] as f64)
                    .sum();
                out[i * n + j] = dot + bias[j] as f64;
            }
        }
        out
    }

    #[test]
    fn products_match_a_float64_reference_on_ragged_shapes() {
        if !supported() {
            eprintln!("no AVX2+FMA on this CPU: the native encoder falls back to candle");
            return;
        }
        // Rows, depth and width that are and are not multiples of the tile and blocks.
        for &(m, k, n) in &[
            (1, 1, 1),
            (7, 300, 17),
            (6, 256, 16),
            (97, 513, 40),
            (200, 64, 48),
        ] {
            let a = matrix(m * k, 1);
            let w = matrix(k * n, 2);
            let bias = matrix(n, 3);
            let packed = PackedWeights::new(&w, k, n, bias.clone());
            let mut out = vec![f32::NAN; m * n];
            matmul(&a, m, &packed, None, Epilogue::None, &mut out);
            let want = reference(&a, m, &w, k, n, &bias);
            for (i, (&got, &want)) in out.iter().zip(&want).enumerate() {
                let tol = 1e-5 * (k as f64).sqrt().max(1.0);
                assert!(
                    (got as f64 - want).abs() <= tol,
                    "{m}x{k}x{n} [{i}]: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn a_row_is_bit_identical_whatever_the_other_rows() {
        if !supported() {
            return;
        }
        let (k, n) = (384, 40);
        let w = PackedWeights::new(&matrix(k * n, 5), k, n, matrix(n, 6));
        let rows = matrix(150 * k, 7);
        let mut all = vec![0.0; 150 * n];
        matmul(&rows, 150, &w, None, Epilogue::Gelu, &mut all);
        // Each row alone, and row 100 at every position of a 7-row call.
        for i in [0, 5, 6, 95, 96, 100, 149] {
            let mut one = vec![0.0; n];
            matmul(
                &rows[i * k..(i + 1) * k],
                1,
                &w,
                None,
                Epilogue::Gelu,
                &mut one,
            );
            assert_eq!(one, all[i * n..(i + 1) * n], "row {i}");
        }
        for pos in 0..7 {
            let mut batch = matrix(7 * k, 8);
            batch[pos * k..(pos + 1) * k].copy_from_slice(&rows[100 * k..101 * k]);
            let mut out = vec![0.0; 7 * n];
            matmul(&batch, 7, &w, None, Epilogue::Gelu, &mut out);
            assert_eq!(
                out[pos * n..(pos + 1) * n],
                all[100 * n..101 * n],
                "at {pos}"
            );
        }
    }

    #[test]
    fn residual_and_relu_apply_after_the_bias() {
        if !supported() {
            return;
        }
        let (m, k, n) = (3, 2, 2);
        // a = [[1, 2], [0, 0], [-1, -1]], W = I, bias = [1, -10], residual = 0.5.
        let a = [1.0, 2.0, 0.0, 0.0, -1.0, -1.0];
        let w = PackedWeights::new(&[1.0, 0.0, 0.0, 1.0], k, n, vec![1.0, -10.0]);
        let residual = [0.5; 6];
        let mut out = [0.0; 6];
        matmul(&a, m, &w, Some(&residual), Epilogue::Relu, &mut out);
        assert_eq!(out, [2.5, 0.0, 1.5, 0.0, 0.5, 0.0]);
    }
}
