//! Single-precision matrix products against fixed weights, for the encoder's dense
//! layers: `C = A·W + bias`, then optionally a residual row added or an activation
//! applied, while the output tile is still in L1.
//!
//! The weights are packed once at load into the order the inner kernel reads them
//! (panels of [`NR`] columns, row `k` of a panel contiguous), so no call copies or
//! transposes them; only the activations are packed per call, a cost of `1/N` of the
//! arithmetic. The blocking is the classic one (Goto and van de Geijn): a [`KC`]-deep
//! slice of a weight panel stays in L1 while [`MC`] rows of activations stream from L2.
//! The AVX2 kernel (6×16) keeps twelve 8-lane accumulators in registers and does two
//! fused multiply-adds per loaded weight vector; where the CPU has AVX-512 the kernel is
//! 12×32 (two panels side by side, twenty-four 16-lane accumulators), half the
//! instructions per multiply-add and twice the multiply-adds per broadcast.
//!
//! Weights packed with [`PackedWeights::new_bf16`] hold bfloat16 pairs (rows `2i` and
//! `2i + 1` of a column in one 32-bit lane), and the product runs on AVX-512 BF16's
//! `vdpbf16ps`: each activation is rounded to bfloat16 (to nearest, ties to even) and
//! the pair products are summed in f32 in the same accumulators, twice the multiply-adds
//! of `vfmadd` per instruction. Everything around the products stays f32.
//!
//! Architecture Invariant: an output row depends only on its own input row and the
//! weights: the blocking is fixed (never derived from the number of rows), every row
//! of a tile runs the same instruction sequence, and the `k` sum is one fused
//! multiply-add chain in ascending order. So a sentence's vector is bit-identical in
//! any batch, which the embedding cache shared between jobs relies on, and on either
//! kernel (a lane's chain is the same operations in the same order at 8 or 16 lanes).

use rayon::prelude::*;

/// Columns per packed weight panel (two 8-lane vectors, one 16-lane vector).
pub const NR: usize = 16;
/// Depth of one pass over the weights (a 16 KB slice of a weight panel).
pub const KC: usize = 256;
/// Activation rows packed per block (96 KB at `KC`, in L2).
pub const MC: usize = 96;

/// What happens to each output value after `A·W + bias`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epilogue {
    /// Nothing more.
    None,
    /// The exact (erf) GELU.
    Gelu,
    /// The tanh approximation of GELU.
    GeluTanh,
    /// max(0, x).
    Relu,
}

/// The packed values of a weight matrix.
enum Panels {
    /// Panels of `k × NR` floats.
    F32(Vec<f32>),
    /// Panels of `ceil(k / 2) × NR` bfloat16 pairs ([`PackedWeights::new_bf16`]).
    Bf16(Vec<u32>),
}

/// `x` rounded to bfloat16 (to nearest, ties to even; a NaN stays a quiet NaN).
fn bf16(x: f32) -> u32 {
    let bits = x.to_bits();
    if x.is_nan() {
        (bits >> 16) | 0x40
    } else {
        (bits + 0x7fff + ((bits >> 16) & 1)) >> 16
    }
}

/// One or two values as a bfloat16 pair: the first in the low half, the second (or
/// zero) in the high half.
fn bf16_pair(values: &[f32]) -> u32 {
    bf16(values[0]) | values.get(1).map_or(0, |&v| bf16(v) << 16)
}

/// A weight matrix `[k, n]` (input features × output features) with its bias, packed
/// for [`matmul`].
pub struct PackedWeights {
    k: usize,
    n: usize,
    /// `ceil(n / NR)` panels, zero-padded past column `n`.
    panels: Panels,
    bias: Vec<f32>,
}

impl PackedWeights {
    /// Packs `weights`, row-major `[k, n]`, with `bias` of length `n`.
    pub fn new(weights: &[f32], k: usize, n: usize, bias: Vec<f32>) -> Self {
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
        PackedWeights {
            k,
            n,
            panels: Panels::F32(panels),
            bias,
        }
    }

