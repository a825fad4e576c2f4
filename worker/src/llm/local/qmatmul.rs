//! CPU matrix products of 8-bit and 4-bit quantised weights with 8-bit quantised
//! activations, for any number of activation rows at once: each weight block is loaded
//! once and multiplied into every row of the batch, so a decode step of 8 sequences
//! reads the weights once, not 8 times. The instruction set ([`Isa`]: AVX2, or AVX2 with
//! AVX-VNNI or AVX-512 VNNI, scalar elsewhere) is chosen at run time; no build flag is
//! needed, and every x86 variant gives the same bits.
//!
//! Formats, as GGUF stores them (blocks of 32 along a row): Q8_0 (`d * q`, q in -128..127, -128 unused by llama.cpp)
//! and Q4_1 (`d * q + m`, q in 0..15, element j in the low nibble of byte j and element
//! j + 16 in its high nibble). Other GGUF types run through candle's own kernels.

/// Elements per block.
pub const BLOCK: usize = 32;

/// Activation rows multiplied per pass over a weight row: AVX-512's 32 registers hold
/// one accumulator for each of 8 rows beside a pair of weight blocks, four rows'
/// scales and the constants; AVX2's 16 hold one for each of 8 when the even and the odd
/// blocks are summed in two passes (`q41_panel`).
const ROWS_PER_PASS: usize = 8;

/// A pair of blocks (`2q` and `2q + 1`) of up to 8 activation rows as the 256-bit
/// kernels of 5 to 8 rows read it (fewer rows, and AVX-512, read [`PairQuad`]s): each
/// row's 64 quantised values (the even block's 32, then the odd one's), its scales each
/// in 8 lanes (so that `d * d_x` is one vector multiply from memory, not a scalar one
/// and a broadcast), and the rows' sums (for Q4_1's minimum) in one register a block; a
/// kernel reads either half of a row's pair. Rows past the pass's last, and the odd half
/// of a last unpaired block, are zero.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Panel {
    qs: [[i8; 2 * BLOCK]; ROWS_PER_PASS],
    d: [[f32; 16]; ROWS_PER_PASS],
    s: [[f32; ROWS_PER_PASS]; 2],
}

impl Panel {
    /// Row `i`'s 32 values of the block `half` (0: even, 1: odd), 32-byte aligned.
    #[inline(always)]
    fn qs(&self, i: usize, half: usize) -> *const i8 {
        self.qs[i][half * BLOCK..].as_ptr()
    }

    /// Row `i`'s scale of the block `half` in 8 lanes, 32-byte aligned.
    #[inline(always)]
    fn d(&self, i: usize, half: usize) -> *const f32 {
        self.d[i][half * 8..].as_ptr()
    }
}

/// A pair of blocks (`2q` and `2q + 1`) of four activation rows (4g to 4g + 3) as the
/// AVX-512 kernels and the 256-bit kernels of 1 to 4 rows read it (a 256-bit kernel
/// takes a row's 64 values in two halves and two rows' scales at a time), made once a
/// product instead of once for each weight row:
/// each row's 64 values in the order its weights' register holds them (Q8_0: the even
/// block's 32, then the odd one's; Q4_1: the even and the odd block's first 16, then
/// their last 16, which is how one shift and one mask lay out a pair of nibble blocks),
/// and the four rows' scales in one register, which meets the weights' f16 values in
/// one vector product for the four rows (Q8_0: `[d_even, d_odd, 0, 0]` a row against
/// `[d0, d1, 0, 0]`; Q4_1: `[d_even, s_even, d_odd, s_odd]` against `[d0, m0, d1, m1]`).
/// Rows past the batch's last are zero.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PairQuad {
    qs: [[i8; 2 * BLOCK]; 4],
    sc: [[f32; 4]; 4],
}

/// A Q8_0 block as GGUF stores it: an f16 scale and 32 signed bytes (34 bytes). The
/// products read every weight byte once per token, so the blocks keep GGUF's size: at
/// one thread a decode step is bound by memory bandwidth, not arithmetic.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct BlockQ8 {
    d: u16,
    qs: [i8; BLOCK],
}

/// A Q4_1 block as GGUF stores it: f16 scale and minimum, 16 bytes of nibbles (20 bytes).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct BlockQ41 {
    d: u16,
    m: u16,
    qs: [u8; BLOCK / 2],
}

fn f16_bits(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// One block of quantised activations; `s` is `d * sum(qs)` (for Q4_1's minimum).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct ActBlock {
    d: f32,
    s: f32,
    qs: [i8; BLOCK],
}

/// The blocks of a weight matrix, row by row.
#[derive(Debug)]
pub enum Blocks {
    /// Q8_0.
    Q8(Vec<BlockQ8>),
    /// Q4_1.
    Q41(Vec<BlockQ41>),
}

/// A quantised `[rows, cols]` weight matrix.
#[derive(Debug)]
pub struct QMatrix {
    rows: usize,
    cols: usize,
    blocks: Blocks,
}

impl QMatrix {
    /// A matrix from GGUF Q8_0 bytes (34 bytes a block: f16 scale, 32 i8).
    pub fn from_q8_0(rows: usize, cols: usize, raw: &[u8]) -> Result<Self, String> {
        let nb = Self::check(rows, cols, raw.len(), 34)?;
        let blocks = raw
            .chunks_exact(34)
            .take(nb)
            .map(|b| {
                let mut qs = [0i8; BLOCK];
                for (q, &x) in qs.iter_mut().zip(&b[2..]) {
                    *q = x as i8;
                }
                BlockQ8 {
                    d: u16::from_le_bytes([b[0], b[1]]),
                    qs,
                }
            })
            .collect();
        Ok(QMatrix {
            rows,
            cols,
            blocks: Blocks::Q8(blocks),
        })
    }

    /// A matrix from GGUF Q4_1 bytes (20 bytes a block: f16 scale, f16 minimum, 16 bytes).
    pub fn from_q4_1(rows: usize, cols: usize, raw: &[u8]) -> Result<Self, String> {
        let nb = Self::check(rows, cols, raw.len(), 20)?;
        let blocks = raw
            .chunks_exact(20)
            .take(nb)
            .map(|b| {
                let mut qs = [0u8; BLOCK / 2];
                qs.copy_from_slice(&b[4..20]);
                BlockQ41 {
                    d: u16::from_le_bytes([b[0], b[1]]),
                    m: u16::from_le_bytes([b[2], b[3]]),
                    qs,
                }
            })
            .collect();
        Ok(QMatrix {
            rows,
            cols,
            blocks: Blocks::Q41(blocks),
        })
    }

    /// The number of blocks of a `[rows, cols]` matrix, which `len` bytes must hold
    /// exactly; checked arithmetic, since `rows` and `cols` come from a file and the
    /// products index the blocks without bounds checks ([`QMatrix::matmul`]).
    fn check(rows: usize, cols: usize, len: usize, block_bytes: usize) -> Result<usize, String> {
        if !cols.is_multiple_of(BLOCK) {
            return Err(format!("{cols} columns are not a multiple of {BLOCK}"));
        }
        let nb = rows
            .checked_mul(cols / BLOCK)
            .filter(|nb| nb.checked_mul(block_bytes) == Some(len))
            .ok_or_else(|| {
                format!("{len} bytes are not {rows} x {cols} values in blocks of {block_bytes}")
            })?;
        Ok(nb)
    }

    /// Output width.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input width.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// `y = x W^T` for `x` of `m` rows of `cols` values; `y` has `m` rows of `rows`.
    pub fn matmul(&self, x: &[f32], m: usize) -> Vec<f32> {
        self.matmul_on(x, m, isa())
    }

