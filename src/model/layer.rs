//! One transformer layer on one tensor-parallel rank, forward and backward, with the
//! tensor-parallel collectives where Megatron-LM puts them. A tensor-parallel group of one
//! makes every collective a no-op, and then the row-parallel products add straight onto the
//! residual stream (the fused residual projection); otherwise the sum over the group has to
//! come first.
//!
//! Per layer (f: identity forward, all-reduce backward; g: all-reduce forward, identity
//! backward):
//!
//! ```text
//! x -> LN1 -> f -> QKV (column parallel) -> attention (local heads) -> proj (row parallel) -> g -> + x
//!   -> LN2 -> f -> FC (column parallel) -> GeLU -> FC proj (row parallel) -> g -> + res
//! ```
//!
//! Shapes (local widths): x, LN outputs, residuals `[ns, C]`; qkv `[n, 3C/TP]`; attention
//! output `[n, C/TP]`; MLP hidden `[n, 4C/TP]` (`n = b t`, `ns = n / TP` under sequence
//! parallelism, else `n`).
//!
//! Under mixed precision the products read the 16-bit compute weights and 16-bit activations
//! ([`Act`]; on `Emu` and `Cuda` real 16-bit buffers, run on the tensor-core GEMM and flash
//! attention by [`ops::mixed`]); LayerNorm parameters and biases are read from the fp32 master
//! weights. The residual stream and its gradient stay fp32 and are never rounded (Megatron-LM's
//! `--fp32-residual-connection`, always on): the row-parallel products add onto it in f32 and
//! the LayerNorm backward accumulates into its gradient in f32. The tensor-parallel collectives
//! reduce f32: the row-parallel products write f32 partial sums, and a 16-bit LayerNorm output
//! is widened (exactly) for sequence parallelism's all-gather.

use trident_runtime::{Buffer, View};

use super::activations::{Dims, LayerActs, Scratch, SpScratch};
use super::tensor::{store_acts, Act};
use super::{ModelError, ParamTensor, ShardLayout};
use crate::ops::{self, Operand, OperandMut, OpsContext};
use crate::parallel::TpGroup;

type Result<T> = std::result::Result<T, ModelError>;

/// The parameters, read by tensor and layer.
pub(super) struct Weights<'a> {
    /// The fp32 master weights (LayerNorm parameters, biases and the embedding tables are
    /// read from them in every precision).
    pub master: &'a Buffer<f32>,
    /// Under mixed precision the weights the products read: the master weights rounded to
    /// bf16 (fp16), refreshed after every update.
    pub compute: Option<&'a Act>,
    pub layout: &'a ShardLayout,
}

impl Weights<'_> {
    /// A tensor of the fp32 master weights.
    pub fn p(&self, t: ParamTensor, layer: usize) -> Result<View<'_, f32>> {
        Ok(self.master.view(self.layout.range(t, layer))?)
    }

    /// A weight matrix as the products read it: the compute weights under mixed precision,
    /// else the master weights.
    pub fn m(&self, t: ParamTensor, layer: usize) -> Result<Operand<'_>> {
        match self.compute {
            Some(compute) => compute.view(self.layout.range(t, layer)),
            None => Ok(Operand::F32(self.p(t, layer)?)),
        }
    }
}

/// The attention output and log-sum-exp: the layer's own, or under selective recomputation
/// the shared scratch.
pub(super) fn attention_buffers<'a>(
    atty: &'a mut Option<Act>,
    lse: &'a mut Option<Buffer<f32>>,
    s_atty: &'a mut Act,
    s_lse: &'a mut Buffer<f32>,
) -> (&'a mut Act, &'a mut Buffer<f32>) {
    match (atty.as_mut(), lse.as_mut()) {
        (Some(x), Some(y)) => (x, y),
        _ => (s_atty, s_lse),
    }
}

/// `local`'s rows from every tensor-parallel rank gathered into `full` (sequence parallelism's
/// f forward and g backward), or, without sequence parallelism, `local` itself.
pub(super) fn gathered<'a>(
    tp: &mut TpGroup,
    full: Option<&'a mut Buffer<f32>>,
    local: View<'a, f32>,
) -> Result<View<'a, f32>> {
    match full {
        Some(full) => {
            tp.all_gather_rows(&local, &mut full.view_mut(..)?)?;
            let full: &'a Buffer<f32> = full;
            Ok(full.view(..)?)
        }
        None => Ok(local),
    }
}