    /// Packs `weights` as [`Self::new`] does, as bfloat16 pairs for the AVX-512 BF16
    /// kernel ([`has_bf16`]): a panel holds `ceil(k / 2) × NR` lanes, lane `(i, j)` rows
    /// `2i` (low half) and `2i + 1` (high half; zero past `k`) of column `j`.
    pub fn new_bf16(weights: &[f32], k: usize, n: usize, bias: Vec<f32>) -> Self {
        assert_eq!(weights.len(), k * n, "weights are not {k}x{n}");
        assert_eq!(bias.len(), n, "bias is not of length {n}");
        let pairs = k.div_ceil(2);
        let mut panels = vec![0u32; n.div_ceil(NR) * pairs * NR];
        for (p, panel) in panels.chunks_exact_mut(pairs * NR).enumerate() {
            let c0 = p * NR;
            for (i, dst) in panel.chunks_exact_mut(NR).enumerate() {
                for (j, lane) in dst.iter_mut().enumerate().take(NR.min(n - c0)) {
                    let at = |row: usize| {
                        if row < k {
                            weights[row * n + c0 + j]
                        } else {
                            0.0
                        }
                    };
                    *lane = bf16_pair(&[at(2 * i), at(2 * i + 1)]);
                }
            }
        }
        PackedWeights {
            k,
            n,
            panels: Panels::Bf16(panels),
            bias,
        }
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }
}

/// `out = epilogue(a·W + bias [+ residual])` for row-major `a` of `m × W.k` and `out` of
/// `m × W.n`; `residual`, if given, is `m × W.n` and is added before the epilogue.
/// Blocks of [`MC`] rows run in parallel on the rayon pool.
///
/// Needs a CPU with AVX2 and FMA ([`supported`]); panics otherwise.
pub fn matmul(
    a: &[f32],
    m: usize,
    w: &PackedWeights,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    out: &mut [f32],
) {
    assert!(supported(), "the native matmul needs AVX2 and FMA");
    if let Panels::Bf16(_) = w.panels {
        assert!(has_bf16(), "bfloat16 weights need AVX-512 BF16");
    }
    assert_eq!(a.len(), m * w.k, "activations are not {m}x{}", w.k);
    assert_eq!(out.len(), m * w.n, "output is not {m}x{}", w.n);
    if let Some(r) = residual {
        assert_eq!(r.len(), m * w.n, "residual is not {m}x{}", w.n);
    }
    matmul_on(Kernel::best(), a, w, residual, epilogue, out);
}

/// [`matmul`] on a given kernel (the tests compare the two).
fn matmul_on(
    kernel: Kernel,
    a: &[f32],
    w: &PackedWeights,
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    out: &mut [f32],
) {
    let (k, n) = (w.k, w.n);
    out.par_chunks_mut(MC * n)
        .enumerate()
        .for_each(|(block, c)| {
            let r0 = block * MC;
            let rows = c.len() / n;
            let a_block = &a[r0 * k..(r0 + rows) * k];
            let res = residual.map(|r| &r[r0 * n..(r0 + rows) * n]);
            // SAFETY (each): the kernel's features were detected at run time (`best`,
            // or the tests' `kernels`); the slices have the sizes `block_product`
            // expects (asserted by `matmul` and derived from them here).
            #[cfg(target_arch = "x86_64")]
            match (&w.panels, kernel) {
                (Panels::F32(b), Kernel::Avx2) => unsafe {
                    avx2_block(a_block, rows, w, b, res, epilogue, c)
                },
                (Panels::F32(b), Kernel::Avx512) => unsafe {
                    avx512_block(a_block, rows, w, b, res, epilogue, c)
                },
                (Panels::Bf16(b), _) => unsafe {
                    bf16_block(a_block, rows, w, b, res, epilogue, c)
                },
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                let _ = (kernel, a_block, res, epilogue, c);
                unreachable!("matmul checks supported() first");
            }
        });
}

