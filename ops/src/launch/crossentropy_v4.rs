//! Launch wrapper of the 128-bit fused softmax cross-entropy (`kernels/src/crossentropy_v4.rs`).

use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::vectorized::vectorized;
use super::{to_u32, Kernels, Result};

const THREADS: u32 = 512;

/// [`super::crossentropy`] with 4 logits per access where `logits` is 16-byte aligned and `vp`
/// a multiple of 4 (else one at a time, the same results): per-row loss
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
    const KERNEL: &str = "crossentropy_v4_f32";
    let ch = Check::new(k.device(), KERNEL);
    ch.output("logits", logits, super::product("rows*vp", &[rows, vp])?)?
        .output("losses", losses, rows)?
        .input("targets", targets, rows)?;
    ch.shape(v >= 1 && v <= vp, || format!("vocabulary {v} must be in 1..=padded vocabulary {vp}"))?;
    to_u32("rows*vp", rows * vp)?;
    if rows == 0 {
        return Ok(());
    }
    let vec = vectorized(&[logits.addr_mut()]) * u32::from(vp % 4 == 0);
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
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}
