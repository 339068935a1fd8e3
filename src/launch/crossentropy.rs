use trident_runtime::{KernelArg, LaunchConfig, View, ViewMut};

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
    let ch = Check::new(k, KERNEL);
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
        logits.addr_mut(),
        losses.addr_mut(),
        targets.addr(),
        (v as u32).to_word(),
        (vp as u32).to_word(),
        dloss.unwrap_or(0.0).to_word(),
        u32::from(dloss.is_some()).to_word(),
    ];
    // SAFETY: the views hold rows x vp logits and rows losses and targets.
    unsafe { k.function(KERNEL)?.launch(&cfg, &args)? };
    Ok(())
}
