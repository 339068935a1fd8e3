//! LayerNorm and GeLU with 16-bit operands. On the kernel devices bf16 operands go straight to
//! the bf16 kernels (f32 math, one rounding per stored value: the bits the f32 kernels and a
//! narrowing conversion store, and the `Cpu`'s rounding, [`super::convert::host_narrow`]).
//! f16 operands, operands of mixed types and rows too wide for the row kernel run the f32
//! kernels between conversions (no f16 variants of these kernels are built).

use trident_kernels::layernorm_row::MAX_C;
use trident_runtime::{Device, View, ViewMut};

use super::super::{check, OpsContext, Result};
use super::convert::{into_f32, wide};
use super::{Operand, OperandMut};
use crate::launch::{self, HalfFormat};

/// Whether the op runs on the kernels: `Emu` or `Cuda`.
fn on_kernels(ctx: &OpsContext) -> bool {
    matches!(ctx.device(), Device::Emu | Device::Cuda(_))
}

/// The f32 op's checks of an elementwise map: `out` (name, length, device) and `inp` hold
/// `n` elements on the context's device.
fn check_map(
    ctx: &OpsContext,
    op: &'static str,
    out: (&'static str, usize, &Device),
    inp: View<u16>,
    n: usize,
) -> Result<()> {
    check::len(op, out.0, out.1, n, &format!("[n={n}]"))?;
    check::len(op, "inp", inp.len(), n, &format!("[n={n}]"))?;
    check::devices(ctx, op, &[(out.0, out.2), ("inp", inp.device())])
}

/// LayerNorm ([`super::super::layernorm_forward`]) of f32 rows into `out`, f32 or 16-bit; the
/// statistics stay f32. A bf16 `out` on the kernel devices is written by the row kernel's
/// bf16-output variant (`c <= 2048`); otherwise a 16-bit `out` is narrowed from an f32 buffer.
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
    match out {
        OperandMut::Half(o, HalfFormat::Bf16) if on_kernels(ctx) && c <= MAX_C as usize => {
            let out = (o.len(), o.device());
            super::super::layernorm::check_forward(ctx, out, mean, rstd, inp, weight, bias, n, c)?;
            let k = ctx.kernels()?;
            Ok(launch::layernorm_forward_row_f32_bf16(k, o, mean, rstd, &inp, &weight, &bias, n, c)?)
        }
        _ => into_f32(ctx, out, false, |o| {
            super::super::layernorm_forward(ctx, o, mean, rstd, inp, weight, bias, n, c)
        }),
    }
}

/// GeLU ([`super::super::gelu_forward`]) of `inp` into `out`, either f32 or 16-bit. Both bf16
/// on the kernel devices: the bf16 kernel; other 16-bit operands are converted around the f32
/// kernel.
pub fn gelu_forward(ctx: &OpsContext, out: &mut OperandMut, inp: Operand, n: usize) -> Result<()> {
    match (&mut *out, inp) {
        (OperandMut::Half(o, HalfFormat::Bf16), Operand::Half(x, HalfFormat::Bf16)) if on_kernels(ctx) => {
            check_map(ctx, "gelu_forward", ("out", o.len(), o.device()), x, n)?;
            Ok(launch::gelu_forward_bf16(ctx.kernels()?, o, &x)?)
        }
        _ => {
            let x = wide(ctx, inp)?;
            into_f32(ctx, out, false, |o| super::super::gelu_forward(ctx, o, x.view()?, n))
        }
    }
}

/// GeLU's backward in place ([`super::super::gelu_backward`]): `d` holds the output's gradient on
/// entry and the input's on return; `inp` is the forward's input. Both bf16 on the kernel
/// devices: the bf16 kernel in place; other 16-bit operands are converted around the f32
/// kernel.
pub fn gelu_backward(ctx: &OpsContext, d: &mut OperandMut, inp: Operand, n: usize) -> Result<()> {
    match (&mut *d, inp) {
        (OperandMut::Half(g, HalfFormat::Bf16), Operand::Half(x, HalfFormat::Bf16)) if on_kernels(ctx) => {
            check_map(ctx, "gelu_backward", ("d", g.len(), g.device()), x, n)?;
            Ok(launch::gelu_backward_bf16_inplace(ctx.kernels()?, g, &x)?)
        }
        _ => {
            let x = wide(ctx, inp)?;
            into_f32(ctx, d, true, |d| super::super::gelu_backward(ctx, d, x.view()?, n))
        }
    }
}
