use rayon::prelude::*;

use super::math::{exp, simd};

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const COEFF: f32 = 0.044_715;
const CHUNK: usize = 4096;

/// `0.5 (1 + tanh(u))` written as the logistic function of `2u`: one exponential and one
/// division, without tanh's sign handling.
#[inline(always)]
fn half_one_plus_tanh(u: f32) -> f32 {
    1.0 / (1.0 + exp(-2.0 * u))
}

/// GeLU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu_forward(out: &mut [f32], inp: &[f32]) {
    out.par_chunks_mut(CHUNK).zip(inp.par_chunks(CHUNK)).for_each(|(o, x)| {
        simd(
            #[inline(always)]
            || {
                for (o, &x) in o.iter_mut().zip(x) {
                    let u = SQRT_2_OVER_PI * (x + COEFF * x * x * x);
                    *o = x * half_one_plus_tanh(u);
                }
            },
        )
    });
}

/// In place: `d` holds the gradient of GeLU's output and becomes that of its input `inp`.
/// With `s = 0.5 (1 + tanh u)`, the derivative is `s + x * 2 s (1 - s) * du/dx`.
pub fn gelu_backward(d: &mut [f32], inp: &[f32]) {
    d.par_chunks_mut(CHUNK).zip(inp.par_chunks(CHUNK)).for_each(|(d, x)| {
        simd(
            #[inline(always)]
            || {
                for (d, &x) in d.iter_mut().zip(x) {
                    let u = SQRT_2_OVER_PI * (x + COEFF * x * x * x);
                    let s = half_one_plus_tanh(u);
                    let du = SQRT_2_OVER_PI * (1.0 + 3.0 * COEFF * x * x);
                    *d *= s + 2.0 * x * s * (1.0 - s) * du;
                }
            },
        )
    });
}
