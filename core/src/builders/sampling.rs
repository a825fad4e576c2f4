//! The seeded randomness of the benchmark builders, spelled out so that a build can be
//! reproduced from its card alone: a ChaCha20 stream (`rand_chacha`, whose output is
//! fixed for a given seed) seeded with `seed_from_u64(seed)`, a uniform index below `n` by
//! rejection sampling on `next_u64`, and the Fisher–Yates shuffle from the last position
//! down. Nothing here depends on `rand`'s own (version-dependent) distributions.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// A ChaCha20 stream of `seed`: stream 0 is a build's main shuffle; the other streams
/// serve independent parts (ClaimDecompBench's class c uses stream c, SocialClaimSplit's
/// post k stream 16 + k), so one part's draws do not depend on how many others are built.
pub fn stream(seed: u64, stream: u64) -> ChaCha20Rng {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// A uniform integer in `0..n` (`n > 0`), by rejection: draws above the largest multiple
/// of `n` are drawn again, so every value is equally likely.
pub fn below(rng: &mut ChaCha20Rng, n: u64) -> u64 {
    assert!(n > 0, "below(0) has no value");
    let zone = u64::MAX - (u64::MAX % n + 1) % n;
    loop {
        let x = rng.next_u64();
        if x <= zone {
            return x % n;
        }
    }
}

/// Whether an event of probability `p` happens: `below(rng, 1_000_000) < p * 1_000_000`.
pub fn chance(rng: &mut ChaCha20Rng, p: f64) -> bool {
    (below(rng, 1_000_000) as f64) < p * 1_000_000.0
}

/// One element of a non-empty slice, uniformly.
pub fn pick<'a, T>(rng: &mut ChaCha20Rng, items: &'a [T]) -> &'a T {
    &items[below(rng, items.len() as u64) as usize]
}

/// One value of `(value, weight)` pairs, with probability weight / total weight: draws
/// `below(total)` and walks the pairs in order. Weights are integers so that the choice
/// is exact; the total must be positive.
pub fn weighted<T: Copy>(rng: &mut ChaCha20Rng, choices: &[(T, u64)]) -> T {
    let total: u64 = choices.iter().map(|&(_, w)| w).sum();
    let mut x = below(rng, total);
    for &(value, w) in choices {
        if x < w {
            return value;
        }
        x -= w;
    }
    unreachable!("x < total = the sum of the weights")
}

/// Shuffles in place: for i from len-1 down to 1, swap item i with item `below(i + 1)`.
pub fn shuffle<T>(rng: &mut ChaCha20Rng, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_fixed_by_seed_and_distinct() {
        let a: Vec<u64> = (0..3).map(|_| stream(42, 0).next_u64()).collect();
        assert!(a.iter().all(|&x| x == a[0]));
        assert_ne!(stream(42, 0).next_u64(), stream(42, 1).next_u64());
        assert_ne!(stream(42, 0).next_u64(), stream(43, 0).next_u64());
    }

    #[test]
    fn shuffle_is_a_seeded_permutation() {
        let mut a: Vec<u32> = (0..50).collect();
        let mut b = a.clone();
        shuffle(&mut stream(42, 0), &mut a);
        shuffle(&mut stream(42, 0), &mut b);
        assert_eq!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<_>>());
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn below_is_roughly_uniform_and_in_range() {
        let mut rng = stream(7, 0);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[below(&mut rng, 6) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_400..10_600).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(below(&mut rng, 1), 0);
    }

    #[test]
    fn weighted_follows_the_weights_and_skips_zero() {
        let mut rng = stream(7, 0);
        let mut counts = [0u32; 3];
        for _ in 0..40_000 {
            counts[weighted(&mut rng, &[(0usize, 1), (1, 0), (2, 3)])] += 1;
        }
        assert_eq!(counts[1], 0);
        assert!((9_400..10_600).contains(&counts[0]), "{counts:?}");
    }
}