/// The inner kernel a product of f32 weights runs on (bfloat16 weights have one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// 6 rows × 16 columns in 8-lane registers.
    Avx2,
    /// 12 rows × 32 columns in 16-lane registers.
    Avx512,
}

impl Kernel {
    /// The widest kernel this CPU has, or the AVX2 one where `CREDENCE_CPU_ISA` asks for
    /// less than AVX-512 (`avx2`, `avxvnni` or `scalar`: the knob of the LLM's products,
    /// for comparing them in one run).
    fn best() -> Kernel {
        static CHOSEN: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let lesser = matches!(
                std::env::var("CREDENCE_CPU_ISA").as_deref(),
                Ok("avx2" | "avxvnni" | "scalar")
            );
            if has_avx512() && !lesser {
                Kernel::Avx512
            } else {
                Kernel::Avx2
            }
        })
    }
}

/// Whether this CPU can run products of bfloat16 weights ([`PackedWeights::new_bf16`]).
pub fn has_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        has_avx512() && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU has AVX-512 F (the 12×32 kernel's one need beyond AVX2).
fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        supported() && std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU can run [`matmul`].
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A kernel: `C[MR × 16·P] (+)= A_tile · B` over `kc` steps, for `P` adjacent weight
/// panels (1 or 2 here; [`Tile::PANELS`] at most).
trait Tile {
    /// A packed value: an f32, or a pair of bfloat16.
    type E: Copy + Default;
    /// Depth steps a value holds (1 or 2).
    const DEPTH: usize;
    /// Rows of a tile.
    const MR: usize;
    /// Panels a full tile spans.
    const PANELS: usize;
    /// One to [`Self::DEPTH`] activations as a packed value.
    fn pack(values: &[f32]) -> Self::E;

    /// `kc` steps of packed values: `a` is a packed tile (`a[k*MR + r]`), `b` the first
    /// panel's slice (`b[k*16 + j]`), the next panel `panel` values further; `c`
    /// row-major with row stride `ldc`. With `accumulate` the chain continues from `C`'s
    /// values, else it starts at zero.
    ///
    /// # Safety
    /// The kernel's CPU features; `a` holds `kc * MR` values, each of `panels` panels
    /// `kc * 16` from its start, `c` `MR` rows of `16 * panels` at stride `ldc`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run(
        panels: usize,
        kc: usize,
        a: *const Self::E,
        b: *const Self::E,
        panel: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    );
}

/// `unsafe fn $name(...)`: [`block_product`] on the kernel `$tile` (packed values
/// `$elem`), compiled with the kernel's features.
macro_rules! block_on {
    ($name:ident, $features:literal, $tile:ty, $elem:ty, $doc:literal) => {
        #[doc = $doc]
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(
            a: &[f32],
            rows: usize,
            w: &PackedWeights,
            panels: &[$elem],
            residual: Option<&[f32]>,
            epilogue: Epilogue,
            c: &mut [f32],
        ) {
            block_product::<$tile>(a, rows, w, panels, residual, epilogue, c)
        }
    };
}

block_on!(
    avx2_block,
    "avx2,fma",
    Avx2,
    f32,
    "One block of at most [`MC`] rows on the AVX2 kernel."
);
block_on!(
    avx512_block,
    "avx2,fma,avx512f",
    Avx512,
    f32,
    "One block of at most [`MC`] rows on the AVX-512 kernel."
);
block_on!(
    bf16_block,
    "avx2,fma,avx512f,avx512bf16",
    Bf16,
    u32,
    "One block of at most [`MC`] rows on the AVX-512 BF16 kernel."
);

