//! The bootstrap's random numbers: SplitMix64 (Steele, Lea and Flood 2014; the generator
//! `java.util.SplittableRandom` uses), on wrapping 64-bit integer arithmetic only, so
//! every machine, build and thread count draws the same numbers. No floating point, no
//! platform word size, no state shared between threads: each resample row has its own
//! stream, seeded from (seed, dataset, n, row) by [`stream_key`] and [`row_seed`].
//!
//! Bounded draws use Lemire's multiply-shift with rejection on 32-bit halves of each
//! 64-bit output (low half first), which is exactly uniform on `0..n`.
//!
//! ```
//! use credence_core::stats::rng::SplitMix64;
//! let mut g = SplitMix64::new(0);
//! // The reference implementation's first output for seed 0.
//! assert_eq!(g.next_u64(), 0xe220_a839_7b1d_cdaf);
//! ```

use sha2::{Digest, Sha256};

/// SplitMix64's increment (the golden ratio in 64-bit fixed point).
pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: a bijective 64-bit mixer.
#[inline]
pub fn mix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The SplitMix64 generator.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is `mix64(seed + GAMMA)`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix64(self.state)
    }
}

/// Uniform draws on `0..n` from a [`SplitMix64`], two per 64-bit output.
#[derive(Debug, Clone)]
pub struct UniformIndex {
    rng: SplitMix64,
    spare: Option<u32>,
    n: u32,
    /// `2^32 mod n`: a 32-bit draw whose low product half is below it is rejected.
    threshold: u32,
}

impl UniformIndex {
    /// Draws on `0..n` (`n` ≥ 1) from a generator seeded with `seed`.
    pub fn new(seed: u64, n: u32) -> Self {
        assert!(n > 0, "uniform draw on an empty range");
        UniformIndex {
            rng: SplitMix64::new(seed),
            spare: None,
            n,
            threshold: n.wrapping_neg() % n,
        }
    }

    #[inline]
    fn next_u32(&mut self) -> u32 {
        match self.spare.take() {
            Some(x) => x,
            None => {
                let x = self.rng.next_u64();
                self.spare = Some((x >> 32) as u32);
                x as u32
            }
        }
    }

    /// The next index: Lemire (2019), "Fast random integer generation in an interval".
    #[inline]
    pub fn next_index(&mut self) -> u32 {
        loop {
            let m = u64::from(self.next_u32()) * u64::from(self.n);
            if (m as u32) >= self.threshold {
                return (m >> 32) as u32;
            }
        }
    }
}

/// The key of one index matrix: the first 8 bytes (little-endian) of
/// sha256(`"credence.bootstrap.v1\0"` ‖ seed as u64 LE ‖ n as u64 LE ‖ dataset in UTF-8).
/// The number of resamples is not part of it, so a matrix of B rows is the first B rows
/// of any larger one.
pub fn stream_key(seed: u64, dataset: &str, n: usize) -> u64 {
    let mut h = Sha256::new();
    h.update(b"credence.bootstrap.v1\0");
    h.update(seed.to_le_bytes());
    h.update((n as u64).to_le_bytes());
    h.update(dataset.as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// The SplitMix64 seed of row `b` of the matrix with key `key`:
/// `mix64(key + (b + 1) * GAMMA)`, wrapping.
#[inline]
pub fn row_seed(key: u64, b: usize) -> u64 {
    mix64(key.wrapping_add((b as u64).wrapping_add(1).wrapping_mul(GAMMA)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_reference_outputs() {
        // From the public-domain C reference (Vigna, splitmix64.c), seed 1234567.
        let mut g = SplitMix64::new(1_234_567);
        let got: Vec<u64> = (0..3).map(|_| g.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }

    #[test]
    fn bounded_draws_cover_the_range_evenly() {
        let mut u = UniformIndex::new(7, 10);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[u.next_index() as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
        let mut one = UniformIndex::new(7, 1);
        assert!((0..100).all(|_| one.next_index() == 0));
    }

    #[test]
    fn keys_depend_on_every_input() {
        let k = stream_key(42, "sample", 100);
        assert_ne!(k, stream_key(43, "sample", 100));
        assert_ne!(k, stream_key(42, "sample2", 100));
        assert_ne!(k, stream_key(42, "sample", 101));
        assert_eq!(k, stream_key(42, "sample", 100));
        assert_ne!(row_seed(k, 0), row_seed(k, 1));
    }
}
