//! The scalar first generation of GeLU (one `f32` per thread per iteration), superseded in the
//! trainer by `trident_kernels::elementwise_vec`'s 128-bit and bf16 kernels; kept as the
//! baseline the kernel benchmark sets them beside.

use trident_kernels::gelu::{gelu, gelu_grad};
use trident_kernels::{kernels, simt};

kernels! {
    /// `out[i] = gelu(inp[i])` for `i < n`.
    pub unsafe fn gelu_forward_f32(out: simt::GlobalMut<f32>, inp: simt::Global<f32>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            out.store(i as usize, gelu(inp.load(i as usize)));
            i += stride;
        }
    }

    /// `dinp[i] = gelu'(inp[i]) * dout[i]` for `i < n`.
    pub unsafe fn gelu_backward_f32(dinp: simt::GlobalMut<f32>, inp: simt::Global<f32>, dout: simt::Global<f32>, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            dinp.store(i as usize, gelu_grad(inp.load(i as usize)) * dout.load(i as usize));
            i += stride;
        }
    }
}