/// Every depth slice, every group of `K::PANELS` weight panels, every `K::MR`-row tile of
/// one block of at most [`MC`] rows. Inlined into the callers above, which enable the
/// kernel's features.
#[inline(always)]
fn block_product<K: Tile>(
    a: &[f32],
    rows: usize,
    w: &PackedWeights,
    weights: &[K::E],
    residual: Option<&[f32]>,
    epilogue: Epilogue,
    c: &mut [f32],
) {
    let (k, n) = (w.k, w.n);
    let mr = K::MR;
    let tiles = rows.div_ceil(mr);
    let mut packed_a = vec![K::E::default(); tiles * mr * KC];
    // Packed values a panel holds per column.
    let depth = k.div_ceil(K::DEPTH);
    let mut edge = [0.0f32; EDGE];
    let mut k0 = 0;
    while k0 < k {
        let kc = KC.min(k - k0);
        let first = k0 == 0;
        let last = k0 + kc == k;
        pack_activations::<K>(a, rows, k, k0, kc, &mut packed_a);
        // `k0` is a multiple of KC, so of DEPTH.
        let (q0, steps) = (k0 / K::DEPTH, kc.div_ceil(K::DEPTH));
        let n_panels = n.div_ceil(NR);
        let mut p = 0;
        while p < n_panels {
            let panels = K::PANELS.min(n_panels - p);
            let c0 = p * NR;
            let width = (panels * NR).min(n - c0);
            let b = weights[p * depth * NR + q0 * NR..].as_ptr();
            for t in 0..tiles {
                let r0 = t * mr;
                let height = mr.min(rows - r0);
                let a_tile = packed_a[t * mr * steps..].as_ptr();
                let ldc = panels * NR;
                if height == mr && width == ldc {
                    let dst = c[r0 * n + c0..].as_mut_ptr();
                    // SAFETY: the tile and the panels' slices hold what `run` reads;
                    // `c` holds `mr` rows of `width` from `dst` at stride `n`; the
                    // caller enabled the kernel's features.
                    unsafe { K::run(panels, steps, a_tile, b, depth * NR, dst, n, !first) };
                } else {
                    // A partial tile runs the same kernel on a copy, so its values are
                    // bit-identical to those of a full tile.
                    for r in 0..height {
                        let src = &c[(r0 + r) * n + c0..(r0 + r) * n + c0 + width];
                        edge[r * ldc..r * ldc + width].copy_from_slice(src);
                    }
                    // SAFETY: as above, with `edge` holding `mr` rows of `ldc`.
                    unsafe {
                        let edge = edge.as_mut_ptr();
                        K::run(panels, steps, a_tile, b, depth * NR, edge, ldc, !first)
                    };
                    for r in 0..height {
                        let dst = &mut c[(r0 + r) * n + c0..(r0 + r) * n + c0 + width];
                        dst.copy_from_slice(&edge[r * ldc..r * ldc + width]);
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
            p += panels;
        }
        k0 += kc;
    }
}

/// The largest tile of any kernel (12 rows × 32 columns).
const EDGE: usize = 12 * 32;

/// Copies columns `k0..k0+kc` of `rows` activation rows into `K::MR`-row tiles of packed
/// values ([`Tile::pack`]), each stored by depth (`tile[step][r]`), zero rows past the
/// end.
#[inline(always)]
fn pack_activations<K: Tile>(
    a: &[f32],
    rows: usize,
    k: usize,
    k0: usize,
    kc: usize,
    packed: &mut [K::E],
) {
    let (mr, steps) = (K::MR, kc.div_ceil(K::DEPTH));
    for t in 0..rows.div_ceil(mr) {
        let tile = &mut packed[t * mr * steps..(t + 1) * mr * steps];
        for r in 0..mr {
            let row = t * mr + r;
            if row < rows {
                let src = &a[row * k + k0..row * k + k0 + kc];
                for (step, values) in src.chunks(K::DEPTH).enumerate() {
                    tile[step * mr + r] = K::pack(values);
                }
            } else {
                for step in 0..steps {
                    tile[step * mr + r] = K::E::default();
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
        Epilogue::Gelu => crate::math::gelu_erf(row),
        Epilogue::GeluTanh => crate::math::gelu_tanh(row),
        Epilogue::Relu => {
            for v in row {
                *v = v.max(0.0);
            }
        }
    }
}

/// The AVX2 kernel: 6 rows, one panel (two 8-lane vectors a row).
struct Avx2;

impl Tile for Avx2 {
    type E = f32;
    const DEPTH: usize = 1;
    const MR: usize = 6;
    const PANELS: usize = 1;

    fn pack(values: &[f32]) -> f32 {
        values[0]
    }

    #[inline(always)]
    unsafe fn run(
        _panels: usize,
        kc: usize,
        a: *const f32,
        b: *const f32,
        _panel: usize,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        // SAFETY: as the trait's contract (AVX2 and FMA enabled by the caller).
        #[cfg(target_arch = "x86_64")]
        unsafe {
            kernel_6x16(kc, a, b, c, ldc, accumulate)
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("{kc} {a:?} {b:?} {c:?} {ldc} {accumulate}")
    }
}

/// `C[6×16] (+)= A_tile · B_slice` over `kc` steps, as [`Tile::run`] for one panel.
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
        let mut acc = [[_mm256_setzero_ps(); 2]; 6];
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
            ap = ap.add(6);
            bp = bp.add(NR);
        }
        for (r, row) in acc.iter().enumerate() {
            _mm256_storeu_ps(c.add(r * ldc), row[0]);
            _mm256_storeu_ps(c.add(r * ldc + 8), row[1]);
        }
    }
}

/// The accumulators of a 12-row AVX-512 tile: zero, or with `accumulate` `C`'s values.
///
/// # Safety
/// `c` holds 12 rows of `16 * P` floats at stride `ldc`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
unsafe fn tile_start<const P: usize>(
    c: *const f32,
    ldc: usize,
    accumulate: bool,
) -> [[std::arch::x86_64::__m512; P]; 12] {
    use std::arch::x86_64::*;
    let mut acc = [[_mm512_setzero_ps(); P]; 12];
    if accumulate {
        for (r, row) in acc.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                // SAFETY: within the tile, as the caller promises.
                *v = unsafe { _mm512_loadu_ps(c.add(r * ldc + j * NR)) };
            }
        }
    }
    acc
}

/// Stores a 12-row AVX-512 tile's accumulators into `C`.
///
/// # Safety
/// As [`tile_start`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
unsafe fn tile_store<const P: usize>(
    acc: &[[std::arch::x86_64::__m512; P]; 12],
    c: *mut f32,
    ldc: usize,
) {
    for (r, row) in acc.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            // SAFETY: within the tile, as the caller promises.
            unsafe { std::arch::x86_64::_mm512_storeu_ps(c.add(r * ldc + j * NR), *v) };
        }
    }
}

