//! The ops on the kernel devices (`Emu`, `Cuda`): each function has the signature of its
//! dispatcher in `ops`, is reached after that dispatcher checked lengths and devices, and
//! launches the kernels of `kernels/` through their checked wrappers in [`crate::launch`].

#![allow(clippy::too_many_arguments)]

use trident_runtime::{View, ViewMut};

use super::{AdamWParams, OpsContext, OpsError, Result};
use crate::launch::{self, AdamW, AttentionShape, EncoderShape};

/// [`super::encoder_forward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn encoder_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    tokens: View<u32>,
    wte: View<f32>,
    wpe: View<f32>,
    b: usize,
    t: usize,
    c: usize,
) -> Result<()> {
    let s = EncoderShape { b, t, c, vp: wte.len() / c.max(1), max_t: wpe.len() / c.max(1) };
    device_tokens(ctx, "encoder_forward", &tokens, s.vp)?;
    Ok(launch::encoder_forward(ctx.kernels()?, out, &tokens, &wte, &wpe, &s)?)
}

/// Token ids that live on the device (`Cuda`) are range-checked by a kernel before a kernel
/// indexes with them, with the same error as the host check (`check::tokens`) gives for ids
/// the host can read.
pub fn device_tokens(ctx: &OpsContext, op: &'static str, tokens: &View<u32>, vocab: usize) -> Result<()> {
    if tokens.host().is_some() {
        return Ok(());
    }
    match launch::first_token_out_of_range(ctx.kernels()?, tokens, vocab)? {
        None => Ok(()),
        Some(position) => {
            let mut token = [0u32];
            tokens.sub(position..position + 1)?.copy_to_slice_on(ctx.stream(), &mut token)?;
            let token = token[0];
            Err(OpsError::TokenOutOfRange { op, token, position, vocab })
        }
    }
}

/// [`super::encoder_backward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn encoder_backward(
    ctx: &OpsContext,
    dwte: &mut ViewMut<f32>,
    dwpe: &mut ViewMut<f32>,
    dout: View<f32>,
    tokens: View<u32>,
    b: usize,
    t: usize,
    c: usize,
) -> Result<()> {
    let s = EncoderShape { b, t, c, vp: dwte.len() / c.max(1), max_t: dwpe.len() / c.max(1) };
    Ok(launch::encoder_backward(ctx.kernels()?, dwte, dwpe, &dout, &tokens, &s)?)
}

/// [`super::layernorm_forward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn layernorm_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    Ok(launch::layernorm_forward_row(ctx.kernels()?, out, mean, rstd, &inp, &weight, &bias, n, c)?)
}

/// [`super::layernorm_backward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn layernorm_backward(
    ctx: &OpsContext,
    dinp: &mut ViewMut<f32>,
    dweight: &mut ViewMut<f32>,
    dbias: &mut ViewMut<f32>,
    dout: View<f32>,
    inp: View<f32>,
    weight: View<f32>,
    mean: View<f32>,
    rstd: View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    let k = ctx.kernels()?;
    Ok(launch::layernorm_backward(k, dinp, dweight, dbias, &dout, &inp, &weight, &mean, &rstd, n, c)?)
}

/// [`super::matmul_forward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn matmul_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: Option<View<f32>>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    Ok(launch::linear_forward(ctx.kernels()?, out, &inp, &weight, bias.as_ref(), n, ic, oc)?)
}

/// [`super::matmul_residual_forward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn matmul_residual_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: Option<View<f32>>,
    residual: View<f32>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    let k = ctx.kernels()?;
    launch::linear_forward(k, out, &inp, &weight, bias.as_ref(), n, ic, oc)?;
    Ok(launch::add_assign_v4(k, out, &residual)?)
}

/// [`super::matmul_backward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn matmul_backward(
    ctx: &OpsContext,
    dinp: &mut ViewMut<f32>,
    dweight: &mut ViewMut<f32>,
    dbias: Option<&mut ViewMut<f32>>,
    dout: View<f32>,
    inp: View<f32>,
    weight: View<f32>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    Ok(launch::linear_backward(ctx.kernels()?, dinp, dweight, dbias, &dout, &inp, &weight, n, ic, oc)?)
}

