//! Token + position embedding: `out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]`.

use crate::simt;

kernels! {
    /// Forward over `bt` rows of `c` channels; row `r` is position `r % t`.
    pub unsafe fn encoder_forward_f32(
        out: *mut f32, tokens: *const u32, wte: *const f32, wpe: *const f32, bt: u32, t: u32, c: u32,
    ) {
        let n = bt * c;
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let (row, ch) = (i / c, i % c);
            let tok = *tokens.add(row as usize);
            let pos = row % t;
            *out.add(i as usize) = *wte.add((tok * c + ch) as usize) + *wpe.add((pos * c + ch) as usize);
            i += stride;
        }
    }

    /// `dwte[tokens[r],:] += dout[r,:]` for every row `r`, with atomics: rows sharing a token
    /// add into the same row of `dwte`.
    pub unsafe fn encoder_backward_wte_f32(dwte: *mut f32, dout: *const f32, tokens: *const u32, bt: u32, c: u32) {
        let n = bt * c;
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let (row, ch) = (i / c, i % c);
            let tok = *tokens.add(row as usize);
            simt::atomic_add_f32(dwte.add((tok * c + ch) as usize), *dout.add(i as usize));
            i += stride;
        }
    }

    /// `dwpe[p,:] += sum over batches of dout[b,p,:]`; one thread per element of `dwpe[..t]`,
    /// so the sum is deterministic.
    pub unsafe fn encoder_backward_wpe_f32(dwpe: *mut f32, dout: *const f32, b: u32, t: u32, c: u32) {
        let n = t * c;
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let mut acc = 0.0f32;
            for bi in 0..b {
                acc += *dout.add((bi * n + i) as usize);
            }
            *dwpe.add(i as usize) += acc;
            i += stride;
        }
    }
}
