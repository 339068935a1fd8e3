//! Mixed precision's conversions between f32 buffers and 16-bit ones (bf16 or f16 bits held as
//! `u16`): narrowing rounds to nearest, ties to even ([`simt::f32_to_bf16`],
//! [`simt::f32_to_f16`], the same integer arithmetic as the host's and as `round_*_f32`'s),
//! widening is exact. The trainer runs them where a kernel with a 16-bit operand is not built
//! yet (a LayerNorm output, GeLU) and to refresh the 16-bit compute weights from the fp32
//! master weights.

use crate::simt;

kernels! {
    /// `out[i] = bf16(x[i])` for `i < n`.
    pub unsafe fn convert_f32_to_bf16(out: simt::GlobalMut<u16>, x: simt::Global<f32>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            out.store(i as usize, simt::f32_to_bf16(x.load(i as usize)));
            i += stride;
        }
    }

    /// `out[i] = f16(x[i])` for `i < n` (magnitudes from 65520 up become infinities).
    pub unsafe fn convert_f32_to_f16(out: simt::GlobalMut<u16>, x: simt::Global<f32>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            out.store(i as usize, simt::f32_to_f16(x.load(i as usize)));
            i += stride;
        }
    }

    /// `out[i] = f32(x[i])` for `i < n`, `x` bf16 bits.
    pub unsafe fn convert_bf16_to_f32(out: simt::GlobalMut<f32>, x: simt::Global<u16>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            out.store(i as usize, simt::bf16_to_f32(x.load(i as usize)));
            i += stride;
        }
    }

    /// `out[i] = f32(x[i])` for `i < n`, `x` f16 bits.
    pub unsafe fn convert_f16_to_f32(out: simt::GlobalMut<f32>, x: simt::Global<u16>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            out.store(i as usize, simt::f16_to_f32(x.load(i as usize)));
            i += stride;
        }
    }
}
