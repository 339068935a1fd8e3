use trident_runtime::{LaunchConfig, View, ViewMut};

use super::{to_u32, Kernels, LaunchError, Result, ELEMENTWISE_THREADS, MAX_BLOCKS};

fn check(
    k: &Kernels,
    kernel: &'static str,
    out: &ViewMut<f32>,
    inputs: &[(&'static str, &View<f32>)],
) -> Result<u32> {
    k.check_device(out.device())?;
    for (what, v) in inputs {
        k.check_device(v.device())?;
        if v.len() != out.len() {
            return Err(LaunchError::Length { kernel, what, got: v.len(), expected: out.len() });
        }
    }
    to_u32("length", out.len())
}

/// `out = gelu(inp)` (GPT-2's tanh approximation).
pub fn gelu_forward(k: &Kernels, out: &mut ViewMut<f32>, inp: &View<f32>) -> Result<()> {
    const KERNEL: &str = "gelu_forward_f32";
    let n = check(k, KERNEL, out, &[("inp", inp)])?;
    let cfg = LaunchConfig::for_items(out.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [out.arg_mut(), inp.arg(), n.into()];
    // SAFETY: both views hold `n` elements on the kernels' device.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}

/// `dinp = gelu'(inp) * dout`.
pub fn gelu_backward(k: &Kernels, dinp: &mut ViewMut<f32>, inp: &View<f32>, dout: &View<f32>) -> Result<()> {
    const KERNEL: &str = "gelu_backward_f32";
    let n = check(k, KERNEL, dinp, &[("inp", inp), ("dout", dout)])?;
    let cfg = LaunchConfig::for_items(dinp.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let args = [dinp.arg_mut(), inp.arg(), dout.arg(), n.into()];
    // SAFETY: the three views hold `n` elements each on the kernels' device.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}

/// `d = gelu'(inp) * d`, in place: `d` holds the output's gradient and becomes the input's.
pub fn gelu_backward_inplace(k: &Kernels, d: &mut ViewMut<f32>, inp: &View<f32>) -> Result<()> {
    const KERNEL: &str = "gelu_backward_f32";
    let n = check(k, KERNEL, d, &[("inp", inp)])?;
    let cfg = LaunchConfig::for_items(d.len(), ELEMENTWISE_THREADS, MAX_BLOCKS);
    let addr = d.arg_mut();
    // The kernel reads `dout[i]` before it writes `dinp[i]`, in the same thread, so the two may
    // be one array.
    let args = [addr, inp.arg(), addr, n.into()];
    // SAFETY: both views hold `n` elements on the kernels' device.
    unsafe { k.launch(KERNEL, &cfg, &args)? };
    Ok(())
}
