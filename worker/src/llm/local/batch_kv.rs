//! The keys and values of every sequence in flight in one buffer per layer, so that a
//! decode step attends for all of them in one batched product per layer instead of a
//! dozen kernel launches per sequence (the tensor path's decode, as CUDA runs it).
//!
//! Each layer holds `[rows, kv_heads, capacity, head_dim]`; the sequences in flight occupy
//! rows `0..n` in the engine's order (a sequence that leaves is replaced by the last one,
//! as `Vec::swap_remove` does). A step writes each sequence's new key and value at its own
//! position with one scatter per layer, and attends over the first `max(len) + 1`
//! positions of rows `0..n` (rounded up for a kept step shape, [`super::step_graph`]),
//! with a mask that hides each row's positions past its own
//! length (and before its sliding window). Rows and capacity grow by doubling; where the
//! memory (or `CREDENCE_KV_MEMORY_GIB`) lacks for that, the buffers are remade at just the
//! rows and positions asked and held, so that fewer rows can grow longer once the engine
//! has preempted the others, and more rows fit again once a long one has left. A
//! position past a row's length may hold an earlier occupant's (finite) values, which the
//! mask's zero weights cancel.

use super::model::SeqCache;
use super::step_graph::StepGraphs;
use candle_core::{DType, Device, Result, Tensor};

/// Why the batch could not make room.
#[derive(Debug)]
pub enum KvError {
    /// The device has too little free memory for the grown buffers.
    Memory {
        /// Bytes the growth needs (with the headroom a step's activations take).
        needed: usize,
        /// Bytes free on the device.
        free: usize,
    },
    /// The buffers would pass the limit set for them (`CREDENCE_KV_MEMORY_GIB`).
    Budget {
        /// Bytes the grown buffers and their steps' headroom would take.
        needed: usize,
        /// The limit.
        budget: usize,
    },
    /// Anything else the device said.
    Device(candle_core::Error),
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::Memory { needed, free } => write!(
                f,
                "out of GPU memory for the keys and values: {:.2} GiB needed, {:.2} GiB free",
                *needed as f64 / GIB,
                *free as f64 / GIB
            ),
            KvError::Budget { needed, budget } => write!(
                f,
                "the keys and values would take {:.2} GiB, past the {:.2} GiB that \
                 CREDENCE_KV_MEMORY_GIB allows",
                *needed as f64 / GIB,
                *budget as f64 / GIB
            ),
            KvError::Device(e) => write!(f, "{}", error_text(e)),
        }
    }
}

impl std::error::Error for KvError {}

impl From<candle_core::Error> for KvError {
    fn from(e: candle_core::Error) -> Self {
        KvError::Device(e)
    }
}

impl From<KvError> for candle_core::Error {
    fn from(e: KvError) -> Self {
        match e {
            KvError::Device(e) => e,
            other => candle_core::Error::Msg(other.to_string()),
        }
    }
}

impl KvError {
    /// Whether more memory would have helped (the estimate, or the device's own
    /// out-of-memory error).
    pub fn is_memory(&self) -> bool {
        match self {
            KvError::Memory { .. } | KvError::Budget { .. } => true,
            KvError::Device(e) => is_out_of_memory(e),
        }
    }
}

/// Whether a device error is the device's own out-of-memory (CUDA's
/// `CUDA_ERROR_OUT_OF_MEMORY`, as candle reports it).
pub fn is_out_of_memory(e: &candle_core::Error) -> bool {
    error_text(e).contains("OUT_OF_MEMORY")
}

