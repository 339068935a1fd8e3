use rayon::prelude::*;

use super::math::{simd, tanh};

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const COEFF: f32 = 0.044_715;
const CHUNK: usize = 4096;

/// GeLU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.
pub fn gelu_forward(out: &mut [f32], inp: &[f32]) {
    out.par_chunks_mut(CHUNK).zip(inp.par_chunks(CHUNK)).for_each(|(o, x)| {
        simd(|| {
            for (o, &x) in o.iter_mut().zip(x) {
                let u = SQRT_2_OVER_PI * (x + COEFF * x * x * x);
                *o = 0.5 * x * (1.0 + tanh(u));
            }
        })
    });
}

/// In place: `d` holds the gradient of GeLU's output and becomes that of its input `inp`.
pub fn gelu_backward(d: &mut [f32], inp: &[f32]) {
    d.par_chunks_mut(CHUNK).zip(inp.par_chunks(CHUNK)).for_each(|(d, x)| {
        simd(|| {
            for (d, &x) in d.iter_mut().zip(x) {
                let u = SQRT_2_OVER_PI * (x + COEFF * x * x * x);
                let th = tanh(u);
                let du = SQRT_2_OVER_PI * (1.0 + 3.0 * COEFF * x * x);
                *d *= 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
            }
        })
    });
}
