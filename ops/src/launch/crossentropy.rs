use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result};

const THREADS: u32 = 512;

/// Per-row loss `losses[r] = logsumexp(logits[r, ..v]) - logits[r, targets[r]]`; with
/// `dloss = Some(g)`, the logits are overwritten by their gradient `(softmax - onehot) * g`
/// (zero on the padding `v..vp`). Targets must be below `v`.
#[allow(clippy::too_many_arguments)]
pub fn crossentropy(
    k: &Kernels,
    logits: &mut ViewMut<f32>,
    losses: &mut ViewMut<f32>,
    targets: &View<u32>,
    rows: usize,
    v: usize,
    vp: usize,
    dloss: Option<f32>,
) -> Result<()> {
    const KERNEL: &str = "crossentropy_f32";
    let ch = Check::new(k.device(), KERNEL);
    ch.output("logits", logits, rows * vp)?
        .output("losses", losses, rows)?
        .input("targets", targets, rows)?;
    ch.shape(v >= 1 && v <= vp, || format!("vocabulary {v} must be in 1..=padded vocabulary {vp}"))?;
    to_u32("rows*vp", rows * vp)?;
    if rows == 0 {
        return Ok(());
    }
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
    ];
    // SAFETY: the views hold rows x vp logits and rows losses and targets.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}
