//! Element-wise and row-wise float kernels of the native encoder: exp, the two GELUs,
//! layer normalisation, softmax and dot products, written as straight-line loops the
//! compiler turns into 8-lane vector code when inlined into an AVX2 function.
//!
//! Sums are taken over eight explicit lanes in a fixed order, so the vector width the
//! compiler picks never changes a result's bits.

/// Lanes of the explicit partial sums.
const LANES: usize = 8;

/// `e^x` for f32 to within 2 ulp on [-87, 88], branch-free so it vectorises: range
/// reduction by `ln 2` and a degree-6 minimax polynomial (Cephes `expf`).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2^23: adding it rounds to an integer held in the low mantissa bits.
    const SHIFTER: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let t = x * LOG2E + SHIFTER;
    let n = t - SHIFTER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let p = p * r * r + r + 1.0;
    let exponent = (t.to_bits() as i32).wrapping_sub(SHIFTER.to_bits() as i32);
    // Wrapping arithmetic: a checked add would put a panic branch in the loop and stop it
    // being vectorised (n is within -126..=127 after the clamp, so nothing wraps).
    p * f32::from_bits((exponent.wrapping_add(127) << 23) as u32)
}

/// erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7).
#[inline(always)]
fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_7,
        -1.453_152,
        1.061_405_4,
    ];
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    (1.0 - poly * exp(-a * a)).copysign(x)
}

/// Applies `f` to every value in place, eight at a time: the fixed-width body becomes
/// vector code even for the 16-value row segments of a matmul tile, which a plain loop
/// (vectorised 32 values at a time) would leave to its scalar remainder.
#[inline(always)]
fn map_in_place(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    let mut chunks = xs.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        let chunk: &mut [f32; LANES] = chunk.try_into().expect("chunks of LANES");
        for v in chunk.iter_mut() {
            *v = f(*v);
        }
    }
    for v in chunks.into_remainder() {
        *v = f(*v);
    }
}

/// The exact GELU, `x·Φ(x)`, in place.
#[inline(always)]
pub fn gelu_erf(xs: &mut [f32]) {
    map_in_place(xs, |x| {
        0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
    });
}

/// The tanh approximation of GELU, in place.
#[inline(always)]
pub fn gelu_tanh(xs: &mut [f32]) {
    const C: f32 = 0.797_884_6; // sqrt(2/pi)
    map_in_place(xs, |x| {
        let u = C * (x + 0.044_715 * x * x * x);
        // tanh(u) = 1 - 2 / (e^{2u} + 1)
        let tanh = 1.0 - 2.0 / (exp(2.0 * u) + 1.0);
        0.5 * x * (1.0 + tanh)
    });
}

/// Σ xs, over eight lanes then across them.
#[inline(always)]
fn sum(xs: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (l, v) in lanes.iter_mut().zip(chunk) {
            *l += v;
        }
    }
    for (l, v) in lanes.iter_mut().zip(chunks.remainder()) {
        *l += v;
    }
    lanes.iter().sum()
}

/// Σ a·b, over eight lanes then across them.
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..LANES {
            lanes[l] += x[l] * y[l];
        }
    }
    for ((l, x), y) in lanes.iter_mut().zip(ca.remainder()).zip(cb.remainder()) {
        *l += x * y;
    }
    lanes.iter().sum()
}

/// Layer normalisation of one row in place: `(x - mean) / sqrt(var + eps) · w + b`.
#[inline(always)]
pub fn layer_norm(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum(row) / n;
    for v in row.iter_mut() {
        *v -= mean;
    }
    let mut lanes = [0.0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (l, v) in lanes.iter_mut().zip(chunk) {
            *l += v * v;
        }
    }
    for (l, v) in lanes.iter_mut().zip(chunks.remainder()) {
        *l += v * v;
    }
    let var = lanes.iter().sum::<f32>() / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((v, w), b) in row.iter_mut().zip(weight).zip(bias) {
        *v = *v * inv * w + b;
    }
}

/// Softmax of one row in place.
#[inline(always)]
pub fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for v in row.iter_mut() {
        *v = exp(*v - max);
    }
    let inv = 1.0 / sum(row);
    for v in row.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp_of_libm() {
        let mut worst = 0.0f64;
        for i in -870_000..=880_000 {
            let x = i as f32 / 10_000.0;
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 2.5e-7, "worst relative error {worst}");
        assert!((0.0..1e-37).contains(&exp(-1000.0)));
        assert!(exp(1000.0).is_finite());
    }

    #[test]
    fn gelus_match_their_definitions() {
        let xs: Vec<f32> = (-4000..=4000).map(|i| i as f32 / 400.0).collect();
        let mut exact = xs.clone();
        gelu_erf(&mut exact);
        let mut tanh = xs.clone();
        gelu_tanh(&mut tanh);
        for ((&x, &e), &t) in xs.iter().zip(&exact).zip(&tanh) {
            let x64 = x as f64;
            let phi = 0.5 * (1.0 + libm_erf(x64 / std::f64::consts::SQRT_2));
            assert!((e as f64 - x64 * phi).abs() <= 1e-6, "erf gelu at {x}: {e}");
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64.powi(3));
            assert!(
                (t as f64 - 0.5 * x64 * (1.0 + u.tanh())).abs() <= 1e-6,
                "tanh gelu at {x}: {t}"
            );
        }
    }

    /// erf in f64 by its Maclaurin series (|x| < 3) or continued fraction, for the test.
    fn libm_erf(x: f64) -> f64 {
        if x.abs() > 3.0 {
            // erfc(x) ≈ e^{-x²}/(x√π) · (1 - 1/(2x²) + 3/(4x⁴)), ample at |x| > 3.
            let a = x.abs();
            let erfc = (-a * a).exp() / (a * std::f64::consts::PI.sqrt())
                * (1.0 - 1.0 / (2.0 * a * a) + 3.0 / (4.0 * a.powi(4)));
            return (1.0 - erfc).copysign(x);
        }
        let mut term = x;
        let mut total = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            total += term / (2 * n + 1) as f64;
        }
        total * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn layer_norm_gives_zero_mean_unit_variance_before_the_affine() {
        let mut row: Vec<f32> = (0..384)
            .map(|i| (i as f32 * 0.37).sin() * 3.0 + 1.0)
            .collect();
        let ones = vec![1.0; 384];
        let zeros = vec![0.0; 384];
        layer_norm(&mut row, &ones, &zeros, 1e-12);
        let mean: f64 = row.iter().map(|&v| v as f64).sum::<f64>() / 384.0;
        let var: f64 = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / 384.0;
        assert!(
            mean.abs() < 1e-6 && (var - 1.0).abs() < 1e-5,
            "{mean} {var}"
        );
    }

    #[test]
    fn softmax_sums_to_one_and_dot_matches() {
        let mut row = vec![1.0f32, 2.0, 3.0, -50.0, 0.5];
        softmax(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(row[2] > row[1] && row[1] > row[0] && row[3] < 1e-20);
        let a: Vec<f32> = (0..37).map(|i| i as f32).collect();
        assert_eq!(dot(&a, &a), (0..37).map(|i| (i * i) as f32).sum::<f32>());
    }
}
