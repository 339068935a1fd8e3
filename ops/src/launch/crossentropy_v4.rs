//! Launch wrappers of the 128-bit fused softmax cross-entropy (`kernels/src/crossentropy_v4.rs`)
//! on f32 logits and on bf16 or f16 ones.

use bytemuck::Pod;
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::vectorized::vectorized;
use super::{to_u32, HalfFormat, Kernels, Result};

const THREADS: u32 = 512;

/// Fused softmax + cross-entropy, one block per row, with 4 logits per access where `logits`
/// is 16-byte aligned and `vp` a multiple of 4 (else one at a time, the same results): per-row loss
/// `logsumexp(logits[r, ..v]) - logits[r, targets[r]]`, and with `dloss = Some(g)` the logits
/// overwritten by `(softmax - onehot) * g` (zero on the padding). Targets must be below `v`.
#[allow(clippy::too_many_arguments)]
pub fn crossentropy_v4(
    k: &Kernels,
    logits: &mut ViewMut<f32>,
    losses: &mut ViewMut<f32>,
    targets: &View<u32>,
    rows: usize,
    v: usize,
    vp: usize,
    dloss: Option<f32>,
) -> Result<()> {
    launch(k, "crossentropy_v4_f32", 4, logits, losses, targets, (rows, v, vp), dloss)
}

/// [`crossentropy_v4`] on 16-bit logits (`format` bits), 8 per access where `logits` is
/// 16-byte aligned and `vp` a multiple of 8: each logit widened to f32, the softmax, the
/// log-sum-exp and the loss in f32, and with `dloss = Some(g)` the gradient written over the
/// logits rounded to `format` (nearest, ties to even; zero on the padding).
#[allow(clippy::too_many_arguments)]
pub fn crossentropy_v4_half(
    k: &Kernels,
    logits: &mut ViewMut<u16>,
    format: HalfFormat,
    losses: &mut ViewMut<f32>,
    targets: &View<u32>,
    rows: usize,
    v: usize,
    vp: usize,
    dloss: Option<f32>,
) -> Result<()> {
    let kernel = match format {
        HalfFormat::Bf16 => "crossentropy_v4_bf16",
        HalfFormat::F16 => "crossentropy_v4_f16",
    };
    launch(k, kernel, 8, logits, losses, targets, (rows, v, vp), dloss)
}

/// Checks and launches `kernel` (one block per row) over logits of `T`, `group` of them per
/// 16-byte access.
#[allow(clippy::too_many_arguments)]
fn launch<T: Pod>(
    k: &Kernels,
    kernel: &'static str,
    group: usize,
    logits: &mut ViewMut<T>,
    losses: &mut ViewMut<f32>,
    targets: &View<u32>,
    (rows, v, vp): (usize, usize, usize),
    dloss: Option<f32>,
) -> Result<()> {
    let ch = Check::new(k.device(), kernel);
    ch.output("logits", logits, super::product("rows*vp", &[rows, vp])?)?
        .output("losses", losses, rows)?
        .input("targets", targets, rows)?;
    ch.shape(v >= 1 && v <= vp, || format!("vocabulary {v} must be in 1..=padded vocabulary {vp}"))?;
    to_u32("rows*vp", rows * vp)?;
    if rows == 0 {
        return Ok(());
    }
    let vec = vectorized(&[logits.addr_mut()]) * u32::from(vp % group == 0);
    let cfg =
        LaunchConfig { grid: [to_u32("rows", rows)?, 1, 1], block: [THREADS, 1, 1], dynamic_smem_bytes: 0 };
    let args = [
        logits.arg_mut(),
        losses.arg_mut(),
        targets.arg(),
        to_u32("v", v)?.into(),
        to_u32("vp", vp)?.into(),
        dloss.unwrap_or(0.0).into(),
        u32::from(dloss.is_some()).into(),
        vec.into(),
    ];
    // SAFETY: the views hold rows x vp logits and rows losses and targets; `vec` only where
    // every row starts 16-byte aligned.
    unsafe { k.launch(kernel, &cfg, &args)? };
    Ok(())
}
