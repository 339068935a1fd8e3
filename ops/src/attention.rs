use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, launch, OpsContext, OpsError, Result};
use crate::launch::AttentionShape;

/// Causal multi-head self-attention, flash style (no `T x T` matrix held).
/// `qkv` is `[b, t, 3c]` (Q, K, V; head `h` in channels `h*hs..(h+1)*hs` of each, `hs = c/nh`),
/// `out` is `[b, t, c]`, and `lse` (`[b, nh, t]`) receives each query row's log-sum-exp of its
/// scaled scores, from which the backward pass recomputes the probabilities.
#[allow(clippy::too_many_arguments)]
pub fn attention_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    lse: &mut ViewMut<f32>,
    qkv: View<f32>,
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) -> Result<()> {
    const OP: &str = "attention_forward";
    check_shapes(OP, b, t, c, nh)?;
    check::len(OP, "out", out.len(), b * t * c, &format!("[b={b}, t={t}, c={c}]"))?;
    check::len(OP, "lse", lse.len(), b * nh * t, &format!("[b={b}, nh={nh}, t={t}]"))?;
    check::len(OP, "qkv", qkv.len(), b * t * 3 * c, &format!("[b={b}, t={t}, 3c={}]", 3 * c))?;
    check::devices(ctx, OP, &[("out", out.device()), ("lse", lse.device()), ("qkv", qkv.device())])?;
    match ctx.device() {
        Device::Cpu => {
            let qkv = check::host(OP, qkv)?;
            cpu::attention_forward(check::host_mut(OP, out)?, check::host_mut(OP, lse)?, qkv, b, t, c, nh);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            Ok(launch::attention_forward(ctx.kernels()?, out, lse, &qkv, &attention_shape(b, t, c, nh)?)?)
        }
    }
}

/// Gradient of [`attention_forward`] with respect to `qkv`, written to `dqkv` (overwritten).
/// `out` and `lse` are what the forward pass produced; `dout` is the gradient of `out`.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    ctx: &OpsContext,
    dqkv: &mut ViewMut<f32>,
    dout: View<f32>,
    qkv: View<f32>,
    out: View<f32>,
    lse: View<f32>,
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) -> Result<()> {
    const OP: &str = "attention_backward";
    check_shapes(OP, b, t, c, nh)?;
    let qkv_shape = format!("[b={b}, t={t}, 3c={}]", 3 * c);
    check::len(OP, "dqkv", dqkv.len(), b * t * 3 * c, &qkv_shape)?;
    check::len(OP, "qkv", qkv.len(), b * t * 3 * c, &qkv_shape)?;
    check::len(OP, "dout", dout.len(), b * t * c, &format!("[b={b}, t={t}, c={c}]"))?;
    check::len(OP, "out", out.len(), b * t * c, &format!("[b={b}, t={t}, c={c}]"))?;
    check::len(OP, "lse", lse.len(), b * nh * t, &format!("[b={b}, nh={nh}, t={t}]"))?;
    let devices = [
        ("dqkv", dqkv.device()),
        ("dout", dout.device()),
        ("qkv", qkv.device()),
        ("out", out.device()),
        ("lse", lse.device()),
    ];
    check::devices(ctx, OP, &devices)?;
    match ctx.device() {
        Device::Cpu => {
            let (dy, x, y, l) =
                (check::host(OP, dout)?, check::host(OP, qkv)?, check::host(OP, out)?, check::host(OP, lse)?);
            cpu::attention_backward(check::host_mut(OP, dqkv)?, dy, x, y, l, b, t, c, nh);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            let s = attention_shape(b, t, c, nh)?;
            let mut scratch = ctx.scratch(b * nh * t)?;
            let mut dsum = scratch.view_mut(..b * nh * t)?;
            Ok(launch::attention_backward(ctx.kernels()?, dqkv, &mut dsum, &dout, &qkv, &out, &lse, &s)?)
        }
    }
}

fn check_shapes(op: &'static str, b: usize, t: usize, c: usize, nh: usize) -> Result<()> {
    check::that(op, nh > 0 && c % nh == 0, || format!("{nh} heads do not divide the hidden size {c}"))?;
    check::that(op, c / nh <= cpu::MAX_HEAD_DIM, || {
        format!("head size {} exceeds the supported {}", c / nh, cpu::MAX_HEAD_DIM)
    })?;
    check::that(op, b > 0 && t > 0 && c > 0, || format!("empty shape b={b}, t={t}, c={c}"))
}

/// The kernels' shape of `b` sequences of `t` tokens, `c` channels over `nh` heads; an error
/// where the heads do not divide the channels.
fn attention_shape(b: usize, t: usize, c: usize, nh: usize) -> Result<AttentionShape> {
    if nh == 0 || c % nh != 0 {
        return Err(OpsError::Shape {
            op: "attention",
            what: format!("{nh} heads do not divide {c} channels"),
        });
    }
    Ok(AttentionShape { b, t, nh, hs: c / nh })
}
