//! GeLU and the residual add.

use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, launch, OpsContext, Result};

/// GeLU, tanh approximation, over `n` elements: `out = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))`.
pub fn gelu_forward(ctx: &OpsContext, out: &mut ViewMut<f32>, inp: View<f32>, n: usize) -> Result<()> {
    const OP: &str = "gelu_forward";
    check::len(OP, "out", out.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "inp", inp.len(), n, &format!("[n={n}]"))?;
    check::devices(ctx, OP, &[("out", out.device()), ("inp", inp.device())])?;
    match ctx.device() {
        Device::Cpu => {
            let x = check::host(OP, inp)?;
            cpu::gelu_forward(check::host_mut(OP, out)?, x);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::gelu_forward_v4(ctx.kernels()?, out, &inp)?),
    }
}

/// Gradient of [`gelu_forward`], in place: `d` holds the gradient of the output on entry and
/// that of the input `inp` on return.
pub fn gelu_backward(ctx: &OpsContext, d: &mut ViewMut<f32>, inp: View<f32>, n: usize) -> Result<()> {
    const OP: &str = "gelu_backward";
    check::len(OP, "d", d.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "inp", inp.len(), n, &format!("[n={n}]"))?;
    check::devices(ctx, OP, &[("d", d.device()), ("inp", inp.device())])?;
    match ctx.device() {
        Device::Cpu => {
            let x = check::host(OP, inp)?;
            cpu::gelu_backward(check::host_mut(OP, d)?, x);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::gelu_backward_v4_inplace(ctx.kernels()?, d, &inp)?),
    }
}

/// Residual connection: `out = a + b` over `n` elements. (Its backward is the identity: the
/// model passes the residual stream's gradient on unchanged.)
pub fn residual_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    a: View<f32>,
    b: View<f32>,
    n: usize,
) -> Result<()> {
    const OP: &str = "residual_forward";
    check::len(OP, "out", out.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "a", a.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "b", b.len(), n, &format!("[n={n}]"))?;
    check::devices(ctx, OP, &[("out", out.device()), ("a", a.device()), ("b", b.device())])?;
    match ctx.device() {
        Device::Cpu => {
            let (a, b) = (check::host(OP, a)?, check::host(OP, b)?);
            cpu::residual_forward(check::host_mut(OP, out)?, a, b);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::add_v4(ctx.kernels()?, out, &a, &b)?),
    }
}

/// Accumulation: `out += inp` over `n` elements (a gradient summed elsewhere added onto the
/// one held here).
pub fn accumulate(ctx: &OpsContext, out: &mut ViewMut<f32>, inp: View<f32>, n: usize) -> Result<()> {
    const OP: &str = "accumulate";
    check::len(OP, "out", out.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "inp", inp.len(), n, &format!("[n={n}]"))?;
    check::devices(ctx, OP, &[("out", out.device()), ("inp", inp.device())])?;
    match ctx.device() {
        Device::Cpu => {
            let b = check::host(OP, inp)?;
            cpu::accumulate(check::host_mut(OP, out)?, b);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::add_assign(ctx.kernels()?, out, &inp)?),
    }
}
