//! Tensor ops on every device: checked kernel launches, the PTX module, the CPU implementations.
//!
//! - [`kernels`]: the PTX and host entries of every kernel of `kernels/`, as the runtime loads
//!   them.
//! - [`launch`]: a safe, checked launch wrapper per kernel.
//! - The ops at the crate root: the GPT trainer's tensor ops, one function each, on any device.
//!
//! The crate depends on the runtime and the kernels only (the `trident` crate, with the model
//! and the trainer, re-exports it). Its feature `cuda`, on by default, builds the kernels' PTX
//! with the pinned nightly; without it `Cpu` and `Emu` run every op and `Cuda` reports
//! [`launch::LaunchError::NoPtx`]. The argument checks of the launch wrappers
//! ([`launch::Check`], [`launch::Kernels::check_device`]) are public for wrappers of one's own
//! kernels.
//!
//! Every op takes an [`OpsContext`], its tensors as [`View`](trident_runtime::View)s (inputs)
//! and [`ViewMut`](trident_runtime::ViewMut)s (outputs), and the sizes that give them shape.
//! It checks lengths and devices, then runs the CPU implementation ([`cpu`]) on `Cpu` or the
//! launch wrapper of its kernel family ([`launch`]) on `Emu` and `Cuda`. Semantics follow
//! llm.c; each op's doc says which outputs are overwritten and which accumulated.
//!
//! Layouts: activations are row-major `[B, T, C]`; weights `[out, in]`; attention's `qkv` is
//! `[B, T, 3C]` and its saved log-sum-exp `[B, NH, T]`.

pub mod kernels;
pub mod launch;

mod attention;
mod check;
mod context;
pub mod cpu;
mod cross_entropy;
mod elementwise;
mod encoder;
mod error;
mod layernorm;
mod matmul;
pub mod mixed;
mod multi_tensor;
mod optimizer;
mod precision;

pub use attention::{attention_backward, attention_forward};
pub use context::OpsContext;
pub use cross_entropy::softmax_cross_entropy;
pub use elementwise::{accumulate, gelu_backward, gelu_forward, residual_forward};
pub use encoder::{encoder_backward, encoder_forward};
pub use error::{OpsError, Result};
pub use layernorm::{layernorm_backward, layernorm_forward};
pub use matmul::{matmul_backward, matmul_forward, matmul_residual_forward};
pub use mixed::{Operand, OperandMut};
pub use multi_tensor::{adamw_update_pieces, sum_of_squares_ranges};
pub use optimizer::{adamw_update, sum_of_squares, AdamWParams};
pub use precision::{round_to, HalfFormat};

#[cfg(test)]
mod tests;
