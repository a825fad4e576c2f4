//! Float kernels shared by the sentence encoder (`credence_worker::embed::native`) and the
//! spaCy port's dense layers (`credence_nlp`): [`gemm`], products against weights packed
//! once at load, with the kernel chosen at run time from what the CPU has, and [`math`],
//! the fused element-wise functions around them (GELU, layer norm, softmax).

pub mod gemm;
pub mod math;
