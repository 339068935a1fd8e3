//! LayerNorm and GeLU with 16-bit operands: the f32 kernels between conversions, until 16-bit
//! variants of these memory-bound kernels are built.

use trident_runtime::{View, ViewMut};

use super::super::{OpsContext, Result};
use super::convert::{into_f32, wide};
use super::{Operand, OperandMut};

/// LayerNorm ([`super::super::layernorm_forward`]) of f32 rows into `out`, f32 or 16-bit; the
/// statistics stay f32. A 16-bit `out` is narrowed from an f32 buffer (a LayerNorm kernel with
/// a 16-bit output, fusing that conversion, is not built yet).
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward(
    ctx: &OpsContext,
    out: &mut OperandMut,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    into_f32(ctx, out, false, |o| {
        super::super::layernorm_forward(ctx, o, mean, rstd, inp, weight, bias, n, c)
    })
}

/// GeLU ([`super::super::gelu_forward`]) of `inp` into `out`, either f32 or 16-bit. 16-bit operands
/// are converted around the f32 kernel (a 16-bit GeLU kernel is not built yet).
pub fn gelu_forward(ctx: &OpsContext, out: &mut OperandMut, inp: Operand, n: usize) -> Result<()> {
    let x = wide(ctx, inp)?;
    into_f32(ctx, out, false, |o| super::super::gelu_forward(ctx, o, x.view()?, n))
}

/// GeLU's backward in place ([`super::super::gelu_backward`]): `d` holds the output's gradient on
/// entry and the input's on return; `inp` is the forward's input. 16-bit operands are
/// converted around the f32 kernel (a 16-bit GeLU kernel is not built yet).
pub fn gelu_backward(ctx: &OpsContext, d: &mut OperandMut, inp: Operand, n: usize) -> Result<()> {
    let x = wide(ctx, inp)?;
    into_f32(ctx, d, true, |d| super::super::gelu_backward(ctx, d, x.view()?, n))
}
