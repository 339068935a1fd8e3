//! AdamW, fused: one pass updates parameters and both moments.

use crate::simt;

kernels! {
    /// With `g = grads[i] * grad_scale` (the clipping factor):
    /// `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`,
    /// `p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)`,
    /// where `bc1 = 1 - b1^t` and `bc2 = 1 - b2^t` are the bias corrections of step `t`.
    pub unsafe fn adamw_f32(
        params: simt::GlobalMut<f32>, grads: simt::Global<f32>, m: simt::GlobalMut<f32>, v: simt::GlobalMut<f32>, n: u32,
        lr: f32, beta1: f32, beta2: f32, eps: f32, weight_decay: f32, bc1: f32, bc2: f32, grad_scale: f32,
    ) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let iu = i as usize;
            let g = grads.load(iu) * grad_scale;
            let mi = beta1 * m.load(iu) + (1.0 - beta1) * g;
            let vi = beta2 * v.load(iu) + (1.0 - beta2) * g * g;
            m.store(iu, mi);
            v.store(iu, vi);
            let p = params.load(iu);
            params.store(iu, p - lr * ((mi / bc1) / (simt::sqrt(vi / bc2) + eps) + weight_decay * p));
            i += stride;
        }
    }
}