    /// [`QMatrix::matmul`] on a given instruction set (which the CPU must have).
    fn matmul_on(&self, x: &[f32], m: usize, isa: Isa) -> Vec<f32> {
        let k = self.cols;
        assert_eq!(
            x.len(),
            m * k,
            "matmul: {} values for {m} rows of {k}",
            x.len()
        );
        let nb = k / BLOCK;
        let quantize = if isa == Isa::Scalar {
            quantize_block
        } else {
            quantize_block_avx2
        };
        let acts: Vec<ActBlock> = x.chunks_exact(BLOCK).map(quantize).collect();
        let n = self.rows;
        // The store below writes `y[(start + i) * n + row]` without bounds checks: it
        // relies on every weight row having `nb` blocks (from `check`) and on `m * n`
        // fitting usize (the products are checked here, where it is cheap).
        let len = m.checked_mul(n).expect("matmul: m x rows overflows usize");
        debug_assert_eq!(acts.len(), m * nb, "one activation row is nb blocks");
        debug_assert_eq!(
            match &self.blocks {
                Blocks::Q8(b) => b.len(),
                Blocks::Q41(b) => b.len(),
            },
            n * nb,
            "a weight row is nb blocks"
        );
        // Each range of weight rows is claimed by one thread, so output column `row` of
        // every activation row is written by one thread only. The decode pool
        // (`pool.rs`: spinning between products, so a step's 200 small ones pay no
        // wake-up, and claimed rather than assigned work, so a descheduled thread does
        // not hold the step).
        let mut y = vec![0f32; len];
        let out_ptr = y.as_mut_ptr() as usize;
        let panels = panels(&acts, m, nb, isa);
        let pairs = nb.div_ceil(2);
        // The kernels of AVX-512, and AVX2's of 1 to 4 rows, read the activations as
        // quads, laid out once here (`nb / 2` for each 4 rows): all rows' on AVX-512, on
        // AVX2 those of a last pass of 1 to 4 rows (from row `first`).
        let last_pass = m.saturating_sub(1) / ROWS_PER_PASS * ROWS_PER_PASS;
        let first = match isa {
            Isa::Avx512Vnni => Some(0),
            Isa::Avx2 | Isa::AvxVnni if m - last_pass <= 4 => Some(last_pass),
            _ => None,
        };
        let quads = match first {
            #[cfg(target_arch = "x86_64")]
            Some(first) => pair_quads(
                &acts[first * nb..],
                nb,
                matches!(self.blocks, Blocks::Q41(_)),
            ),
            _ => Vec::new(),
        };
        let np = nb / 2;
        super::pool::pool().run(n, |range| {
            let width = range.len();
            let mut out = vec![0f32; m.min(ROWS_PER_PASS) * width];
            for start in (0..m).step_by(ROWS_PER_PASS) {
                let rows_here = (m - start).min(ROWS_PER_PASS);
                let a = &acts[start * nb..(start + rows_here) * nb];
                let pass = start / ROWS_PER_PASS;
                let out = &mut out[..rows_here * width];
                let weights = range.start * nb..range.end * nb;
                let laid = match first {
                    Some(first) if start >= first => {
                        Laid::Quads(&quads[(start - first) / 4 * np..])
                    }
                    _ => Laid::Panels(panels.get(pass * pairs..(pass + 1) * pairs)),
                };
                match &self.blocks {
                    Blocks::Q8(b) => dot_q8(&b[weights], a, laid, nb, out, isa),
                    Blocks::Q41(b) => dot_q41(&b[weights], a, laid, nb, out, isa),
                }
                for (i, part) in out.chunks_exact(width).enumerate() {
                    debug_assert!((start + i) * n + range.end <= m * n, "store outside y");
                    // SAFETY: the pool hands out disjoint row ranges, so columns
                    // `range` of every row of y are written by this worker only, below
                    // m * n, and `y` outlives the call.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            part.as_ptr(),
                            (out_ptr as *mut f32).add((start + i) * n + range.start),
                            width,
                        )
                    };
                }
            }
        });
        y
    }
}

/// The [`Panel`]s of the activations, pass after pass (8 rows a pass), `ceil(nb / 2)` a
/// pass of 5 to 8 rows (a last pass of fewer runs on quads); empty on AVX-512 and for
/// the portable code.
fn panels(acts: &[ActBlock], m: usize, nb: usize, isa: Isa) -> Vec<Panel> {
    if matches!(isa, Isa::Scalar | Isa::Avx512Vnni) || m < 5 {
        return Vec::new();
    }
    let empty = Panel {
        qs: [[0; 2 * BLOCK]; ROWS_PER_PASS],
        d: [[0.0; 16]; ROWS_PER_PASS],
        s: [[0.0; ROWS_PER_PASS]; 2],
    };
    let pairs = nb.div_ceil(2);
    // A last pass of 1 to 4 rows runs on quads.
    let passes = m / ROWS_PER_PASS + usize::from(m % ROWS_PER_PASS >= 5);
    let mut panels = vec![empty; passes * pairs];
    for (r, row) in acts
        .chunks_exact(nb)
        .take(passes * ROWS_PER_PASS)
        .enumerate()
    {
        let (pass, i) = (r / ROWS_PER_PASS, r % ROWS_PER_PASS);
        for (b, x) in row.iter().enumerate() {
            let (panel, half) = (&mut panels[pass * pairs + b / 2], b % 2);
            panel.qs[i][half * BLOCK..(half + 1) * BLOCK].copy_from_slice(&x.qs);
            panel.d[i][half * 8..(half + 1) * 8].fill(x.d);
            panel.s[half][i] = x.s;
        }
    }
    panels
}

/// The [`PairQuad`]s of the activation rows (`nb` blocks each; an odd last block is left
/// to the kernels, which read it from the row): rows 4g to 4g + 3's `nb / 2` quads,
/// group after group, for Q4_1 weights (`q41`) or Q8_0.
#[cfg(target_arch = "x86_64")]
fn pair_quads(acts: &[ActBlock], nb: usize, q41: bool) -> Vec<PairQuad> {
    let np = nb / 2;
    let rows = acts.len() / nb;
    let empty = PairQuad {
        qs: [[0; 2 * BLOCK]; 4],
        sc: [[0.0; 4]; 4],
    };
    let mut quads = vec![empty; rows.div_ceil(4) * np];
    for (r, row) in acts.chunks_exact(nb).enumerate() {
        let (group, slot) = (r / 4, r % 4);
        for (q, pair) in row.chunks_exact(2).enumerate() {
            let quad = &mut quads[group * np + q];
            let (x0, x1, qs) = (&pair[0], &pair[1], &mut quad.qs[slot]);
            quad.sc[slot] = if q41 {
                let h = BLOCK / 2;
                qs[..h].copy_from_slice(&x0.qs[..h]);
                qs[h..2 * h].copy_from_slice(&x1.qs[..h]);
                qs[2 * h..3 * h].copy_from_slice(&x0.qs[h..]);
                qs[3 * h..].copy_from_slice(&x1.qs[h..]);
                [x0.d, x0.s, x1.d, x1.s]
            } else {
                qs[..BLOCK].copy_from_slice(&x0.qs);
                qs[BLOCK..].copy_from_slice(&x1.qs);
                [x0.d, x1.d, 0.0, 0.0]
            };
        }
    }
    quads
}

fn quantize_block(x: &[f32]) -> ActBlock {
    let amax = x.iter().fold(0f32, |a, &v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = if d > 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0i8; BLOCK];
    let mut sum = 0i32;
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round_ties_even() as i8;
        sum += i32::from(*q);
    }
    ActBlock {
        d,
        s: d * sum as f32,
        qs,
    }
}

/// [`quantize_block`] in AVX2 (which every [`Isa`] but `Scalar` has): the same
/// operations lane by lane (the maximum of the magnitudes, exact in any order; `v * id`
/// rounded half to even, the conversion's default; an integer sum), so the same block. A
/// block holding a NaN or an infinity goes to the scalar code, whose casts of those
/// differ from the vector conversion's.
fn quantize_block_avx2(x: &[f32]) -> ActBlock {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: only called when `isa()` found AVX2.
    return unsafe { avx2_quantize::block(x) }.unwrap_or_else(|| quantize_block(x));
    #[cfg(not(target_arch = "x86_64"))]
    quantize_block(x)
}

#[cfg(target_arch = "x86_64")]
mod avx2_quantize {
    use super::{ActBlock, BLOCK};
    use std::arch::x86_64::*;

    /// One block, or `None` where a value is not finite.
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn block(x: &[f32]) -> Option<ActBlock> {
        assert_eq!(x.len(), BLOCK);
        // SAFETY: 4 x 8 floats.
        let v: [__m256; 4] =
            std::array::from_fn(|i| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * i)) });
        let sign = _mm256_set1_ps(-0.0);
        let [a, b, c, d] = v.map(|v| _mm256_andnot_ps(sign, v));
        let m = _mm256_max_ps(_mm256_max_ps(a, b), _mm256_max_ps(c, d));
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
        // A NaN anywhere, or an infinity (then amax is one).
        let nan = v.iter().fold(0, |acc, &v| {
            acc | _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))
        });
        let d = amax / 127.0;
        let id = if d > 0.0 { 1.0 / d } else { 0.0 };
        // An infinite `id` (a block of values below ~1e-36) makes infinite products,
        // which the scalar cast saturates and the conversion does not.
        if nan != 0 || !amax.is_finite() || !id.is_finite() {
            return None;
        }
        let id = _mm256_set1_ps(id);
        let q = v.map(|v| _mm256_cvtps_epi32(_mm256_mul_ps(v, id)));
        // |v * id| <= 127 (rounded): the packs never saturate, so the sum of the i32s is
        // the sum of the bytes.
        let sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        let sum = _mm_add_epi32(
            _mm256_castsi256_si128(sum),
            _mm256_extracti128_si256(sum, 1),
        );
        let sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0b01_00_11_10));
        let sum = _mm_cvtsi128_si32(_mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0b10_11_00_01)));
        // The packs interleave 128-bit lanes; the permutation puts the bytes back in order.
        let bytes = _mm256_packs_epi16(
            _mm256_packs_epi32(q[0], q[1]),
            _mm256_packs_epi32(q[2], q[3]),
        );
        let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        let mut qs = [0i8; BLOCK];
        // SAFETY: 32 bytes.
        unsafe { _mm256_storeu_si256(qs.as_mut_ptr().cast(), bytes) };
        Some(ActBlock {
            d,
            s: d * sum as f32,
            qs,
        })
    }
}

