//! Launches of the scalar first generations (`trident_dev_kernels::{gelu, crossentropy}`): one
//! element (GeLU) or one row with one `f32` load per thread and step (cross-entropy), the
//! baselines of the trainer's 128-bit and bf16 kernels in the kernel benchmark.

use trident_ops::launch::{Check, Kernels, LaunchError};
use trident_runtime::{LaunchConfig, View, ViewMut};

/// Threads per block of the GeLU launches.
const GELU_THREADS: u32 = 256;
/// Enough blocks to fill any current GPU; the grid-stride loops cover the rest.
const MAX_BLOCKS: u32 = 65_535;
/// Threads per block (one block per row) of the cross-entropy launch.
const CROSSENTROPY_THREADS: u32 = 512;

fn to_u32(what: &'static str, n: usize) -> Result<u32, LaunchError> {
    u32::try_from(n).map_err(|_| LaunchError::TooLarge { what, value: n })
}

/// `out = gelu(inp)` (GPT-2's tanh approximation), elementwise.
///
/// # Errors
/// [`LaunchError`] where the views differ in length or device from the kernels, or the
/// length exceeds the kernel's `u32` index.
pub fn gelu_forward(k: &Kernels, out: &mut ViewMut<f32>, inp: &View<f32>) -> Result<(), LaunchError> {
    const KERNEL: &str = "gelu_forward_f32";
    let n = out.len();
    Check::new(k.device(), KERNEL).output("out", out, n)?.input("inp", inp, n)?;
    let cfg = LaunchConfig::for_items(n, GELU_THREADS, MAX_BLOCKS);
    let args = [out.arg_mut(), inp.arg(), to_u32("length", n)?.into()];
    // SAFETY: both views hold `n` elements on the kernels' device.
    unsafe { k.launch(KERNEL, &cfg, &args) }
}

/// `dinp = gelu'(inp) * dout`, elementwise.
///
/// # Errors
/// As [`gelu_forward`].
pub fn gelu_backward(
    k: &Kernels,
    dinp: &mut ViewMut<f32>,
    inp: &View<f32>,
    dout: &View<f32>,
) -> Result<(), LaunchError> {
    const KERNEL: &str = "gelu_backward_f32";
    let n = dinp.len();
    Check::new(k.device(), KERNEL).output("dinp", dinp, n)?.input("inp", inp, n)?.input("dout", dout, n)?;
    let cfg = LaunchConfig::for_items(n, GELU_THREADS, MAX_BLOCKS);
    let args = [dinp.arg_mut(), inp.arg(), dout.arg(), to_u32("length", n)?.into()];
    // SAFETY: the three views hold `n` elements each on the kernels' device.
    unsafe { k.launch(KERNEL, &cfg, &args) }
}

/// Per-row loss `losses[r] = logsumexp(logits[r, ..v]) - logits[r, targets[r]]`; with
/// `dloss = Some(g)`, the logits are overwritten by their gradient `(softmax - onehot) * g`
/// (zero on the padding `v..vp`). Targets must be below `v`.
///
/// # Errors
/// [`LaunchError`] where a view is shorter than its shape or on another device, `v` is not in
/// `1..=vp`, or a size exceeds the kernel's `u32` indices.
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
) -> Result<(), LaunchError> {
    const KERNEL: &str = "crossentropy_f32";
    let cells = rows.checked_mul(vp).ok_or(LaunchError::TooLarge { what: "rows*vp", value: usize::MAX })?;
    let ch = Check::new(k.device(), KERNEL);
    ch.output("logits", logits, cells)?.output("losses", losses, rows)?.input("targets", targets, rows)?;
    ch.shape(v >= 1 && v <= vp, || format!("vocabulary {v} must be in 1..=padded vocabulary {vp}"))?;
    to_u32("rows*vp", cells)?;
    if rows == 0 {
        return Ok(());
    }
    let cfg = LaunchConfig {
        grid: [to_u32("rows", rows)?, 1, 1],
        block: [CROSSENTROPY_THREADS, 1, 1],
        dynamic_smem_bytes: 0,
    };
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
    unsafe { k.launch(KERNEL, &cfg, &args) }
}
