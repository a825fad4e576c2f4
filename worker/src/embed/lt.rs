//! The encoder's dense layers on CUDA as one cuBLASLt call each: the product and its bias
//! in one kernel (cuBLASLt's bias epilogue), as PyTorch's `nn.Linear` runs, instead of
//! candle's product followed by a broadcast add, a second pass over every output whose
//! index arithmetic (a division and a remainder per dimension and element) costs more
//! than the bytes it moves. f32 runs in f32 arithmetic (`CUBLAS_COMPUTE_32F`, never
//! TF32, so the vectors stay the f32 ones); f16 and bf16 accumulate in f32.
//!
//! `CREDENCE_ENCODER_DENSE=candle` runs candle's product and add instead, for comparison
//! (the GPU rehearsal measures both).

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::cublaslt::{result as lt, sys};
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, DevicePtr, DevicePtrMut};
use candle_core::cuda_backend::{CudaDevice, DeviceId};
use candle_core::{CpuStorage, CudaStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

/// Whether the dense layers of an encoder on `device` run through [`linear`].
pub(super) fn fused_on(device: &candle_core::Device) -> bool {
    static CANDLE: OnceLock<bool> = OnceLock::new();
    device.is_cuda()
        && !*CANDLE
            .get_or_init(|| std::env::var("CREDENCE_ENCODER_DENSE").is_ok_and(|v| v == "candle"))
}

/// `x w + bias` for `x` `[m, k]`, `w` `[k, n]` (both contiguous) and `bias` `[n]`, all on
/// one CUDA device and of one dtype.
pub(super) fn linear(x: &Tensor, w: &Tensor, bias: &Tensor) -> Result<Tensor> {
    x.apply_op3_no_bwd(w, bias, &LinearBias)
}

struct LinearBias;

/// One device's cuBLASLt handle, its workspace, and the algorithm its heuristic chose for
/// each product shape.
struct Lt {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    algos: HashMap<(DType, usize, usize, usize), sys::cublasLtMatmulAlgo_t>,
}

// The handle is used under the mutex only, on the stream each call names.
unsafe impl Send for Lt {}

/// Workspace cuBLASLt may use (NVIDIA's recommendation for Hopper; ample for others).
const WORKSPACE: usize = 32 << 20;

fn handles() -> &'static Mutex<HashMap<DeviceId, Lt>> {
    static HANDLES: OnceLock<Mutex<HashMap<DeviceId, Lt>>> = OnceLock::new();
    HANDLES.get_or_init(Default::default)
}

fn cublas(e: impl std::fmt::Debug, what: &str) -> candle_core::Error {
    candle_core::Error::Cuda(format!("cuBLASLt {what}: {e:?}").into())
}

/// Owned cuBLASLt descriptors of one call, destroyed when dropped.
struct Descriptors {
    matmul: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        // SAFETY: each was created once by this call and is destroyed once here.
        unsafe {
            let _ = lt::destroy_matmul_desc(self.matmul);
            for layout in self.layouts {
                let _ = lt::destroy_matrix_layout(layout);
            }
        }
    }
}

impl CustomOp3 for LinearBias {
    fn name(&self) -> &'static str {
        "linear-bias-cublaslt"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        candle_core::bail!("the fused dense layer runs on CUDA only")
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        x_layout: &Layout,
        w: &CudaStorage,
        w_layout: &Layout,
        bias: &CudaStorage,
        bias_layout: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let (m, k) = x_layout.shape().dims2()?;
        let (k2, n) = w_layout.shape().dims2()?;
        let bias_n = bias_layout.shape().dims1()?;
        if k != k2 || bias_n != n {
            candle_core::bail!("fused dense layer: [{m}, {k}] x [{k2}, {n}] + [{bias_n}]");
        }
        if !(x_layout.is_contiguous() && w_layout.is_contiguous() && bias_layout.is_contiguous()) {
            candle_core::bail!("fused dense layer: inputs must be contiguous");
        }
        let dtype = x.dtype();
        if w.dtype() != dtype || bias.dtype() != dtype {
            candle_core::bail!("fused dense layer: mixed dtypes");
        }
        let device = x.device().clone();
        let operands = Operands {
            x: (x, x_layout),
            w: (w, w_layout),
            bias: (bias, bias_layout),
            dims: (m, k, n),
        };
        let out = match dtype {
            DType::F32 => run::<f32>(&device, &operands)?,
            DType::F16 => run::<half::f16>(&device, &operands)?,
            DType::BF16 => run::<half::bf16>(&device, &operands)?,
            other => candle_core::bail!("fused dense layer: no kernel for {other:?}"),
        };
        Ok((out, Shape::from((m, n))))
    }
}

/// cuBLASLt's name for a candle float type.
fn data_type(dtype: DType) -> sys::cudaDataType {
    match dtype {
        DType::F16 => sys::cudaDataType_t::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType_t::CUDA_R_16BF,
        _ => sys::cudaDataType_t::CUDA_R_32F,
    }
}

/// The elements of a storage its layout starts at.
fn view<'a, T: candle_core::cuda_backend::CudaDType>(
    (storage, layout): (&'a CudaStorage, &Layout),
) -> Result<CudaView<'a, T>> {
    Ok(storage.as_cuda_slice::<T>()?.slice(layout.start_offset()..))
}

