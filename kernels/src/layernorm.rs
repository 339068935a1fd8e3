//! LayerNorm over the last dimension, one warp per row.
//!
//! Forward saves each row's mean and reciprocal standard deviation for the backward, as llm.c
//! does. Backward accumulates (`+=`) into the input gradient, which already holds the residual
//! stream's gradient, and into the weight and bias gradients.

use crate::reduce::warp_sum;
use crate::simt;

/// The epsilon added to the variance before its reciprocal square root (GPT-2's).
pub const EPS: f32 = 1e-5;

kernels! {
    /// Rows `n` of `c` channels; launch with 32 * rows-per-block threads.
    pub unsafe fn layernorm_forward_f32(
        out: simt::GlobalMut<f32>, mean: simt::GlobalMut<f32>, rstd: simt::GlobalMut<f32>,
        inp: simt::Global<f32>, weight: simt::Global<f32>, bias: simt::Global<f32>, n: u32, c: u32,
    ) {
        let warps = simt::block_dim_x() / 32;
        let row = simt::block_idx_x() * warps + simt::thread_idx_x() / 32;
        if row >= n {
            return;
        }
        let lane = simt::lane_id();
        let x = inp.add((row * c) as usize);
        let mut sum = 0.0f32;
        let mut i = lane;
        while i < c {
            sum += x.load(i as usize);
            i += 32;
        }
        let m = warp_sum(sum) / c as f32;
        let mut var = 0.0f32;
        let mut i = lane;
        while i < c {
            let d = x.load(i as usize) - m;
            var = simt::fma(d, d, var);
            i += 32;
        }
        let s = simt::rsqrt(warp_sum(var) / c as f32 + EPS);
        let y = out.add((row * c) as usize);
        let mut i = lane;
        while i < c {
            let iu = i as usize;
            y.store(iu, (x.load(iu) - m) * s * weight.load(iu) + bias.load(iu));
            i += 32;
        }
        if lane == 0 {
            mean.store(row as usize, m);
            rstd.store(row as usize, s);
        }
    }

    /// Backward; the weight and bias gradients are summed per block in dynamic shared memory
    /// (`2 * c` floats) and added to global memory once per block.
    pub unsafe fn layernorm_backward_f32(
        dinp: simt::GlobalMut<f32>, dweight: simt::GlobalMut<f32>, dbias: simt::GlobalMut<f32>,
        dout: simt::Global<f32>, inp: simt::Global<f32>, weight: simt::Global<f32>,
        mean: simt::Global<f32>, rstd: simt::Global<f32>, n: u32, c: u32,
    ) {
        let acc_w = simt::dynamic_shared::<f32>(0, c as usize);
        let acc_b = simt::dynamic_shared::<f32>(c as usize * 4, c as usize);
        let mut i = simt::thread_idx_x();
        while i < c {
            acc_w.store(i as usize, 0.0);
            acc_b.store(i as usize, 0.0);
            i += simt::block_dim_x();
        }
        simt::sync_threads();

        let lane = simt::lane_id();
        let warps_per_block = simt::block_dim_x() / 32;
        let warps = warps_per_block * simt::grid_dim_x();
        let mut row = simt::block_idx_x() * warps_per_block + simt::thread_idx_x() / 32;
        while row < n {
            let base = (row * c) as usize;
            let (m, s) = (mean.load(row as usize), rstd.load(row as usize));
            // Two row sums the input gradient needs: of dnorm and of dnorm * norm.
            let mut sum_d = 0.0f32;
            let mut sum_dn = 0.0f32;
            let mut i = lane;
            while i < c {
                let iu = i as usize;
                let norm = (inp.load(base + iu) - m) * s;
                let dnorm = weight.load(iu) * dout.load(base + iu);
                sum_d += dnorm;
                sum_dn = simt::fma(dnorm, norm, sum_dn);
                i += 32;
            }
            let mean_d = warp_sum(sum_d) / c as f32;
            let mean_dn = warp_sum(sum_dn) / c as f32;
            let mut i = lane;
            while i < c {
                let iu = i as usize;
                let g = dout.load(base + iu);
                let norm = (inp.load(base + iu) - m) * s;
                let dnorm = weight.load(iu) * g;
                acc_b.atomic_add(iu, g);
                acc_w.atomic_add(iu, norm * g);
                dinp.store(base + iu, dinp.load(base + iu) + (dnorm - mean_d - norm * mean_dn) * s);
                i += 32;
            }
            row += warps;
        }
        simt::sync_threads();
        let mut i = simt::thread_idx_x();
        while i < c {
            dweight.atomic_add(i as usize, acc_w.load(i as usize));
            dbias.atomic_add(i as usize, acc_b.load(i as usize));
            i += simt::block_dim_x();
        }
    }
}
