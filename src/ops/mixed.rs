//! Ops whose tensors may be 16-bit (mixed precision): one function per op over [`Operand`]s, f32
//! or bf16/f16 buffers alike, on every device.
//!
//! - All operands f32: the f32 op of this module's parent, bit for bit (the reference path,
//!   fp32 training and the Cpu's mixed precision, which stores rounded values in f32 buffers).
//! - A 16-bit weight on a kernel device (`Emu`, `Cuda`): the linear layers run on the
//!   tensor-core GEMM (`launch::gemm_tc`, f32 accumulation, bias and residual in the epilogue,
//!   f32 or 16-bit output), attention on flash attention when its queries are bf16 with a head
//!   size of 64 or 128 (`launch::flash_attention_*`).
//! - Anything else (an f32 operand beside 16-bit ones, a kernel that is not built for a shape
//!   or format): the 16-bit operands are widened to f32 (exact), the f32 op runs, and a 16-bit
//!   output is narrowed (rounded to nearest, ties to even). Those are the values the Cpu stores,
//!   so every path agrees with it up to the order of f32 sums.
//!
//! Conversions allocate their f32 or 16-bit buffers per call (freed in stream order after the
//! work that reads them, like `gemm_tc`'s split-K workspace); they are transient and not in
//! any memory report.

use trident_runtime::{Buffer, Device, View, ViewMut};

use super::{check, OpsContext, Result};
use crate::launch::{
    self, FlashAttentionShape, GemmTc, GemmTcOutput, HalfFormat, HalfType, FLASH_HEAD_SIZES,
};

/// An input of the mixed-precision ops: f32 values, or 16-bit ones (`format` bits as `u16`).
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// f32 values.
    F32(View<'a, f32>),
    /// bf16 or f16 values.
    Half(View<'a, u16>, HalfFormat),
}

/// An output of the mixed-precision ops: f32 or 16-bit, as [`Operand`].
#[derive(Debug)]
pub enum OperandMut<'a> {
    /// f32 values.
    F32(ViewMut<'a, f32>),
    /// bf16 or f16 values.
    Half(ViewMut<'a, u16>, HalfFormat),
}

impl<'a> Operand<'a> {
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            Operand::F32(v) => v.len(),
            Operand::Half(v, _) => v.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The 16-bit format, or `None` for f32.
    pub fn format(&self) -> Option<HalfFormat> {
        match self {
            Operand::F32(_) => None,
            Operand::Half(_, f) => Some(*f),
        }
    }

    /// The device the values live on.
    pub fn device(&self) -> &'a Device {
        match self {
            Operand::F32(v) => v.device(),
            Operand::Half(v, _) => v.device(),
        }
    }

    fn as_f32(&self) -> Option<View<'a, f32>> {
        match self {
            Operand::F32(v) => Some(*v),
            Operand::Half(..) => None,
        }
    }
}

impl OperandMut<'_> {
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            OperandMut::F32(v) => v.len(),
            OperandMut::Half(v, _) => v.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The 16-bit format, or `None` for f32.
    pub fn format(&self) -> Option<HalfFormat> {
        match self {
            OperandMut::F32(_) => None,
            OperandMut::Half(_, f) => Some(*f),
        }
    }

    /// The same elements, read-only.
    pub fn as_operand(&self) -> Operand<'_> {
        match self {
            OperandMut::F32(v) => Operand::F32(v.as_view()),
            OperandMut::Half(v, f) => Operand::Half(v.as_view(), *f),
        }
    }

    fn device(&self) -> &Device {
        match self {
            OperandMut::F32(v) => v.device(),
            OperandMut::Half(v, _) => v.device(),
        }
    }
}

