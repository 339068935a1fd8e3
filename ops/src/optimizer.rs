//! The optimizer's device ops: the fused AdamW update and the sum of squares behind the global
//! gradient norm.

use trident_runtime::{Device, View, ViewMut};

use super::{check, cpu, launch, OpsContext, OpsError, Result};

/// Hyper-parameters of one AdamW step over one tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWParams {
    /// Learning rate.
    pub lr: f32,
    /// Decay of the first moment.
    pub beta1: f32,
    /// Decay of the second moment.
    pub beta2: f32,
    /// Added to the root of the second moment.
    pub eps: f32,
    /// Decoupled weight decay (0 for tensors that do not decay).
    pub weight_decay: f32,
    /// Multiplies every gradient first (gradient clipping).
    pub grad_scale: f32,
    /// 1-based step number, for the bias corrections `1 - beta^step`.
    pub step: u64,
}

/// One fused AdamW step: `m = b1 m + (1-b1) g`, `v = b2 v + (1-b2) g^2` (with `g = grad_scale *
/// grads`), then `params -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * params)` with
/// the bias-corrected moments `m_hat`, `v_hat`.
pub fn adamw_update(
    ctx: &OpsContext,
    params: &mut ViewMut<f32>,
    grads: View<f32>,
    m: &mut ViewMut<f32>,
    v: &mut ViewMut<f32>,
    hp: &AdamWParams,
) -> Result<()> {
    const OP: &str = "adamw_update";
    let n = params.len();
    check::len(OP, "grads", grads.len(), n, "the parameters' length")?;
    check::len(OP, "m", m.len(), n, "the parameters' length")?;
    check::len(OP, "v", v.len(), n, "the parameters' length")?;
    check::that(OP, hp.step >= 1, || "the step number is 1-based".into())?;
    let devices =
        [("params", params.device()), ("grads", grads.device()), ("m", m.device()), ("v", v.device())];
    check::devices(ctx, OP, &devices)?;
    match ctx.device() {
        Device::Cpu => {
            let g = check::host(OP, grads)?;
            let (m, v) = (check::host_mut(OP, m)?, check::host_mut(OP, v)?);
            cpu::adamw_update(check::host_mut(OP, params)?, g, m, v, hp);
            Ok(())
        }
        Device::Emu | Device::Cuda(_) => {
            Ok(launch::adamw(ctx.kernels()?, params, m, v, &grads, &hp.launch_params()?)?)
        }
    }
}

/// `sum(x^2)` over the view (accumulated in at least f32 per block and f64 across blocks).
pub fn sum_of_squares(ctx: &OpsContext, x: View<f32>) -> Result<f64> {
    const OP: &str = "sum_of_squares";
    check::devices(ctx, OP, &[("x", x.device())])?;
    match ctx.device() {
        Device::Cpu => Ok(cpu::sum_of_squares(check::host(OP, x)?)),
        Device::Emu | Device::Cuda(_) => {
            let all = 0..x.len();
            Ok(launch::sum_squares_ranges(ctx.kernels()?, &x, &[all])?)
        }
    }
}

impl AdamWParams {
    /// The kernel's hyperparameters; an error where the step does not fit the kernel's `u32`.
    fn launch_params(&self) -> Result<launch::AdamW> {
        let step = u32::try_from(self.step).map_err(|_| OpsError::Shape {
            op: "adamw_update",
            what: format!("step {} exceeds u32", self.step),
        })?;
        Ok(launch::AdamW {
            lr: self.lr,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            step,
            grad_scale: self.grad_scale,
        })
    }
}
