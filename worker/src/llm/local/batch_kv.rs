//! The keys and values of every sequence in flight in one buffer per layer, so that a
//! decode step attends for all of them in one batched product per layer instead of a
//! dozen kernel launches per sequence (the tensor path's decode, as CUDA runs it).
//!
//! Each layer holds `[rows, kv_heads, capacity, head_dim]`; the sequences in flight occupy
//! rows `0..n` in the engine's order (a sequence that leaves is replaced by the last one,
//! as `Vec::swap_remove` does). A step writes each sequence's new key and value at its own
//! position with one scatter per layer, and attends over the first `max(len) + 1`
//! positions of rows `0..n`, with a mask that hides each row's positions past its own
//! length (and before its sliding window). Rows and capacity grow by doubling; a
//! position past a row's length may hold an earlier occupant's (finite) values, which the
//! mask's zero weights cancel.

use super::model::SeqCache;
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
            KvError::Device(e) => write!(f, "{e}"),
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
            KvError::Memory { .. } => true,
            KvError::Device(e) => e.to_string().contains("OUT_OF_MEMORY"),
        }
    }
}

const GIB: f64 = (1u64 << 30) as f64;

/// Memory a decode step's activations and the allocator need beside the keys and values.
const HEADROOM: usize = 2 << 30;

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
}

/// Positions a buffer holds at first; it doubles as sequences grow.
const FIRST_CAPACITY: usize = 256;

impl BatchKv {
    /// An empty cache for `layers` blocks of `kv_heads` heads of `head_dim`.
    pub fn new(
        layers: usize,
        kv_heads: usize,
        head_dim: usize,
        dtype: DType,
        device: &Device,
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
        }
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

    /// Grows the buffers to at least `rows` rows of `capacity` positions (each doubling),
    /// where the device has the memory for it.
    fn reserve(&mut self, rows: usize, capacity: usize) -> std::result::Result<(), KvError> {
        let new_rows = if rows > self.rows {
            rows.max(self.rows * 2).max(4)
        } else {
            self.rows
        };
        let new_capacity = if capacity > self.capacity {
            capacity.max(self.capacity * 2).max(FIRST_CAPACITY)
        } else {
            self.capacity
        };
        if new_rows == self.rows && new_capacity == self.capacity {
            return Ok(());
        }
        let per_layer_position = self.bytes_per_position() / (2 * self.layers.max(1));
        let grown = new_rows * new_capacity * self.bytes_per_position();
        let held = self.rows * self.capacity * self.bytes_per_position();
        if let Some(free) = free_bytes(&self.device) {
            // Buffers are replaced one at a time: the old one of a layer lives beside its
            // new one until the copy is made.
            let needed = grown - held + self.rows * self.capacity * per_layer_position + HEADROOM;
            if needed > free {
                return Err(KvError::Memory { needed, free });
            }
        }
        let (h, d) = (self.kv_heads, self.head_dim);
        let zeros = |r: usize, c: usize| Tensor::zeros((r, h, c, d), self.dtype, &self.device);
        if self.k.is_empty() {
            for _ in 0..self.layers {
                self.k.push(zeros(new_rows, new_capacity)?);
                self.v.push(zeros(new_rows, new_capacity)?);
            }
        } else {
            for buffer in self.k.iter_mut().chain(self.v.iter_mut()) {
                // One dimension at a time: slice_set copies along one.
                if new_capacity > self.capacity {
                    let wider = zeros(self.rows, new_capacity)?;
                    wider.slice_set(buffer, 2, 0)?;
                    *buffer = wider;
                }
                if new_rows > self.rows {
                    let taller = zeros(new_rows, new_capacity)?;
                    taller.slice_set(buffer, 0, 0)?;
                    *buffer = taller;
                }
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

    /// The row holding the most positions.
    pub fn longest(&self) -> Option<usize> {
        (0..self.lens.len()).max_by_key(|&i| self.lens[i])
    }

    /// Prepares a decode step: room for one more position in every row. Returns the
    /// step's write positions (`[n, kv_heads, 1, head_dim]`, each row's length) and the
    /// number of positions the step attends over.
    pub(crate) fn begin_step(&mut self) -> Result<(Tensor, usize)> {
        let n = self.lens.len();
        let total = self.lens.iter().max().map_or(0, |m| m + 1);
        self.make_room()?;
        let per_row = self.kv_heads * self.head_dim;
        let positions: Vec<u32> = self
            .lens
            .iter()
            .flat_map(|&len| std::iter::repeat_n(len as u32, per_row))
            .collect();
        let positions = Tensor::from_vec(
            positions,
            (n, self.kv_heads, 1, self.head_dim),
            &self.device,
        )?;
        Ok((positions, total))
    }

    /// The additive mask `[n, 1, 1, total]` of a step: row `i` sees positions
    /// `first..=len_i` (`first` = the sliding window's start, else 0).
    pub(crate) fn mask(&self, total: usize, window: Option<usize>) -> Result<Tensor> {
        let n = self.lens.len();
        let mut mask = vec![f32::NEG_INFINITY; n * total];
        for (i, &len) in self.lens.iter().enumerate() {
            let seen = len + 1;
            let first = match window {
                Some(w) if seen > w => seen - w,
                _ => 0,
            };
            mask[i * total + first..i * total + seen].fill(0.0);
        }
        Tensor::from_vec(mask, (n, 1, 1, total), &self.device)
    }

    /// Writes a step's new keys and values (`[n, kv_heads, 1, head_dim]`) of `layer` and
    /// returns the layer's keys and values over the step's positions (`[n, kv_heads,
    /// total, head_dim]`, strided views of the buffers).
    pub(crate) fn write(
        &self,
        layer: usize,
        positions: &Tensor,
        k: &Tensor,
        v: &Tensor,
        total: usize,
    ) -> Result<(Tensor, Tensor)> {
        let n = self.lens.len();
        let mut out = Vec::with_capacity(2);
        for (buffer, new) in [(&self.k[layer], k), (&self.v[layer], v)] {
            let rows = buffer.narrow(0, 0, n)?;
            rows.scatter_set(positions, &new.to_dtype(self.dtype)?.contiguous()?, 2)?;
            out.push(rows.narrow(2, 0, total)?);
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
