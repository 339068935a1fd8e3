//! The scalar first generation of the fused softmax + cross-entropy, one block per token,
//! superseded in the trainer by `trident_kernels::crossentropy_v4`; kept as its benchmark
//! baseline.
//!
//! One pass reads the logits for the row's log-sum-exp; with `write_grad` a second pass
//! overwrites the logits with their gradient, `(softmax - onehot(target)) * dloss`, so the
//! probabilities never exist in memory. Logits past the real vocabulary (padding) get zero
//! gradient and take no part in the softmax.

use trident_kernels::reduce::{block_max, block_sum};
use trident_kernels::{kernels, simt};

kernels! {
    /// `logits` is `[rows, vp]`, `losses` and `targets` `[rows]`; launch `rows` blocks.
    pub unsafe fn crossentropy_f32(
        logits: simt::GlobalMut<f32>, losses: simt::GlobalMut<f32>, targets: simt::Global<u32>, v: u32, vp: u32, dloss: f32, write_grad: u32,
    ) {
        let scratch = simt::static_shared!(CROSSENTROPY_SCRATCH, f32, 32);
        let row = simt::block_idx_x() as usize;
        let x = logits.add(row * vp as usize);
        let tid = simt::thread_idx_x();
        let step = simt::block_dim_x();

        // Each thread's running max and sum of exponentials over its share of the row.
        let mut m = f32::NEG_INFINITY;
        let mut s = 0.0f32;
        let mut i = tid;
        while i < v {
            let xi = x.load(i as usize);
            if xi > m {
                s = s * simt::exp(m - xi) + 1.0;
                m = xi;
            } else {
                s += simt::exp(xi - m);
            }
            i += step;
        }
        let row_max = block_max(m, scratch);
        let local = if m == f32::NEG_INFINITY { 0.0 } else { s * simt::exp(m - row_max) };
        let row_sum = block_sum(local, scratch);
        let lse = row_max + simt::log2(row_sum) * core::f32::consts::LN_2;
        let target = targets.load(row);
        if tid == 0 {
            losses.store(row, lse - x.load(target as usize));
        }
        // Every thread has read the target's logit above before any thread overwrites it.
        simt::sync_threads();
        if write_grad != 0 {
            let mut i = tid;
            while i < vp {
                let g = if i < v { simt::exp(x.load(i as usize) - lse) } else { 0.0 };
                let g = if i == target { g - 1.0 } else { g };
                x.store(i as usize, g * dloss);
                i += step;
            }
        }
    }
}
