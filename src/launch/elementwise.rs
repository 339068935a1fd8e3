use trident_runtime::{KernelArg, LaunchConfig, View, ViewMut};

use super::{to_u32, Kernels, LaunchError, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// `out = a + b`, elementwise.
pub fn add(k: &Kernels, out: &mut ViewMut<f32>, a: &View<f32>, b: &View<f32>) -> Result<()> {
    const KERNEL: &str = "add_f32";
    for (what, v) in [("a", a), ("b", b)] {
        k.check_device(v.device())?;
        if v.len() != out.len() {
            return Err(LaunchError::Length { kernel: KERNEL, what, got: v.len(), expected: out.len() });
        }
    }
    k.check_device(out.device())?;
    let n = to_u32("length", out.len())?;
    let cfg = LaunchConfig::for_items(out.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [out.addr_mut(), a.addr(), b.addr(), n.to_word()];
    // SAFETY: the three views hold `n` elements each on the kernels' device.
    unsafe { k.function(KERNEL)?.launch(&cfg, &args)? };
    Ok(())
}
