//! Elementwise kernels over flat f32 arrays, one grid-stride loop each.

use crate::simt;

kernels! {
    /// `out[i] = a[i] + b[i]` for `i < n`.
    pub unsafe fn add_f32(out: simt::GlobalMut<f32>, a: simt::Global<f32>, b: simt::Global<f32>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let i_ = i as usize;
            out.store(i_, a.load(i_) + b.load(i_));
            i += stride;
        }
    }
}