/// [`Tile::run`] of a 12-row AVX-512 kernel generic over its panel count: `$kernel`
/// for two panels or one.
macro_rules! run_12xp {
    ($kernel:ident, $e:ty) => {
        #[inline(always)]
        unsafe fn run(
            panels: usize,
            kc: usize,
            a: *const $e,
            b: *const $e,
            panel: usize,
            c: *mut f32,
            ldc: usize,
            accumulate: bool,
        ) {
            // SAFETY (each): as the trait's contract (the kernel's features enabled by
            // the caller).
            #[cfg(target_arch = "x86_64")]
            match panels {
                2 => unsafe { $kernel::<2>(kc, a, b, panel, c, ldc, accumulate) },
                _ => unsafe { $kernel::<1>(kc, a, b, panel, c, ldc, accumulate) },
            }
            #[cfg(not(target_arch = "x86_64"))]
            unreachable!("{panels} {kc} {a:?} {b:?} {panel} {c:?} {ldc} {accumulate}")
        }
    };
}

/// The AVX-512 kernel: 12 rows, two panels (one 16-lane vector a panel and row).
struct Avx512;

impl Tile for Avx512 {
    type E = f32;
    const DEPTH: usize = 1;
    const MR: usize = 12;
    const PANELS: usize = 2;

