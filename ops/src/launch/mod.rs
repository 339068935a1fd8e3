//! Safe, typed launch wrappers: one per kernel of `kernels/`.
//!
//! Each wrapper checks lengths, shapes, strides and devices against what the kernel will touch,
//! then launches it on the device of its [`Kernels`], queued on their stream (the device's
//! default stream, or one named with the unsafe [`Kernels::on_stream`]); the runtime checks
//! the arguments' types against the kernel's parameters once more. These are the only callers
//! of the kernels; the ops of the trainer call these wrappers on `Emu` and `Cuda`, on the
//! stream of their context.

mod attention;
mod check;
mod collective;
mod convert;
mod crossentropy_v4;
mod elementwise;
mod encoder;
mod error;
mod flash_attention;
mod gemm;
mod gemm_hopper;
mod gemm_tc;
mod kernels;
mod layernorm;
mod layernorm_row;
mod linear;
mod multi_tensor;
mod optim;
mod precision;
mod vectorized;

pub use attention::{attention_backward, attention_forward, AttentionShape};
pub use check::Check;
pub use collective::{
    all_gather, all_reduce, all_reduce_table, broadcast, choose_all_reduce, choose_all_reduce_in, flag_words,
    parse_all_reduce_table, recv, reduce_scatter, segment, send, status_words, timeout, Algorithm,
    AllReduceCutoffs, CollectiveElement, Family, Peers, ALL_REDUCE_TABLE_TSV, COLLECTIVE_THREADS,
    TABLE_WORDS_PER_RANK,
};
pub use convert::{bias_backward, bias_backward_half, narrow, widen};
pub use crossentropy_v4::{crossentropy_v4, crossentropy_v4_half};
pub use elementwise::{add, add_assign};
pub use encoder::{encoder_backward, encoder_forward, EncoderShape};
pub use error::LaunchError;
pub use flash_attention::{
    flash_attention_backward, flash_attention_backward_with, flash_attention_forward, FlashAttentionShape,
    FLASH_HEAD_SIZES,
};
pub use gemm::{gemm, Gemm, Transpose};
pub use gemm_hopper::{
    dispatches_to_gemm_hopper, gemm_hopper, gemm_hopper_supports, operand_map_fields, EMU_SMS,
    GEMM_HOPPER_VAR,
};
pub use gemm_tc::{
    gemm_tc, gemm_tc_with_workspace, plan_gemm_tc, GemmTc, GemmTcOutput, GemmTcPlan, GemmTcWorkspace,
};
pub use kernels::Kernels;
pub use layernorm::{layernorm_backward, layernorm_forward};
pub use layernorm_row::{
    layernorm_forward_row, layernorm_forward_row_bf16, layernorm_forward_row_bf16_kernel,
    layernorm_forward_row_f32_bf16, layernorm_residual_forward, layernorm_residual_forward_bf16,
};
pub use linear::{linear_backward, linear_forward};
pub use multi_tensor::{adamw_chunks, chunk_table, sum_squares_ranges, sum_squares_ranges_with, CHUNK};
pub use optim::{adamw, first_token_out_of_range, scale, sum_squares, AdamW};
pub use precision::{round_to, HalfFormat};
pub use vectorized::{
    add_assign_v4, add_bf16, add_v4, gelu_backward_bf16, gelu_backward_bf16_inplace, gelu_backward_v4,
    gelu_backward_v4_inplace, gelu_forward_bf16, gelu_forward_v4,
};

/// The launch wrappers' result type.
pub type Result<T, E = LaunchError> = std::result::Result<T, E>;

/// Threads per block of the elementwise kernels.
const ELEMENTWISE_THREADS: u32 = 256;
/// Enough blocks to fill any current GPU; the kernels' grid-stride loops cover the rest.
const MAX_BLOCKS: u32 = 65_535;

/// The product of `factors`, or [`LaunchError::TooLarge`] naming `what` where it overflows
/// `usize` (a wrapped product could pass a length check that the kernel's sizes do not).
fn product(what: &'static str, factors: &[usize]) -> Result<usize> {
    factors
        .iter()
        .try_fold(1usize, |p, &f| p.checked_mul(f))
        .ok_or(LaunchError::TooLarge { what, value: usize::MAX })
}

/// `n` as a `u32` kernel argument, or an error naming `what`.
fn to_u32(what: &'static str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| LaunchError::TooLarge { what, value: n })
}
