//! Batched decode steps replayed as CUDA graphs, so that a step costs one launch instead
//! of the ~40 kernel launches a layer that candle's host work issues one by one (on an
//! H200 that host work, not the weights' bytes, set a 4-bit Gemma-3-12b's pace: ~0.28 ms
//! a layer).
//!
//! A graph replays fixed work on fixed buffers, so a step that can be captured reads
//! everything that changes from one step to the next from device buffers kept per shape
//! ([`StepInputs`]): the new tokens, each row's position, and the attention masks. Its
//! attention spans a fixed number of positions, the step's longest sequence rounded up to
//! [`SPAN_STEP`] (the mask hides the rest), so one graph serves many steps. A shape is
//! `(rows, span)`: its first step runs eagerly on the kept buffers (loading every kernel
//! and caching candle's small parameter uploads), its second is captured and launched,
//! and later ones only launch. The keys and values stay in [`super::batch_kv::BatchKv`]'s
//! buffers; when those grow (new addresses), its graphs are dropped.
//!
//! [`GraphMode::Eager`] runs the same kept buffers and spans without capturing, on any
//! device: the CPU's tests check it against the plain step, and on a GPU it is the
//! reference a captured run's token ids must equal. Capture is off by default
//! ([`GRAPHS_VAR`]) until a GPU's rehearsal has measured it.
//!
//! Two limits follow from candle's CUDA kernels. Its quantised products of more than
//! eight rows keep a scratch buffer that any longer prefill regrows (freeing the one a
//! graph would point at), so a GGUF model captures steps of at most eight rows; the
//! buffer of one to eight rows is grown to its largest size before the first capture.
//! And a capture that candle or the driver refuses turns capture off for the model, with
//! one warning: the steps then run eagerly.

use candle_core::{Device, Result, Tensor};

/// The environment variable that chooses how the batched decode runs on a GPU: `on`
/// (or `1`) captures its steps as CUDA graphs, `eager` runs the same fixed-shape steps
/// without capture (for comparison), `off` (or `0`, the default) the plain steps.
pub const GRAPHS_VAR: &str = "CREDENCE_CUDA_GRAPHS";

/// Positions a step's attention span is rounded up to.
pub const SPAN_STEP: usize = 256;

/// Shapes whose buffers (and graphs) are kept at once; the least recently used goes.
const KEPT_SHAPES: usize = 8;

/// Rows up to which candle's quantised products use the scratch buffer that stays put
/// once grown (its `MMVQ_MAX_BATCH`).
pub const QUANTISED_GRAPH_ROWS: usize = 8;

/// How batched decode steps run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphMode {
    /// Each step uploads its inputs and attends over its longest sequence.
    #[default]
    Off,
    /// Steps of kept shapes on kept input buffers, not captured.
    Eager,
    /// As `Eager`, and captured as CUDA graphs where the device is a GPU.
    Captured,
}

impl GraphMode {
    /// The mode [`GRAPHS_VAR`] asks for.
    pub fn from_env() -> std::result::Result<Self, String> {
        match std::env::var(GRAPHS_VAR) {
            Err(_) => Ok(GraphMode::Off),
            Ok(v) => v.parse(),
        }
    }

    /// Whether steps attend over rounded spans on kept buffers.
    pub fn keeps_shapes(self) -> bool {
        self != GraphMode::Off
    }
}

impl std::str::FromStr for GraphMode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "" | "0" | "off" => Ok(GraphMode::Off),
            "eager" => Ok(GraphMode::Eager),
            "1" | "on" => Ok(GraphMode::Captured),
            other => Err(format!(
                "{GRAPHS_VAR}: {other:?} is not one of on, 1, eager, off, 0"
            )),
        }
    }
}

/// The attention span of a step whose longest sequence reaches `total` positions in
/// buffers of `capacity`: `total` itself, or rounded up to [`SPAN_STEP`] for a kept shape.
pub fn span(mode: GraphMode, total: usize, capacity: usize) -> usize {
    if mode.keeps_shapes() {
        total.next_multiple_of(SPAN_STEP).min(capacity).max(total)
    } else {
        total
    }
}

/// What a step reads besides the weights and the keys and values, on its host side.
#[derive(Debug, Clone, PartialEq)]
pub struct StepValues {
    /// Each row's new token.
    pub ids: Vec<u32>,
    /// Each row's position for it (the row's length before the step).
    pub positions: Vec<u32>,
    /// Additive masks `[rows, span]`: full attention's, then the sliding window's where
    /// the model has one.
    pub masks: Vec<Vec<f32>>,
    /// Positions attended over.
    pub span: usize,
}

