//! Causal self-attention over f32 or 16-bit operands: flash attention for bf16 with head size
//! 64 or 128 on a kernel device, else the f32 kernel.

use trident_runtime::{Buffer, Device, View, ViewMut};

use super::super::{check, OpsContext, Result};
use super::convert::{into_f32, into_half, narrow, wide};
use super::{Operand, OperandMut};
use crate::launch::{self, FlashAttentionShape, HalfFormat, FLASH_HEAD_SIZES};

/// Why attention over heads of `hs` channels stored in `format` (`None`: f32) on `device` does
/// not run on flash attention, or `None` when it does (given 16-byte aligned buffers, as the
/// model's are): flash attention is built for bf16 and head sizes 64 and 128 on the kernel
/// devices; fp16, other head sizes, fp32 and the `Cpu` take the f32 attention kernel.
pub fn flash_attention_refusal(device: &Device, format: Option<HalfFormat>, hs: usize) -> Option<String> {
    match (device, format) {
        (Device::Cpu, _) => Some("the cpu computes attention in f32".into()),
        (_, None) => Some("fp32 runs the f32 attention kernel".into()),
        (_, Some(HalfFormat::F16)) => {
            Some("flash attention is built for bf16 only; fp16 widens to the f32 kernel".into())
        }
        (_, Some(HalfFormat::Bf16)) if !FLASH_HEAD_SIZES.contains(&hs) => {
            Some(format!("head size {hs} is not one of flash attention's {FLASH_HEAD_SIZES:?}"))
        }
        _ => None,
    }
}

/// Whether attention of `qkv` runs on flash attention ([`flash_attention_refusal`] has no
/// objection and `qkv` is 16-byte aligned). The backward takes the same path as the forward
/// (their log-sum-exps are each other's).
fn flash_attention(ctx: &OpsContext, qkv: &Operand, c: usize, nh: usize) -> bool {
    let hs = c.checked_div(nh).unwrap_or(0);
    nh * hs == c
        && flash_attention_refusal(ctx.device(), qkv.format(), hs).is_none()
        && matches!(qkv, Operand::Half(v, _) if v.addr() % 16 == 0)
}

/// Causal self-attention ([`super::super::attention_forward`]) of `qkv` `[b, t, 3c]` into `out`
/// `[b, t, c]`, f32 or 16-bit, and the f32 log-sum-exp `lse` `[b, nh, t]`; on flash
/// attention where [`flash_attention_refusal`] has no objection.
#[allow(clippy::too_many_arguments)]
pub fn attention_forward(
    ctx: &OpsContext,
    out: &mut OperandMut,
    lse: &mut ViewMut<f32>,
    qkv: Operand,
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) -> Result<()> {
    const OP: &str = "attention_forward";
    if let (OperandMut::F32(o), Some(x)) = (&mut *out, qkv.as_f32()) {
        return super::super::attention_forward(ctx, o, lse, x, b, t, c, nh);
    }
    if flash_attention(ctx, &qkv, c, nh) {
        check::len(OP, "out", out.len(), b * t * c, &format!("[b={b}, t={t}, c={c}]"))?;
        let Operand::Half(x, _) = qkv else { unreachable!("flash attention reads bf16") };
        let s = FlashAttentionShape { b, t, nh, hs: c / nh };
        let k = ctx.kernels()?;
        return into_half(ctx, out, HalfFormat::Bf16, |o| {
            Ok(launch::flash_attention_forward(k, o, lse, &x, &s)?)
        });
    }
    let x = wide(ctx, qkv)?;
    into_f32(ctx, out, false, |o| super::super::attention_forward(ctx, o, lse, x.view()?, b, t, c, nh))
}

/// Gradient of [`attention_forward`]: `dqkv` (overwritten, f32 or 16-bit) from `dout`, the
/// forward's `qkv`, `out` and `lse`; on flash attention exactly when the forward was.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    ctx: &OpsContext,
    dqkv: &mut OperandMut,
    dout: Operand,
    qkv: Operand,
    out: Operand,
    lse: View<f32>,
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) -> Result<()> {
    const OP: &str = "attention_backward";
    if let (OperandMut::F32(d), Some(dy), Some(x), Some(y)) =
        (&mut *dqkv, dout.as_f32(), qkv.as_f32(), out.as_f32())
    {
        return super::super::attention_backward(ctx, d, dy, x, y, lse, b, t, c, nh);
    }
    if flash_attention(ctx, &qkv, c, nh) {
        let shape = format!("[b={b}, t={t}, c={c}]");
        check::len(OP, "dout", dout.len(), b * t * c, &shape)?;
        check::len(OP, "out", out.len(), b * t * c, &shape)?;
        check::len(OP, "dqkv", dqkv.len(), 3 * b * t * c, &shape)?;
        let Operand::Half(x, _) = qkv else { unreachable!("flash attention reads bf16") };
        let s = FlashAttentionShape { b, t, nh, hs: c / nh };
        let k = ctx.kernels()?;
        let (dy, y) = (narrow(ctx, dout, HalfFormat::Bf16)?, narrow(ctx, out, HalfFormat::Bf16)?);
        let mut dsum = Buffer::<f32>::uninit(ctx.device(), s.stat_len())?;
        let mut dq_accum = Buffer::<f32>::uninit(ctx.device(), s.out_len())?;
        return into_half(ctx, dqkv, HalfFormat::Bf16, |d| {
            let (mut dsum, mut dq) = (dsum.view_mut(..)?, dq_accum.view_mut(..)?);
            let (dy, y) = (dy.view()?, y.view()?);
            Ok(launch::flash_attention_backward(k, d, &mut dsum, &mut dq, &dy, &x, &y, &lse, &s)?)
        });
    }
    let (dy, x, y) = (wide(ctx, dout)?, wide(ctx, qkv)?, wide(ctx, out)?);
    into_f32(ctx, dqkv, false, |d| {
        super::super::attention_backward(ctx, d, dy.view()?, x.view()?, y.view()?, lse, b, t, c, nh)
    })
}