/// A device error's message for a request's answer: without the stack trace candle
/// attaches wherever `RUST_BACKTRACE` is set (a dozen lines of frames in a result row).
pub fn error_text(e: &candle_core::Error) -> String {
    match e {
        candle_core::Error::WithBacktrace { inner, .. } => error_text(inner),
        candle_core::Error::Context { inner, context } => {
            format!("{context}: {}", error_text(inner))
        }
        candle_core::Error::WithPath { inner, path } => {
            format!("{}: {}", path.display(), error_text(inner))
        }
        other => other.to_string(),
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Memory a decode step needs whatever its size: cuBLAS's workspace and the allocator's
/// rounding.
const STEP_FIXED: usize = 256 << 20;

/// What a decode step allocates beside the keys and values, as the model's shape sets it:
/// the headroom kept free when the buffers grow, and part of what bounds the sequences in
/// flight ([`BatchKv::fitting_rows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepMemory {
    /// Bytes per sequence: the activations live at once at the widest point of a block
    /// and the logits.
    pub per_row: usize,
    /// Bytes per sequence and attended position: the attention's scores and weights.
    pub per_row_position: usize,
}

impl StepMemory {
    /// The estimate for a model of `hidden` and `mlp` widths, `heads` query heads and a
    /// vocabulary of `vocab`, with activations of `activation_bytes`.
    pub fn of(
        hidden: usize,
        mlp: usize,
        heads: usize,
        vocab: usize,
        activation_bytes: usize,
    ) -> Self {
        StepMemory {
            // The residual, a norm's output, the queries, keys, values and the attention's
            // output (at most eight rows of `hidden`), the MLP's gate, up, activation and
            // product (four of `mlp`); the logits in f32, soft-capped and compared (three).
            per_row: (8 * hidden + 4 * mlp) * activation_bytes + 3 * vocab * 4,
            // Scores in f32, masked, their softmax, and the weights in the activations' type.
            per_row_position: heads * (3 * 4 + activation_bytes),
        }
    }

    /// The headroom of a step over `rows` sequences attending over `positions`: twice the
    /// estimate (freed buffers are reused only once the allocator has them back), and the
    /// fixed part.
    pub fn bytes(&self, rows: usize, positions: usize) -> usize {
        let live = rows.saturating_mul(self.per_row).saturating_add(
            rows.saturating_mul(positions)
                .saturating_mul(self.per_row_position),
        );
        STEP_FIXED.saturating_add(live.saturating_mul(2))
    }
}

/// Free bytes on the device where it can tell (CUDA); `None` on the CPU.
pub fn free_bytes(device: &Device) -> Option<usize> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = device {
        return d
            .cuda_stream()
            .context()
            .mem_get_info()
            .ok()
            .map(|(free, _)| free);
    }
    let _ = device;
    None
}

/// The batched keys and values of the sequences in flight.
pub struct BatchKv {
    /// Per layer (empty until the first sequence arrives).
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    layers: usize,
    /// Positions held by each row in use.
    lens: Vec<usize>,
    rows: usize,
    capacity: usize,
    kv_heads: usize,
    head_dim: usize,
    dtype: DType,
    device: Device,
    step: StepMemory,
    /// The most bytes the buffers and their steps' headroom may take, if limited.
    budget: Option<usize>,
    /// The kept shapes (and CUDA graphs) of the steps over these buffers.
    pub(crate) graphs: StepGraphs,
}

/// Positions a buffer holds at first; it doubles as sequences grow.
const FIRST_CAPACITY: usize = 256;

impl BatchKv {
    /// An empty cache for `layers` blocks of `kv_heads` heads of `head_dim`, whose decode
    /// steps need `step` beside it.
    pub fn new(
        layers: usize,
        kv_heads: usize,
        head_dim: usize,
        dtype: DType,
        device: &Device,
        step: StepMemory,
    ) -> Self {
        BatchKv {
            k: Vec::new(),
            v: Vec::new(),
            layers,
            lens: Vec::new(),
            rows: 0,
            capacity: 0,
            kv_heads,
            head_dim,
            dtype,
            device: device.clone(),
            step,
            budget: None,
            graphs: StepGraphs::default(),
        }
    }

    /// The same, with its steps run in kept shapes as `graphs` says.
    pub fn with_graphs(mut self, graphs: StepGraphs) -> Self {
        self.graphs = graphs;
        self
    }

    /// Positions each row's buffers hold now.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Shapes kept for the steps, and how many of them are captured as CUDA graphs.
    pub fn kept_steps(&self) -> (usize, usize) {
        self.graphs.kept()
    }