/// `out = inp` converted to `out`'s type: f32 to 16-bit rounds to nearest (ties to even; f16
/// overflows to infinity), 16-bit to f32 is exact, equal types copy. Between bf16 and f16 is
/// refused (nothing converts between them).
pub fn convert(ctx: &OpsContext, out: &mut OperandMut, inp: Operand) -> Result<()> {
    const OP: &str = "convert";
    check::len(OP, "out", out.len(), inp.len(), &format!("[{}]", inp.len()))?;
    check::devices(ctx, OP, &[("out", out.device()), ("inp", inp.device())])?;
    match (out, inp) {
        (OperandMut::F32(o), Operand::F32(i)) => Ok(o.copy_from(&i)?),
        (OperandMut::Half(o, fo), Operand::Half(i, fi)) => {
            check::that(OP, *fo == fi, || format!("{fi:?} values into a {fo:?} buffer"))?;
            Ok(o.copy_from(&i)?)
        }
        (OperandMut::Half(o, format), Operand::F32(i)) => match ctx.device() {
            Device::Cpu => {
                let narrow = host_narrow(*format);
                let x = check::host(OP, i)?;
                check::host_mut(OP, o)?.iter_mut().zip(x).for_each(|(o, x)| *o = narrow(*x));
                Ok(())
            }
            Device::Emu | Device::Cuda(_) => Ok(launch::narrow(ctx.kernels()?, o, &i, *format)?),
        },
        (OperandMut::F32(o), Operand::Half(i, format)) => match ctx.device() {
            Device::Cpu => {
                let widen = host_widen(format);
                let x = check::host(OP, i)?;
                check::host_mut(OP, o)?.iter_mut().zip(x).for_each(|(o, x)| *o = widen(*x));
                Ok(())
            }
            Device::Emu | Device::Cuda(_) => Ok(launch::widen(ctx.kernels()?, o, &i, format)?),
        },
    }
}

/// The host's rounding to `format`: the kernels' integer arithmetic, so the bits agree.
fn host_narrow(format: HalfFormat) -> fn(f32) -> u16 {
    use trident_kernels::simt::{f32_to_bf16, f32_to_f16};
    match format {
        HalfFormat::Bf16 => f32_to_bf16,
        HalfFormat::F16 => f32_to_f16,
    }
}

fn host_widen(format: HalfFormat) -> fn(u16) -> f32 {
    use trident_kernels::simt::{bf16_to_f32, f16_to_f32};
    match format {
        HalfFormat::Bf16 => bf16_to_f32,
        HalfFormat::F16 => f16_to_f32,
    }
}

/// f32 values: borrowed, or widened into a buffer of their own.
enum Wide<'a> {
    View(View<'a, f32>),
    Owned(Buffer<f32>),
}

impl Wide<'_> {
    fn view(&self) -> Result<View<'_, f32>> {
        Ok(match self {
            Wide::View(v) => *v,
            Wide::Owned(b) => b.view(..)?,
        })
    }
}

/// `x` as f32 values.
fn wide<'a>(ctx: &OpsContext, x: Operand<'a>) -> Result<Wide<'a>> {
    match x {
        Operand::F32(v) => Ok(Wide::View(v)),
        Operand::Half(..) => {
            let mut b = Buffer::<f32>::uninit(ctx.device(), x.len())?;
            convert(ctx, &mut OperandMut::F32(b.view_mut(..)?), x)?;
            Ok(Wide::Owned(b))
        }
    }
}

/// 16-bit values: borrowed, or narrowed into a buffer of their own.
enum Narrow<'a> {
    View(View<'a, u16>),
    Owned(Buffer<u16>),
}

impl Narrow<'_> {
    fn view(&self) -> Result<View<'_, u16>> {
        Ok(match self {
            Narrow::View(v) => *v,
            Narrow::Owned(b) => b.view(..)?,
        })
    }
}

/// `x` as `format` values (an f32 operand rounded; one of the other 16-bit format refused).
fn narrow<'a>(ctx: &OpsContext, x: Operand<'a>, format: HalfFormat) -> Result<Narrow<'a>> {
    match x {
        Operand::Half(v, f) if f == format => Ok(Narrow::View(v)),
        _ => {
            let mut b = Buffer::<u16>::uninit(ctx.device(), x.len())?;
            convert(ctx, &mut OperandMut::Half(b.view_mut(..)?, format), x)?;
            Ok(Narrow::Owned(b))
        }
    }
}

/// Runs `f` on an f32 output standing for `out`: `out` itself, or a buffer narrowed into
/// `out` afterwards. With `read`, the buffer starts with `out`'s values (an op that updates
/// its output in place).
fn into_f32(
    ctx: &OpsContext,
    out: &mut OperandMut,
    read: bool,
    f: impl FnOnce(&mut ViewMut<f32>) -> Result<()>,
) -> Result<()> {
    match out {
        OperandMut::F32(o) => f(o),
        OperandMut::Half(..) => {
            let mut tmp = Buffer::<f32>::uninit(ctx.device(), out.len())?;
            if read {
                convert(ctx, &mut OperandMut::F32(tmp.view_mut(..)?), out.as_operand())?;
            }
            f(&mut tmp.view_mut(..)?)?;
            convert(ctx, out, Operand::F32(tmp.view(..)?))
        }
    }
}

