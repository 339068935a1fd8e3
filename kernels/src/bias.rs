//! Bias of a linear layer: added along rows in forward, summed over rows in backward (from an
//! f32 or, with 128-bit loads, a bf16 or f16 gradient).

use crate::simt::{self, Global, GlobalMut};
use crate::vector::{load_b16x8, widen_b16};

/// Rows each thread of `bias_backward_f32` sums before its one atomic add.
pub const BIAS_ROWS_PER_BLOCK: u32 = 64;

/// Threads of a `bias_backward_bf16` / `_f16` block: 8 warps.
pub const BIAS16_THREADS: u32 = 256;
/// Columns of a `bias_backward_bf16` / `_f16` block: a warp's 32 lanes x one 16-byte group of
/// 8 values each.
pub const BIAS16_COLS_PER_BLOCK: u32 = 256;
/// Rows of a `bias_backward_bf16` / `_f16` block: 8 per warp.
pub const BIAS16_ROWS_PER_BLOCK: u32 = 64;

/// Warps of a 16-bit bias block.
const BIAS16_WARPS: usize = (BIAS16_THREADS / 32) as usize;
/// Shared words per warp of the 16-bit bias block's partial sums: lane `l`'s 8 at
/// `9 l .. 9 l + 8` (the odd stride spreads each of the 8 stores of a warp over all 32 banks).
const BIAS16_WARP_WORDS: usize = 32 * 9;
/// Shared words of a 16-bit bias block: every warp's partial sums.
const BIAS16_SMEM_WORDS: usize = BIAS16_WARPS * BIAS16_WARP_WORDS;

/// `dbias[j] += sum over r of dout[r, j]` from 16-bit `dout` (f16 bits where `F16`, else bf16)
/// in f32. Block `(x, y)` covers columns `x*256 ..` and rows `y*64 ..`; lane `l` of warp `w`
/// owns columns `x*256 + 8l .. + 8` (one 16-byte group: a warp reads 512 contiguous bytes of a
/// row) and sums rows `y*64 + w`, `+ 8`, ... (8 of them). The 8 warps' partial sums meet in
/// shared memory, and thread `t` adds column `x*256 + t`'s total with one atomic: one per
/// column per 64 rows, as `bias_backward_f32`. Without `vectorized` (`dout` not 16-byte
/// aligned or `cols` not a multiple of 8) each value is loaded alone, the same sums.
///
/// # Safety
///
/// `dbias` holds `cols` values, `dout` `rows * cols`; launched with `BIAS16_THREADS` threads
/// and a grid of `(cols / 256, rows / 64)` rounded up.
#[inline(always)]
unsafe fn bias_backward_b16<const F16: bool>(
    dbias: GlobalMut<f32>,
    dout: Global<u16>,
    rows: u32,
    cols: u32,
    vectorized: bool,
    scratch: simt::Shared<f32>,
) {
    let tid = simt::thread_idx_x();
    let (lane, warp) = ((tid % 32) as usize, (tid / 32) as usize);
    let c0 = simt::block_idx_x() * BIAS16_COLS_PER_BLOCK;
    let col = c0 as usize + 8 * lane;
    let r0 = simt::block_idx_y() * BIAS16_ROWS_PER_BLOCK;
    let r1 = if r0 + BIAS16_ROWS_PER_BLOCK < rows { r0 + BIAS16_ROWS_PER_BLOCK } else { rows };
    let mut acc = [0.0f32; 8];
    let mut r = r0 + warp as u32;
    while r < r1 {
        let at = r as usize * cols as usize + col;
        if vectorized && col < cols as usize {
            let xs = load_b16x8::<F16>(dout, at);
            for k in 0..8 {
                acc[k] += xs[k];
            }
        } else {
            for k in 0..8 {
                if col + k < cols as usize {
                    acc[k] += widen_b16::<F16>(dout.load(at + k));
                }
            }
        }
        r += BIAS16_WARPS as u32;
    }
    for k in 0..8 {
        scratch.store(warp * BIAS16_WARP_WORDS + 9 * lane + k, acc[k]);
    }
    simt::sync_threads();
    // Thread t: column c0 + t, held by lane t / 8 at slot t % 8 of every warp.
    let t = tid as usize;
    let slot = 9 * (t / 8) + t % 8;
    let mut total = 0.0f32;
    for w in 0..BIAS16_WARPS {
        total += scratch.load(w * BIAS16_WARP_WORDS + slot);
    }
    if (c0 as usize + t) < cols as usize {
        dbias.red_add(c0 as usize + t, total);
    }
}

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

    /// [`bias_backward_f32`] from bf16 `dout` (`u16` bits), 8 values per 128-bit load where
    /// `vectorized`, summed in f32 (see `bias_backward_b16`).
    pub unsafe fn bias_backward_bf16(
        dbias: GlobalMut<f32>, dout: Global<u16>, rows: u32, cols: u32, vectorized: u32,
    ) {
        let scratch = simt::static_shared!(BIAS_BACKWARD_BF16_SCRATCH, f32, BIAS16_SMEM_WORDS);
        bias_backward_b16::<false>(dbias, dout, rows, cols, vectorized != 0, scratch);
    }

    /// [`bias_backward_bf16`] from f16 `dout`.
    pub unsafe fn bias_backward_f16(
        dbias: GlobalMut<f32>, dout: Global<u16>, rows: u32, cols: u32, vectorized: u32,
    ) {
        let scratch = simt::static_shared!(BIAS_BACKWARD_F16_SCRATCH, f32, BIAS16_SMEM_WORDS);
        bias_backward_b16::<true>(dbias, dout, rows, cols, vectorized != 0, scratch);
    }
}
