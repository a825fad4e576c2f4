//! The arithmetic of one query row's attention over one key/value group of its cache,
//! for the plain path ([`super::plain`]): the scores of the group's query heads against
//! every visible key, their softmax, and the weighted sums of the values.
//!
//! Every float operation is the one a head at a time would do, in the same order (a dot
//! product's fused multiply-adds in 8 lanes from zero, then the lanes' pairwise sum; a
//! weight `e / sum`; `y = w v + y` key after key), so the AVX2 code has the bits of the
//! portable loops. It only schedules them better: 4 keys' dot products at once
//! (independent chains, where one product at a time waited on each multiply-add), and
//! each head's output kept in registers across all keys instead of loaded and stored
//! once a key.

/// One query row's view of one group: `rep` query heads of `d` values (contiguous), and
/// `n` keys and values, key `i` at `keys[i * stride + off..][..d]` (likewise values).
pub struct Group<'a> {
    /// The group's query heads, `rep * d` values.
    pub queries: &'a [f32],
    /// The layer's keys from the first visible position, `stride` values a position.
    pub keys: &'a [f32],
    /// The layer's values, laid out as `keys`.
    pub values: &'a [f32],
    /// Values a position (all groups).
    pub stride: usize,
    /// This group's first column within a position.
    pub off: usize,
    /// Head width.
    pub d: usize,
    /// Visible keys.
    pub n: usize,
}

impl Group<'_> {
    fn key(&self, i: usize) -> &[f32] {
        &self.keys[i * self.stride + self.off..][..self.d]
    }

    fn value(&self, i: usize) -> &[f32] {
        &self.values[i * self.stride + self.off..][..self.d]
    }
}

/// `out` (`rep * d` values, head after head) = the attention of the group's query heads:
/// `softmax(q k^T * scale) v` per head. `weights` is scratch space.
pub fn attend(group: &Group<'_>, scale: f32, weights: &mut Vec<f32>, out: &mut [f32]) {
    attend_on(group, scale, weights, out, avx2_ok(group.d));
}

/// [`attend`] on the AVX2 code or the portable loops.
fn attend_on(group: &Group<'_>, scale: f32, weights: &mut Vec<f32>, out: &mut [f32], simd: bool) {
    let (d, n) = (group.d, group.n);
    let rep = group.queries.len() / d;
    debug_assert_eq!(out.len(), rep * d, "one output head per query head");
    weights.clear();
    weights.resize(rep * n, 0f32);
    for (j, row) in weights.chunks_exact_mut(n).enumerate() {
        let q = &group.queries[j * d..(j + 1) * d];
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: AVX2 and FMA were detected; d is a multiple of 8 (`avx2_ok`).
            unsafe { avx2::scores(q, group, scale, row) };
        }
        if !simd {
            for (i, s) in row.iter_mut().enumerate() {
                *s = lanes_dot(q, group.key(i)) * scale;
            }
        }
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let mut sum = 0f32;
        for s in row.iter_mut() {
            *s = (*s - max).exp();
            sum += *s;
        }
        for s in row.iter_mut() {
            *s /= sum;
        }
    }
    for (w, head) in weights.chunks_exact(n).zip(out.chunks_exact_mut(d)) {
        #[cfg(target_arch = "x86_64")]
        if simd {
            // SAFETY: as above.
            unsafe { avx2::weighted_sum(w, group, head) };
        }
        if !simd {
            head.fill(0.0);
            for (i, &w) in w.iter().enumerate() {
                for (o, v) in head.iter_mut().zip(group.value(i)) {
                    *o = w.mul_add(*v, *o);
                }
            }
        }
    }
}