/// The instruction set the products run on, chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// No AVX2: portable Rust.
    Scalar,
    /// AVX2, FMA and F16C: 8-bit dot products as `maddubs` + `madd`.
    Avx2,
    /// AVX2 plus AVX-VNNI (Alder Lake, Zen 5): one `vpdpbusd` instead of the two.
    AvxVnni,
    /// AVX2 plus AVX-512 (F, BW, DQ, VL, VNNI: Ice Lake, Sapphire Rapids, Zen 4): two
    /// blocks per 512-bit `vpdpbusd`, up to 8 activation rows per pass.
    Avx512Vnni,
}

/// The [`Isa`] the products run on: the best this CPU has, or a lesser one named by
/// `CREDENCE_CPU_ISA` (`scalar`, `avx2`, `avxvnni`, `avx512vnni`; for comparing them in
/// one benchmark run). Every x86 variant computes the same integers (the 8-bit products
/// of a block never saturate `maddubs`' 16-bit pairs: at most 2 x 128 x 127), so the
/// products are bit-identical on every machine.
pub fn isa() -> Isa {
    static CHOSEN: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let best = best_isa();
        let asked = match std::env::var("CREDENCE_CPU_ISA").as_deref() {
            Ok("scalar") => Isa::Scalar,
            Ok("avx2") => Isa::Avx2,
            Ok("avxvnni") => Isa::AvxVnni,
            Ok("avx512vnni") => Isa::Avx512Vnni,
            _ => return best,
        };
        let has = asked == best
            || match asked {
                Isa::Scalar => true,
                Isa::Avx2 => best != Isa::Scalar,
                #[cfg(target_arch = "x86_64")]
                Isa::AvxVnni => has_avx2() && std::arch::is_x86_feature_detected!("avxvnni"),
                _ => false,
            };
        if has {
            asked
        } else {
            tracing::warn!(
                ?asked,
                ?best,
                "CREDENCE_CPU_ISA names an instruction set this CPU lacks; using the best it has"
            );
            best
        }
    })
}

/// The best [`Isa`] this CPU has.
fn best_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if !has_avx2() {
            Isa::Scalar
        } else if std::arch::is_x86_feature_detected!("avx512vnni")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
        {
            Isa::Avx512Vnni
        } else if std::arch::is_x86_feature_detected!("avxvnni") {
            Isa::AvxVnni
        } else {
            Isa::Avx2
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Isa::Scalar
    }
}

/// Whether the CPU has AVX2, FMA and F16C (checked once per process by std).
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Runs `kernel(row, dst)` (`dst[i]` = the weight row times activation row i) for each
/// weight row j of `w` (`nb` blocks a row) and stores `dst[i]` at `out[i * len + j]`,
/// `len` being the number of weight rows; `out.len() / len` activation rows (1 to 8).
#[inline(always)]
fn each_row<W>(w: &[W], nb: usize, out: &mut [f32], mut kernel: impl FnMut(&[W], &mut [f32])) {
    let len = w.len() / nb;
    if len == 0 {
        return;
    }
    let r = out.len() / len;
    let mut dst = [0f32; ROWS_PER_PASS];
    for (j, row) in w.chunks_exact(nb).enumerate() {
        kernel(row, &mut dst[..r]);
        for (i, &v) in dst[..r].iter().enumerate() {
            out[i * len + j] = v;
        }
    }
}

/// The portable products: `dst[i] = sum over blocks of block(w, x)` for activation row i.
fn scalar_rows<W>(
    row: &[W],
    acts: &[ActBlock],
    nb: usize,
    dst: &mut [f32],
    block: impl Fn(&W, &ActBlock) -> f32,
) {
    for (i, out) in dst.iter_mut().enumerate() {
        let a = &acts[i * nb..(i + 1) * nb];
        *out = row.iter().zip(a).map(|(w, x)| block(w, x)).sum();
    }
}

/// The activations of a pass as the kernels of its [`Isa`] read them.
#[derive(Clone, Copy)]
enum Laid<'a> {
    /// A pass of 5 to 8 rows on AVX2: its part of [`panels`].
    Panels(Option<&'a [Panel]>),
    /// AVX-512, and a pass of 1 to 4 rows on AVX2: the [`PairQuad`]s from the pass's
    /// first row on.
    Quads(&'a [PairQuad]),
}

impl<'a> Laid<'a> {
    /// The quads; none for panels (a kernel of quads then fails its length check).
    fn quads(self) -> &'a [PairQuad] {
        match self {
            Laid::Quads(q) => q,
            Laid::Panels(_) => &[],
        }
    }

    /// The panels; none for quads, or where there are none.
    fn panels(self) -> &'a [Panel] {
        match self {
            Laid::Panels(p) => p.unwrap_or(&[]),
            Laid::Quads(_) => &[],
        }
    }
}

/// `out[i * len + j] = (row j of w) . acts[i]` for the `len` weight rows of `w` and the
/// activation rows `acts` (`nb` blocks each, at most 8; `out` holds len values for each),
/// also given as `laid` for the kernels of `isa`.
fn dot_q8(w: &[BlockQ8], acts: &[ActBlock], laid: Laid, nb: usize, out: &mut [f32], isa: Isa) {
    // SAFETY (each): the ISA's features were detected at run time.
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx2 => return unsafe { avx2::dot_q8(w, acts, laid, nb, out) },
        Isa::AvxVnni => return unsafe { avxvnni::dot_q8(w, acts, laid, nb, out) },
        Isa::Avx512Vnni => return unsafe { avx512::dot_q8(w, laid.quads(), acts, nb, out) },
        Isa::Scalar => {}
    }
    let _ = (isa, laid);
    each_row(w, nb, out, |row, dst| {
        scalar_rows(row, acts, nb, dst, |w, x| {
            let s: i32 =
                w.qs.iter()
                    .zip(&x.qs)
                    .map(|(&p, &q)| i32::from(p) * i32::from(q))
                    .sum();
            f16_bits(w.d) * x.d * s as f32
        })
    });
}

/// The same for Q4_1 weights: `d * q . x + m * sum(x)`.
fn dot_q41(w: &[BlockQ41], acts: &[ActBlock], laid: Laid, nb: usize, out: &mut [f32], isa: Isa) {
    // SAFETY (each): the ISA's features were detected at run time.
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx2 => return unsafe { avx2::dot_q41(w, acts, laid, nb, out) },
        Isa::AvxVnni => return unsafe { avxvnni::dot_q41(w, acts, laid, nb, out) },
        Isa::Avx512Vnni => return unsafe { avx512::dot_q41(w, laid.quads(), acts, nb, out) },
        Isa::Scalar => {}
    }
    let _ = (isa, laid);
    each_row(w, nb, out, |row, dst| {
        scalar_rows(row, acts, nb, dst, |w, x| {
            let mut s = 0i32;
            for j in 0..BLOCK / 2 {
                s += i32::from(w.qs[j] & 0x0f) * i32::from(x.qs[j]);
                s += i32::from(w.qs[j] >> 4) * i32::from(x.qs[j + BLOCK / 2]);
            }
            f16_bits(w.d) * x.d * s as f32 + f16_bits(w.m) * x.s
        })
    });
}

/// One Q8_0 block `w` (index `b`) into the accumulators of R rows.
#[cfg(target_arch = "x86_64")]
macro_rules! q8_block {
    ($w:expr, $b:expr, $acts:expr, $nb:expr, $acc:expr) => {{
        let w: &BlockQ8 = $w;
        // SAFETY: a block holds 32 bytes.
        let wv = unsafe { _mm256_loadu_si256(w.qs.as_ptr().cast()) };
        let aw = _mm256_sign_epi8(wv, wv);
        let (d, _) = f16x2(w.d, 0);
        for i in 0..R {
            let x = &$acts[i * $nb + $b];
            // SAFETY: as above.
            let xv = unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) };
            let sx = _mm256_sign_epi8(xv, wv);
            let p = udot(aw, sx);
            $acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * x.d), $acc[i]);
        }
    }};
}