impl StepValues {
    /// The values of a step of `ids` for rows of `lens` positions each, attending over
    /// `span` positions; `window`: the sliding window, where the model has one.
    pub fn new(ids: &[u32], lens: &[usize], span: usize, window: Option<usize>) -> Self {
        let mask = |window: Option<usize>| {
            let mut mask = vec![f32::NEG_INFINITY; lens.len() * span];
            for (i, &len) in lens.iter().enumerate() {
                // Row `i` sees positions `first..=len`.
                let seen = len + 1;
                let first = match window {
                    Some(w) if seen > w => seen - w,
                    _ => 0,
                };
                mask[i * span + first..i * span + seen].fill(0.0);
            }
            mask
        };
        let mut masks = vec![mask(None)];
        if window.is_some() {
            masks.push(mask(window));
        }
        StepValues {
            ids: ids.to_vec(),
            positions: lens.iter().map(|&l| l as u32).collect(),
            masks,
            span,
        }
    }

    /// Rows of the step.
    pub fn rows(&self) -> usize {
        self.ids.len()
    }
}

/// A step's inputs on the device.
pub struct StepInputs {
    /// `[rows, 1]` u32.
    pub ids: Tensor,
    /// `[rows]` u32.
    pub positions: Tensor,
    /// `[rows, 1, 1, span]` f32, as [`StepValues::masks`].
    pub masks: Vec<Tensor>,
    /// Positions attended over.
    pub span: usize,
}

impl StepInputs {
    /// Fresh device tensors of `values`.
    pub fn upload(values: &StepValues, device: &Device) -> Result<Self> {
        let n = values.rows();
        Ok(StepInputs {
            ids: Tensor::from_vec(values.ids.clone(), (n, 1), device)?,
            positions: Tensor::from_vec(values.positions.clone(), n, device)?,
            masks: values
                .masks
                .iter()
                .map(|m| Tensor::from_vec(m.clone(), (n, 1, 1, values.span), device))
                .collect::<Result<_>>()?,
            span: values.span,
        })
    }

    /// The mask of full attention (`false`) or of the sliding window (`true`).
    pub fn mask(&self, windowed: bool) -> &Tensor {
        &self.masks[usize::from(windowed).min(self.masks.len() - 1)]
    }

    /// Copies `values` (of the same shape) into these tensors, in place: a captured step
    /// reads them where it was captured.
    fn overwrite(&self, values: &StepValues) -> Result<()> {
        let fresh = StepInputs::upload(values, self.ids.device())?;
        self.ids.slice_set(&fresh.ids, 0, 0)?;
        self.positions.slice_set(&fresh.positions, 0, 0)?;
        for (kept, new) in self.masks.iter().zip(&fresh.masks) {
            kept.slice_set(new, 0, 0)?;
        }
        Ok(())
    }
}

/// A captured step: its graph and the logits buffer it writes.
#[cfg(feature = "cuda")]
struct Captured {
    graph: candle_core::cuda::cudarc::driver::CudaGraph,
    logits: Tensor,
}

/// A kept shape.
struct Kept {
    rows: usize,
    span: usize,
    inputs: StepInputs,
    /// When it last ran (the owner's step counter).
    last: u64,
    /// The logits' shape, once a step has run eagerly.
    #[cfg(feature = "cuda")]
    logits_dims: Option<Vec<usize>>,
    #[cfg(feature = "cuda")]
    captured: Option<Captured>,
}

/// The kept shapes of one batch's decode steps.
#[derive(Default)]
// Capture's own fields are read only where there is a GPU to capture on.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct StepGraphs {
    mode: GraphMode,
    /// Rows up to which a step may be captured.
    capture_rows: usize,
    kept: Vec<Kept>,
    steps: u64,
    /// Capture was refused once: steps run eagerly from then on.
    refused: bool,
    /// The workspaces a capture points into have their largest size.
    prepared: bool,
}

impl StepGraphs {
    /// Kept shapes for steps that run as `mode` says, captured up to `capture_rows` rows.
    pub fn new(mode: GraphMode, capture_rows: usize) -> Self {
        StepGraphs {
            mode,
            capture_rows,
            ..StepGraphs::default()
        }
    }

    /// How the steps run.
    pub fn mode(&self) -> GraphMode {
        self.mode
    }

    /// Forgets every kept shape and graph (the key and value buffers they point at were
    /// replaced).
    pub fn clear(&mut self) {
        self.kept.clear();
    }