fn attention_shape(b: usize, t: usize, c: usize, nh: usize) -> Result<AttentionShape> {
    if nh == 0 || c % nh != 0 {
        return Err(OpsError::Shape {
            op: "attention",
            what: format!("{nh} heads do not divide {c} channels"),
        });
    }
    Ok(AttentionShape { b, t, nh, hs: c / nh })
}

/// [`super::attention_forward`] on `Emu` and `Cuda`, through the checked launch wrappers.
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
    Ok(launch::attention_forward(ctx.kernels()?, out, lse, &qkv, &attention_shape(b, t, c, nh)?)?)
}

/// [`super::attention_backward`] on `Emu` and `Cuda`, through the checked launch wrappers.
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
    let s = attention_shape(b, t, c, nh)?;
    let mut scratch = ctx.scratch(b * nh * t)?;
    let mut dsum = scratch.view_mut(..b * nh * t)?;
    Ok(launch::attention_backward(ctx.kernels()?, dqkv, &mut dsum, &dout, &qkv, &out, &lse, &s)?)
}

/// [`super::gelu_forward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn gelu_forward(ctx: &OpsContext, out: &mut ViewMut<f32>, inp: View<f32>, _n: usize) -> Result<()> {
    Ok(launch::gelu_forward_v4(ctx.kernels()?, out, &inp)?)
}

/// [`super::gelu_backward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn gelu_backward(ctx: &OpsContext, d: &mut ViewMut<f32>, inp: View<f32>, _n: usize) -> Result<()> {
    Ok(launch::gelu_backward_v4_inplace(ctx.kernels()?, d, &inp)?)
}

/// [`super::residual_forward`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn residual_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    a: View<f32>,
    b: View<f32>,
    _n: usize,
) -> Result<()> {
    Ok(launch::add_v4(ctx.kernels()?, out, &a, &b)?)
}

/// [`super::softmax_cross_entropy`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn softmax_cross_entropy(
    ctx: &OpsContext,
    logits: &mut ViewMut<f32>,
    losses: &mut ViewMut<f32>,
    targets: View<u32>,
    n: usize,
    v: usize,
    vp: usize,
    dloss: Option<f32>,
) -> Result<()> {
    device_tokens(ctx, "softmax_cross_entropy", &targets, v)?;
    Ok(launch::crossentropy_v4(ctx.kernels()?, logits, losses, &targets, n, v, vp, dloss)?)
}

/// [`super::adamw_update`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn adamw_update(
    ctx: &OpsContext,
    params: &mut ViewMut<f32>,
    grads: View<f32>,
    m: &mut ViewMut<f32>,
    v: &mut ViewMut<f32>,
    hp: &AdamWParams,
) -> Result<()> {
    let step = u32::try_from(hp.step)
        .map_err(|_| OpsError::Shape { op: "adamw_update", what: format!("step {} exceeds u32", hp.step) })?;
    let h = AdamW {
        lr: hp.lr,
        beta1: hp.beta1,
        beta2: hp.beta2,
        eps: hp.eps,
        weight_decay: hp.weight_decay,
        step,
        grad_scale: hp.grad_scale,
    };
    Ok(launch::adamw(ctx.kernels()?, params, m, v, &grads, &h)?)
}

/// [`super::sum_of_squares`] on `Emu` and `Cuda`, through the checked launch wrappers.
pub fn sum_of_squares(ctx: &OpsContext, x: View<f32>) -> Result<f64> {
    let all = 0..x.len();
    Ok(launch::sum_squares_ranges(ctx.kernels()?, &x, &[all])?)
}

/// [`super::round_to`] on a GPU device.
pub fn round_to(ctx: &OpsContext, x: &mut ViewMut<f32>, format: crate::launch::HalfFormat) -> Result<()> {
    Ok(launch::round_to(ctx.kernels()?, x, format)?)
}