/// Runs `f` on a `format` output standing for `out`: `out` itself when it is `format`, else a
/// buffer converted into `out` afterwards.
fn into_half(
    ctx: &OpsContext,
    out: &mut OperandMut,
    format: HalfFormat,
    f: impl FnOnce(&mut ViewMut<u16>) -> Result<()>,
) -> Result<()> {
    match out {
        OperandMut::Half(o, fo) if *fo == format => f(o),
        _ => {
            let mut tmp = Buffer::<u16>::uninit(ctx.device(), out.len())?;
            f(&mut tmp.view_mut(..)?)?;
            convert(ctx, out, Operand::Half(tmp.view(..)?, format))
        }
    }
}

fn half_type(format: HalfFormat) -> HalfType {
    match format {
        HalfFormat::Bf16 => HalfType::Bf16,
        HalfFormat::F16 => HalfType::F16,
    }
}

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
            None => return super::matmul_forward(ctx, o, x, w, bias, n, ic, oc),
            Some(Some(r)) => return super::matmul_residual_forward(ctx, o, x, w, bias, r, n, ic, oc),
            Some(None) => {}
        }
    }
    if let Some(format) = tensor_core_format(ctx, &weight, &[ic]) {
        let Operand::Half(w, _) = weight else { unreachable!("a tensor-core weight is 16-bit") };
        let x = narrow(ctx, inp, format)?;
        let spec = GemmTc::new(n, oc, ic, half_type(format)).trans_b();
        return gemm_tc_into(ctx, out, (x.view()?, w), bias, residual, &spec);
    }
    let (x, w) = (wide(ctx, inp)?, wide(ctx, weight)?);
    let r = residual.map(|r| wide(ctx, r)).transpose()?;
    into_f32(ctx, out, false, |o| match &r {
        None => super::matmul_forward(ctx, o, x.view()?, w.view()?, bias, n, ic, oc),
        Some(r) => super::matmul_residual_forward(ctx, o, x.view()?, w.view()?, bias, r.view()?, n, ic, oc),
    })
}