    /// Shapes kept, and how many of them are captured.
    pub fn kept(&self) -> (usize, usize) {
        #[cfg(feature = "cuda")]
        let captured = self.kept.iter().filter(|k| k.captured.is_some()).count();
        #[cfg(not(feature = "cuda"))]
        let captured = 0;
        (self.kept.len(), captured)
    }

    /// Runs one step of `values` with `step` (the step's work on its inputs, giving the
    /// logits `[rows, vocab]` in f32); `prepare` grows what a capture points into before
    /// the first one.
    pub fn run(
        &mut self,
        values: &StepValues,
        device: &Device,
        step: impl Fn(&StepInputs) -> Result<Tensor>,
        prepare: impl FnOnce() -> Result<()>,
    ) -> Result<Tensor> {
        if !self.mode.keeps_shapes() {
            return step(&StepInputs::upload(values, device)?);
        }
        self.steps += 1;
        let (i, fresh) = self.kept_index(values, device)?;
        let kept = &mut self.kept[i];
        if !fresh {
            kept.inputs.overwrite(values)?;
        }
        kept.last = self.steps;
        #[cfg(feature = "cuda")]
        if let Device::Cuda(cuda) = device {
            let rows = self.kept[i].rows;
            if self.mode == GraphMode::Captured && !self.refused && rows <= self.capture_rows {
                return self.run_captured(i, cuda, step, prepare);
            }
        }
        let _ = prepare;
        step(&self.kept[i].inputs)
    }

    /// The index of the kept shape of `values`, and whether it was made now (with
    /// `values` in it; the least recently used shape dropped) for want of one.
    fn kept_index(&mut self, values: &StepValues, device: &Device) -> Result<(usize, bool)> {
        let (rows, span) = (values.rows(), values.span);
        if let Some(i) = self
            .kept
            .iter()
            .position(|k| k.rows == rows && k.span == span)
        {
            return Ok((i, false));
        }
        if self.kept.len() >= KEPT_SHAPES {
            let oldest = (0..self.kept.len())
                .min_by_key(|&i| self.kept[i].last)
                .expect("kept shapes");
            self.kept.swap_remove(oldest);
        }
        self.kept.push(Kept {
            rows,
            span,
            inputs: StepInputs::upload(values, device)?,
            last: 0,
            #[cfg(feature = "cuda")]
            logits_dims: None,
            #[cfg(feature = "cuda")]
            captured: None,
        });
        Ok((self.kept.len() - 1, true))
    }

    /// A step of kept shape `i` on a GPU: eager the first time (loading its kernels, with
    /// candle's parameter uploads cached for the capture), captured and launched the
    /// second, launched from then on.
    #[cfg(feature = "cuda")]
    fn run_captured(
        &mut self,
        i: usize,
        cuda: &candle_core::CudaDevice,
        step: impl Fn(&StepInputs) -> Result<Tensor>,
        prepare: impl FnOnce() -> Result<()>,
    ) -> Result<Tensor> {
        if let Some(c) = &self.kept[i].captured {
            c.graph
                .launch()
                .map_err(|e| candle_core::Error::Msg(format!("CUDA graph launch: {e}")))?;
            return Ok(c.logits.clone());
        }
        let _cache = cuda.enable_cuda_graph_htod_cache();
        let Some(dims) = self.kept[i].logits_dims.clone() else {
            let logits = step(&self.kept[i].inputs)?;
            self.kept[i].logits_dims = Some(logits.dims().to_vec());
            return Ok(logits);
        };
        if !self.prepared {
            prepare()?;
            self.prepared = true;
        }
        // The logits buffer outlives the capture; everything the step allocates is freed
        // inside it, so the graph can run again.
        let logits = Tensor::zeros(
            dims,
            candle_core::DType::F32,
            self.kept[i].inputs.ids.device(),
        )?;
        match capture(cuda, || {
            let l = step(&self.kept[i].inputs)?;
            logits.slice_set(&l.contiguous()?, 0, 0)
        }) {
            Ok(graph) => {
                graph
                    .launch()
                    .map_err(|e| candle_core::Error::Msg(format!("CUDA graph launch: {e}")))?;
                self.kept[i].captured = Some(Captured {
                    graph,
                    logits: logits.clone(),
                });
                Ok(logits)
            }
            Err(why) => {
                let kept = &self.kept[i];
                tracing::warn!(
                    rows = kept.rows,
                    span = kept.span,
                    "CUDA graph capture refused, decode steps run eagerly from now on: {why}"
                );
                self.refused = true;
                step(&self.kept[i].inputs)
            }
        }
    }
}

