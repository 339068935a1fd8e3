//! Elementwise kernels over flat f32 arrays, one grid-stride loop each.

use crate::simt;

kernels! {
    /// `out[i] = a[i] + b[i]` for `i < n`.
    pub unsafe fn add_f32(out: *mut f32, a: *const f32, b: *const f32, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let i_ = i as usize;
            *out.add(i_) = *a.add(i_) + *b.add(i_);
            i += stride;
        }
    }
}