/// [`gathered`] for a tensor of either storage. The collectives move f32, so 16-bit rows are
/// widened (exactly) before the all-gather; the product that reads the gathered rows narrows
/// them again.
pub(super) fn gathered_act<'a>(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    full: Option<&'a mut Buffer<f32>>,
    local: Operand<'a>,
) -> Result<Operand<'a>> {
    let Some(full) = full else { return Ok(local) };
    match local {
        Operand::F32(v) => tp.all_gather_rows(&v, &mut full.view_mut(..)?)?,
        Operand::Half(..) => {
            let mut wide = Buffer::<f32>::uninit(ctx.device(), local.len())?;
            ops::mixed::convert(ctx, &mut OperandMut::F32(wide.view_mut(..)?), local)?;
            tp.all_gather_rows(&wide.view(..)?, &mut full.view_mut(..)?)?;
        }
    }
    let full: &'a Buffer<f32> = full;
    Ok(Operand::F32(full.view(..)?))
}

/// Row-parallel linear layer forward: the local product over this rank's input columns, the
/// bias added on tensor-parallel rank 0 only, then g: the sum over the group, all-reduced in
/// `s.proj` or, under sequence parallelism, reduce-scattered onto this rank's rows in
/// `proj_local`. Returns the buffer that holds the result.
#[allow(clippy::too_many_arguments)]
fn row_parallel_forward<'s>(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    (proj, proj_local): (&'s mut Buffer<f32>, Option<&'s mut Buffer<f32>>),
    inp: Operand,
    w: Operand,
    bias: View<f32>,
    n: usize,
    ic_local: usize,
    oc: usize,
) -> Result<&'s Buffer<f32>> {
    let bias = (tp.rank == 0).then_some(bias);
    let mut out = OperandMut::F32(proj.view_mut(..)?);
    ops::mixed::linear_forward(ctx, &mut out, inp, w, bias, None, n, ic_local, oc)?;
    let mut out = proj.view_mut(..)?;
    match proj_local {
        Some(local) => {
            tp.reduce_scatter_rows(&out.as_view(), &mut local.view_mut(..)?)?;
            Ok(local)
        }
        None => {
            tp.all_reduce_view(&mut out)?;
            Ok(proj)
        }
    }
}

/// A row-parallel projection back onto the residual stream: `out = residual + g(inp W^T) +
/// bias`, with the residual and the bias added in the GEMM's epilogue (the fused residual
/// projection) on every grid: tensor-parallel rank 0 computes `residual + inp W^T + bias`
/// over its input columns and the others their partial product, so that g's all-reduce, run
/// in place on `out`, leaves the whole sum (in a group of one: no collective, no copy). Under
/// sequence parallelism the residual holds only this rank's rows, so the whole-row product is
/// reduce-scattered first and the residual added after. `(n, ic_local, ns)`: token rows, this
/// rank's input columns, rows of the residual stream held here.
#[allow(clippy::too_many_arguments)]
fn project_onto(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    bufs: (&mut Buffer<f32>, Option<&mut Buffer<f32>>),
    out: &mut Buffer<f32>,
    inp: Operand,
    (w, bias): (Operand, View<f32>),
    residual: &Buffer<f32>,
    (n, ic_local, ns): (usize, usize, usize),
) -> Result<()> {
    let c = out.len() / ns.max(1);
    if bufs.1.is_some() {
        let proj = row_parallel_forward(ctx, tp, bufs, inp, w, bias, n, ic_local, c)?;
        ops::residual_forward(ctx, &mut out.view_mut(..)?, residual.view(..)?, proj.view(..)?, ns * c)?;
        return Ok(());
    }
    let mut y = OperandMut::F32(out.view_mut(..)?);
    if tp.rank == 0 {
        let residual = Operand::F32(residual.view(..)?);
        ops::mixed::linear_forward(ctx, &mut y, inp, w, Some(bias), Some(residual), n, ic_local, c)?;
    } else {
        ops::mixed::linear_forward(ctx, &mut y, inp, w, None, None, n, ic_local, c)?;
    }
    Ok(tp.all_reduce_view(&mut out.view_mut(..)?)?)
}

