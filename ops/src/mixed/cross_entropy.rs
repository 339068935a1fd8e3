//! The fused softmax cross-entropy over f32 or 16-bit logits.

use trident_runtime::{Device, View, ViewMut};

use super::super::cross_entropy::check_args;
use super::super::{check, OpsContext, Result};
use super::convert::into_f32;
use super::OperandMut;
use crate::launch;

/// [`super::super::softmax_cross_entropy`] over logits of either type: per-row losses (f32)
/// and, with `dloss = Some(g)`, the gradient `g * (softmax - onehot)` written over the logits
/// (zero on the padding `v..vp`). 16-bit logits on the kernel devices go to the 16-bit kernel
/// (`launch::crossentropy_v4_half`: every logit widened to f32, the loss in f32, the gradient
/// rounded once to the logits' format as it is stored); on the `Cpu` they are widened around
/// the f32 op, which gives the same values up to the order of f32 sums.
#[allow(clippy::too_many_arguments)]
pub fn softmax_cross_entropy(
    ctx: &OpsContext,
    logits: &mut OperandMut,
    losses: &mut ViewMut<f32>,
    targets: View<u32>,
    n: usize,
    v: usize,
    vp: usize,
    dloss: Option<f32>,
) -> Result<()> {
    match logits {
        OperandMut::Half(x, format) if matches!(ctx.device(), Device::Emu | Device::Cuda(_)) => {
            check_args(ctx, (x.len(), x.device()), losses, targets, n, v, vp)?;
            check::device_tokens(ctx, "softmax_cross_entropy", &targets, v)?;
            let k = ctx.kernels()?;
            Ok(launch::crossentropy_v4_half(k, x, *format, losses, &targets, n, v, vp, dloss)?)
        }
        _ => into_f32(ctx, logits, true, |x| {
            super::super::softmax_cross_entropy(ctx, x, losses, targets, n, v, vp, dloss)
        }),
    }
}
