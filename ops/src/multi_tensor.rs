//! Optimizer ops over many tensors of one flat buffer at once: AdamW over every tensor in one
//! launch, and the sum of squares of many ranges (the gradient norm) in one reduction.

use std::ops::Range;

use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, AdamWParams, OpsContext, OpsError, Result};
use crate::launch::{self, AdamW};

/// Fails unless every range lies in `0..n`.
fn ranges_inside<'a>(
    op: &'static str,
    ranges: impl Iterator<Item = &'a Range<usize>>,
    n: usize,
) -> Result<()> {
    for r in ranges {
        check::that(op, r.start <= r.end && r.end <= n, || format!("range {r:?} is not inside 0..{n}"))?;
    }
    Ok(())
}

/// [`super::adamw_update`] of every range of `pieces` (ranges of `params`, and whether each
/// decays: `hp.weight_decay` applies only to those) in one launch on `Emu` and `Cuda`. `grads`,
/// `m` and `v` are indexed as `params`; elements in no range are left alone. Ranges must not
/// overlap.
pub fn adamw_update_pieces(
    ctx: &OpsContext,
    params: &mut ViewMut<f32>,
    grads: View<f32>,
    m: &mut ViewMut<f32>,
    v: &mut ViewMut<f32>,
    pieces: &[(Range<usize>, bool)],
    hp: &AdamWParams,
) -> Result<()> {
    const OP: &str = "adamw_update_pieces";
    let n = params.len();
    check::len(OP, "grads", grads.len(), n, "the parameters' length")?;
    check::len(OP, "m", m.len(), n, "the parameters' length")?;
    check::len(OP, "v", v.len(), n, "the parameters' length")?;
    check::that(OP, hp.step >= 1, || "the step number is 1-based".into())?;
    ranges_inside(OP, pieces.iter().map(|(r, _)| r), n)?;
    let devices =
        [("params", params.device()), ("grads", grads.device()), ("m", m.device()), ("v", v.device())];
    check::devices(ctx, OP, &devices)?;
    let decay =
        |decays: bool| AdamWParams { weight_decay: if decays { hp.weight_decay } else { 0.0 }, ..*hp };
    match ctx.device() {
        Device::Cpu => {
            let g = check::host(OP, grads)?;
            let (m, v) = (check::host_mut(OP, m)?, check::host_mut(OP, v)?);
            let p = check::host_mut(OP, params)?;
            for (r, decays) in pieces {
                let r = r.clone();
                cpu::adamw_update(
                    &mut p[r.clone()],
                    &g[r.clone()],
                    &mut m[r.clone()],
                    &mut v[r],
                    &decay(*decays),
                );
            }
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            let step = u32::try_from(hp.step)
                .map_err(|_| OpsError::Shape { op: OP, what: format!("step {} exceeds u32", hp.step) })?;
            let h = AdamW {
                lr: hp.lr,
                beta1: hp.beta1,
                beta2: hp.beta2,
                eps: hp.eps,
                weight_decay: hp.weight_decay,
                step,
                grad_scale: hp.grad_scale,
            };
            Ok(launch::adamw_chunks(ctx.kernels()?, params, m, v, &grads, pieces, &h)?)
        }
    }
}

/// The sum of `x[i]^2` over every range of `ranges` (on `Emu` and `Cuda` one grid-filling
/// reduction and one block, whatever the number of ranges).
pub fn sum_of_squares_ranges(ctx: &OpsContext, x: View<f32>, ranges: &[Range<usize>]) -> Result<f64> {
    const OP: &str = "sum_of_squares_ranges";
    check::devices(ctx, OP, &[("x", x.device())])?;
    ranges_inside(OP, ranges.iter(), x.len())?;
    match ctx.device() {
        Device::Cpu => {
            let x = check::host(OP, x)?;
            Ok(ranges.iter().map(|r| cpu::sum_of_squares(&x[r.clone()])).sum())
        }
        Device::Emu | Device::Cuda(_) => Ok(launch::sum_squares_ranges(ctx.kernels()?, &x, ranges)?),
    }
}
