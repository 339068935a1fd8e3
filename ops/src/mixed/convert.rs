//! Conversions between f32 and 16-bit operands, and the borrowed-or-converted views the other
//! ops build on.

use trident_runtime::{Buffer, Device, View, ViewMut};

use super::super::{check, OpsContext, Result};
use super::{Operand, OperandMut};
use crate::launch::{self, HalfFormat};

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
pub(super) fn host_narrow(format: HalfFormat) -> fn(f32) -> u16 {
    use trident_kernels::simt::{f32_to_bf16, f32_to_f16};
    match format {
        HalfFormat::Bf16 => f32_to_bf16,
        HalfFormat::F16 => f32_to_f16,
    }
}

pub(super) fn host_widen(format: HalfFormat) -> fn(u16) -> f32 {
    use trident_kernels::simt::{bf16_to_f32, f16_to_f32};
    match format {
        HalfFormat::Bf16 => bf16_to_f32,
        HalfFormat::F16 => f16_to_f32,
    }
}

/// f32 values: borrowed, or widened into a buffer of their own.
pub(super) enum Wide<'a> {
    View(View<'a, f32>),
    Owned(Buffer<f32>),
}

impl Wide<'_> {
    pub(super) fn view(&self) -> Result<View<'_, f32>> {
        Ok(match self {
            Wide::View(v) => *v,
            Wide::Owned(b) => b.view(..)?,
        })
    }
}

/// `x` as f32 values.
pub(super) fn wide<'a>(ctx: &OpsContext, x: Operand<'a>) -> Result<Wide<'a>> {
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
pub(super) enum Narrow<'a> {
    View(View<'a, u16>),
    Owned(Buffer<u16>),
}

impl Narrow<'_> {
    pub(super) fn view(&self) -> Result<View<'_, u16>> {
        Ok(match self {
            Narrow::View(v) => *v,
            Narrow::Owned(b) => b.view(..)?,
        })
    }
}

/// `x` as `format` values (an f32 operand rounded; one of the other 16-bit format refused).
pub(super) fn narrow<'a>(ctx: &OpsContext, x: Operand<'a>, format: HalfFormat) -> Result<Narrow<'a>> {
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
pub(super) fn into_f32(
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
pub(super) fn into_half(
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
