//! Ops whose tensors may be 16-bit (mixed precision): one function per op over [`Operand`]s, f32
//! or bf16/f16 buffers alike, on every device.
//!
//! - All operands f32: the f32 op of this module's parent, bit for bit (the reference path,
//!   fp32 training and the Cpu's mixed precision, which stores rounded values in f32 buffers).
//! - A 16-bit weight on a kernel device (`Emu`, `Cuda`): the linear layers run on the
//!   tensor-core GEMM (`launch::gemm_tc`, f32 accumulation, bias and residual in the epilogue,
//!   f32 or 16-bit output), attention on flash attention when its queries are bf16 with a head
//!   size of 64 or 128 (`launch::flash_attention_*`).
//! - Anything else (an f32 operand beside 16-bit ones, a kernel that is not built for a shape
//!   or format): the 16-bit operands are widened to f32 (exact), the f32 op runs, and a 16-bit
//!   output is narrowed (rounded to nearest, ties to even). Those are the values the Cpu stores,
//!   so every path agrees with it up to the order of f32 sums.
//!
//! Conversions allocate their f32 or 16-bit buffers per call (freed in stream order after the
//! work that reads them, like `gemm_tc`'s split-K workspace); they are transient and not in
//! any memory report.
//!
//! Files: [`Operand`] and [`OperandMut`] here; the conversions (`convert.rs`), the linear layers
//! (`linear.rs`), attention (`attention.rs`), LayerNorm and GeLU (`memory_bound.rs`), the
//! softmax cross-entropy (`cross_entropy.rs`).

use trident_runtime::{Device, View, ViewMut};

use crate::launch::HalfFormat;

mod attention;
mod convert;
mod cross_entropy;
mod linear;
mod memory_bound;

pub use attention::{attention_backward, attention_forward, flash_attention_refusal};
pub use convert::convert;
pub use cross_entropy::softmax_cross_entropy;
pub use linear::{linear_backward, linear_backward_gelu, linear_forward};
pub use memory_bound::{gelu_backward, gelu_forward, layernorm_forward};

/// An input of the mixed-precision ops: f32 values, or 16-bit ones (`format` bits as `u16`).
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// f32 values.
    F32(View<'a, f32>),
    /// bf16 or f16 values.
    Half(View<'a, u16>, HalfFormat),
}

/// An output of the mixed-precision ops: f32 or 16-bit, as [`Operand`].
#[derive(Debug)]
pub enum OperandMut<'a> {
    /// f32 values.
    F32(ViewMut<'a, f32>),
    /// bf16 or f16 values.
    Half(ViewMut<'a, u16>, HalfFormat),
}

impl<'a> Operand<'a> {
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            Operand::F32(v) => v.len(),
            Operand::Half(v, _) => v.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The 16-bit format, or `None` for f32.
    pub fn format(&self) -> Option<HalfFormat> {
        match self {
            Operand::F32(_) => None,
            Operand::Half(_, f) => Some(*f),
        }
    }

    /// The device the values live on.
    pub fn device(&self) -> &'a Device {
        match self {
            Operand::F32(v) => v.device(),
            Operand::Half(v, _) => v.device(),
        }
    }

    fn as_f32(&self) -> Option<View<'a, f32>> {
        match self {
            Operand::F32(v) => Some(*v),
            Operand::Half(..) => None,
        }
    }
}

impl OperandMut<'_> {
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            OperandMut::F32(v) => v.len(),
            OperandMut::Half(v, _) => v.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The 16-bit format, or `None` for f32.
    pub fn format(&self) -> Option<HalfFormat> {
        match self {
            OperandMut::F32(_) => None,
            OperandMut::Half(_, f) => Some(*f),
        }
    }

    /// The same elements, read-only.
    pub fn as_operand(&self) -> Operand<'_> {
        match self {
            OperandMut::F32(v) => Operand::F32(v.as_view()),
            OperandMut::Half(v, f) => Operand::Half(v.as_view(), *f),
        }
    }

    fn device(&self) -> &Device {
        match self {
            OperandMut::F32(v) => v.device(),
            OperandMut::Half(v, _) => v.device(),
        }
    }
}

#[cfg(test)]
mod tests;
