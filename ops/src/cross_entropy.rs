use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, launch, OpsContext, Result};

/// Fused softmax and cross-entropy over `n` rows of `vp` logits, of which the first `v` are
/// real (the padded rest are masked out of the softmax). Writes each row's loss
/// `logsumexp(logits[..v]) - logits[target]` to `losses` (`[n]`). With `dloss = Some(g)`
/// (`g` = d(total loss)/d(row loss), e.g. `1 / (B*T*accumulation)`), the same pass overwrites
/// the row with its gradient `g * (softmax - onehot(target))`, zero on the padding.
#[allow(clippy::too_many_arguments)]
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
    const OP: &str = "softmax_cross_entropy";
    check_args(ctx, (logits.len(), logits.device()), losses, targets, n, v, vp)?;
    match ctx.device() {
        Device::Cpu => {
            let tgt = check::host(OP, targets)?;
            let losses = check::host_mut(OP, losses)?;
            cpu::softmax_cross_entropy(check::host_mut(OP, logits)?, losses, tgt, v, vp, dloss);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            check::device_tokens(ctx, "softmax_cross_entropy", &targets, v)?;
            Ok(launch::crossentropy_v4(ctx.kernels()?, logits, losses, &targets, n, v, vp, dloss)?)
        }
    }
}

/// [`softmax_cross_entropy`]'s checks, for logits of any type (`logits`: their length and
/// device): the vocabulary within the padded one, the lengths, one device, and targets the
/// host can read below `v`.
pub(crate) fn check_args(
    ctx: &OpsContext,
    logits: (usize, &Device),
    losses: &ViewMut<f32>,
    targets: View<u32>,
    n: usize,
    v: usize,
    vp: usize,
) -> Result<()> {
    const OP: &str = "softmax_cross_entropy";
    check::that(OP, v > 0 && v <= vp, || format!("vocabulary {v} must be in 1..={vp} (the padded size)"))?;
    check::len(OP, "logits", logits.0, n * vp, &format!("[n={n}, vp={vp}]"))?;
    check::len(OP, "losses", losses.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "targets", targets.len(), n, &format!("[n={n}]"))?;
    let devices = [("logits", logits.1), ("losses", losses.device()), ("targets", targets.device())];
    check::devices(ctx, OP, &devices)?;
    if let Some(tgt) = targets.host() {
        check::tokens(OP, tgt, v)?;
    }
    Ok(())
}
