//! Tensor ops of the GPT trainer, one function each, on any device.
//!
//! Every op takes an [`OpsContext`], its tensors as [`View`](trident_runtime::View)s (inputs)
//! and [`ViewMut`](trident_runtime::ViewMut)s (outputs), and the sizes that give them shape.
//! It checks lengths and devices, then runs the CPU implementation ([`cpu`]) on `Cpu` or the
//! kernel launch ([`gpu`]) on `Emu` and `Cuda`. Semantics follow llm.c; each op's doc says
//! which outputs are overwritten and which accumulated.
//!
//! Layouts: activations are row-major `[B, T, C]`; weights `[out, in]`; attention's `qkv` is
//! `[B, T, 3C]` and its saved log-sum-exp `[B, NH, T]`.

mod attention;
mod check;
mod context;
pub mod cpu;
mod cross_entropy;
mod elementwise;
mod encoder;
mod error;
pub mod gpu;
mod layernorm;
mod matmul;
pub mod mixed;
mod optimizer;
mod precision;

pub use attention::{attention_backward, attention_forward};
pub use context::OpsContext;
pub use cross_entropy::softmax_cross_entropy;
pub use elementwise::{gelu_backward, gelu_forward, residual_forward};
pub use encoder::{encoder_backward, encoder_forward};
pub use error::{OpsError, Result};
pub use layernorm::{layernorm_backward, layernorm_forward};
pub use matmul::{matmul_backward, matmul_forward, matmul_residual_forward};
pub use mixed::{Operand, OperandMut};
pub use optimizer::{adamw_update, sum_of_squares, AdamWParams};
pub use precision::{round_to, HalfFormat};

#[cfg(test)]
mod tests;
