use trident_kernels::reduce::{COMBINE_MAX, COMBINE_SUM};
use trident_runtime::{LaunchConfig, View, ViewMut};

use super::check::Check;
use super::{to_u32, Kernels, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// The reduction a collective applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CombineOp {
    /// `acc += incoming`.
    Sum,
    /// `acc = max(acc, incoming)`.
    Max,
}

/// `acc = acc (op) incoming`, elementwise.
pub fn combine(k: &Kernels, op: CombineOp, acc: &mut ViewMut<f32>, incoming: &View<f32>) -> Result<()> {
    const KERNEL: &str = "combine_f32";
    let n = acc.len();
    Check::new(k.device(), KERNEL).output("acc", acc, n)?.input("incoming", incoming, n)?;
    let cfg = LaunchConfig::for_items(n, ELEMENTWISE_THREADS, MAX_BLOCKS);
    let op = match op {
        CombineOp::Sum => COMBINE_SUM,
        CombineOp::Max => COMBINE_MAX,
    };
    // Host memory a transport lends (no buffer's allocation) is lent to the emulator's checks
    // for the launch.
    let _lent = (acc.as_view().lend_to_emulator(), incoming.lend_to_emulator());
    let out = acc.arg_mut();
    // The kernel reads each element of `acc` before it writes it, in the same thread.
    let args = [out, out, incoming.arg(), to_u32("n", n)?.into(), op.into()];
    // SAFETY: both views hold `n` elements on the kernels' device.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}