/// One Q4_1 block `w` (index `b`) into the accumulators and minimum sums of R rows:
/// `d * d_x * (q . q_x) + m * d_x * sum(q_x)`.
#[cfg(target_arch = "x86_64")]
macro_rules! q41_block {
    ($w:expr, $b:expr, $acts:expr, $nb:expr, $acc:expr, $mins:expr) => {{
        let w: &BlockQ41 = $w;
        // SAFETY: a block holds 16 bytes of nibbles.
        let packed = unsafe { _mm_loadu_si128(w.qs.as_ptr().cast()) };
        let low = _mm_set1_epi8(0x0f);
        let lo = _mm_and_si128(packed, low);
        let hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low);
        let wv = _mm256_set_m128i(hi, lo);
        let (d, mn) = f16x2(w.d, w.m);
        for i in 0..R {
            let x = &$acts[i * $nb + $b];
            // SAFETY: an activation block holds 32 bytes.
            let xv = unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) };
            let p = udot(wv, xv);
            $acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * x.d), $acc[i]);
            $mins[i] += mn * x.s;
        }
    }};
}

/// The x86 kernels, once per [`Isa`]: the same code compiled for each instruction set,
/// with its own `udot` (unsigned x signed 8-bit products of a 32-byte block, summed by
/// four into eight i32 lanes).
#[cfg(target_arch = "x86_64")]
macro_rules! x86_kernels {
    ($name:ident, $features:literal, $udot:item) => {
        mod $name {
            use super::{ActBlock, BlockQ41, BlockQ8, Laid, PairQuad, Panel};
            use std::arch::x86_64::*;

            $udot

            #[target_feature(enable = $features)]
            pub(super) fn hsum(v: __m256) -> f32 {
                let hi = _mm256_extractf128_ps(v, 1);
                let s = _mm_add_ps(_mm256_castps256_ps128(v), hi);
                let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                let s = _mm_add_ss(s, _mm_movehdup_ps(s));
                _mm_cvtss_f32(s)
            }

            /// Two f16 values to f32.
            #[target_feature(enable = $features)]
            pub(super) fn f16x2(a: u16, b: u16) -> (f32, f32) {
                let v = _mm_cvtph_ps(_mm_cvtsi32_si128(
                    (u32::from(a) | (u32::from(b) << 16)) as i32,
                ));
                (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
            }

            // The kernels are generic over the number of activation rows R (1 to 8) so that the
            // accumulators are registers: indexed at run time they were spilled to the stack,
            // and every block waited on a store and a load. Up to 4 rows keep two accumulators
            // a row (even and odd blocks, two independent chains of fused multiply-adds) and
            // read [`super::PairQuad`]s; 5 to 8 rows would need all 16 registers for that, so
            // they sum the even blocks in one pass and the odd ones in a second (the same
            // operations in the same order: the same bits), with one accumulator a row, each
            // weight block unpacked once for 8 rows instead of twice for 4, and the activations
            // read from [`super::Panel`]s.

            /// [`super::dot_q8`]: `out[i * len + j] = (row j of w) . acts[i]`, with the
            /// pass's activations `laid` as quads (1 to 4 rows) or panels (5 to 8).
            #[target_feature(enable = $features)]
            pub unsafe fn dot_q8(
                w: &[BlockQ8],
                acts: &[ActBlock],
                laid: Laid,
                nb: usize,
                out: &mut [f32],
            ) {
                let (q, p) = (laid.quads(), laid.panels());
                match out.len() / (w.len() / nb).max(1) {
                    1 => super::each_row(w, nb, out, |row, dst| q8_quads::<1>(row, q, acts, nb, dst)),
                    2 => super::each_row(w, nb, out, |row, dst| q8_quads::<2>(row, q, acts, nb, dst)),
                    3 => super::each_row(w, nb, out, |row, dst| q8_quads::<3>(row, q, acts, nb, dst)),
                    4 => super::each_row(w, nb, out, |row, dst| q8_quads::<4>(row, q, acts, nb, dst)),
                    5 => super::each_row(w, nb, out, |row, dst| q8_panel::<5>(row, p, nb, dst)),
                    6 => super::each_row(w, nb, out, |row, dst| q8_panel::<6>(row, p, nb, dst)),
                    7 => super::each_row(w, nb, out, |row, dst| q8_panel::<7>(row, p, nb, dst)),
                    _ => super::each_row(w, nb, out, |row, dst| q8_panel::<8>(row, p, nb, dst)),
                }
            }

            /// The same for Q4_1 weights.
            #[target_feature(enable = $features)]
            pub unsafe fn dot_q41(
                w: &[BlockQ41],
                acts: &[ActBlock],
                laid: Laid,
                nb: usize,
                out: &mut [f32],
            ) {
                let (q, p) = (laid.quads(), laid.panels());
                match out.len() / (w.len() / nb).max(1) {
                    1 => super::each_row(w, nb, out, |row, dst| q41_quads::<1>(row, q, acts, nb, dst)),
                    2 => super::each_row(w, nb, out, |row, dst| q41_quads::<2>(row, q, acts, nb, dst)),
                    3 => super::each_row(w, nb, out, |row, dst| q41_quads::<3>(row, q, acts, nb, dst)),
                    4 => super::each_row(w, nb, out, |row, dst| q41_quads::<4>(row, q, acts, nb, dst)),
                    5 => super::each_row(w, nb, out, |row, dst| q41_panel::<5>(row, p, nb, dst)),
                    6 => super::each_row(w, nb, out, |row, dst| q41_panel::<6>(row, p, nb, dst)),
                    7 => super::each_row(w, nb, out, |row, dst| q41_panel::<7>(row, p, nb, dst)),
                    _ => super::each_row(w, nb, out, |row, dst| q41_panel::<8>(row, p, nb, dst)),
                }
            }

            /// Q8_0 products of R (5 to 8) rows from their panels: the even blocks' pass,
            /// then the odd ones'.
            #[target_feature(enable = $features)]
            fn q8_panel<const R: usize>(row: &[BlockQ8], panels: &[Panel], nb: usize, dst: &mut [f32]) {
                assert!(row.len() >= nb && panels.len() >= nb.div_ceil(2) && dst.len() >= R);
                let mut halves = [[_mm256_setzero_ps(); R]; 2];
                for (parity, half) in halves.iter_mut().enumerate() {
                    let mut acc = [_mm256_setzero_ps(); R];
                    for b in (parity..nb).step_by(2) {
                        // SAFETY: b < nb and b / 2 < ceil(nb / 2), within both (asserted
                        // above).
                        let (w, p) = unsafe { (row.get_unchecked(b), panels.get_unchecked(b / 2)) };
                        // SAFETY: a block holds 32 bytes; a panel is 32-byte aligned, and
                        // so are its rows of 32 bytes and of 8 floats.
                        let wv = unsafe { _mm256_loadu_si256(w.qs.as_ptr().cast()) };
                        let aw = _mm256_sign_epi8(wv, wv);
                        let d = _mm256_set1_ps(f16x2(w.d, 0).0);
                        for (i, acc) in acc.iter_mut().enumerate() {
                            // SAFETY: as above.
                            let (xv, dx) = unsafe {
                                (
                                    _mm256_load_si256(p.qs(i, parity).cast()),
                                    _mm256_load_ps(p.d(i, parity)),
                                )
                            };
                            let prod = udot(aw, _mm256_sign_epi8(xv, wv));
                            // d * d_x in every lane: the bits of the scalar product.
                            let scale = _mm256_mul_ps(d, dx);
                            *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(prod), scale, *acc);
                        }
                    }
                    *half = acc;
                }
                for i in 0..R {
                    dst[i] = hsum(_mm256_add_ps(halves[0][i], halves[1][i]));
                }
            }

            /// Q4_1 products of R (5 to 8) rows from their panels: the even blocks' pass,
            /// then the odd ones', each with the minimum's sums of the 8 rows in one
            /// register.
            #[target_feature(enable = $features)]
            fn q41_panel<const R: usize>(
                row: &[BlockQ41],
                panels: &[Panel],
                nb: usize,
                dst: &mut [f32],
            ) {
                assert!(row.len() >= nb && panels.len() >= nb.div_ceil(2) && dst.len() >= R);
                let low = _mm_set1_epi8(0x0f);
                let mut halves = [[_mm256_setzero_ps(); R]; 2];
                let mut mins = [[0f32; 8]; 2];
                for (parity, (half, mins)) in halves.iter_mut().zip(&mut mins).enumerate() {
                    let mut acc = [_mm256_setzero_ps(); R];
                    for b in (parity..nb).step_by(2) {
                        // SAFETY: b < nb and b / 2 < ceil(nb / 2), within both (asserted
                        // above).
                        let (w, p) = unsafe { (row.get_unchecked(b), panels.get_unchecked(b / 2)) };
                        // SAFETY: a block holds 16 bytes of nibbles.
                        let packed = unsafe { _mm_loadu_si128(w.qs.as_ptr().cast()) };
                        let lo = _mm_and_si128(packed, low);
                        let hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low);
                        let wv = _mm256_set_m128i(hi, lo);
                        let d = _mm256_set1_ps(f16x2(w.d, 0).0);
                        for (i, acc) in acc.iter_mut().enumerate() {
                            // SAFETY: a panel and its rows are 32-byte aligned.
                            let (xv, dx) = unsafe {
                                (
                                    _mm256_load_si256(p.qs(i, parity).cast()),
                                    _mm256_load_ps(p.d(i, parity)),
                                )
                            };
                            let scale = _mm256_mul_ps(d, dx);
                            *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(wv, xv)), scale, *acc);
                        }
                    }
                    *half = acc;
                    *mins = q41_mins(row, panels, nb, parity);
                }
                for i in 0..R {
                    dst[i] = hsum(_mm256_add_ps(halves[0][i], halves[1][i])) + mins[0][i] + mins[1][i];
                }
            }

            /// The minimum's sums of the 8 rows of a pass over the blocks of one parity,
            /// in a loop of their own (in the products' loop, their register and the
            /// minimum's broadcast spilled two accumulators): m * s_x, then the add, the
            /// 1-4 row kernels' two roundings.
            #[target_feature(enable = $features)]
            fn q41_mins(
                row: &[BlockQ41],
                panels: &[Panel],
                nb: usize,
                parity: usize,
            ) -> [f32; 8] {
                assert!(row.len() >= nb && panels.len() >= nb.div_ceil(2));
                let mut m = _mm256_setzero_ps();
                for b in (parity..nb).step_by(2) {
                    // SAFETY: b < nb and b / 2 < ceil(nb / 2), within both (asserted above).
                    let (w, p) = unsafe { (row.get_unchecked(b), panels.get_unchecked(b / 2)) };
                    // SAFETY: a panel is 64-byte aligned, and so are its sums.
                    let s = unsafe { _mm256_load_ps(p.s[parity].as_ptr()) };
                    m = _mm256_add_ps(m, _mm256_mul_ps(_mm256_set1_ps(f16x2(w.m, 0).0), s));
                }
                let mut out = [0f32; 8];
                // SAFETY: 8 floats.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr(), m) };
                out
            }

            /// The permutation that puts lane `4 slot + first` of two rows' scale
            /// products (row `slot`'s four lanes: `[d_even, d_odd, 0, 0]` for Q8_0,
            /// `[d_even, s_even, d_odd, s_odd]` for Q4_1) in lanes 0-3, and lane
            /// `4 slot + second` in lanes 4-7.
            #[target_feature(enable = $features)]
            fn lanes(slot: i32, first: i32, second: i32) -> __m256i {
                let (a, b) = (4 * slot + first, 4 * slot + second);
                _mm256_setr_epi32(a, a, a, a, b, b, b, b)
            }

            /// A weight pair's four scales in both halves, to meet two rows' scales.
            #[target_feature(enable = $features)]
            fn both_halves(x: __m128) -> __m256 {
                _mm256_set_m128(x, x)
            }

            /// Rows 2h and 2h + 1's scales in a quad, times a weight pair's `dw`.
            ///
            /// # Safety
            /// The caller's features; a quad's scales are 32-byte aligned.
            #[inline(always)]
            unsafe fn scales(quad: &PairQuad, h: usize, dw: __m256) -> __m256 {
                // SAFETY: 8 floats from row 2h on (h < 2), 32-byte aligned.
                _mm256_mul_ps(dw, unsafe { _mm256_load_ps(quad.sc[2 * h].as_ptr()) })
            }

            /// Row `i`'s 32 values of a pair's half `half` in a quad.
            ///
            /// # Safety
            /// The caller's features; i < 4.
            #[inline(always)]
            unsafe fn values(quad: &PairQuad, i: usize, half: usize) -> __m256i {
                // SAFETY: a quad's rows are 64-byte aligned, each half 32 bytes.
                unsafe { _mm256_load_si256(quad.qs.get_unchecked(i)[32 * half..].as_ptr().cast()) }
            }

            // The kernels of 1 to 4 rows read the activations as [`PairQuad`]s (laid out
            // once a product): a pair of weight blocks' f16 scales (and Q4_1's minimums)
            // become f32 in one conversion and meet two rows' scales in one product, whose
            // lanes also sum Q4_1's minimums, and a permutation gives each row its scales,
            // in place of a scalar product and a broadcast a row and block. Each lane makes
            // the operations of the kernels they replaced in their order (the same bits).

            /// Q8_0 products of R (1 to 4) rows: the even blocks' accumulators and the
            /// odd ones'.
            #[target_feature(enable = $features)]
            fn q8_quads<const R: usize>(
                row: &[BlockQ8],
                quads: &[PairQuad],
                acts: &[ActBlock],
                nb: usize,
                dst: &mut [f32],
            ) {
                let np = nb / 2;
                assert!(R <= 4 && row.len() >= nb && quads.len() >= np && acts.len() >= R * nb && dst.len() >= R);
                let mut even = [_mm256_setzero_ps(); R];
                let mut odd = [_mm256_setzero_ps(); R];
                for (q, pair) in row[..2 * np].chunks_exact(2).enumerate() {
                    // SAFETY: q < np (asserted above); a block holds 32 bytes.
                    let (quad, w0, w1) = unsafe {
                        (
                            quads.get_unchecked(q),
                            _mm256_loadu_si256(pair[0].qs.as_ptr().cast()),
                            _mm256_loadu_si256(pair[1].qs.as_ptr().cast()),
                        )
                    };
                    let (a0, a1) = (_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(w1, w1));
                    // [d0, d1, 0, 0] in each half.
                    let dw = both_halves(_mm_cvtph_ps(_mm_insert_epi16(
                        _mm_cvtsi32_si128(i32::from(pair[0].d)),
                        i32::from(pair[1].d),
                        1,
                    )));
                    let mut v = [_mm256_setzero_ps(); 2];
                    for (h, v) in v.iter_mut().enumerate().take(R.div_ceil(2)) {
                        // SAFETY: the caller's features.
                        *v = unsafe { scales(quad, h, dw) };
                    }
                    // Indexed, not zipped: the unrolled loop keeps the arrays in registers.
                    #[allow(clippy::needless_range_loop)]
                    for i in 0..R {
                        let slot = (i % 2) as i32;
                        // SAFETY: i < R <= 4.
                        let (xe, xo) = unsafe { (values(quad, i, 0), values(quad, i, 1)) };
                        let pe = udot(a0, _mm256_sign_epi8(xe, w0));
                        let po = udot(a1, _mm256_sign_epi8(xo, w1));
                        let se = _mm256_permutevar8x32_ps(v[i / 2], lanes(slot, 0, 0));
                        let so = _mm256_permutevar8x32_ps(v[i / 2], lanes(slot, 1, 1));
                        even[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pe), se, even[i]);
                        odd[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(po), so, odd[i]);
                    }
                }
                if nb % 2 == 1 {
                    q8_block!(&row[nb - 1], nb - 1, acts, nb, even);
                }
                for i in 0..R {
                    dst[i] = hsum(_mm256_add_ps(even[i], odd[i]));
                }
            }

            /// Q4_1 products of R (1 to 4) rows. A pair's nibbles are masked in the order
            /// [`PairQuad`] gives: `lo` holds the even and the odd block's first 16
            /// elements, `hi` their last 16, so the even accumulator of the kernels this
            /// replaced is `lo`'s low half and `hi`'s low half, the odd one their high
            /// halves, put back together once a row.
            #[target_feature(enable = $features)]
            fn q41_quads<const R: usize>(
                row: &[BlockQ41],
                quads: &[PairQuad],
                acts: &[ActBlock],
                nb: usize,
                dst: &mut [f32],
            ) {
                let np = nb / 2;
                assert!(R <= 4 && row.len() >= nb && quads.len() >= np && acts.len() >= R * nb && dst.len() >= R);
                let low = _mm256_set1_epi8(0x0f);
                let mut lo = [_mm256_setzero_ps(); R];
                let mut hi = [_mm256_setzero_ps(); R];
                // Row 2h + s's even blocks' minimum sum in lane 4s + 1 of `mins[h]`, its
                // odd ones' in lane 4s + 3.
                let mut mins = [_mm256_setzero_ps(); 2];
                for (q, pair) in row[..2 * np].chunks_exact(2).enumerate() {
                    // SAFETY: q < np (asserted above); a block holds 16 bytes of nibbles
                    // after its f16 scale and minimum (4 bytes, read unaligned).
                    let (quad, packed, dm0, dm1) = unsafe {
                        (
                            quads.get_unchecked(q),
                            _mm256_set_m128i(
                                _mm_loadu_si128(pair[1].qs.as_ptr().cast()),
                                _mm_loadu_si128(pair[0].qs.as_ptr().cast()),
                            ),
                            std::ptr::read_unaligned(std::ptr::from_ref(&pair[0]).cast::<i32>()),
                            std::ptr::read_unaligned(std::ptr::from_ref(&pair[1]).cast::<i32>()),
                        )
                    };
                    let (wl, wh) = (_mm256_and_si256(packed, low), _mm256_and_si256(_mm256_srli_epi16(packed, 4), low));
                    // [d0, m0, d1, m1] in each half, to meet each row's [d_x0, s_x0, d_x1, s_x1].
                    let dm = both_halves(_mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(dm0), dm1, 1)));
                    let mut v = [_mm256_setzero_ps(); 2];
                    for h in 0..R.div_ceil(2) {
                        // SAFETY: the caller's features.
                        v[h] = unsafe { scales(quad, h, dm) };
                        mins[h] = _mm256_add_ps(mins[h], v[h]);
                    }
                    // Indexed, not zipped: the unrolled loop keeps the arrays in registers.
                    #[allow(clippy::needless_range_loop)]
                    for i in 0..R {
                        // SAFETY: i < R <= 4.
                        let (xl, xh) = unsafe { (values(quad, i, 0), values(quad, i, 1)) };
                        let scale = _mm256_permutevar8x32_ps(v[i / 2], lanes((i % 2) as i32, 0, 2));
                        lo[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(wl, xl)), scale, lo[i]);
                        hi[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(udot(wh, xh)), scale, hi[i]);
                    }
                }
                let mut sums = [[0f32; 8]; 2];
                for (sums, mins) in sums.iter_mut().zip(&mins).take(R.div_ceil(2)) {
                    // SAFETY: 8 floats.
                    unsafe { _mm256_storeu_ps(sums.as_mut_ptr(), *mins) };
                }
                let mut even = [_mm256_setzero_ps(); R];
                let mut odd = [_mm256_setzero_ps(); R];
                let mut mins_even = [0f32; R];
                let mut mins_odd = [0f32; R];
                for i in 0..R {
                    even[i] = _mm256_permute2f128_ps(lo[i], hi[i], 0x20);
                    odd[i] = _mm256_permute2f128_ps(lo[i], hi[i], 0x31);
                    let slot = &sums[i / 2][4 * (i % 2)..4 * (i % 2) + 4];
                    (mins_even[i], mins_odd[i]) = (slot[1], slot[3]);
                }
                if nb % 2 == 1 {
                    q41_block!(&row[nb - 1], nb - 1, acts, nb, even, mins_even);
                }
                for i in 0..R {
                    dst[i] = hsum(_mm256_add_ps(even[i], odd[i])) + mins_even[i] + mins_odd[i];
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
x86_kernels!(
    avx2,
    "avx2,fma,f16c",
    #[target_feature(enable = "avx2,fma,f16c")]
    fn udot(u: __m256i, s: __m256i) -> __m256i {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    }
);

#[cfg(target_arch = "x86_64")]
x86_kernels!(
    avxvnni,
    "avx2,fma,f16c,avxvnni",
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    fn udot(u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s)
    }
);

