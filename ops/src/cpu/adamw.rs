use rayon::prelude::*;

use super::math::simd;
use crate::AdamWParams;

/// One fused AdamW step over a tensor: moments updated, bias-corrected, decoupled weight decay.
pub fn adamw_update(params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32], hp: &AdamWParams) {
    const CHUNK: usize = 8192;
    let AdamWParams { lr, beta1, beta2, eps, weight_decay, grad_scale, .. } = *hp;
    let c1 = 1.0 / (1.0 - beta1.powi(hp.step as i32));
    let c2 = 1.0 / (1.0 - beta2.powi(hp.step as i32));
    params
        .par_chunks_mut(CHUNK)
        .zip(grads.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK).zip(v.par_chunks_mut(CHUNK)))
        .for_each(|((p, g), (m, v))| {
            simd(
                #[inline(always)]
                || {
                    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
                        let g = g * grad_scale;
                        *m = beta1 * *m + (1.0 - beta1) * g;
                        *v = beta2 * *v + (1.0 - beta2) * g * g;
                        let update = (*m * c1) / ((*v * c2).sqrt() + eps);
                        *p -= lr * (update + weight_decay * *p);
                    }
                },
            )
        });
}