/// Records `work` on the device's stream as a graph, or says why it could not.
#[cfg(feature = "cuda")]
fn capture(
    cuda: &candle_core::CudaDevice,
    work: impl FnOnce() -> Result<()>,
) -> std::result::Result<candle_core::cuda::cudarc::driver::CudaGraph, String> {
    use candle_core::cuda::cudarc::driver::sys;
    let stream = cuda.cuda_stream();
    stream
        .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(|e| format!("beginning the capture: {e}"))?;
    let recorded = work();
    // Ended whatever happened, so that the stream leaves capture mode.
    let graph = stream.end_capture(
        sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
    );
    recorded.map_err(|e| super::batch_kv::error_text(&e))?;
    graph
        .map_err(|e| format!("ending the capture: {e}"))?
        .ok_or_else(|| "the capture recorded nothing".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::DType;

    #[test]
    fn the_mode_parses_from_its_words_and_names_the_variable_otherwise() {
        assert_eq!("on".parse(), Ok(GraphMode::Captured));
        assert_eq!("1".parse(), Ok(GraphMode::Captured));
        assert_eq!("eager".parse(), Ok(GraphMode::Eager));
        assert_eq!("off".parse(), Ok(GraphMode::Off));
        assert_eq!("0".parse(), Ok(GraphMode::Off));
        let e = "yes".parse::<GraphMode>().unwrap_err();
        assert!(e.contains(GRAPHS_VAR) && e.contains("\"yes\""), "{e}");
    }

    #[test]
    fn a_kept_shape_spans_whole_steps_within_the_capacity() {
        assert_eq!(span(GraphMode::Off, 300, 512), 300);
        assert_eq!(span(GraphMode::Eager, 300, 512), 512);
        assert_eq!(span(GraphMode::Captured, 256, 256), 256);
        assert_eq!(span(GraphMode::Captured, 257, 1024), 512);
        // Never past the buffers, never short of the step.
        assert_eq!(span(GraphMode::Eager, 300, 384), 384);
    }

    #[test]
    fn masks_show_each_row_its_own_positions_and_window() {
        let v = StepValues::new(&[7, 8], &[2, 4], 8, Some(3));
        let seen = |m: &[f32]| -> Vec<usize> { (0..m.len()).filter(|&i| m[i] == 0.0).collect() };
        assert_eq!(v.positions, vec![2, 4]);
        assert_eq!(seen(&v.masks[0][..8]), vec![0, 1, 2]);
        assert_eq!(seen(&v.masks[0][8..]), vec![0, 1, 2, 3, 4]);
        assert_eq!(seen(&v.masks[1][..8]), vec![0, 1, 2]);
        assert_eq!(seen(&v.masks[1][8..]), vec![2, 3, 4]);
        assert_eq!(StepValues::new(&[1], &[0], 4, None).masks.len(), 1);
    }

    #[test]
    fn steps_of_one_shape_reuse_its_buffers_and_the_oldest_shape_goes() {
        let device = Device::Cpu;
        let mut graphs = StepGraphs::new(GraphMode::Eager, usize::MAX);
        // The step echoes its inputs, so a stale buffer would show.
        let echo = |i: &StepInputs| {
            let ids = i.ids.to_dtype(DType::F32)?.flatten_all()?;
            let pos = i.positions.to_dtype(DType::F32)?;
            Tensor::stack(&[ids, pos], 1)
        };
        for (ids, lens) in [([3u32, 4], [10usize, 20]), ([5, 6], [11, 21])] {
            let v = StepValues::new(&ids, &lens, 256, None);
            let out = graphs.run(&v, &device, echo, || Ok(())).unwrap();
            let want: Vec<Vec<f32>> = (0..2)
                .map(|r| vec![ids[r] as f32, lens[r] as f32])
                .collect();
            assert_eq!(out.to_vec2::<f32>().unwrap(), want);
        }
        assert_eq!(graphs.kept(), (1, 0));
        for rows in 1..=KEPT_SHAPES + 1 {
            let v = StepValues::new(&vec![1; rows], &vec![1; rows], 256, None);
            graphs.run(&v, &device, echo, || Ok(())).unwrap();
        }
        assert_eq!(graphs.kept().0, KEPT_SHAPES);
        // Rows 1 ran before rows 2 ran again: the oldest when rows 9 came, it went.
        assert!(graphs.kept.iter().all(|k| k.rows != 1));
        graphs.clear();
        assert_eq!(graphs.kept(), (0, 0));
    }
}
