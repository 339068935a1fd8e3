use rayon::prelude::*;

use super::math::{exp_in_range, simd};

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const COEFF: f32 = 0.044_715;
const CHUNK: usize = 4096;
/// Where GeLU has reached 0 (below `-SATURATED`) or `x` (above), and its derivative 0 or 1, in f32.
const SATURATED: f32 = 10.0;

/// `-2u` for `u = sqrt(2/pi) (x + 0.044715 x^3)`, as `x (C1 x^2 + C0)`.
#[inline(always)]
fn minus_two_u(x: f32) -> f32 {
    const C1: f32 = -2.0 * SQRT_2_OVER_PI * COEFF;
    const C0: f32 = -2.0 * SQRT_2_OVER_PI;
    x * (x * x).mul_add(C1, C0)
}

/// GeLU, tanh form: `0.5 x (1 + tanh u)`, computed as `x / (1 + e^(-2u))` (the logistic
/// function of `2u`): one exponential and one division, without tanh's sign handling. Clamped
/// at `SATURATED`, `-2u` stays within `exp`'s range, and below `-SATURATED` the result is about
/// -1e-37, where `x / (1 + e^(-2u))` would not vanish for huge `|x|` (e^(-2u) would stop at the
/// largest finite f32).
pub fn gelu_forward(out: &mut [f32], inp: &[f32]) {
    out.par_chunks_mut(CHUNK).zip(inp.par_chunks(CHUNK)).for_each(|(o, x)| {
        simd(
            #[inline(always)]
            || {
                for (o, &x) in o.iter_mut().zip(x) {
                    // Comparisons rather than `max`/`min`, so that NaN propagates.
                    let low = if x < -SATURATED { -SATURATED } else { x };
                    let within = if low > SATURATED { SATURATED } else { low };
                    *o = low / (1.0 + exp_in_range(minus_two_u(within)));
                }
            },
        )
    });
}

/// In place: `d` holds the gradient of GeLU's output and becomes that of its input `inp`.
/// With `s = 0.5 (1 + tanh u)`, the derivative is `s + x * 2 s (1 - s) du/dx`, written as
/// `s (1 + (1 - s) g)` with `g = 2 x du/dx = x (D1 x^2 + D0)`. Past `SATURATED` the derivative is
/// 0 or 1 in f32, so `x` is clamped there: unclamped, `x^3` overflows near 7e12 and `0 * inf`
/// would give NaN.
pub fn gelu_backward(d: &mut [f32], inp: &[f32]) {
    const D1: f32 = 6.0 * SQRT_2_OVER_PI * COEFF;
    const D0: f32 = 2.0 * SQRT_2_OVER_PI;
    d.par_chunks_mut(CHUNK).zip(inp.par_chunks(CHUNK)).for_each(|(d, x)| {
        simd(
            #[inline(always)]
            || {
                for (d, &x) in d.iter_mut().zip(x) {
                    let x = x.clamp(-SATURATED, SATURATED);
                    let s = 1.0 / (1.0 + exp_in_range(minus_two_u(x)));
                    let g = x * (x * x).mul_add(D1, D0);
                    *d *= s * (1.0 - s).mul_add(g, 1.0);
                }
            },
        )
    });
}