/// The AVX-512 kernels: two blocks per 512-bit register, the even block in the low
/// half and the odd one in the high half, so that the low half of each accumulator is
/// the 256-bit kernels' even accumulator and the high half their odd one, lane for lane
/// the same fused multiply-adds in the same order: the same bits as AVX2, with half the
/// instructions and up to 8 activation rows per pass.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    // The AVX2 module's horizontal sum and f16 pair (its features are a subset of these).
    use super::avx2::{f16x2, hsum};
    use super::{ActBlock, BlockQ41, BlockQ8, PairQuad};
    use std::arch::x86_64::*;

    /// The kernels' loop over the weight rows of `$w` with `$kernel::<R>`, R the number
    /// of activation rows (1 to 8): the accumulators of a const number of rows stay in
    /// registers.
    macro_rules! by_rows {
        ($kernel:ident, $w:expr, $quads:expr, $acts:expr, $nb:expr, $out:expr) => {{
            let (w, quads, acts, nb, out) = ($w, $quads, $acts, $nb, $out);
            macro_rules! rows {
                ($r:literal) => {
                    super::each_row(w, nb, out, |row, dst| {
                        $kernel::<$r>(row, quads, acts, nb, dst)
                    })
                };
            }
            match out.len() / (w.len() / nb).max(1) {
                1 => rows!(1),
                2 => rows!(2),
                3 => rows!(3),
                4 => rows!(4),
                5 => rows!(5),
                6 => rows!(6),
                7 => rows!(7),
                _ => rows!(8),
            }
        }};
    }

    /// Two 32-byte halves as one register.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    fn join(lo: __m256i, hi: __m256i) -> __m512i {
        _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)
    }

    /// The permutation that gives a row of a quad (`slot`) its scales from the four rows'
    /// products (`[d_even, _, d_odd, _]` or `[d_even, d_odd, _, _]` a row, `odd` the
    /// lane of `d_odd`), in the lanes where its weights' register holds the even and the
    /// odd block: Q8_0 (`odd` 1) the even block in lanes 0-7, Q4_1 (`odd` 2) in 0-3 and
    /// 8-11.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    fn spread(slot: i32, odd: i32) -> __m512i {
        let (e, o) = (4 * slot, 4 * slot + odd);
        if odd == 1 {
            _mm512_setr_epi32(e, e, e, e, e, e, e, e, o, o, o, o, o, o, o, o)
        } else {
            _mm512_setr_epi32(e, e, e, e, o, o, o, o, e, e, e, e, o, o, o, o)
        }
    }

    /// A weight pair's four scales in the lanes of each row of a quad that R rows use:
    /// one row needs only the low four (a broadcast would cost the pass of one row an
    /// instruction a pair), the others are zero.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    fn quad_lanes<const R: usize>(x: __m128) -> __m512 {
        if R == 1 {
            _mm512_zextps128_ps512(x)
        } else {
            _mm512_broadcast_f32x4(x)
        }
    }

    /// The 32 quantised activations of a block.
    ///
    /// # Safety
    /// AVX2 (a block holds 32 bytes).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    unsafe fn act(x: &ActBlock) -> __m256i {
        // SAFETY: an activation block holds 32 bytes.
        unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) }
    }

    /// Row `i`'s 64 values of a pair of blocks in `quads` (rows 4g to 4g + 3, `np`
    /// quads a group, `q` the pair).
    ///
    /// # Safety
    /// `quads` holds `(i / 4 + 1) * np` quads and `q < np`.
    #[inline(always)]
    unsafe fn row_values(quads: &[PairQuad], np: usize, q: usize, i: usize) -> __m512i {
        // SAFETY: within `quads` (the caller); a quad is 64-byte aligned and so are
        // its rows of 64 bytes.
        unsafe {
            let quad = quads.get_unchecked(i / 4 * np + q);
            _mm512_load_si512(quad.qs[i % 4].as_ptr().cast())
        }
    }

    /// The four rows' scales of a quad times a weight pair's `dw` (in each 4 lanes).
    ///
    /// # Safety
    /// `quads` holds `(g + 1) * np` quads and `q < np`.
    #[inline(always)]
    unsafe fn scales(quads: &[PairQuad], np: usize, q: usize, g: usize, dw: __m512) -> __m512 {
        // SAFETY: within `quads` (the caller); a quad's scales are 64-byte aligned.
        let sc = unsafe { _mm512_load_ps(quads.get_unchecked(g * np + q).sc.as_ptr().cast()) };
        _mm512_mul_ps(dw, sc)
    }

    // The kernels of 1 to 8 activation rows: the activations come as [`PairQuad`]s,
    // laid out once a product; a pair of weight blocks' two f16 scales (and Q4_1's two
    // minimums) become f32 in one conversion and meet four rows' scales in one vector
    // product; Q4_1's minimum sums run in the lanes of that product. Each lane makes the
    // 256-bit kernels' operations in their order (`d * d_x` rounded, then the fused
    // multiply-add; `m * s` rounded, then added): the same bits on every instruction
    // set, and for a row in any batch.

    /// [`super::dot_q8`] for 1 to 8 activation rows given as their [`PairQuad`]s
    /// (`quads`, `nb / 2` for each 4 rows) and their blocks (`acts`, for an odd last
    /// block): `out[i * len + j] = (row j of w) . (row i)`, `len` the weight rows.
    ///
    /// # Safety
    /// The CPU has the features above; `w` holds rows of `nb` blocks, `acts`
    /// `out.len() / len` rows of `nb` blocks and `quads` their groups' quads.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    pub unsafe fn dot_q8(
        w: &[BlockQ8],
        quads: &[PairQuad],
        acts: &[ActBlock],
        nb: usize,
        out: &mut [f32],
    ) {
        by_rows!(q8_quads, w, quads, acts, nb, out)
    }

    /// The same for Q4_1 weights.
    ///
    /// # Safety
    /// As [`dot_q8`].
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    pub unsafe fn dot_q41(
        w: &[BlockQ41],
        quads: &[PairQuad],
        acts: &[ActBlock],
        nb: usize,
        out: &mut [f32],
    ) {
        by_rows!(q41_quads, w, quads, acts, nb, out)
    }

    /// One Q8_0 weight row against R activation rows.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    fn q8_quads<const R: usize>(
        row: &[BlockQ8],
        quads: &[PairQuad],
        acts: &[ActBlock],
        nb: usize,
        dst: &mut [f32],
    ) {
        let (np, groups) = (nb / 2, R.div_ceil(4));
        assert!(
            row.len() >= nb && quads.len() >= groups * np && acts.len() >= R * nb && dst.len() >= R
        );
        let spreads = [spread(0, 1), spread(1, 1), spread(2, 1), spread(3, 1)];
        let mut acc = [_mm512_setzero_ps(); R];
        for (q, pair) in row[..2 * np].chunks_exact(2).enumerate() {
            // SAFETY: a block holds 32 bytes.
            let wv = unsafe {
                join(
                    _mm256_loadu_si256(pair[0].qs.as_ptr().cast()),
                    _mm256_loadu_si256(pair[1].qs.as_ptr().cast()),
                )
            };
            let negative = _mm512_movepi8_mask(wv);
            let aw = _mm512_abs_epi8(wv);
            // [d0, d1, 0, 0] in each 4 lanes.
            let dw = quad_lanes::<R>(_mm_cvtph_ps(_mm_insert_epi16(
                _mm_cvtsi32_si128(i32::from(pair[0].d)),
                i32::from(pair[1].d),
                1,
            )));
            let mut v = [_mm512_setzero_ps(); 2];
            for (g, v) in v.iter_mut().enumerate().take(groups) {
                // SAFETY: g < groups and q < np (asserted above).
                *v = unsafe { scales(quads, np, q, g, dw) };
            }
            // Indexed, not zipped: the unrolled loop keeps the array in registers.
            #[allow(clippy::needless_range_loop)]
            for i in 0..R {
                // SAFETY: i / 4 < groups and q < np (asserted above).
                let xv = unsafe { row_values(quads, np, q, i) };
                let sx = _mm512_mask_sub_epi8(xv, negative, _mm512_setzero_si512(), xv);
                let p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, sx);
                let scale = _mm512_permutexvar_ps(spreads[i % 4], v[i / 4]);
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc[i]);
            }
        }
        if nb % 2 == 1 {
            let last = &row[nb - 1];
            // SAFETY: as above.
            let wv = unsafe { _mm256_loadu_si256(last.qs.as_ptr().cast()) };
            let aw = _mm256_sign_epi8(wv, wv);
            let (d, _) = f16x2(last.d, 0);
            for (i, acc) in acc.iter_mut().enumerate() {
                let x = &acts[i * nb + nb - 1];
                // SAFETY: as above.
                let sx = _mm256_sign_epi8(unsafe { act(x) }, wv);
                let p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx);
                let even = _mm512_castps512_ps256(*acc);
                let even = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * x.d), even);
                *acc = _mm512_insertf32x8(*acc, even, 0);
            }
        }
        for (acc, dst) in acc.iter().zip(dst) {
            let (even, odd) = (
                _mm512_castps512_ps256(*acc),
                _mm512_extractf32x8_ps(*acc, 1),
            );
            *dst = hsum(_mm256_add_ps(even, odd));
        }
    }

    /// One Q4_1 weight row against R activation rows. A pair's nibbles are masked in the
    /// order [`PairQuad`] gives (the even and the odd block's first 16 elements, then
    /// their last 16), so lanes 4-7 of an accumulator hold what the 256-bit kernels
    /// keep in lanes 8-11 and the reverse; one permutation puts them back before the
    /// sum.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    fn q41_quads<const R: usize>(
        row: &[BlockQ41],
        quads: &[PairQuad],
        acts: &[ActBlock],
        nb: usize,
        dst: &mut [f32],
    ) {
        let (np, groups) = (nb / 2, R.div_ceil(4));
        assert!(
            row.len() >= nb && quads.len() >= groups * np && acts.len() >= R * nb && dst.len() >= R
        );
        let spreads = [spread(0, 2), spread(1, 2), spread(2, 2), spread(3, 2)];
        let low = _mm512_set1_epi8(0x0f);
        let mut acc = [_mm512_setzero_ps(); R];
        // Row 4g + s's even blocks' minimum sum in lane 4s + 1 of `mins[g]`, its odd
        // ones' in lane 4s + 3.
        let mut mins = [_mm512_setzero_ps(); 2];
        for (q, pair) in row[..2 * np].chunks_exact(2).enumerate() {
            // SAFETY: a block holds 16 bytes of nibbles after its f16 scale and minimum
            // (4 bytes, read unaligned).
            let (packed, dm0, dm1) = unsafe {
                (
                    _mm256_set_m128i(
                        _mm_loadu_si128(pair[1].qs.as_ptr().cast()),
                        _mm_loadu_si128(pair[0].qs.as_ptr().cast()),
                    ),
                    std::ptr::read_unaligned(std::ptr::from_ref(&pair[0]).cast::<i32>()),
                    std::ptr::read_unaligned(std::ptr::from_ref(&pair[1]).cast::<i32>()),
                )
            };
            let wv = _mm512_and_si512(
                _mm512_inserti64x4(
                    _mm512_castsi256_si512(packed),
                    _mm256_srli_epi16(packed, 4),
                    1,
                ),
                low,
            );
            // [d0, m0, d1, m1] in each 4 lanes, to meet each row's [d_x0, s_x0, d_x1, s_x1].
            let dm = quad_lanes::<R>(_mm_cvtph_ps(_mm_insert_epi32(
                _mm_cvtsi32_si128(dm0),
                dm1,
                1,
            )));
            let mut v = [_mm512_setzero_ps(); 2];
            for g in 0..groups {
                // SAFETY: g < groups and q < np (asserted above).
                v[g] = unsafe { scales(quads, np, q, g, dm) };
                mins[g] = _mm512_add_ps(mins[g], v[g]);
            }
            // Indexed, not zipped: the unrolled loop keeps the arrays in registers.
            #[allow(clippy::needless_range_loop)]
            for i in 0..R {
                // SAFETY: i / 4 < groups and q < np (asserted above).
                let xv = unsafe { row_values(quads, np, q, i) };
                let p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv, xv);
                let scale = _mm512_permutexvar_ps(spreads[i % 4], v[i / 4]);
                acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), scale, acc[i]);
            }
        }
        let mut sums = [[0f32; 16]; 2];
        for (sums, mins) in sums.iter_mut().zip(&mins).take(groups) {
            // SAFETY: 16 floats.
            unsafe { _mm512_storeu_ps(sums.as_mut_ptr(), *mins) };
        }
        let back = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
        for i in 0..R {
            let mut acc = _mm512_permutexvar_ps(back, acc[i]);
            let slot = &sums[i / 4][4 * (i % 4)..4 * (i % 4) + 4];
            let (mut mins_even, mins_odd) = (slot[1], slot[3]);
            if nb % 2 == 1 {
                let (last, x) = (&row[nb - 1], &acts[i * nb + nb - 1]);
                let wv = unpack_q41(last);
                let (d, mn) = f16x2(last.d, last.m);
                // SAFETY: an activation block holds 32 bytes.
                let p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wv, unsafe { act(x) });
                let even = _mm512_castps512_ps256(acc);
                let even = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * x.d), even);
                acc = _mm512_insertf32x8(acc, even, 0);
                mins_even += mn * x.s;
            }
            let (even, odd) = (_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
            dst[i] = hsum(_mm256_add_ps(even, odd)) + mins_even + mins_odd;
        }
    }

    /// The 32 nibbles of a Q4_1 block in element order (low nibbles are elements 0-15).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")]
    fn unpack_q41(w: &BlockQ41) -> __m256i {
        let low = _mm_set1_epi8(0x0f);
        // SAFETY: a block holds 16 bytes of nibbles.
        let packed = unsafe { _mm_loadu_si128(w.qs.as_ptr().cast()) };
        let lo = _mm_and_si128(packed, low);
        let hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low);
        _mm256_set_m128i(hi, lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed pseudo-random sequence of non-negative integers.
    fn lcg(seed: u32) -> impl FnMut() -> i32 {
        let mut s = seed;
        move || {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (s >> 16) as i32
        }
    }

    fn raw_q8(rows: usize, cols: usize, seed: u32) -> (Vec<u8>, Vec<f32>) {
        let mut raw = Vec::new();
        let mut dense = Vec::new();
        let mut next = lcg(seed);
        for _ in 0..rows * cols / BLOCK {
            let d = half::f16::from_f32(0.01 + (next() % 100) as f32 / 5000.0);
            raw.extend_from_slice(&d.to_le_bytes());
            for _ in 0..BLOCK {
                let q = (next() % 255 - 127) as i8;
                raw.push(q as u8);
                dense.push(d.to_f32() * f32::from(q));
            }
        }
        (raw, dense)
    }

    fn raw_q41(rows: usize, cols: usize, seed: u32) -> (Vec<u8>, Vec<f32>) {
        let mut raw = Vec::new();
        let mut dense = Vec::new();
        let mut next = lcg(seed);
        for _ in 0..rows * cols / BLOCK {
            let d = half::f16::from_f32(0.01 + (next() % 100) as f32 / 5000.0);
            let m = half::f16::from_f32(-0.1 + (next() % 100) as f32 / 500.0);
            raw.extend_from_slice(&d.to_le_bytes());
            raw.extend_from_slice(&m.to_le_bytes());
            let q: Vec<u8> = (0..BLOCK).map(|_| (next() % 16) as u8).collect();
            for j in 0..BLOCK / 2 {
                raw.push(q[j] | (q[j + 16] << 4));
            }
            for &v in &q {
                dense.push(d.to_f32() * f32::from(v) + m.to_f32());
            }
        }
        (raw, dense)
    }

    fn reference(dense: &[f32], x: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
        let mut y = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                y[i * n + j] = (0..k).map(|t| x[i * k + t] * dense[j * k + t]).sum();
            }
        }
        y
    }

    fn check(q: &QMatrix, dense: &[f32]) {
        let (n, k) = (q.rows(), q.cols());
        for m in [1, 3, 8, 11] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let want = reference(dense, &x, m, n, k);
            let got = q.matmul(&x, m);
            let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
            for (a, b) in got.iter().zip(&want) {
                // 8-bit activations: within 1% of the largest output.
                assert!(
                    (a - b).abs() <= 0.01 * scale,
                    "m={m}: {a} vs {b} (scale {scale})"
                );
            }
            // Each row's result does not depend on the other rows of the batch.
            let alone = q.matmul(&x[..k], 1);
            assert_eq!(alone[..], got[..n], "m={m}: first row differs from alone");
        }
    }

    /// The instruction sets this CPU has.
    fn isas() -> Vec<Isa> {
        let best = best_isa();
        let mut all = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if has_avx2() {
                all.push(Isa::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avxvnni") && has_avx2() {
                all.push(Isa::AvxVnni);
            }
        }
        if best == Isa::Avx512Vnni {
            all.push(Isa::Avx512Vnni);
        }
        all
    }

    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        // Q8_0 weights at both ends of the byte range (-128 included) and Q4_1 nibbles.
        let (mut raw8, _) = raw_q8(24, 256, 3);
        for (i, b) in raw8.iter_mut().enumerate() {
            if i % 34 >= 2 && i % 7 == 0 {
                *b = if i % 2 == 0 { 0x80 } else { 0x7f };
            }
        }
        let (raw41, _) = raw_q41(24, 256, 4);
        // An odd number of blocks a row (9): the AVX-512 kernels' pairs end on a single.
        let (mut raw8_odd, _) = raw_q8(24, 288, 5);
        raw8_odd[2] = 0x80;
        let (raw41_odd, _) = raw_q41(24, 288, 6);
        // One block a row: no pair at all.
        let (raw8_one, _) = raw_q8(24, 32, 12);
        let (raw41_one, _) = raw_q41(24, 32, 13);
        let matrices = [
            QMatrix::from_q8_0(24, 256, &raw8).unwrap(),
            QMatrix::from_q4_1(24, 256, &raw41).unwrap(),
            QMatrix::from_q8_0(24, 288, &raw8_odd).unwrap(),
            QMatrix::from_q4_1(24, 288, &raw41_odd).unwrap(),
            QMatrix::from_q8_0(24, 32, &raw8_one).unwrap(),
            QMatrix::from_q4_1(24, 32, &raw41_one).unwrap(),
        ];
        let x: Vec<f32> = (0..11 * 288)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 7.0)
            .collect();
        let isas = isas();
        println!("instruction sets here: {isas:?}");
        for q in &matrices {
            let k = q.cols();
            // Up to 11 rows: one and a half passes of the 8-row kernels.
            for m in 1..=11 {
                let simd: Vec<Vec<f32>> = isas
                    .iter()
                    .filter(|&&i| i != Isa::Scalar)
                    .map(|&i| q.matmul_on(&x[..m * k], m, i))
                    .collect();
                for other in &simd[1.min(simd.len())..] {
                    assert_eq!(other, &simd[0], "m={m}");
                }
                // The portable code sums in another order: equal to rounding.
                let scalar = q.matmul_on(&x[..m * k], m, Isa::Scalar);
                if let Some(first) = simd.first() {
                    for (a, b) in scalar.iter().zip(first) {
                        assert!((a - b).abs() <= 1e-4 * a.abs().max(1.0), "{a} vs {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_vector_quantisation_gives_the_scalar_blocks() {
        let mut next = lcg(11);
        let mut blocks: Vec<Vec<f32>> = (0..200)
            .map(|b| {
                // Magnitudes from 1e-30 to 1e30, halves that round to even, zeros.
                let scale = 10f32.powi(b % 61 - 30);
                (0..BLOCK)
                    .map(|_| match next() % 9 {
                        0 => 0.0,
                        1 => (next() % 255 - 127) as f32 + 0.5,
                        _ => (next() % 20001 - 10000) as f32 / 10000.0 * scale,
                    })
                    .collect()
            })
            .collect();
        blocks.push(vec![0.0; BLOCK]);
        // Values so small that 127 / max overflows.
        blocks.push((0..BLOCK).map(|i| i as f32 * 1e-40).collect());
        let special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY];
        for (i, v) in special.into_iter().enumerate() {
            let mut b = vec![1.5; BLOCK];
            b[i * 7] = v;
            blocks.push(b);
        }
        if cfg!(target_arch = "x86_64") && !has_avx2() {
            println!("no AVX2 here: the vector quantisation cannot run");
            return;
        }
        for b in &blocks {
            let (want, got) = (quantize_block(b), quantize_block_avx2(b));
            assert_eq!(want.qs, got.qs, "{b:?}");
            assert_eq!(want.d.to_bits(), got.d.to_bits(), "{b:?}");
            assert_eq!(want.s.to_bits(), got.s.to_bits(), "{b:?}");
        }
    }

    #[test]
    fn each_row_of_a_batch_has_the_bits_it_has_alone() {
        // The 5-8 row kernels sum even and odd blocks in two passes, the 1-4 row ones in
        // one: a sequence must decode to the same tokens in any batch. 9 and 8 blocks a
        // row, up to 19 rows (two full passes and a 3-row one).
        let (raw8, _) = raw_q8(16, 288, 7);
        let (raw41, _) = raw_q41(16, 288, 8);
        let (raw41_even, _) = raw_q41(16, 256, 9);
        let matrices = [
            QMatrix::from_q8_0(16, 288, &raw8).unwrap(),
            QMatrix::from_q4_1(16, 288, &raw41).unwrap(),
            QMatrix::from_q4_1(16, 256, &raw41_even).unwrap(),
        ];
        let x: Vec<f32> = (0..19 * 288)
            .map(|i| ((i * 29 % 89) as f32 - 44.0) / 9.0)
            .collect();
        for isa in isas() {
            for q in &matrices {
                let (n, k) = (q.rows(), q.cols());
                let alone: Vec<Vec<f32>> = (0..19)
                    .map(|r| q.matmul_on(&x[r * k..(r + 1) * k], 1, isa))
                    .collect();
                for m in 1..=19 {
                    let got = q.matmul_on(&x[..m * k], m, isa);
                    for (r, want) in alone.iter().take(m).enumerate() {
                        assert_eq!(&got[r * n..(r + 1) * n], &want[..], "{isa:?} m={m} row {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn q8_0_products_match_the_dequantised_matrix_for_every_batch_size() {
        let (raw, dense) = raw_q8(40, 576, 1);
        check(&QMatrix::from_q8_0(40, 576, &raw).unwrap(), &dense);
    }

    #[test]
    fn q4_1_products_match_the_dequantised_matrix_for_every_batch_size() {
        let (raw, dense) = raw_q41(40, 576, 2);
        check(&QMatrix::from_q4_1(40, 576, &raw).unwrap(), &dense);
    }
}
