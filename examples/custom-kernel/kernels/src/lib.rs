// The two attributes every kernels crate carries (see `trident_kernels::kernels!`): no `std` on
// the GPU, and the nightly features for `extern "ptx-kernel"` and inline PTX. Built for the
// host (for `Emu`) the crate is ordinary stable Rust. No `#[panic_handler]`: `trident-kernels`
// provides the nvptx64 one.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]
//! Kernels of the custom-kernel example, written once against `trident_kernels::simt`.
//!
//! Built for `nvptx64-nvidia-cuda` (by the example's `build.rs`) they are the entry points
//! of its PTX; built for the host they are [`HOST_KERNELS`], which `Emu` runs.

use trident_kernels::simt::{self, Global, GlobalMut};

/// Elements (and threads) per block of `reverse_tiles_f32`.
pub const TILE: usize = 256;

trident_kernels::kernels! {
    /// `y[i] = a * x[i] + y[i]` (one rounding, `fma`) for `i < n`, over a grid-stride loop.
    pub unsafe fn saxpy_f32(y: GlobalMut<f32>, x: Global<f32>, a: f32, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            let k = i as usize;
            y.store(k, simt::fma(a, x.load(k), y.load(k)));
            i += stride;
        }
    }

    /// `partial[blockIdx.x]` = the sum of the elements `x[i]` of the block's grid-stride
    /// share: thread `t` of block `b` adds `x[b*B + t + k*B*G]` (`B` threads, `G` blocks) in
    /// increasing `k`, then the block halves its `B` partial sums in dynamic shared memory,
    /// `s[t] += s[t + h]` for `h = B/2, B/4, .., 1`, with a barrier before each step.
    ///
    /// `B` must be a power of two and the launch's dynamic shared memory `4 * B` bytes;
    /// `partial` has `G` elements.
    pub unsafe fn block_sum_f32(partial: GlobalMut<f32>, x: Global<f32>, n: u32) {
        let threads = simt::block_dim_x();
        let t = simt::thread_idx_x();
        let stride = threads * simt::grid_dim_x();
        let mut acc = 0f32;
        let mut i = simt::block_idx_x() * threads + t;
        while i < n {
            acc += x.load(i as usize);
            i += stride;
        }
        // Layout: `sums[t]` is thread t's running sum; the launch gives 4 * B bytes.
        let sums = simt::dynamic_shared::<f32>(0, threads as usize);
        sums.store(t as usize, acc);
        let mut half = threads / 2;
        while half > 0 {
            simt::sync_threads();
            if t < half {
                let (a, b) = (sums.load(t as usize), sums.load((t + half) as usize));
                sums.store(t as usize, a + b);
            }
            half /= 2;
        }
        if t == 0 {
            partial.store(simt::block_idx_x() as usize, sums.load(0));
        }
    }

    /// Reverses each tile of [`TILE`] consecutive elements of `x` in place: block `b`
    /// (of [`TILE`] threads) stages `x[b*TILE..][..TILE]` in a static shared array, waits at a
    /// barrier, and writes element `t` from `tile[TILE - 1 - t]`.
    pub unsafe fn reverse_tiles_f32(x: GlobalMut<f32>) {
        let tile = trident_kernels::static_shared!(tile, f32, TILE);
        let t = simt::thread_idx_x() as usize;
        let base = simt::block_idx_x() as usize * TILE;
        tile.store(t, x.load(base + t));
        simt::sync_threads();
        x.store(base + t, tile.load(TILE - 1 - t));
    }
}
