//! How fast the CPU decode path's quantised products run (`llm/local/qmatmul.rs`), not a
//! test: SmolLM2-135M's weight shapes (hidden 576, intermediate 1536, 3 of 9 heads'
//! keys and values), random Q4_1 and Q8_0 blocks, for 1, 2, 4 and 8 activation rows.
//! Two working sets: one layer's seven matrices (2.2 MB of Q4_1, in this CPU's caches),
//! and all 30 layers' (66 MB, read from memory as a decode step reads them). A product
//! that runs as fast from memory as from cache is bound by its instructions, not by the
//! bytes.
//!
//! ```sh
//! RAYON_NUM_THREADS=1 cargo bench --profile dev -p credence-worker --bench qmatmul
//! RAYON_NUM_THREADS=1 CREDENCE_CPU_ISA=avx2 cargo bench --profile dev -p credence-worker --bench qmatmul
//! ```
//!
//! Prints one line a case: weight rows a second, GB/s of weight bytes, ns a row.

use credence_worker::llm::local::qmatmul::{isa, QMatrix};
use std::time::{Duration, Instant};

const HIDDEN: usize = 576;
const INTERMEDIATE: usize = 1536;
const KV: usize = 192;
const LAYERS: usize = 30;
/// How long each case runs.
const RUN: Duration = Duration::from_millis(1500);

/// A fixed pseudo-random byte sequence.
struct Lcg(u32);

impl Lcg {
    fn byte(&mut self) -> u8 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        (self.0 >> 16) as u8
    }
}

/// An f16 scale in 0.001..0.03, as trained weights' blocks have.
fn scale(rng: &mut Lcg) -> [u8; 2] {
    let v = 0.001 + f32::from(rng.byte()) / 255.0 * 0.03;
    half::f16::from_f32(v).to_bits().to_le_bytes()
}

fn q4_1(rows: usize, cols: usize, rng: &mut Lcg) -> QMatrix {
    let mut raw = Vec::with_capacity(rows * cols / 32 * 20);
    for _ in 0..rows * cols / 32 {
        raw.extend(scale(rng));
        raw.extend(half::f16::from_f32(-0.1).to_bits().to_le_bytes());
        raw.extend((0..16).map(|_| rng.byte()));
    }
    QMatrix::from_q4_1(rows, cols, &raw).expect("Q4_1 blocks")
}

fn q8_0(rows: usize, cols: usize, rng: &mut Lcg) -> QMatrix {
    let mut raw = Vec::with_capacity(rows * cols / 32 * 34);
    for _ in 0..rows * cols / 32 {
        raw.extend(scale(rng));
        raw.extend((0..32).map(|_| rng.byte().min(254)));
    }
    QMatrix::from_q8_0(rows, cols, &raw).expect("Q8_0 blocks")
}

/// One layer's matrices: q, k, v, o, gate, up, down.
fn layer(make: fn(usize, usize, &mut Lcg) -> QMatrix, rng: &mut Lcg) -> Vec<QMatrix> {
    [
        (HIDDEN, HIDDEN),
        (KV, HIDDEN),
        (KV, HIDDEN),
        (HIDDEN, HIDDEN),
        (INTERMEDIATE, HIDDEN),
        (INTERMEDIATE, HIDDEN),
        (HIDDEN, INTERMEDIATE),
    ]
    .into_iter()
    .map(|(r, c)| make(r, c, rng))
    .collect()
}

/// Runs every matrix of `set` against `m` activation rows until [`RUN`] has passed.
fn measure(label: &str, set: &[QMatrix], bytes_per_block: usize, m: usize) {
    let inputs: Vec<Vec<f32>> = set
        .iter()
        .map(|w| {
            (0..m * w.cols())
                .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
                .collect()
        })
        .collect();
    let rows: usize = set.iter().map(QMatrix::rows).sum();
    let bytes: usize = set
        .iter()
        .map(|w| w.rows() * w.cols() / 32 * bytes_per_block)
        .sum();
    let mut sink = 0f32;
    // One pass to warm the caches (and the pool).
    for (w, x) in set.iter().zip(&inputs) {
        sink += w.matmul(x, m)[0];
    }
    let start = Instant::now();
    let mut passes = 0usize;
    while start.elapsed() < RUN {
        for (w, x) in set.iter().zip(&inputs) {
            sink += w.matmul(x, m)[0];
        }
        passes += 1;
    }
    let s = start.elapsed().as_secs_f64();
    let rows_s = (passes * rows) as f64 / s;
    println!(
        "{label:<28} m={m}  {:>7.2} M rows/s  {:>6.2} GB/s  {:>6.1} ns/row  ({} passes{})",
        rows_s / 1e6,
        (passes * bytes) as f64 / s / 1e9,
        1e9 / rows_s,
        passes,
        if sink.is_nan() { ", NaN" } else { "" }
    );
}

fn main() {
    println!(
        "qmatmul: {:?}, {} thread(s)",
        isa(),
        candle_core::utils::get_num_threads()
    );
    let mut rng = Lcg(7);
    for (name, make, bytes) in [
        ("Q4_1", q4_1 as fn(usize, usize, &mut Lcg) -> QMatrix, 20),
        ("Q8_0", q8_0, 34),
    ] {
        let model: Vec<QMatrix> = (0..LAYERS).flat_map(|_| layer(make, &mut rng)).collect();
        let one = &model[..7];
        for m in [1, 2, 4, 8] {
            measure(&format!("{name} one layer (cached)"), one, bytes, m);
            measure(&format!("{name} 30 layers (memory)"), &model, bytes, m);
        }
    }
}
