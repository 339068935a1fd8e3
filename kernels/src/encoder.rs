//! Token + position embedding: `out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]`.

use crate::simt;

kernels! {
    /// Forward over `bt` rows of `c` channels; row `r` is position `r % t`.
    pub unsafe fn encoder_forward_f32(
        out: simt::GlobalMut<f32>, tokens: simt::Global<u32>, wte: simt::Global<f32>, wpe: simt::Global<f32>, bt: u32, t: u32, c: u32,
    ) {
        let n = bt * c;
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let (row, ch) = (i / c, i % c);
            let tok = tokens.load(row as usize);
            let pos = row % t;
            out.store(i as usize, wte.load((tok * c + ch) as usize) + wpe.load((pos * c + ch) as usize));
            i += stride;
        }
    }

    /// `dwte[tokens[r],:] += dout[r,:]` for every row `r`, with atomics: rows sharing a token
    /// add into the same row of `dwte`.
    pub unsafe fn encoder_backward_wte_f32(dwte: simt::GlobalMut<f32>, dout: simt::Global<f32>, tokens: simt::Global<u32>, bt: u32, c: u32) {
        let n = bt * c;
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let (row, ch) = (i / c, i % c);
            let tok = tokens.load(row as usize);
            dwte.atomic_add((tok * c + ch) as usize, dout.load(i as usize));
            i += stride;
        }
    }

    /// `dwpe[p,:] += sum over batches of dout[b,p,:]`; one thread per element of `dwpe[..t]`,
    /// so the sum is deterministic.
    pub unsafe fn encoder_backward_wpe_f32(dwpe: simt::GlobalMut<f32>, dout: simt::Global<f32>, b: u32, t: u32, c: u32) {
        let n = t * c;
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let mut acc = 0.0f32;
            for bi in 0..b {
                acc += dout.load((bi * n + i) as usize);
            }
            dwpe.store(i as usize, dwpe.load(i as usize) + acc);
            i += stride;
        }
    }
}
