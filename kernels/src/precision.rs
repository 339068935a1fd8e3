//! Mixed precision's storage rounding: f32 values rounded in place to the nearest bf16 or f16
//! (ties to even) and kept as f32, so that every device stores the same values a bf16 or f16
//! buffer would hold while computing in f32. The conversions are integer arithmetic
//! ([`simt::f32_to_bf16`], [`simt::f32_to_f16`]), bit-identical on the GPU and the host.

use crate::simt;

kernels! {
    /// `x[i] = bf16(x[i])` for `i < n`.
    pub unsafe fn round_bf16_f32(x: simt::GlobalMut<f32>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let i_ = i as usize;
            x.store(i_, simt::bf16_to_f32(simt::f32_to_bf16(x.load(i_))));
            i += stride;
        }
    }

    /// `x[i] = f16(x[i])` for `i < n`: magnitudes from 65520 up become infinities, which the
    /// loss scaler then finds.
    pub unsafe fn round_f16_f32(x: simt::GlobalMut<f32>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let i_ = i as usize;
            x.store(i_, simt::f16_to_f32(simt::f32_to_f16(x.load(i_))));
            i += stride;
        }
    }
}