/// Gradient of [`linear_forward`]: `dinp = dout weight` (overwritten, f32 or 16-bit as `dinp`
/// is), `dweight += dout^T inp` and `dbias += dout` summed over rows, both in f32 (accumulated,
/// so micro-batches add up). With a 16-bit weight on a kernel device the two products run on
/// tensor cores (`nn` and `tn`, f32 accumulation).
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
    const OP: &str = "linear_backward";
    check::len(OP, "dinp", dinp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(OP, "dout", dout.len(), n * oc, &format!("[n={n}, oc={oc}]"))?;
    check::len(OP, "inp", inp.len(), n * ic, &format!("[n={n}, ic={ic}]"))?;
    check::len(OP, "weight", weight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    check::len(OP, "dweight", dweight.len(), oc * ic, &format!("[oc={oc}, ic={ic}]"))?;
    if let (OperandMut::F32(d), Some(dy), Some(x), Some(w)) =
        (&mut *dinp, dout.as_f32(), inp.as_f32(), weight.as_f32())
    {
        return super::matmul_backward(ctx, d, dweight, dbias, dy, x, w, n, ic, oc);
    }
    if let Some(format) = tensor_core_format(ctx, &weight, &[ic, oc]) {
        let Operand::Half(w, _) = weight else { unreachable!("a tensor-core weight is 16-bit") };
        let k = ctx.kernels()?;
        let (dy, x) = (narrow(ctx, dout, format)?, narrow(ctx, inp, format)?);
        let (dy, x) = (dy.view()?, x.view()?);
        let t = half_type(format);
        // dinp[n, ic] = dout[n, oc] W[oc, ic].
        gemm_tc_into(ctx, dinp, (dy, w), None, None, &GemmTc::new(n, ic, oc, t))?;
        // dW[oc, ic] += dout^T x: the product into a buffer of its own, then added (the
        // epilogue's residual cannot alias the output it writes through another view).
        let mut dw = Buffer::<f32>::uninit(ctx.device(), oc * ic)?;
        let spec = GemmTc::new(oc, ic, n, t).trans_a();
        launch::gemm_tc(k, &mut dw.view_mut(..)?, &dy, &x, None, None::<&View<f32>>, &spec)?;
        launch::add_assign(k, dweight, &dw.view(..)?)?;
        if let Some(db) = dbias {
            check::len(OP, "dbias", db.len(), oc, &format!("[oc={oc}]"))?;
            // The bias gradient sums f32 rows (no 16-bit column-sum kernel yet: a 16-bit
            // `dout` is widened for it).
            let dy = wide(ctx, dout)?;
            launch::bias_backward(k, db, &dy.view()?, n, oc)?;
        }
        return Ok(());
    }
    let (dy, x, w) = (wide(ctx, dout)?, wide(ctx, inp)?, wide(ctx, weight)?);
    into_f32(ctx, dinp, false, |d| {
        super::matmul_backward(ctx, d, dweight, dbias, dy.view()?, x.view()?, w.view()?, n, ic, oc)
    })
}

/// Why attention over heads of `hs` channels stored in `format` (`None`: f32) on `device` does
/// not run on flash attention, or `None` when it does (given 16-byte aligned buffers, as the
/// model's are): flash attention is built for bf16 and head sizes 64 and 128 on the kernel
/// devices; fp16, other head sizes, fp32 and the `Cpu` take the f32 attention kernel.
pub fn flash_attention_refusal(device: &Device, format: Option<HalfFormat>, hs: usize) -> Option<String> {
    match (device, format) {
        (Device::Cpu, _) => Some("the cpu computes attention in f32".into()),
        (_, None) => Some("fp32 runs the f32 attention kernel".into()),
        (_, Some(HalfFormat::F16)) => {
            Some("flash attention is built for bf16 only; fp16 widens to the f32 kernel".into())
        }
        (_, Some(HalfFormat::Bf16)) if !FLASH_HEAD_SIZES.contains(&hs) => {
            Some(format!("head size {hs} is not one of flash attention's {FLASH_HEAD_SIZES:?}"))
        }
        _ => None,
    }
}

/// Whether attention of `qkv` runs on flash attention ([`flash_attention_refusal`] has no
/// objection and `qkv` is 16-byte aligned). The backward takes the same path as the forward
/// (their log-sum-exps are each other's).
fn flash_attention(ctx: &OpsContext, qkv: &Operand, c: usize, nh: usize) -> bool {
    let hs = c.checked_div(nh).unwrap_or(0);
    nh * hs == c
        && flash_attention_refusal(ctx.device(), qkv.format(), hs).is_none()
        && matches!(qkv, Operand::Half(v, _) if v.addr() % 16 == 0)
}

/// Causal self-attention ([`super::attention_forward`]) of `qkv` `[b, t, 3c]` into `out`
/// `[b, t, c]`, f32 or 16-bit, and the f32 log-sum-exp `lse` `[b, nh, t]`; on flash
/// attention where [`flash_attention`] allows.
#[allow(clippy::too_many_arguments)]
pub fn attention_forward(
    ctx: &OpsContext,
    out: &mut OperandMut,
    lse: &mut ViewMut<f32>,
    qkv: Operand,
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) -> Result<()> {
    const OP: &str = "attention_forward";
    if let (OperandMut::F32(o), Some(x)) = (&mut *out, qkv.as_f32()) {
        return super::attention_forward(ctx, o, lse, x, b, t, c, nh);
    }
    if flash_attention(ctx, &qkv, c, nh) {
        check::len(OP, "out", out.len(), b * t * c, &format!("[b={b}, t={t}, c={c}]"))?;
        let Operand::Half(x, _) = qkv else { unreachable!("flash attention reads bf16") };
        let s = FlashAttentionShape { b, t, nh, hs: c / nh };
        let k = ctx.kernels()?;
        return into_half(ctx, out, HalfFormat::Bf16, |o| {
            Ok(launch::flash_attention_forward(k, o, lse, &x, &s)?)
        });
    }
    let x = wide(ctx, qkv)?;
    into_f32(ctx, out, false, |o| super::attention_forward(ctx, o, lse, x.view()?, b, t, c, nh))
}

/// Gradient of [`attention_forward`]: `dqkv` (overwritten, f32 or 16-bit) from `dout`, the
/// forward's `qkv`, `out` and `lse`; on flash attention exactly when the forward was.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    ctx: &OpsContext,
    dqkv: &mut OperandMut,
    dout: Operand,
    qkv: Operand,
    out: Operand,
    lse: View<f32>,
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) -> Result<()> {
    const OP: &str = "attention_backward";
    if let (OperandMut::F32(d), Some(dy), Some(x), Some(y)) =
        (&mut *dqkv, dout.as_f32(), qkv.as_f32(), out.as_f32())
    {
        return super::attention_backward(ctx, d, dy, x, y, lse, b, t, c, nh);
    }
    if flash_attention(ctx, &qkv, c, nh) {
        let shape = format!("[b={b}, t={t}, c={c}]");
        check::len(OP, "dout", dout.len(), b * t * c, &shape)?;
        check::len(OP, "out", out.len(), b * t * c, &shape)?;
        check::len(OP, "dqkv", dqkv.len(), 3 * b * t * c, &shape)?;
        let Operand::Half(x, _) = qkv else { unreachable!("flash attention reads bf16") };
        let s = FlashAttentionShape { b, t, nh, hs: c / nh };
        let k = ctx.kernels()?;
        let (dy, y) = (narrow(ctx, dout, HalfFormat::Bf16)?, narrow(ctx, out, HalfFormat::Bf16)?);
        let mut dsum = Buffer::<f32>::uninit(ctx.device(), s.stat_len())?;
        let mut dq_accum = Buffer::<f32>::uninit(ctx.device(), s.out_len())?;
        return into_half(ctx, dqkv, HalfFormat::Bf16, |d| {
            let (mut dsum, mut dq) = (dsum.view_mut(..)?, dq_accum.view_mut(..)?);
            let (dy, y) = (dy.view()?, y.view()?);
            Ok(launch::flash_attention_backward(k, d, &mut dsum, &mut dq, &dy, &x, &y, &lse, &s)?)
        });
    }
    let (dy, x, y) = (wide(ctx, dout)?, wide(ctx, qkv)?, wide(ctx, out)?);
    into_f32(ctx, dqkv, false, |d| {
        super::attention_backward(ctx, d, dy.view()?, x.view()?, y.view()?, lse, b, t, c, nh)
    })
}

