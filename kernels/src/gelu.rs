//! GeLU in GPT-2's tanh form: `gelu(x) = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`,
//! and its derivative: the device functions the GeLU kernels ([`crate::elementwise_vec`]) and
//! the GEMM's fused epilogue ([`crate::gemm_tc`]) apply per element.

use crate::simt;

pub(crate) const SQRT_2_OVER_PI: f32 = 0.797_884_6;
pub(crate) const CUBE: f32 = 0.044715;
/// Past this |x| GeLU's derivative is 0 or 1 in f32; clamping there keeps `x^3` from
/// overflowing (near 7e12), where `(1 - t^2) * du` would be `0 * inf`.
const SATURATED: f32 = 10.0;

/// `gelu(x)`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let u = SQRT_2_OVER_PI * (x + CUBE * x * x * x);
    0.5 * x * (1.0 + simt::tanh(u))
}

/// `gelu'(x)`.
#[inline(always)]
pub fn gelu_grad(x: f32) -> f32 {
    let x = x.clamp(-SATURATED, SATURATED);
    let u = SQRT_2_OVER_PI * (x + CUBE * x * x * x);
    let t = simt::tanh(u);
    let du = SQRT_2_OVER_PI * (1.0 + 3.0 * CUBE * x * x);
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du
}
