//! spaCy's string ids (MurmurHash64A, or the built-in symbol's enum value) and thinc's
//! HashEmbed row selection (MurmurHash3 x64 on one u64), SPEC §2.

use std::collections::HashMap;
use std::sync::OnceLock;

const SYMBOLS_JSON: &str = include_str!("data/symbols.json");

/// spaCy's 457 built-in symbols (`spacy/symbols.pyx`); a string's position is its id.
fn symbols() -> &'static HashMap<String, u64> {
    static TABLE: OnceLock<HashMap<String, u64>> = OnceLock::new();
    TABLE.get_or_init(|| {
        // The file is compiled in and checked by a unit test, so it always parses.
        let list: Vec<String> = serde_json::from_str(SYMBOLS_JSON).unwrap_or_default();
        list.into_iter().zip(0u64..).collect()
    })
}

/// MurmurHash64A (Austin Appleby) as spaCy's `hash_string` uses it.
pub fn murmurhash64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes([
            block[0], block[1], block[2], block[3], block[4], block[5], block[6], block[7],
        ]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (j, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * j);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The id `StringStore.add(s)` returns: 0 for "", the symbol id for a built-in symbol,
/// otherwise MurmurHash64A of the UTF-8 bytes with seed 1.
pub fn string_id(s: &str) -> u64 {
    if s.is_empty() {
        return 0;
    }
    if let Some(&id) = symbols().get(s) {
        return id;
    }
    murmurhash64a(s.as_bytes(), 1)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// MurmurHash3_x64_128 of the 8 little-endian bytes of `value`, read as four u32 words
/// `[low(h1), high(h1), low(h2), high(h2)]` (thinc's `hash` for HashEmbed).
pub fn hashembed_words(value: u64, seed: u32) -> [u32; 4] {
    const C1: u64 = 0x87c3_7b91_1142_53d5;
    const C2: u64 = 0x4cf5_ad43_2745_937f;
    let mut h1 = u64::from(seed);
    let mut h2 = u64::from(seed);
    let k1 = value.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
    h1 ^= k1;
    h1 ^= 8;
    h2 ^= 8;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    [h1 as u32, (h1 >> 32) as u32, h2 as u32, (h2 >> 32) as u32]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_table_has_all_457_entries() {
        assert_eq!(symbols().len(), 457);
        assert_eq!(string_id("X"), symbols()["X"]);
        assert!(string_id("number") < 457);
    }

    #[test]
    fn string_ids_match_spacy() {
        // Values from the golden file (norm of "the", shape of "The").
        assert_eq!(string_id("the"), 7_425_985_699_627_899_538);
        assert_eq!(string_id("Xxx"), 18_200_729_499_220_207_786);
        assert_eq!(string_id(""), 0);
    }
}