/// Column-parallel linear layer backward: local weight gradients and the input gradient's
/// partial sums, then f's backward: the sum over the group into `dln`, all-reduced or,
/// under sequence parallelism, computed in `dln_full` and reduce-scattered onto this rank's
/// rows.
#[allow(clippy::too_many_arguments)]
pub(super) fn column_parallel_backward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    grads: &mut Buffer<f32>,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    (dln, dln_full): (&mut Buffer<f32>, Option<&mut Buffer<f32>>),
    dout: Operand,
    inp: Operand,
    (n, ic, oc_local): (usize, usize, usize),
) -> Result<()> {
    // The local products are a row-parallel backward's; only the reduction differs.
    let mut dln_full = dln_full;
    let partial = match dln_full.as_deref_mut() {
        Some(full) => full,
        None => &mut *dln,
    };
    let partial = &mut OperandMut::F32(partial.view_mut(..)?);
    row_parallel_backward(ctx, grads, w, (wt, bt, l), partial, dout, inp, None, (n, ic, oc_local))?;
    match dln_full {
        Some(full) => tp.reduce_scatter_rows(&full.view(..)?, &mut dln.view_mut(..)?)?,
        None => tp.all_reduce_view(&mut dln.view_mut(..)?)?,
    }
    Ok(())
}

/// The scratch's LayerNorm-gather and column-gradient buffers (sequence parallelism).
pub(super) fn sp_ln_buffers(
    sp: &mut Option<SpScratch>,
) -> (Option<&mut Buffer<f32>>, Option<&mut Buffer<f32>>) {
    match sp {
        Some(sp) => (Some(&mut sp.ln_full), Some(&mut sp.dln_full)),
        None => (None, None),
    }
}

/// Row-parallel linear layer backward: g's backward is the identity, so the local product
/// gives this rank's input columns' gradient; the replicated bias gets the same gradient on
/// every rank. With `gelu_x` (the layer's input is `gelu(gelu_x)`) the input gradient is
/// carried on through GeLU in the same pass: the gradient of `gelu_x`.
#[allow(clippy::too_many_arguments)]
pub(super) fn row_parallel_backward(
    ctx: &OpsContext,
    grads: &mut Buffer<f32>,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    dinp: &mut OperandMut,
    dout: Operand,
    inp: Operand,
    gelu_x: Option<Operand>,
    (n, ic_local, oc): (usize, usize, usize),
) -> Result<()> {
    let [mut dw, mut db] = grads.views_mut([w.layout.range(wt, l), w.layout.range(bt, l)])?;
    let (wm, db) = (w.m(wt, l)?, Some(&mut db));
    match gelu_x {
        Some(x) => {
            ops::mixed::linear_backward_gelu(ctx, dinp, &mut dw, db, dout, inp, wm, x, n, ic_local, oc)?
        }
        None => ops::mixed::linear_backward(ctx, dinp, &mut dw, db, dout, inp, wm, n, ic_local, oc)?,
    }
    Ok(())
}