/// LayerNorm ([`super::layernorm_forward`]) of f32 rows into `out`, f32 or 16-bit; the
/// statistics stay f32. A 16-bit `out` is narrowed from an f32 buffer (a LayerNorm kernel with
/// a 16-bit output, fusing that conversion, is not built yet).
#[allow(clippy::too_many_arguments)]
pub fn layernorm_forward(
    ctx: &OpsContext,
    out: &mut OperandMut,
    mean: &mut ViewMut<f32>,
    rstd: &mut ViewMut<f32>,
    inp: View<f32>,
    weight: View<f32>,
    bias: View<f32>,
    n: usize,
    c: usize,
) -> Result<()> {
    into_f32(ctx, out, false, |o| super::layernorm_forward(ctx, o, mean, rstd, inp, weight, bias, n, c))
}

/// GeLU ([`super::gelu_forward`]) of `inp` into `out`, either f32 or 16-bit. 16-bit operands
/// are converted around the f32 kernel (a 16-bit GeLU kernel is not built yet).
pub fn gelu_forward(ctx: &OpsContext, out: &mut OperandMut, inp: Operand, n: usize) -> Result<()> {
    let x = wide(ctx, inp)?;
    into_f32(ctx, out, false, |o| super::gelu_forward(ctx, o, x.view()?, n))
}

/// GeLU's backward in place ([`super::gelu_backward`]): `d` holds the output's gradient on
/// entry and the input's on return; `inp` is the forward's input. 16-bit operands are
/// converted around the f32 kernel (a 16-bit GeLU kernel is not built yet).
pub fn gelu_backward(ctx: &OpsContext, d: &mut OperandMut, inp: Operand, n: usize) -> Result<()> {
    let x = wide(ctx, inp)?;
    into_f32(ctx, d, true, |d| super::gelu_backward(ctx, d, x.view()?, n))
}

#[cfg(test)]
mod tests {
    use trident_kernels::simt::{bf16_to_f32, f32_to_bf16};
    use trident_runtime::Buffer;

    use super::*;
    use crate::model::init::NormalRng;

    /// `n` normal values of scale `scale`, rounded to bf16 (kept as f32).
    fn values(r: &mut NormalRng, n: usize, scale: f64) -> Vec<f32> {
        (0..n).map(|_| bf16_to_f32(f32_to_bf16((r.next_normal() * scale) as f32))).collect()
    }