    /// How many sequences of `positions` each fit in `free` bytes with their decode
    /// step's headroom. The buffers grow by doubling (rows from four, positions from
    /// [`FIRST_CAPACITY`]), so this is the most rows of such a buffer that fit, while a
    /// tenth of `free` stays for prefills and the kept prompts of prefix reuse, and within
    /// the budget where one is set; 1 where not even four fit (that sequence then fails
    /// alone, with the memory it lacked).
    pub fn fitting_rows(&self, free: usize, positions: usize) -> usize {
        let budget = (free - free / 10).min(self.budget.unwrap_or(usize::MAX));
        let capacity = positions.max(FIRST_CAPACITY).next_power_of_two();
        let bytes = |rows: usize| self.bytes_of(rows, capacity);
        if bytes(4) > budget {
            return 1;
        }
        let mut rows = 4usize;
        while rows < (1 << 20) && bytes(rows * 2) <= budget {
            rows *= 2;
        }
        rows
    }

    /// Sequences held.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// Whether no sequence is held.
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Positions held by each sequence, in row order.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Bytes of one position of one sequence over all layers (keys and values).
    pub fn bytes_per_position(&self) -> usize {
        2 * self.layers * self.kv_heads * self.head_dim * self.dtype.size_in_bytes()
    }

    /// Bytes its buffers hold now.
    fn held(&self) -> usize {
        self.rows * self.capacity * self.bytes_per_position()
    }

    /// The same, with its buffers and their steps' headroom held to at most `budget`
    /// bytes (`CREDENCE_KV_MEMORY_GIB`): on a GPU it shares with another process, or on a
    /// CPU, where nothing else bounds them.
    pub fn with_budget(mut self, budget: Option<usize>) -> Self {
        self.budget = budget;
        self
    }

    /// Bytes a buffer of `rows` rows of `capacity` positions and its steps' headroom take.
    pub fn bytes_of(&self, rows: usize, capacity: usize) -> usize {
        rows.saturating_mul(capacity)
            .saturating_mul(self.bytes_per_position())
            .saturating_add(self.step.bytes(rows, capacity))
    }

    /// Whether the device (and the budget) has the memory for buffers of `rows` rows of
    /// `capacity` positions in place of the ones held.
    fn check(&self, rows: usize, capacity: usize) -> std::result::Result<(), KvError> {
        let total = rows * capacity * self.bytes_per_position();
        if let Some(budget) = self.budget {
            let needed = self.bytes_of(rows, capacity);
            if needed > budget {
                return Err(KvError::Budget { needed, budget });
            }
        }
        if let Some(free) = free_bytes(&self.device) {
            // Buffers are replaced one at a time: an old one of a layer lives beside its
            // new one until the copy is made.
            let per_buffer =
                |r: usize, c: usize| r * c * self.bytes_per_position() / (2 * self.layers.max(1));
            let needed = total.saturating_sub(self.held())
                + per_buffer(self.rows, self.capacity)
                + per_buffer(rows, capacity)
                + self.step.bytes(rows, capacity);
            if needed > free {
                return Err(KvError::Memory { needed, free });
            }
        }
        Ok(())
    }

