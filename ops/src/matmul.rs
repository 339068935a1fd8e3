use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, launch, OpsContext, Result};

/// Linear layer: `out[n, oc] = inp[n, ic] @ weight[oc, ic]^T + bias[oc]` (no bias when `None`).
#[allow(clippy::too_many_arguments)]
pub fn matmul_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: Option<View<f32>>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    const OP: &str = "matmul_forward";
    check_forward(ctx, OP, out, inp, weight, bias, n, ic, oc)?;
    match ctx.device() {
        Device::Cpu => {
            let bias = bias.map(|b| check::host(OP, b)).transpose()?;
            let (x, w) = (check::host(OP, inp)?, check::host(OP, weight)?);
            cpu::matmul_forward(check::host_mut(OP, out)?, x, w, bias, ic, oc);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            Ok(launch::linear_forward(ctx.kernels()?, out, &inp, &weight, bias.as_ref(), n, ic, oc)?)
        }
    }
}

/// A linear layer that adds its result to the residual stream: `out = residual + inp @
/// weight^T + bias`. Its backward is [`matmul_backward`] with the residual stream's gradient as
/// `dout` (the residual branch passes it on unchanged). On the Cpu device the product
/// accumulates onto `residual + bias`, which saves a pass over the output.
#[allow(clippy::too_many_arguments)]
pub fn matmul_residual_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: Option<View<f32>>,
    residual: View<f32>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    const OP: &str = "matmul_residual_forward";
    check_forward(ctx, OP, out, inp, weight, bias, n, ic, oc)?;
    check::len(OP, "residual", residual.len(), n * oc, &format!("[n={n}, oc={oc}]"))?;
    check::devices(ctx, OP, &[("residual", residual.device())])?;
    match ctx.device() {
        Device::Cpu => {
            let bias = bias.map(|b| check::host(OP, b)).transpose()?;
            let (x, w, res) = (check::host(OP, inp)?, check::host(OP, weight)?, check::host(OP, residual)?);
            cpu::matmul_residual_forward(check::host_mut(OP, out)?, x, w, bias, res, ic, oc);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            let k = ctx.kernels()?;
            launch::linear_forward(k, out, &inp, &weight, bias.as_ref(), n, ic, oc)?;
            Ok(launch::add_assign_v4(k, out, &residual)?)
        }
    }
}

/// The shapes and devices of a linear layer's forward pass.
#[allow(clippy::too_many_arguments)]
fn check_forward(
    ctx: &OpsContext,
    op: &'static str,
    out: &ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: Option<View<f32>>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    check::that(op, ic > 0 && oc > 0, || format!("empty weight [oc={oc}, ic={ic}]"))?;
    check::len(op, "out", out.len(), n * oc, &format!("[n={n}, oc={oc}]"))?;
    check::len(op, "inp", inp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(op, "weight", weight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    if let Some(bias) = bias {
        check::len(op, "bias", bias.len(), oc, &format!("[oc={oc}]"))?;
        check::devices(ctx, op, &[("bias", bias.device())])?;
    }
    check::devices(ctx, op, &[("out", out.device()), ("inp", inp.device()), ("weight", weight.device())])
}

/// Gradient of [`matmul_forward`]: `dinp = dout @ weight` (overwritten), `dweight += dout^T @
/// inp`, `dbias += dout` summed over rows (accumulated, so micro-batches add up).
#[allow(clippy::too_many_arguments)]
pub fn matmul_backward(
    ctx: &OpsContext,
    dinp: &mut ViewMut<f32>,
    dweight: &mut ViewMut<f32>,
    dbias: Option<&mut ViewMut<f32>>,
    dout: View<f32>,
    inp: View<f32>,
    weight: View<f32>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    const OP: &str = "matmul_backward";
    check::that(OP, ic > 0 && oc > 0, || format!("empty weight [oc={oc}, ic={ic}]"))?;
    check::len(OP, "dinp", dinp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(OP, "inp", inp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(OP, "dout", dout.len(), n * oc, &format!("[n={n}, oc={oc}]"))?;
    check::len(OP, "weight", weight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    check::len(OP, "dweight", dweight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    if let Some(dbias) = &dbias {
        check::len(OP, "dbias", dbias.len(), oc, &format!("[oc={oc}]"))?;
        check::devices(ctx, OP, &[("dbias", dbias.device())])?;
    }
    let devices = [
        ("dinp", dinp.device()),
        ("dweight", dweight.device()),
        ("dout", dout.device()),
        ("inp", inp.device()),
        ("weight", weight.device()),
    ];
    check::devices(ctx, OP, &devices)?;
    match ctx.device() {
        Device::Cpu => {
            let (dy, x, w) = (check::host(OP, dout)?, check::host(OP, inp)?, check::host(OP, weight)?);
            let db = match dbias {
                Some(d) => Some(check::host_mut(OP, d)?),
                None => None,
            };
            let dw = check::host_mut(OP, dweight)?;
            cpu::matmul_backward(check::host_mut(OP, dinp)?, dw, db, dy, x, w, ic, oc);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::linear_backward(
            ctx.kernels()?,
            dinp,
            dweight,
            dbias,
            &dout,
            &inp,
            &weight,
            n,
            ic,
            oc,
        )?),
    }
}