    fn bf16_operand(b: &Buffer<u16>) -> Operand<'_> {
        Operand::Half(b.view(..).unwrap(), HalfFormat::Bf16)
    }

    fn f32_operand(b: &Buffer<f32>) -> Operand<'_> {
        Operand::F32(b.view(..).unwrap())
    }

    /// What one linear layer gives: the output and input gradient (as f32 values), the weight
    /// and bias gradients, and the kernels launched.
    struct Linear {
        out: Vec<f32>,
        dinp: Vec<f32>,
        dw: Vec<f32>,
        db: Vec<f32>,
        launches: std::collections::HashMap<&'static str, u64>,
    }

    /// Forward with bias and residual, then backward (onto gradients that start at 1), of an
    /// `[n, ic] x [oc, ic]^T` layer on `device`: bf16 buffers where `half`, else f32 buffers
    /// of the same values with the outputs rounded as the `Cpu` stores them.
    fn linear(device: &Device, half: bool, (n, ic, oc): (usize, usize, usize)) -> Linear {
        let ctx = OpsContext::new(device).unwrap();
        let r = &mut NormalRng::new(5);
        let (x, w, bias) = (values(r, n * ic, 1.0), values(r, oc * ic, 0.2), values(r, oc, 0.1));
        let (res, dy) = (values(r, n * oc, 1.0), values(r, n * oc, 1.0));
        let bf16 = |v: &[f32]| v.iter().map(|x| f32_to_bf16(*x)).collect::<Vec<u16>>();
        let half_buf = |v: &[f32]| Buffer::from_slice(device, &bf16(v)).unwrap();
        let f32_buf = |v: &[f32]| Buffer::<f32>::from_slice(device, v).unwrap();
        let bias = f32_buf(&bias);
        let (mut dw, mut db) = (f32_buf(&vec![1.0; oc * ic]), f32_buf(&vec![1.0; oc]));
        let (out, dinp) = if half {
            let f = HalfFormat::Bf16;
            let (x, w, res, dy) = (half_buf(&x), half_buf(&w), half_buf(&res), half_buf(&dy));
            let (mut out, mut dinp) = (
                Buffer::<u16>::zeros(device, n * oc).unwrap(),
                Buffer::<u16>::zeros(device, n * ic).unwrap(),
            );
            let op = bf16_operand;
            let mut o = OperandMut::Half(out.view_mut(..).unwrap(), f);
            let b = Some(bias.view(..).unwrap());
            linear_forward(&ctx, &mut o, op(&x), op(&w), b, Some(op(&res)), n, ic, oc).unwrap();
            let mut d = OperandMut::Half(dinp.view_mut(..).unwrap(), f);
            let (mut dwv, mut dbv) = (dw.view_mut(..).unwrap(), db.view_mut(..).unwrap());
            linear_backward(&ctx, &mut d, &mut dwv, Some(&mut dbv), op(&dy), op(&x), op(&w), n, ic, oc)
                .unwrap();
            let widen = |b: Buffer<u16>| b.to_vec().unwrap().into_iter().map(bf16_to_f32).collect::<Vec<_>>();
            (widen(out), widen(dinp))
        } else {
            let (x, w, res, dy) = (f32_buf(&x), f32_buf(&w), f32_buf(&res), f32_buf(&dy));
            let (mut out, mut dinp) = (f32_buf(&vec![0.0; n * oc]), f32_buf(&vec![0.0; n * ic]));
            let op = f32_operand;
            let mut o = OperandMut::F32(out.view_mut(..).unwrap());
            let b = Some(bias.view(..).unwrap());
            linear_forward(&ctx, &mut o, op(&x), op(&w), b, Some(op(&res)), n, ic, oc).unwrap();
            let mut d = OperandMut::F32(dinp.view_mut(..).unwrap());
            let (mut dwv, mut dbv) = (dw.view_mut(..).unwrap(), db.view_mut(..).unwrap());
            linear_backward(&ctx, &mut d, &mut dwv, Some(&mut dbv), op(&dy), op(&x), op(&w), n, ic, oc)
                .unwrap();
            for b in [&mut out, &mut dinp] {
                super::super::round_to(&ctx, &mut b.view_mut(..).unwrap(), HalfFormat::Bf16).unwrap();
            }
            (out.to_vec().unwrap(), dinp.to_vec().unwrap())
        };
        let launches = ctx.kernels().map(|k| k.launch_counts()).unwrap_or_default();
        Linear { out, dinp, dw: dw.to_vec().unwrap(), db: db.to_vec().unwrap(), launches }
    }

    /// Elementwise within `ulps` of bf16's spacing at each value (f32 sums in another order
    /// flip a rounding now and then: one spacing) plus `abs`.
    fn assert_near(what: &str, got: &[f32], want: &[f32], ulps: f32, abs: f32) {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((g - w).abs() <= ulps * w.abs() / 128.0 + abs, "{what}[{i}]: {g} vs {w}");
        }
    }

    fn launched(l: &Linear, prefix: &str) -> u64 {
        l.launches.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, n)| n).sum()
    }

    /// bf16 buffers on `Emu` run on the tensor-core GEMM (widths multiples of 8) or on the f32
    /// GEMM between conversions (an input width of 20), and agree with the `Cpu`'s f32 buffers
    /// of the same rounded values: the outputs within one bf16 rounding, the f32 gradients
    /// within f32 sums' reordering.
    #[test]
    fn bf16_linear_layers_agree_with_the_cpu_on_the_tensor_cores_and_off_them() {
        for (shape, tensor_cores) in [((24, 32, 48), true), ((24, 20, 48), false)] {
            let want = linear(&Device::Cpu, false, shape);
            let got = linear(&Device::Emu, true, shape);
            let case = format!("{shape:?}");
            assert_near(&format!("{case} out"), &got.out, &want.out, 1.0, 0.0);
            assert_near(&format!("{case} dinp"), &got.dinp, &want.dinp, 1.0, 0.0);
            assert_near(&format!("{case} dweight"), &got.dw, &want.dw, 0.0, 1e-4);
            assert_near(&format!("{case} dbias"), &got.db, &want.db, 0.0, 1e-4);
            let (tc, f32_gemm) =
                (launched(&got, "gemm_tc_bf16_"), launched(&got, "gemm_") - launched(&got, "gemm_tc"));
            if tensor_cores {
                assert_eq!((tc, f32_gemm), (3, 0), "{case}: {:?}", got.launches);
            } else {
                assert_eq!((tc, f32_gemm), (0, 3), "{case}: {:?}", got.launches);
            }
        }
    }

    /// The conversions keep the bits the host's rounding gives, on `Cpu` and `Emu`, and
    /// widening gives the values back exactly.
    #[test]
    fn conversions_round_on_every_device_and_widen_exactly() {
        let r = &mut NormalRng::new(9);
        let x: Vec<f32> = (0..1000).map(|i| (r.next_normal() * 10f64.powi(i % 10 - 5)) as f32).collect();
        for format in [HalfFormat::Bf16, HalfFormat::F16] {
            let want: Vec<u16> = x.iter().map(|v| host_narrow(format)(*v)).collect();
            for device in [Device::Cpu, Device::Emu] {
                let ctx = OpsContext::new(&device).unwrap();
                let src = Buffer::from_slice(&device, &x).unwrap();
                let mut half = Buffer::<u16>::zeros(&device, x.len()).unwrap();
                convert(
                    &ctx,
                    &mut OperandMut::Half(half.view_mut(..).unwrap(), format),
                    Operand::F32(src.view(..).unwrap()),
                )
                .unwrap();
                assert_eq!(half.to_vec().unwrap(), want, "{format:?} on {}", device.kind());
                let mut back = Buffer::<f32>::zeros(&device, x.len()).unwrap();
                let h = Operand::Half(half.view(..).unwrap(), format);
                convert(&ctx, &mut OperandMut::F32(back.view_mut(..).unwrap()), h).unwrap();
                let exact: Vec<f32> = want.iter().map(|b| host_widen(format)(*b)).collect();
                assert_eq!(back.to_vec().unwrap(), exact);
                let other = match format {
                    HalfFormat::Bf16 => HalfFormat::F16,
                    HalfFormat::F16 => HalfFormat::Bf16,
                };
                let mut wrong = Buffer::<u16>::zeros(&device, x.len()).unwrap();
                let err = convert(&ctx, &mut OperandMut::Half(wrong.view_mut(..).unwrap(), other), h);
                assert!(err.is_err(), "{format:?} into {other:?} is refused");
            }
        }
    }
}