/// A LayerNorm of this rank's residual rows (`ns` of them).
#[allow(clippy::too_many_arguments)]
pub(super) fn layernorm_rows(
    ctx: &OpsContext,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    out: &mut Act,
    mean: &mut Buffer<f32>,
    rstd: &mut Buffer<f32>,
    x: &Buffer<f32>,
    d: Dims,
) -> Result<()> {
    let (mut out, mut mean, mut rstd) = (out.all_mut()?, mean.view_mut(..)?, rstd.view_mut(..)?);
    ops::mixed::layernorm_forward(
        ctx,
        &mut out,
        &mut mean,
        &mut rstd,
        x.view(..)?,
        w.p(wt, l)?,
        w.p(bt, l)?,
        d.ns,
        d.c,
    )?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn layer_forward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    w: &Weights,
    d: Dims,
    s: &mut Scratch,
    l: usize,
    x: &Buffer<f32>,
    a: &mut LayerActs,
) -> Result<()> {
    let Dims { b, t, n, c, cl, heads, fl, ns, .. } = d;
    let p = |t: ParamTensor| w.p(t, l);
    let ln1 = (ParamTensor::Ln1W, ParamTensor::Ln1B, l);
    layernorm_rows(ctx, w, ln1, &mut a.ln1, &mut a.ln1_mean, &mut a.ln1_rstd, x, d)?;
    store_acts(ctx, d, &mut [&mut a.ln1])?;
    // f, then QKV: column parallel over this rank's heads.
    let (qkvw, qkvb) = (w.m(ParamTensor::QkvW, l)?, p(ParamTensor::QkvB)?);
    let ln = gathered_act(ctx, tp, s.sp.as_mut().map(|sp| &mut sp.ln_full), a.ln1.all()?)?;
    ops::mixed::linear_forward(ctx, &mut a.qkv.all_mut()?, ln, qkvw, Some(qkvb), None, n, c, 3 * cl)?;
    store_acts(ctx, d, &mut [&mut a.qkv])?;
    let (atty, lse) = attention_buffers(&mut a.atty, &mut a.lse, &mut s.atty, &mut s.lse);
    let mut lse = lse.view_mut(..)?;
    ops::mixed::attention_forward(ctx, &mut atty.all_mut()?, &mut lse, a.qkv.all()?, b, t, cl, heads)?;
    store_acts(ctx, d, &mut [&mut *atty])?;
    let atty = atty.all()?;
    let (pw, pb) = (w.m(ParamTensor::AttnProjW, l)?, p(ParamTensor::AttnProjB)?);
    let bufs = (&mut s.proj, s.sp.as_mut().map(|sp| &mut sp.proj_local));
    project_onto(ctx, tp, bufs, &mut a.res2, atty, (pw, pb), x, (n, cl, ns))?;
    let ln2 = (ParamTensor::Ln2W, ParamTensor::Ln2B, l);
    layernorm_rows(ctx, w, ln2, &mut a.ln2, &mut a.ln2_mean, &mut a.ln2_rstd, &a.res2, d)?;
    store_acts(ctx, d, &mut [&mut a.ln2])?;
    let (fcw, fcb) = (w.m(ParamTensor::FcW, l)?, p(ParamTensor::FcB)?);
    let ln = gathered_act(ctx, tp, s.sp.as_mut().map(|sp| &mut sp.ln_full), a.ln2.all()?)?;
    ops::mixed::linear_forward(ctx, &mut a.fch.all_mut()?, ln, fcw, Some(fcb), None, n, c, fl)?;
    store_acts(ctx, d, &mut [&mut a.fch])?;
    ops::mixed::gelu_forward(ctx, &mut a.fch_gelu.all_mut()?, a.fch.all()?, n * fl)?;
    store_acts(ctx, d, &mut [&mut a.fch_gelu])?;
    let (pw, pb) = (w.m(ParamTensor::FcProjW, l)?, p(ParamTensor::FcProjB)?);
    let bufs = (&mut s.proj, s.sp.as_mut().map(|sp| &mut sp.proj_local));
    project_onto(ctx, tp, bufs, &mut a.res3, a.fch_gelu.all()?, (pw, pb), &a.res2, (n, fl, ns))
}