/// A fused dense layer's inputs (storage and layout each) and its `(m, k, n)`.
struct Operands<'a> {
    x: (&'a CudaStorage, &'a Layout),
    w: (&'a CudaStorage, &'a Layout),
    bias: (&'a CudaStorage, &'a Layout),
    dims: (usize, usize, usize),
}

fn run<T>(device: &CudaDevice, operands: &Operands) -> Result<CudaStorage>
where
    T: candle_core::cuda_backend::CudaDType
        + candle_core::WithDType
        + candle_core::cuda_backend::cudarc::driver::DeviceRepr,
{
    let (m, k, n) = operands.dims;
    let stream = device.cuda_stream();
    let (x, w, bias) = (
        view::<T>(operands.x)?,
        view::<T>(operands.w)?,
        view::<T>(operands.bias)?,
    );
    // SAFETY: every element is written by the product below before it is read.
    let mut out = unsafe { device.alloc::<T>(m * n)? };
    let dtype = T::DTYPE;
    let kind = data_type(dtype);
    let mut guard = handles().lock().expect("cuBLASLt handles");
    let state = match guard.entry(device.id()) {
        Entry::Occupied(entry) => entry.into_mut(),
        Entry::Vacant(entry) => {
            let handle = lt::create_handle().map_err(|e| cublas(e, "handle"))?;
            // SAFETY: cuBLASLt only writes scratch data into it.
            let workspace =
                unsafe { stream.alloc::<u8>(WORKSPACE) }.map_err(|e| cublas(e, "workspace"))?;
            entry.insert(Lt {
                handle,
                workspace,
                algos: HashMap::new(),
            })
        }
    };
    // Row-major `out[m, n] = x[m, k] w[k, n]` is, column-major, `out^T[n, m] = w^T[n, k]
    // x^T[k, m]`: A is `w` read as n x k (leading dimension n), B is `x` as k x m
    // (leading dimension k), D is n x m (leading dimension n), and the bias runs along
    // D's n rows. No transposes.
    let compute = sys::cublasComputeType_t::CUBLAS_COMPUTE_32F;
    let matmul = lt::create_matmul_desc(compute, sys::cudaDataType_t::CUDA_R_32F)
        .map_err(|e| cublas(e, "descriptor"))?;
    let layout = |rows: usize, cols: usize| {
        lt::create_matrix_layout(kind, rows as u64, cols as u64, rows as i64)
            .map_err(|e| cublas(e, "layout"))
    };
    let descriptors = Descriptors {
        matmul,
        layouts: [layout(n, k)?, layout(k, m)?, layout(n, m)?],
    };
    let [a_layout, b_layout, d_layout] = descriptors.layouts;
    let (w_ptr, _w_sync) = w.device_ptr(&stream);
    let (x_ptr, _x_sync) = x.device_ptr(&stream);
    let (bias_ptr, _bias_sync) = bias.device_ptr(&stream);
    let (workspace_ptr, _workspace_sync) = state.workspace.device_ptr(&stream);
    let epilogue = sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS;
    // SAFETY: the descriptors live until the end of this function; the attribute
    // buffers are of the sizes cuBLASLt documents for them.
    unsafe {
        lt::set_matmul_desc_attribute(
            matmul,
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
            (&epilogue) as *const _ as *const c_void,
            std::mem::size_of_val(&epilogue),
        )
        .map_err(|e| cublas(e, "epilogue"))?;
        lt::set_matmul_desc_attribute(
            matmul,
            sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
            (&bias_ptr) as *const _ as *const c_void,
            std::mem::size_of_val(&bias_ptr),
        )
        .map_err(|e| cublas(e, "bias"))?;
    }
    let key = (dtype, m, k, n);
    let algo = match state.algos.get(&key) {
        Some(algo) => *algo,
        None => {
            let preference = lt::create_matmul_pref().map_err(|e| cublas(e, "preference"))?;
            let workspace_bytes = WORKSPACE as u64;
            // SAFETY: the preference is destroyed once, after its last use.
            let heuristic = unsafe {
                let chosen = lt::set_matmul_pref_attribute(
                    preference,
                    sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    (&workspace_bytes) as *const _ as *const c_void,
                    std::mem::size_of_val(&workspace_bytes),
                )
                .and_then(|()| {
                    lt::get_matmul_algo_heuristic(
                        state.handle,
                        matmul,
                        a_layout,
                        b_layout,
                        d_layout,
                        d_layout,
                        preference,
                    )
                });
                let _ = lt::destroy_matmul_pref(preference);
                chosen.map_err(|e| cublas(e, "heuristic"))?
            };
            state.algos.insert(key, heuristic.algo);
            heuristic.algo
        }
    };
    let (alpha, beta) = (1f32, 0f32);
    {
        let (out_ptr, _out_sync) = out.device_ptr_mut(&stream);
        // SAFETY: the pointers are live device buffers of the sizes the layouts describe
        // (x: m*k, w: k*n, bias: n, out: m*n elements of T), on `stream`.
        unsafe {
            lt::matmul(
                state.handle,
                matmul,
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                w_ptr as *const c_void,
                a_layout,
                x_ptr as *const c_void,
                b_layout,
                out_ptr as *const c_void,
                d_layout,
                out_ptr as *mut c_void,
                d_layout,
                &algo,
                workspace_ptr as *mut c_void,
                WORKSPACE,
                stream.cu_stream() as *mut _,
            )
            .map_err(|e| cublas(e, "matmul"))?;
        }
    }
    drop(descriptors);
    Ok(CudaStorage::wrap_cuda_slice(out, device.clone()))
}
