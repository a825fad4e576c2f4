//! Model files made to fail their load's checks.

use std::path::Path;

/// A GGUF file of metadata only: no tokenizer, and `llama.block_count = 2^40` (a crafted
/// or truncated file; a loader that believed the count would allocate a terabyte).
pub fn write_crafted_gguf(path: &Path) {
    let mut b = Vec::new();
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes()); // version
    b.extend(0u64.to_le_bytes()); // tensors
    b.extend(2u64.to_le_bytes()); // metadata entries
    let key = |b: &mut Vec<u8>, k: &str| {
        b.extend((k.len() as u64).to_le_bytes());
        b.extend(k.as_bytes());
    };
    key(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes()); // string
    b.extend(5u64.to_le_bytes());
    b.extend(b"llama");
    key(&mut b, "llama.block_count");
    b.extend(10u32.to_le_bytes()); // u64
    b.extend((1u64 << 40).to_le_bytes());
    std::fs::write(path, b).unwrap();
}
