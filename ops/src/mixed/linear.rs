//! The linear layer over f32 or 16-bit operands: on the tensor-core GEMM where the weight is
//! 16-bit on a kernel device, else on the f32 ops.

use trident_runtime::{Buffer, Device, View, ViewMut};

use super::super::{check, OpsContext, Result};
use super::convert::{into_f32, narrow, wide, Narrow, Wide};
use super::{Operand, OperandMut};
use crate::launch::{self, GemmTc, GemmTcOutput, HalfFormat};

/// The format of the tensor-core GEMMs of a linear layer of `weight` whose stored rows hold
/// `dims` elements: the weight's, when it is 16-bit on a kernel device, 16-byte aligned, and
/// every leading dimension a multiple of 8 (`gemm_tc`'s `cp.async` rows); else `None` and the
/// layer runs on the f32 GEMM.
fn tensor_core_format(ctx: &OpsContext, weight: &Operand, dims: &[usize]) -> Option<HalfFormat> {
    match (ctx.device(), weight) {
        (Device::Emu | Device::Cuda(_), Operand::Half(w, f))
            if w.addr() % 16 == 0 && dims.iter().all(|d| d % 8 == 0) =>
        {
            Some(*f)
        }
        _ => None,
    }
}

/// `c = op(a) op(b) (+ bias) (+ residual)` on tensor cores into `c` of either type.
fn gemm_tc_into(
    ctx: &OpsContext,
    c: &mut OperandMut,
    (a, b): (View<u16>, View<u16>),
    bias: Option<View<f32>>,
    residual: Option<Operand>,
    spec: &GemmTc,
) -> Result<()> {
    fn run<O: GemmTcOutput>(
        ctx: &OpsContext,
        c: &mut ViewMut<O>,
        (a, b): (View<u16>, View<u16>),
        bias: Option<View<f32>>,
        residual: Option<View<O>>,
        spec: &GemmTc,
    ) -> Result<()> {
        Ok(launch::gemm_tc(ctx.kernels()?, c, &a, &b, bias.as_ref(), residual.as_ref(), spec)?)
    }
    match c {
        OperandMut::F32(c) => {
            let residual = residual.map(|r| wide(ctx, r)).transpose()?;
            let residual = residual.as_ref().map(Wide::view).transpose()?;
            run(ctx, c, (a, b), bias, residual, spec)
        }
        OperandMut::Half(c, format) => {
            let residual = residual.map(|r| narrow(ctx, r, *format)).transpose()?;
            let residual = residual.as_ref().map(Narrow::view).transpose()?;
            run(ctx, c, (a, b), bias, residual, spec)
        }
    }
}

