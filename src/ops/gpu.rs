//! The ops on the kernel devices (`Emu`, `Cuda`): each function has the signature of its
//! dispatcher in `ops` and is reached after that dispatcher checked lengths and devices.
//! Until the kernels are wired in, each reports that it is unsupported.

#![allow(clippy::too_many_arguments)]

use trident_runtime::{View, ViewMut};

use super::{AdamWParams, OpsContext, OpsError, Result};

fn unsupported<T>(ctx: &OpsContext, op: &'static str) -> Result<T> {
    Err(OpsError::Unsupported { op, device: ctx.device().kind() })
}

pub fn encoder_forward(
    ctx: &OpsContext,
    _out: &mut ViewMut<f32>,
    _tokens: View<u32>,
    _wte: View<f32>,
    _wpe: View<f32>,
    _b: usize,
    _t: usize,
    _c: usize,
) -> Result<()> {
    unsupported(ctx, "encoder_forward")
}

pub fn encoder_backward(
    ctx: &OpsContext,
    _dwte: &mut ViewMut<f32>,
    _dwpe: &mut ViewMut<f32>,
    _dout: View<f32>,
    _tokens: View<u32>,
    _b: usize,
    _t: usize,
    _c: usize,
) -> Result<()> {
    unsupported(ctx, "encoder_backward")
}

pub fn layernorm_forward(
    ctx: &OpsContext,
    _out: &mut ViewMut<f32>,
    _mean: &mut ViewMut<f32>,
    _rstd: &mut ViewMut<f32>,
    _inp: View<f32>,
    _weight: View<f32>,
    _bias: View<f32>,
    _n: usize,
    _c: usize,
) -> Result<()> {
    unsupported(ctx, "layernorm_forward")
}

pub fn layernorm_backward(
    ctx: &OpsContext,
    _dinp: &mut ViewMut<f32>,
    _dweight: &mut ViewMut<f32>,
    _dbias: &mut ViewMut<f32>,
    _dout: View<f32>,
    _inp: View<f32>,
    _weight: View<f32>,
    _mean: View<f32>,
    _rstd: View<f32>,
    _n: usize,
    _c: usize,
) -> Result<()> {
    unsupported(ctx, "layernorm_backward")
}

pub fn matmul_forward(
    ctx: &OpsContext,
    _out: &mut ViewMut<f32>,
    _inp: View<f32>,
    _weight: View<f32>,
    _bias: Option<View<f32>>,
    _n: usize,
    _ic: usize,
    _oc: usize,
) -> Result<()> {
    unsupported(ctx, "matmul_forward")
}

pub fn matmul_backward(
    ctx: &OpsContext,
    _dinp: &mut ViewMut<f32>,
    _dweight: &mut ViewMut<f32>,
    _dbias: Option<&mut ViewMut<f32>>,
    _dout: View<f32>,
    _inp: View<f32>,
    _weight: View<f32>,
    _n: usize,
    _ic: usize,
    _oc: usize,
) -> Result<()> {
    unsupported(ctx, "matmul_backward")
}

pub fn attention_forward(
    ctx: &OpsContext,
    _out: &mut ViewMut<f32>,
    _lse: &mut ViewMut<f32>,
    _qkv: View<f32>,
    _b: usize,
    _t: usize,
    _c: usize,
    _nh: usize,
) -> Result<()> {
    unsupported(ctx, "attention_forward")
}

pub fn attention_backward(
    ctx: &OpsContext,
    _dqkv: &mut ViewMut<f32>,
    _dout: View<f32>,
    _qkv: View<f32>,
    _out: View<f32>,
    _lse: View<f32>,
    _b: usize,
    _t: usize,
    _c: usize,
    _nh: usize,
) -> Result<()> {
    unsupported(ctx, "attention_backward")
}

pub fn gelu_forward(ctx: &OpsContext, _out: &mut ViewMut<f32>, _inp: View<f32>, _n: usize) -> Result<()> {
    unsupported(ctx, "gelu_forward")
}

pub fn gelu_backward(ctx: &OpsContext, _d: &mut ViewMut<f32>, _inp: View<f32>, _n: usize) -> Result<()> {
    unsupported(ctx, "gelu_backward")
}

pub fn residual_forward(
    ctx: &OpsContext,
    _out: &mut ViewMut<f32>,
    _a: View<f32>,
    _b: View<f32>,
    _n: usize,
) -> Result<()> {
    unsupported(ctx, "residual_forward")
}

pub fn softmax_cross_entropy(
    ctx: &OpsContext,
    _logits: &mut ViewMut<f32>,
    _losses: &mut ViewMut<f32>,
    _targets: View<u32>,
    _n: usize,
    _v: usize,
    _vp: usize,
    _dloss: Option<f32>,
) -> Result<()> {
    unsupported(ctx, "softmax_cross_entropy")
}

pub fn adamw_update(
    ctx: &OpsContext,
    _params: &mut ViewMut<f32>,
    _grads: View<f32>,
    _m: &mut ViewMut<f32>,
    _v: &mut ViewMut<f32>,
    _hp: &AdamWParams,
) -> Result<()> {
    unsupported(ctx, "adamw_update")
}

pub fn sum_of_squares(ctx: &OpsContext, _x: View<f32>) -> Result<f64> {
    unsupported(ctx, "sum_of_squares")
}