    fn pack(values: &[f32]) -> f32 {
        values[0]
    }

    run_12xp!(kernel_12xp, f32);
}

/// `C[12 × 16·P] (+)= A_tile · B` over `kc` steps, as [`Tile::run`]: `P` panels of
/// 16 columns, `panel` values apart.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
#[inline]
unsafe fn kernel_12xp<const P: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    panel: usize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the caller passes `a` with kc*12 values, `P` panels of kc*16
    // from `b` at stride `panel`, and `c` with 12 rows of 16*P at stride `ldc`.
    unsafe {
        // Up to twenty-four accumulators of the thirty-two registers.
        let mut acc = tile_start::<P>(c, ldc, accumulate);
        let mut ap = a;
        for kk in 0..kc {
            let mut bv = [_mm512_setzero_ps(); P];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(b.add(j * panel + kk * NR));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let ar = _mm512_set1_ps(*ap.add(r));
                for (v, bj) in row.iter_mut().zip(&bv) {
                    *v = _mm512_fmadd_ps(ar, *bj, *v);
                }
            }
            ap = ap.add(12);
        }
        tile_store(&acc, c, ldc);
    }
}

/// The AVX-512 BF16 kernel: 12 rows, two panels, a pair of depth steps a lane.
struct Bf16;

impl Tile for Bf16 {
    type E = u32;
    const DEPTH: usize = 2;
    const MR: usize = 12;
    const PANELS: usize = 2;

    fn pack(values: &[f32]) -> u32 {
        bf16_pair(values)
    }

    run_12xp!(kernel_bf16_12xp, u32);
}

