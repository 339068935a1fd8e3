use trident_runtime::{LaunchConfig, View, ViewMut};

use super::{to_u32, Kernels, LaunchError, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

/// `out = a + b`, elementwise.
pub fn add(k: &Kernels, out: &mut ViewMut<f32>, a: &View<f32>, b: &View<f32>) -> Result<()> {
    launch_add(k, out, Some(a), b)
}

/// `out += b`, elementwise: the `add_f32` kernel with `out` as its first operand too (each
/// thread reads its element before it writes it, so the aliasing is harmless).
pub fn add_assign(k: &Kernels, out: &mut ViewMut<f32>, b: &View<f32>) -> Result<()> {
    launch_add(k, out, None, b)
}

/// `out = a + b`, with `out` itself as `a` when `a` is `None`.
fn launch_add(k: &Kernels, out: &mut ViewMut<f32>, a: Option<&View<f32>>, b: &View<f32>) -> Result<()> {
    const KERNEL: &str = "add_f32";
    for (what, v) in a.map(|a| ("a", a)).into_iter().chain([("b", b)]) {
        k.check_device(v.device())?;
        if v.len() != out.len() {
            return Err(LaunchError::Length { kernel: KERNEL, what, got: v.len(), expected: out.len() });
        }
    }
    k.check_device(out.device())?;
    let n = to_u32("length", out.len())?;
    let cfg = LaunchConfig::for_items(out.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let dst = out.arg_mut();
    let args = [dst, a.map_or(dst, View::arg), b.arg(), n.into()];
    // SAFETY: every view holds `n` elements on the kernels' device; where `out` is also an
    // operand, each thread reads its element before writing it.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}