/// `q . k` as the AVX2 code sums it: fused multiply-adds in 8 lanes (a lane per index
/// mod 8, a tail past the last 8 in lanes 0..), then `((0+4)+(2+6))+((1+5)+(3+7))`.
fn lanes_dot(q: &[f32], k: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    for (i, (a, b)) in q.iter().zip(k).enumerate() {
        acc[i % 8] = a.mul_add(*b, acc[i % 8]);
    }
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

/// Whether the AVX2 code runs for heads of `d` values.
fn avx2_ok(d: usize) -> bool {
    d.is_multiple_of(8) && super::qmatmul::has_avx2()
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Group;
    use std::arch::x86_64::*;

    /// The horizontal sum of the dot products' lanes: `((0+4)+(2+6))+((1+5)+(3+7))`.
    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let hi = _mm256_extractf128_ps(v, 1);
        let s = _mm_add_ps(_mm256_castps256_ps128(v), hi);
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }

    /// `row[i] = (q . key i) * scale`, four keys at a time.
    ///
    /// # Safety
    /// AVX2 and FMA; `q.len() == group.d`, a multiple of 8.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn scores(q: &[f32], group: &Group<'_>, scale: f32, row: &mut [f32]) {
        assert!(q.len() == group.d && row.len() == group.n);
        let mut quads = row.chunks_exact_mut(4);
        let mut i = 0;
        for quad in quads.by_ref() {
            let keys = [
                group.key(i),
                group.key(i + 1),
                group.key(i + 2),
                group.key(i + 3),
            ];
            let mut acc = [_mm256_setzero_ps(); 4];
            for c in (0..q.len()).step_by(8) {
                // SAFETY: c + 8 <= d, the length of q and of each key.
                let qv = unsafe { _mm256_loadu_ps(q.as_ptr().add(c)) };
                for (a, k) in acc.iter_mut().zip(&keys) {
                    // SAFETY: as above.
                    let kv = unsafe { _mm256_loadu_ps(k.as_ptr().add(c)) };
                    *a = _mm256_fmadd_ps(qv, kv, *a);
                }
            }
            for (s, a) in quad.iter_mut().zip(acc) {
                *s = hsum(a) * scale;
            }
            i += 4;
        }
        for s in quads.into_remainder() {
            let k = group.key(i);
            let mut acc = _mm256_setzero_ps();
            for c in (0..q.len()).step_by(8) {
                // SAFETY: as above.
                let (qv, kv) = unsafe {
                    (
                        _mm256_loadu_ps(q.as_ptr().add(c)),
                        _mm256_loadu_ps(k.as_ptr().add(c)),
                    )
                };
                acc = _mm256_fmadd_ps(qv, kv, acc);
            }
            *s = hsum(acc) * scale;
            i += 1;
        }
    }

    /// `head = sum over keys of weights[i] * value i`, 64 columns at a time in eight
    /// registers.
    ///
    /// # Safety
    /// AVX2 and FMA; `head.len() == group.d`, a multiple of 8.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn weighted_sum(weights: &[f32], group: &Group<'_>, head: &mut [f32]) {
        assert!(head.len() == group.d && weights.len() == group.n);
        for (c, out) in (0..group.d).step_by(64).zip(head.chunks_mut(64)) {
            // SAFETY (each): the caller's, and out.len() / 8 registers of columns c...
            match out.len() / 8 {
                8 => unsafe { columns::<8>(weights, group, c, out) },
                7 => unsafe { columns::<7>(weights, group, c, out) },
                6 => unsafe { columns::<6>(weights, group, c, out) },
                5 => unsafe { columns::<5>(weights, group, c, out) },
                4 => unsafe { columns::<4>(weights, group, c, out) },
                3 => unsafe { columns::<3>(weights, group, c, out) },
                2 => unsafe { columns::<2>(weights, group, c, out) },
                _ => unsafe { columns::<1>(weights, group, c, out) },
            }
        }
    }

    /// [`weighted_sum`] of the columns `c..c + 8 R` into `out`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn columns<const R: usize>(
        weights: &[f32],
        group: &Group<'_>,
        c: usize,
        out: &mut [f32],
    ) {
        assert!(out.len() == 8 * R && c + 8 * R <= group.d);
        let mut acc = [_mm256_setzero_ps(); R];
        for (i, &w) in weights.iter().enumerate() {
            let v = &group.value(i)[c..c + 8 * R];
            let wv = _mm256_set1_ps(w);
            for (r, a) in acc.iter_mut().enumerate() {
                // SAFETY: v holds 8 R values.
                *a = _mm256_fmadd_ps(wv, unsafe { _mm256_loadu_ps(v.as_ptr().add(8 * r)) }, *a);
            }
        }
        for (r, a) in acc.into_iter().enumerate() {
            // SAFETY: out holds 8 R values.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(8 * r), a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In f64, one head at a time.
    fn reference(group: &Group<'_>, scale: f32) -> Vec<f64> {
        let (d, n) = (group.d, group.n);
        let rep = group.queries.len() / d;
        let mut out = vec![0f64; rep * d];
        for j in 0..rep {
            let q = &group.queries[j * d..(j + 1) * d];
            let s: Vec<f64> = (0..n)
                .map(|i| {
                    let k = group.key(i);
                    q.iter()
                        .zip(k)
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum::<f64>()
                        * f64::from(scale)
                })
                .collect();
            let max = s.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
            let e: Vec<f64> = s.iter().map(|v| (v - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for (i, e) in e.iter().enumerate() {
                for (o, x) in out[j * d..(j + 1) * d].iter_mut().zip(group.value(i)) {
                    *o += e / sum * f64::from(*x);
                }
            }
        }
        out
    }

    #[test]
    fn the_avx2_code_has_the_bits_of_the_portable_loops() {
        let value = |i: usize| ((i * 7919 % 1009) as f32 - 504.0) / 97.0;
        // Head widths of SmolLM2 (64), Phi-3 (96), Qwen3 (128) and Gemma 3 (256), and one
        // that the AVX2 code leaves to the loops (20); key counts around the 4-key steps;
        // 3 query heads of the second of 2 groups.
        for d in [64, 96, 128, 256, 20] {
            for n in [1, 3, 4, 5, 17] {
                let (rep, groups) = (3, 2);
                let stride = groups * d;
                let queries: Vec<f32> = (0..rep * d).map(|i| value(i + 11) / 30.0).collect();
                let keys: Vec<f32> = (0..n * stride).map(|i| value(i + 5)).collect();
                let values: Vec<f32> = (0..n * stride).map(|i| value(i + 101)).collect();
                let group = Group {
                    queries: &queries,
                    keys: &keys,
                    values: &values,
                    stride,
                    off: d,
                    d,
                    n,
                };
                let mut portable = vec![f32::NAN; rep * d];
                attend_on(&group, 0.125, &mut Vec::new(), &mut portable, false);
                for (a, b) in portable.iter().zip(reference(&group, 0.125)) {
                    assert!((f64::from(*a) - b).abs() < 1e-4, "d={d} n={n}: {a} vs {b}");
                }
                if avx2_ok(d) {
                    let mut simd = vec![f32::NAN; rep * d];
                    attend(&group, 0.125, &mut Vec::new(), &mut simd);
                    assert_eq!(simd, portable, "d={d} n={n}");
                }
            }
        }
    }
}