/// `C[12 × 16·P] (+)= A_tile · B` over `steps` pairs of depth steps, as [`Tile::run`]:
/// per pair, one `vdpbf16ps` a row and panel.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f,avx512bf16")]
#[inline]
unsafe fn kernel_bf16_12xp<const P: usize>(
    steps: usize,
    a: *const u32,
    b: *const u32,
    panel: usize,
    c: *mut f32,
    ldc: usize,
    accumulate: bool,
) {
    use std::arch::x86_64::*;
    // SAFETY (whole body): the caller passes `a` with steps*12 pairs, `P` panels of
    // steps*16 pairs from `b` at stride `panel`, and `c` with 12 rows of 16*P at stride
    // `ldc`. A register of 16 pairs is a register of 32 bfloat16 (the transmutes).
    unsafe {
        let mut acc = tile_start::<P>(c, ldc, accumulate);
        let mut ap = a;
        for step in 0..steps {
            let mut bv = [std::mem::transmute::<__m512i, __m512bh>(_mm512_setzero_si512()); P];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                    b.add(j * panel + step * NR).cast(),
                ));
            }
            for (r, row) in acc.iter_mut().enumerate() {
                let pair = _mm512_set1_epi32(*ap.add(r) as i32);
                let ar = std::mem::transmute::<__m512i, __m512bh>(pair);
                for (v, bj) in row.iter_mut().zip(&bv) {
                    *v = _mm512_dpbf16_ps(*v, ar, *bj);
                }
            }
            ap = ap.add(12);
        }
        tile_store(&acc, c, ldc);
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
            let want = reference(&a, m, &w, k, n, &bias);
            for kernel in kernels() {
                let mut out = vec![f32::NAN; m * n];
                matmul_on(kernel, &a, &packed, None, Epilogue::None, &mut out);
                for (i, (&got, &want)) in out.iter().zip(&want).enumerate() {
                    let tol = 1e-5 * (k as f64).sqrt().max(1.0);
                    assert!(
                        (got as f64 - want).abs() <= tol,
                        "{kernel:?} {m}x{k}x{n} [{i}]: {got} vs {want}"
                    );
                }
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

    /// The kernels this CPU can run.
    fn kernels() -> Vec<Kernel> {
        let mut all = vec![Kernel::Avx2];
        if has_avx512() {
            all.push(Kernel::Avx512);
        } else {
            println!("no AVX-512 here: only the AVX2 kernel is tested");
        }
        all
    }

    #[test]
    fn every_kernel_gives_the_same_bits() {
        if !supported() {
            return;
        }
        // Rows past a tile of 6 and of 12, past a block of 96; an odd number of panels
        // (a 12×16 tile), a partial panel; depths past one and two slices of 256.
        for &(m, k, n) in &[
            (1, 1, 1),
            (13, 300, 17),
            (97, 513, 40),
            (200, 384, 1152),
            (25, 600, 48),
        ] {
            let a = matrix(m * k, 11);
            let residual = matrix(m * n, 12);
            let w = PackedWeights::new(&matrix(k * n, 13), k, n, matrix(n, 14));
            for epilogue in [Epilogue::None, Epilogue::Gelu, Epilogue::Relu] {
                let run = |kernel| {
                    let mut out = vec![f32::NAN; m * n];
                    matmul_on(kernel, &a, &w, Some(&residual), epilogue, &mut out);
                    out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                let want = run(Kernel::Avx2);
                for kernel in kernels() {
                    assert_eq!(run(kernel), want, "{kernel:?} {m}x{k}x{n} {epilogue:?}");
                }
            }
        }
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        let f = |bits: u32| f32::from_bits(bits);
        assert_eq!(bf16(1.0), 0x3f80);
        // Halfway between 0x3f80 and 0x3f81: to the even one; just above: up.
        assert_eq!(bf16(f(0x3f80_8000)), 0x3f80);
        assert_eq!(bf16(f(0x3f81_8000)), 0x3f82);
        assert_eq!(bf16(f(0x3f80_8001)), 0x3f81);
        assert_eq!(bf16(-2.0), 0xc000);
        assert_eq!(bf16(f32::INFINITY), 0x7f80);
        assert_eq!(bf16(f32::MAX), 0x7f80, "rounds up to infinity");
        assert_eq!(bf16(f32::NAN) & 0x7fc0, 0x7fc0, "a quiet NaN");
        assert_eq!(bf16_pair(&[1.0, -2.0]), 0xc000_3f80);
        assert_eq!(bf16_pair(&[1.0]), 0x3f80);
    }

    #[test]
    fn bf16_products_sum_the_rounded_inputs_in_f32() {
        if !has_bf16() {
            println!("no AVX-512 BF16 here: bfloat16 weights cannot run");
            return;
        }
        let round =
            |v: &[f32]| -> Vec<f32> { v.iter().map(|&x| f32::from_bits(bf16(x) << 16)).collect() };
        // Odd depth (a half pair), past two slices; rows past tiles; a partial panel.
        for &(m, k, n) in &[(1, 1, 1), (13, 301, 17), (97, 600, 40), (30, 384, 64)] {
            let (a, w, bias) = (matrix(m * k, 21), matrix(k * n, 22), matrix(n, 23));
            let packed = PackedWeights::new_bf16(&w, k, n, bias.clone());
            let mut out = vec![f32::NAN; m * n];
            matmul(&a, m, &packed, None, Epilogue::None, &mut out);
            let want = reference(&round(&a), m, &round(&w), k, n, &bias);
            for (i, (&got, &want)) in out.iter().zip(&want).enumerate() {
                let tol = 1e-5 * (k as f64).sqrt().max(1.0);
                assert!(
                    (got as f64 - want).abs() <= tol,
                    "{m}x{k}x{n} [{i}]: {got} vs {want}"
                );
            }
            // Each row alone has the bits it has in the batch.
            for i in [0, m / 2, m - 1] {
                let mut one = vec![0.0; n];
                matmul(
                    &a[i * k..(i + 1) * k],
                    1,
                    &packed,
                    None,
                    Epilogue::None,
                    &mut one,
                );
                assert_eq!(one, out[i * n..(i + 1) * n], "{m}x{k}x{n} row {i}");
            }
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
