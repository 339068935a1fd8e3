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

/// `out += b`, elementwise: the `add_f32` kernel with `out` as its first operand too (each
/// thread reads its element before it writes it, so the aliasing is harmless).
pub fn add_assign(k: &Kernels, out: &mut ViewMut<f32>, b: &View<f32>) -> Result<()> {
    const KERNEL: &str = "add_f32";
    k.check_device(b.device())?;
    if b.len() != out.len() {
        return Err(LaunchError::Length { kernel: KERNEL, what: "b", got: b.len(), expected: out.len() });
    }
    k.check_device(out.device())?;
    let n = to_u32("length", out.len())?;
    let cfg = LaunchConfig::for_items(out.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let dst = out.addr_mut();
    let args = [dst, dst, b.addr(), n.to_word()];
    // SAFETY: both views hold `n` elements on the kernels' device; `out` is read and written
    // element by element by the same thread.
    unsafe { k.function(KERNEL)?.launch(&cfg, &args)? };
    Ok(())
}
