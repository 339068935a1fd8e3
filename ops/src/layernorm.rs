use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, launch, OpsContext, Result};

/// LayerNorm over the last dimension of `inp` (`[n, c]`):
/// `out = (inp - mean) * rstd * weight + bias`, saving each row's `mean` and `rstd` (`[n]`)
/// for the backward pass. Eps is 1e-5.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward(
    ctx: &OpsContext,
    out: &mut ViewMut<f32>,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    const OP: &str = "layernorm_forward";
    check_forward(ctx, (out.len(), out.device()), mean, rstd, inp, weight, bias, n, c)?;
    match ctx.device() {
        Device::Cpu => {
            let (x, w, b) = (check::host(OP, inp)?, check::host(OP, weight)?, check::host(OP, bias)?);
            let (mean, rstd) = (check::host_mut(OP, mean)?, check::host_mut(OP, rstd)?);
            cpu::layernorm_forward(check::host_mut(OP, out)?, mean, rstd, x, w, b, c);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            Ok(launch::layernorm_forward_row(ctx.kernels()?, out, mean, rstd, &inp, &weight, &bias, n, c)?)
        }
    }
}

/// [`layernorm_forward`]'s checks of lengths and devices, for an output of `out.0` elements on
/// `out.1` (of any element type: the mixed-precision op's 16-bit output too).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_forward(
    ctx: &OpsContext,
    out: (usize, &Device),
    mean: &ViewMut<f32>,
    rstd: &ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    const OP: &str = "layernorm_forward";
    let rows = format!("[n={n}, c={c}]");
    check::len(OP, "out", out.0, n * c, &rows)?;
    check::len(OP, "inp", inp.len(), n * c, &rows)?;
    check::len(OP, "mean", mean.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "rstd", rstd.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "weight", weight.len(), c, &format!("[c={c}]"))?;
    check::len(OP, "bias", bias.len(), c, &format!("[c={c}]"))?;
    let devices = [
        ("out", out.1),
        ("mean", mean.device()),
        ("rstd", rstd.device()),
        ("inp", inp.device()),
        ("weight", weight.device()),
        ("bias", bias.device()),
    ];
    check::devices(ctx, OP, &devices)
}

/// Gradient of [`layernorm_forward`]. Accumulates into `dinp` (`+=`: it is the residual
/// stream's gradient), `dweight` and `dbias`.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_backward(
    ctx: &OpsContext,
    dinp: &mut ViewMut<f32>,
    dweight: &mut ViewMut<f32>,
    dbias: &mut ViewMut<f32>,
    dout: View<f32>,
    inp: View<f32>,
    weight: View<f32>,
    mean: View<f32>,
    rstd: View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    const OP: &str = "layernorm_backward";
    let rows = format!("[n={n}, c={c}]");
    check::len(OP, "dinp", dinp.len(), n * c, &rows)?;
    check::len(OP, "dout", dout.len(), n * c, &rows)?;
    check::len(OP, "inp", inp.len(), n * c, &rows)?;
    check::len(OP, "mean", mean.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "rstd", rstd.len(), n, &format!("[n={n}]"))?;
    check::len(OP, "weight", weight.len(), c, &format!("[c={c}]"))?;
    check::len(OP, "dweight", dweight.len(), c, &format!("[c={c}]"))?;
    check::len(OP, "dbias", dbias.len(), c, &format!("[c={c}]"))?;
    let devices = [
        ("dinp", dinp.device()),
        ("dweight", dweight.device()),
        ("dbias", dbias.device()),
        ("dout", dout.device()),
        ("inp", inp.device()),
        ("weight", weight.device()),
        ("mean", mean.device()),
        ("rstd", rstd.device()),
    ];
    check::devices(ctx, OP, &devices)?;
    match ctx.device() {
        Device::Cpu => {
            let (dy, x, w) = (check::host(OP, dout)?, check::host(OP, inp)?, check::host(OP, weight)?);
            let (mu, rs) = (check::host(OP, mean)?, check::host(OP, rstd)?);
            let (dw, db) = (check::host_mut(OP, dweight)?, check::host_mut(OP, dbias)?);
            cpu::layernorm_backward(check::host_mut(OP, dinp)?, dw, db, dy, x, w, mu, rs, c);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::layernorm_backward(
            ctx.kernels()?,
            dinp,
            dweight,
            dbias,
            &dout,
            &inp,
            &weight,
            &mean,
            &rstd,
            n,
            c,
        )?),
    }
}
