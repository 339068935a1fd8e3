//! Fused softmax + cross-entropy over the vocabulary with 128-bit accesses, one block per token.
//!
//! Two passes over the row remain, and no more can go: the loss needs the log-sum-exp of the
//! whole row, and every gradient element `(softmax - onehot) * dloss` needs it too, so the
//! first pass (an online softmax: running maximum and sum of exponentials, rescaled when the
//! maximum grows, over 4 logits at a time) must end before the second writes anything. A row
//! of the GPT-2 vocabulary (50304 f32, 196 KiB) does not fit in a block's registers, so the
//! second pass reads it again; on a GPU whose L2 holds a row per resident block (H100: 50 MB)
//! that read is served from L2, and the DRAM traffic stays one read and one write of the
//! logits. Without `write_grad` (evaluation) there is one pass.
//!
//! Logits past the real vocabulary `v` (padding up to `vp`) take no part in the softmax and
//! get zero gradient. `vectorized = 1` where `logits` is 16-byte aligned and `vp` a multiple
//! of 4 (every row aligned).

use crate::reduce::{block_max, block_sum};
use crate::simt::{self, Global, GlobalMut};
use crate::vector;

/// Folds `xs` into the running maximum `m` and sum `s` of `exp(x - m)`.
#[inline(always)]
fn online<const W: usize>(m: &mut f32, s: &mut f32, xs: [f32; W]) {
    let mut top = xs[0];
    for k in 1..W {
        top = top.max(xs[k]);
    }
    if top > *m {
        // From -inf the old sum is 0 and exp(-inf) is 0: no NaN.
        *s *= simt::exp(*m - top);
        *m = top;
    }
    for k in 0..W {
        *s += simt::exp(xs[k] - *m);
    }
}

kernels! {
    /// `logits` is `[rows, vp]`, `losses` and `targets` `[rows]`; launch `rows` blocks.
    pub unsafe fn crossentropy_v4_f32(
        logits: GlobalMut<f32>, losses: GlobalMut<f32>, targets: Global<u32>, v: u32, vp: u32, dloss: f32,
        write_grad: u32, vectorized: u32,
    ) {
        let scratch = simt::static_shared!(CROSSENTROPY_V4_SCRATCH, f32, 32);
        let row = simt::block_idx_x() as usize;
        let x = logits.add(row * vp as usize);
        let (tid, step, vec) = (simt::thread_idx_x(), simt::block_dim_x(), vectorized != 0);

        let (mut m, mut s) = (f32::NEG_INFINITY, 0.0f32);
        vector::for_range::<4>(0, v, tid, step, vec, |i, whole| {
            if whole {
                online(&mut m, &mut s, x.load_v4(i));
            } else {
                online(&mut m, &mut s, [x.load(i)]);
            }
        });
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
            let grad = |i: usize, xi: f32| {
                let g = if i < v as usize { simt::exp(xi - lse) } else { 0.0 };
                (if i == target as usize { g - 1.0 } else { g }) * dloss
            };
            vector::for_range::<4>(0, vp, tid, step, vec, |i, whole| {
                if whole {
                    let xs = x.load_v4(i);
                    x.store_v4(i, [grad(i, xs[0]), grad(i + 1, xs[1]), grad(i + 2, xs[2]), grad(i + 3, xs[3])]);
                } else {
                    x.store(i, grad(i, x.load(i)));
                }
            });
        }
    }
}