/// Linear layer: `out[n, oc] = inp[n, ic] weight[oc, ic]^T (+ bias[oc]) (+ residual[n, oc])`,
/// the residual added in the same pass (the fused residual projection). With a 16-bit weight
/// on a kernel device one tensor-core GEMM (`nt`) does it all, bias and residual in its
/// epilogue, writing f32 or 16-bit as `out` is.
#[allow(clippy::too_many_arguments)]
pub fn linear_forward(
    ctx: &OpsContext,
    out: &mut OperandMut,
    inp: Operand,
    weight: Operand,
    bias: Option<View<f32>>,
    residual: Option<Operand>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    const OP: &str = "linear_forward";
    check::len(OP, "out", out.len(), n * oc, &format!("[n={n}, oc={oc}]"))?;
    check::len(OP, "inp", inp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(OP, "weight", weight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    if let Some(r) = &residual {
        check::len(OP, "residual", r.len(), n * oc, &format!("[n={n}, oc={oc}]"))?;
    }
    if let (OperandMut::F32(o), Some(x), Some(w)) = (&mut *out, inp.as_f32(), weight.as_f32()) {
        match residual.map(|r| r.as_f32()) {
            None => return super::super::matmul_forward(ctx, o, x, w, bias, n, ic, oc),
            Some(Some(r)) => return super::super::matmul_residual_forward(ctx, o, x, w, bias, r, n, ic, oc),
            Some(None) => {}
        }
    }
    if let Some(format) = tensor_core_format(ctx, &weight, &[ic]) {
        let Operand::Half(w, _) = weight else { unreachable!("a tensor-core weight is 16-bit") };
        let x = narrow(ctx, inp, format)?;
        let spec = GemmTc::new(n, oc, ic, format).trans_b();
        return gemm_tc_into(ctx, out, (x.view()?, w), bias, residual, &spec);
    }
    let (x, w) = (wide(ctx, inp)?, wide(ctx, weight)?);
    let r = residual.map(|r| wide(ctx, r)).transpose()?;
    into_f32(ctx, out, false, |o| match &r {
        None => super::super::matmul_forward(ctx, o, x.view()?, w.view()?, bias, n, ic, oc),
        Some(r) => {
            super::super::matmul_residual_forward(ctx, o, x.view()?, w.view()?, bias, r.view()?, n, ic, oc)
        }
    })
}

/// Gradient of [`linear_forward`]: `dinp = dout weight` (overwritten, f32 or 16-bit as `dinp`
/// is), `dweight += dout^T inp` and `dbias += dout` summed over rows, both in f32 (accumulated,
/// so micro-batches add up). With a 16-bit weight on a kernel device the two products run on
/// tensor cores (`nn` and `tn`, f32 accumulation), reading a 16-bit `dout` as it is, and the
/// bias gradient sums it directly too (`launch::bias_backward_half`, f32 column sums).
#[allow(clippy::too_many_arguments)]
pub fn linear_backward(
    ctx: &OpsContext,
    dinp: &mut OperandMut,
    dweight: &mut ViewMut<f32>,
    dbias: Option<&mut ViewMut<f32>>,
    dout: Operand,
    inp: Operand,
    weight: Operand,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    linear_backward_through(ctx, dinp, dweight, dbias, dout, inp, weight, None, n, ic, oc)
}

/// [`linear_backward`] of a linear layer whose input is `gelu(x)`, carried on through GeLU:
/// `dinp = (dout weight) x gelu'(x)` (the gradient of `x`), `dweight` and `dbias` as there
/// (`inp` is `gelu(x)`). On the tensor cores GeLU's derivative is applied in the input-gradient
/// GEMM's epilogue (`GemmTc::gelu_grad`), each value rounded once; elsewhere `dinp` is
/// computed in f32 and multiplied by GeLU's derivative in place.
#[allow(clippy::too_many_arguments)]
pub fn linear_backward_gelu(
    ctx: &OpsContext,
    dinp: &mut OperandMut,
    dweight: &mut ViewMut<f32>,
    dbias: Option<&mut ViewMut<f32>>,
    dout: Operand,
    inp: Operand,
    weight: Operand,
    x: Operand,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    check::len("linear_backward_gelu", "x", x.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    linear_backward_through(ctx, dinp, dweight, dbias, dout, inp, weight, Some(x), n, ic, oc)
}

/// [`linear_backward`], and with `gelu_x` [`linear_backward_gelu`].
#[allow(clippy::too_many_arguments)]
fn linear_backward_through(
    ctx: &OpsContext,
    dinp: &mut OperandMut,
    dweight: &mut ViewMut<f32>,
    dbias: Option<&mut ViewMut<f32>>,
    dout: Operand,
    inp: Operand,
    weight: Operand,
    gelu_x: Option<Operand>,
    n: usize,
    ic: usize,
    oc: usize,
) -> Result<()> {
    const OP: &str = "linear_backward";
    check::len(OP, "dinp", dinp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(OP, "dout", dout.len(), n * oc, &format!("[n={n}, oc={oc}]"))?;
    check::len(OP, "inp", inp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(OP, "weight", weight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    check::len(OP, "dweight", dweight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    if let (OperandMut::F32(d), Some(dy), Some(x), Some(w)) =
        (&mut *dinp, dout.as_f32(), inp.as_f32(), weight.as_f32())
    {
        super::super::matmul_backward(ctx, d, dweight, dbias, dy, x, w, n, ic, oc)?;
        return match gelu_x {
            Some(g) => super::gelu_backward(ctx, dinp, g, n * ic),
            None => Ok(()),
        };
    }
    if let Some(format) = tensor_core_format(ctx, &weight, &[ic, oc]) {
        let Operand::Half(w, _) = weight else { unreachable!("a tensor-core weight is 16-bit") };
        let k = ctx.kernels()?;
        let (dy, x) = (narrow(ctx, dout, format)?, narrow(ctx, inp, format)?);
        let (dy, x) = (dy.view()?, x.view()?);
        let t = format;
        // dinp[n, ic] = dout[n, oc] W[oc, ic] (times gelu'(x), x read as the residual).
        let spec = GemmTc::new(n, ic, oc, t);
        let spec = if gelu_x.is_some() { spec.gelu_grad() } else { spec };
        gemm_tc_into(ctx, dinp, (dy, w), None, gelu_x, &spec)?;
        // dW[oc, ic] += dout^T x, accumulated by the epilogue into the f32 gradient (one f32
        // add per element, as a separate addition would do); a gradient the kernel cannot
        // store to (not 16-byte aligned) gets the product in a buffer of its own, then added.
        let spec = GemmTc::new(oc, ic, n, t).trans_a();
        if dweight.addr_mut() % 16 == 0 {
            launch::gemm_tc(k, dweight, &dy, &x, None, None::<&View<f32>>, &spec.accumulate())?;
        } else {
            let mut dw = Buffer::<f32>::uninit(ctx.device(), oc * ic)?;
            launch::gemm_tc(k, &mut dw.view_mut(..)?, &dy, &x, None, None::<&View<f32>>, &spec)?;
            launch::add_assign(k, dweight, &dw.view(..)?)?;
        }
        if let Some(db) = dbias {
            check::len(OP, "dbias", db.len(), oc, &format!("[oc={oc}]"))?;
            // Column sums in f32, read straight from `dout` in its own type.
            match dout {
                Operand::F32(dy) => launch::bias_backward(k, db, &dy, n, oc)?,
                Operand::Half(dy, f) => launch::bias_backward_half(k, db, &dy, f, n, oc)?,
            }
        }
        return Ok(());
    }
    let (dy, x, w) = (wide(ctx, dout)?, wide(ctx, inp)?, wide(ctx, weight)?);
    into_f32(ctx, dinp, false, |d| {
        super::super::matmul_backward(ctx, d, dweight, dbias, dy.view()?, x.view()?, w.view()?, n, ic, oc)?;
        match gelu_x {
            // In f32, before `dinp` is narrowed: one rounding, as on the tensor cores.
            Some(g) => super::super::gelu_backward(ctx, d, wide(ctx, g)?.view()?, n * ic),
            None => Ok(()),
        }
    })
}