    /// The shape the buffers must take to hold `rows` rows of `capacity` positions (with
    /// what they hold), or `None` where they already do. Each dimension that is short
    /// doubles; where the memory lacks for that, the buffers take just what is asked and
    /// held, rounded up to powers of two, the other dimension shrunk to what is in use
    /// (after a long sequence leaves, or when sequences were preempted to let it grow).
    fn shape_for(
        &self,
        rows: usize,
        capacity: usize,
    ) -> std::result::Result<Option<(usize, usize)>, KvError> {
        if rows <= self.rows && capacity <= self.capacity {
            return Ok(None);
        }
        let grow = |held: usize, asked: usize, least: usize| {
            if asked > held {
                asked.max(held * 2).max(least)
            } else {
                held
            }
        };
        let grown = (
            grow(self.rows, rows, 4),
            grow(self.capacity, capacity, FIRST_CAPACITY),
        );
        let in_use = self.lens.iter().max().copied().unwrap_or(0);
        let tight = (
            rows.max(self.lens.len()).max(4).next_power_of_two(),
            capacity.max(in_use).max(FIRST_CAPACITY).next_power_of_two(),
        );
        match self.check(grown.0, grown.1) {
            Ok(()) => Ok(Some(grown)),
            Err(e) if tight != grown && e.is_memory() => {
                self.check(tight.0, tight.1).map(|()| Some(tight))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether `rows` rows of `capacity` positions would fit (growing the buffers if
    /// need be) in the memory there is now.
    pub fn fits(&self, rows: usize, capacity: usize) -> bool {
        self.shape_for(rows, capacity).is_ok()
    }

    /// Makes the buffers hold at least `rows` rows of `capacity` positions
    /// ([`BatchKv::shape_for`]), where the device has the memory for it.
    fn reserve(&mut self, rows: usize, capacity: usize) -> std::result::Result<(), KvError> {
        let Some((new_rows, new_capacity)) = self.shape_for(rows, capacity)? else {
            return Ok(());
        };
        // Captured steps point at the buffers about to be replaced.
        self.graphs.clear();
        let (h, d) = (self.kv_heads, self.head_dim);
        let zeros = |r: usize, c: usize| Tensor::zeros((r, h, c, d), self.dtype, &self.device);
        // What is kept: the rows in use and the positions they hold.
        let keep_rows = self.lens.len();
        let keep_positions = self.capacity.min(new_capacity);
        if self.k.is_empty() || keep_rows == 0 {
            // Nothing to copy: the old buffers go before the new ones are made.
            self.k.clear();
            self.v.clear();
            for _ in 0..self.layers {
                self.k.push(zeros(new_rows, new_capacity)?);
                self.v.push(zeros(new_rows, new_capacity)?);
            }
        } else {
            for buffer in self.k.iter_mut().chain(self.v.iter_mut()) {
                let mut kept = if keep_rows < self.rows || keep_positions < self.capacity {
                    buffer
                        .narrow(0, 0, keep_rows)?
                        .narrow(2, 0, keep_positions)?
                        .contiguous()?
                } else {
                    buffer.clone()
                };
                // One dimension at a time: slice_set copies along one.
                if new_capacity > keep_positions {
                    let wider = zeros(keep_rows, new_capacity)?;
                    wider.slice_set(&kept, 2, 0)?;
                    kept = wider;
                }
                if new_rows > keep_rows {
                    let taller = zeros(new_rows, new_capacity)?;
                    taller.slice_set(&kept, 0, 0)?;
                    kept = taller;
                }
                *buffer = kept;
            }
        }
        self.rows = new_rows;
        self.capacity = new_capacity;
        Ok(())
    }

    /// Adds a prefilled sequence as the last row.
    pub fn push(&mut self, cache: &SeqCache) -> std::result::Result<(), KvError> {
        let len = cache.len();
        let row = self.lens.len();
        self.reserve(row + 1, len + 1)?;
        for layer in 0..self.layers {
            let (k, v) = cache.layer(layer, len)?;
            for (buffer, new) in [(&self.k[layer], k), (&self.v[layer], v)] {
                let new = new.to_dtype(self.dtype)?.contiguous()?;
                buffer.narrow(0, row, 1)?.slice_set(&new, 2, 0)?;
            }
        }
        self.lens.push(len);
        Ok(())
    }

    /// Removes row `i`; the last row takes its place.
    pub fn swap_remove(&mut self, i: usize) -> Result<()> {
        let last = self.lens.len() - 1;
        if i != last {
            let len = self.lens[last];
            for buffer in self.k.iter().chain(self.v.iter()) {
                let moved = buffer.narrow(0, last, 1)?.narrow(2, 0, len)?.contiguous()?;
                buffer.narrow(0, i, 1)?.slice_set(&moved, 2, 0)?;
            }
        }
        self.lens.swap_remove(i);
        Ok(())
    }

    /// Forgets every sequence (the buffers stay for the next ones).
    pub fn clear(&mut self) {
        self.lens.clear();
    }

    /// Room for one more position in every row: a decode step's keys and values.
    pub fn make_room(&mut self) -> std::result::Result<(), KvError> {
        let total = self.lens.iter().max().map_or(0, |m| m + 1);
        self.reserve(self.lens.len(), total)
    }

    /// Prepares a decode step: room for one more position in every row. Returns the
    /// number of positions the step must attend over (the longest row's, with its new
    /// one).
    pub(crate) fn begin_step(&mut self) -> Result<usize> {
        let total = self.lens.iter().max().map_or(0, |m| m + 1);
        self.make_room()?;
        Ok(total)
    }

    /// Writes a step's new keys and values (`[n, kv_heads, 1, head_dim]`) of `layer` at
    /// each row's `positions` (`[n]`) and returns the layer's keys and values over the
    /// step's first `span` positions (`[n, kv_heads, span, head_dim]`, strided views of
    /// the buffers).
    pub(crate) fn write(
        &self,
        layer: usize,
        positions: &Tensor,
        k: &Tensor,
        v: &Tensor,
        span: usize,
    ) -> Result<(Tensor, Tensor)> {
        let n = self.lens.len();
        // The scatter's index has the shape of what it writes.
        let at = positions
            .reshape((n, 1, 1, 1))?
            .broadcast_as((n, self.kv_heads, 1, self.head_dim))?
            .contiguous()?;
        let mut out = Vec::with_capacity(2);
        for (buffer, new) in [(&self.k[layer], k), (&self.v[layer], v)] {
            let rows = buffer.narrow(0, 0, n)?;
            rows.scatter_set(&at, &new.to_dtype(self.dtype)?.contiguous()?, 2)?;
            out.push(rows.narrow(2, 0, span)?);
        }
        let v = out.pop().expect("two");
        let k = out.pop().expect("two");
        Ok((k, v))
    }

    /// Ends a step: every row holds one more position.
    pub(crate) fn end_step(&mut self) {
        for len in &mut self.lens {
            *len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen3-8B's shape in bf16: 36 layers of 8 key/value heads of 128.
    fn qwen3_8b() -> BatchKv {
        let step = StepMemory::of(4096, 12288, 32, 151_936, 2);
        BatchKv::new(36, 8, 128, DType::BF16, &Device::Cpu, step)
    }

    #[test]
    fn error_text_leaves_out_backtraces_and_keeps_context() {
        let oom = || candle_core::Error::Msg("DriverError(CUDA_ERROR_OUT_OF_MEMORY)".into());
        let traced = candle_core::Error::WithBacktrace {
            inner: Box::new(oom()),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert_eq!(error_text(&traced), "DriverError(CUDA_ERROR_OUT_OF_MEMORY)");
        assert!(is_out_of_memory(&traced));
        let framed = traced.context("the prefill");
        assert_eq!(
            error_text(&framed),
            "the prefill: DriverError(CUDA_ERROR_OUT_OF_MEMORY)"
        );
        assert!(!is_out_of_memory(&candle_core::Error::Msg(
            "shape mismatch".into()
        )));
        let kv = KvError::Device(framed);
        assert!(kv.is_memory());
        assert!(!kv.to_string().contains('\n'));
    }

    #[test]
    fn step_memory_grows_with_rows_and_positions() {
        let step = qwen3_8b().step;
        // Per row: (8 * 4096 + 4 * 12288) * 2 bytes of activations, 3 * 151,936 * 4 of
        // logits; per row and position: 32 heads * (3 * 4 + 2).
        assert_eq!(step.per_row, 163_840 + 1_823_232);
        assert_eq!(step.per_row_position, 448);
        assert_eq!(step.bytes(0, 0), STEP_FIXED);
        assert_eq!(
            step.bytes(3, 100),
            STEP_FIXED + 2 * (3 * step.per_row + 300 * step.per_row_position)
        );
        assert_eq!(step.bytes(usize::MAX, usize::MAX), usize::MAX);
    }

    /// The batch as if it held `lens` in buffers of `rows` rows of `capacity` positions
    /// (no buffers are made: the shapes are what is checked).
    fn holding(mut kv: BatchKv, rows: usize, capacity: usize, lens: &[usize]) -> BatchKv {
        kv.rows = rows;
        kv.capacity = capacity;
        kv.lens = lens.to_vec();
        kv
    }

    #[test]
    fn buffers_double_within_the_budget_and_else_take_just_what_is_asked() {
        let kv = qwen3_8b();
        let budget = kv.bytes_of(8, 2048);
        let kv = kv.with_budget(Some(budget));
        // The engine's sizing: 8 rows of 2,048 positions fit the budget, 16 do not.
        assert_eq!(kv.fitting_rows(usize::MAX, 2048), 8);
        // Within the budget, a short dimension doubles and the other stays.
        let kv = holding(kv, 4, 1024, &[1024, 10, 10, 10]);
        assert_eq!(kv.shape_for(4, 1025).unwrap(), Some((4, 2048)));
        assert_eq!(kv.shape_for(5, 1024).unwrap(), Some((8, 1024)));
        assert_eq!(kv.shape_for(4, 1024).unwrap(), None);
        // Six rows, one past 2,048 positions: 8 rows of 4,096 pass the budget, and so
        // do just the six rows asked (8, a power of two)...
        let kv = holding(kv, 8, 2048, &[2048, 900, 900, 900, 900, 900]);
        let e = kv.shape_for(6, 2049).unwrap_err();
        assert!(e.is_memory(), "{e}");
        assert!(e.to_string().contains("CREDENCE_KV_MEMORY_GIB"), "{e}");
        assert!(!kv.fits(6, 2049));
        // ... while four rows of 4,096 fit: the buffers take that shape, fewer rows.
        let kv = holding(kv, 8, 2048, &[2048, 900, 900, 900]);
        assert_eq!(kv.shape_for(4, 2049).unwrap(), Some((4, 4096)));
        assert!(kv.fits(4, 2049));
        // Once the long one has left, a fifth row takes eight rows of what is in use.
        let kv = holding(kv, 4, 4096, &[1000, 1000, 1000, 1000]);
        assert_eq!(kv.shape_for(5, 1001).unwrap(), Some((8, 1024)));
        // A row asked longer than those held sets the capacity.
        assert_eq!(kv.shape_for(5, 1500).unwrap(), Some((8, 2048)));
        // Without a budget (a CPU, which cannot say what is free) nothing bounds them.
        let kv = holding(qwen3_8b(), 8, 2048, &[2048; 8]);
        assert_eq!(kv.shape_for(8, 2049).unwrap(), Some((8, 4096)));
    }

    #[test]
    fn fitting_rows_is_the_largest_doubling_that_fits_nine_tenths_of_free() {
        let kv = qwen3_8b();
        // 2,048 positions: 301,989,888 bytes of keys and values a row, 5,809,152 of step
        // headroom. Nine tenths of 20 GiB hold 32 rows (10.1e9 bytes), not 64 (20.0e9).
        assert_eq!(kv.bytes_per_position(), 147_456);
        assert_eq!(kv.fitting_rows(20 << 30, 2048), 32);
        // Positions round up to the buffer's doubling: 1,500 take 2,048.
        assert_eq!(kv.fitting_rows(20 << 30, 1500), 32);
        // On an H200 after the weights (~125 GiB free): 256.
        assert_eq!(kv.fitting_rows(125 << 30, 2048), 256);
        // Where not even four fit, one (it fails alone if it cannot fit either).
        assert_eq!(kv.fitting_rows(1 << 30, 2048), 1);
        assert_eq!(kv.fitting_rows(0, 2048), 1);
        // Whatever the memory, the rows that fit are a doubling whose next does not fit.
        for gib in [2usize, 3, 5, 8, 13, 40, 79, 141] {
            let free = gib << 30;
            let rows = kv.fitting_rows(free, 5632);
            let bytes = |r: usize| r * 8192 * 147_456 + kv.step.bytes(r, 8192);
            let budget = free - free / 10;
            if rows > 1 {
                assert!(rows.is_power_of_two() && bytes(rows) <= budget, "{gib} GiB");
            }
            assert!(bytes(rows.max(4) * 2) > budget, "{gib} GiB: {rows}");
        }
    }
}