/// Backward of one layer: `s.dres` holds the gradient of the layer's output on entry and of
/// its input `x` on return (this rank's rows under sequence parallelism).
#[allow(clippy::too_many_arguments)]
pub(super) fn layer_backward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    w: &Weights,
    grads: &mut Buffer<f32>,
    d: Dims,
    s: &mut Scratch,
    l: usize,
    x: &Buffer<f32>,
    a: &LayerActs,
) -> Result<()> {
    let Dims { b, t, n, c, cl, heads, fl, ns, .. } = d;
    // MLP: FC proj (row parallel), GeLU, FC (column parallel, then f's backward), LN2.
    let fcproj = (ParamTensor::FcProjW, ParamTensor::FcProjB, l);
    let dres = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.dres_full), s.dres.view(..)?)?;
    // The projection's input gradient carried on through GeLU in the same pass: dfch =
    // (dres W) x gelu'(fch).
    let (dout, inp, fch) = (Operand::F32(dres), a.fch_gelu.all()?, Some(a.fch.all()?));
    row_parallel_backward(ctx, grads, w, fcproj, &mut s.dfch.all_mut()?, dout, inp, fch, (n, fl, c))?;
    store_acts(ctx, d, &mut [&mut s.dfch])?;
    let fc = (ParamTensor::FcW, ParamTensor::FcB, l);
    let (ln_full, dln_full) = sp_ln_buffers(&mut s.sp);
    let ln2_rows = gathered_act(ctx, tp, ln_full, a.ln2.all()?)?;
    let dln = (&mut s.dln, dln_full);
    column_parallel_backward(ctx, tp, grads, w, fc, dln, s.dfch.all()?, ln2_rows, (n, c, fl))?;
    let ln2 = (ParamTensor::Ln2W, ParamTensor::Ln2B, l);
    layernorm_backward(ctx, tp, grads, w, ln2, s, &a.res2, &a.ln2_mean, &a.ln2_rstd, ns, c)?;
    // Attention: proj (row parallel), attention over the local heads, QKV (column parallel), LN1.
    if a.atty.is_none() {
        // Selective recomputation: the attention output was not kept.
        let (mut atty, mut lse) = (s.atty.all_mut()?, s.lse.view_mut(..)?);
        ops::mixed::attention_forward(ctx, &mut atty, &mut lse, a.qkv.all()?, b, t, cl, heads)?;
        store_acts(ctx, d, &mut [&mut s.atty])?;
    }
    let (atty, lse) = match (&a.atty, &a.lse) {
        (Some(x), Some(y)) => (x, y),
        _ => (&s.atty, &s.lse),
    };
    let proj = (ParamTensor::AttnProjW, ParamTensor::AttnProjB, l);
    let dres = gathered(tp, s.sp.as_mut().map(|sp| &mut sp.dres_full), s.dres.view(..)?)?;
    let (dout, inp) = (Operand::F32(dres), atty.all()?);
    row_parallel_backward(ctx, grads, w, proj, &mut s.datty.all_mut()?, dout, inp, None, (n, cl, c))?;
    store_acts(ctx, d, &mut [&mut s.datty])?;
    let (datty, qkv) = (s.datty.all()?, a.qkv.all()?);
    ops::mixed::attention_backward(
        ctx,
        &mut s.dqkv.all_mut()?,
        datty,
        qkv,
        atty.all()?,
        lse.view(..)?,
        b,
        t,
        cl,
        heads,
    )?;
    store_acts(ctx, d, &mut [&mut s.dqkv])?;
    let qkvt = (ParamTensor::QkvW, ParamTensor::QkvB, l);
    let (ln_full, dln_full) = sp_ln_buffers(&mut s.sp);
    let ln1_rows = gathered_act(ctx, tp, ln_full, a.ln1.all()?)?;
    let dln = (&mut s.dln, dln_full);
    column_parallel_backward(ctx, tp, grads, w, qkvt, dln, s.dqkv.all()?, ln1_rows, (n, c, 3 * cl))?;
    let ln1 = (ParamTensor::Ln1W, ParamTensor::Ln1B, l);
    layernorm_backward(ctx, tp, grads, w, ln1, s, x, &a.ln1_mean, &a.ln1_rstd, ns, c)
}

/// LayerNorm backward of this rank's `n` rows from `s.dln`, accumulating into `s.dres` (the
/// residual stream). Under sequence parallelism the weight and bias gradients of these rows
/// are summed over the tensor-parallel group before they join the gradients.
#[allow(clippy::too_many_arguments)]
pub(super) fn layernorm_backward(
    ctx: &OpsContext,
    tp: &mut TpGroup,
    grads: &mut Buffer<f32>,
    w: &Weights,
    (wt, bt, l): (ParamTensor, ParamTensor, usize),
    s: &mut Scratch,
    x: &Buffer<f32>,
    mean: &Buffer<f32>,
    rstd: &Buffer<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    let (dy, x, mean, rstd) = (s.dln.view(..)?, x.view(..)?, mean.view(..)?, rstd.view(..)?);
    let (wr, br) = (w.layout.range(wt, l), w.layout.range(bt, l));
    let Some(sp) = &mut s.sp else {
        let [mut dw, mut db] = grads.views_mut([wr, br])?;
        let mut dres = s.dres.view_mut(..)?;
        ops::layernorm_backward(ctx, &mut dres, &mut dw, &mut db, dy, x, w.p(wt, l)?, mean, rstd, n, c)?;
        return Ok(());
    };
    sp.dln_params.view_mut(..)?.fill_zero()?;
    let [mut dw, mut db] = sp.dln_params.views_mut([0..c, c..2 * c])?;
    let mut dres = s.dres.view_mut(..)?;
    ops::layernorm_backward(ctx, &mut dres, &mut dw, &mut db, dy, x, w.p(wt, l)?, mean, rstd, n, c)?;
    // The TP group's sum of the weight and bias gradients, added onto this rank's on the
    // device (Megatron-LM sums sequence-parallel LayerNorm gradients over TP the same way).
    tp.all_reduce_view(&mut sp.dln_params.view_mut(..)?)?;
    ops::accumulate(ctx, &mut grads.view_mut(wr)?, sp.dln_params.view(..c)?, c)?;
    ops::accumulate(ctx, &mut grads.view_mut(br)?, sp.dln_params.view(c..)?, c)?;
    Ok(())
}
