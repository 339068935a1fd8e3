//! Bias of a linear layer: added along rows in forward, summed over rows in backward.

use crate::simt;

/// Rows each thread of `bias_backward_f32` sums before its one atomic add.
pub const BIAS_ROWS_PER_BLOCK: u32 = 64;

kernels! {
    /// `out[r, j] += bias[j]` for `r < rows`, `j < cols`.
    pub unsafe fn add_bias_f32(out: simt::GlobalMut<f32>, bias: simt::Global<f32>, rows: u32, cols: u32) {
        let n = rows * cols;
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            out.store(i as usize, out.load(i as usize) + bias.load((i % cols) as usize));
            i += stride;
        }
    }

    /// `dbias[j] += sum over r of dout[r, j]`. Block `(x, y)` covers columns
    /// `x*blockDim.x ..` and rows `y*BIAS_ROWS_PER_BLOCK ..`: reads coalesce along columns and
    /// each thread adds its partial sum once.
    pub unsafe fn bias_backward_f32(dbias: simt::GlobalMut<f32>, dout: simt::Global<f32>, rows: u32, cols: u32) {
        let col = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        if col >= cols {
            return;
        }
        let r0 = simt::block_idx_y() * BIAS_ROWS_PER_BLOCK;
        let r1 = if r0 + BIAS_ROWS_PER_BLOCK < rows { r0 + BIAS_ROWS_PER_BLOCK } else { rows };
        let mut acc = 0.0f32;
        let mut r = r0;
        while r < r1 {
            acc += dout.load((r * cols + col) as usize);
            r += 1;
        }
        dbias.atomic_add(col as usize, acc);
    }
}
