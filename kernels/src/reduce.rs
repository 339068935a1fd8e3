//! Warp and block reductions, and the reduction kernels built on them.

use crate::simt;

/// Sum over the 32 lanes of a warp; every lane gets the result.
#[inline(always)]
pub fn warp_sum(mut v: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        v += simt::shfl_xor_f32(simt::FULL_MASK, v, offset);
        offset /= 2;
    }
    v
}

/// Maximum over the 32 lanes of a warp; every lane gets the result.
#[inline(always)]
pub fn warp_max(mut v: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        v = v.max(simt::shfl_xor_f32(simt::FULL_MASK, v, offset));
        offset /= 2;
    }
    v
}

/// Sum over a 1-D block of up to 1024 threads; every thread gets the result. `scratch` holds
/// at least 32 floats and is free again when this returns.
#[inline(always)]
pub fn block_sum(v: f32, scratch: simt::Shared<f32>) -> f32 {
    let lane = simt::lane_id() as usize;
    let warp = simt::thread_idx_x() as usize / 32;
    let warps = (simt::block_dim_x() as usize).div_ceil(32);
    let v = warp_sum(v);
    if lane == 0 {
        scratch.store(warp, v);
    }
    simt::sync_threads();
    let v = if lane < warps { scratch.load(lane) } else { 0.0 };
    let v = warp_sum(v);
    // Nobody may overwrite `scratch` for the next reduction before every warp has read it.
    simt::sync_threads();
    v
}

/// Maximum over a 1-D block; see [`block_sum`].
#[inline(always)]
pub fn block_max(v: f32, scratch: simt::Shared<f32>) -> f32 {
    let lane = simt::lane_id() as usize;
    let warp = simt::thread_idx_x() as usize / 32;
    let warps = (simt::block_dim_x() as usize).div_ceil(32);
    let v = warp_max(v);
    if lane == 0 {
        scratch.store(warp, v);
    }
    simt::sync_threads();
    let v = if lane < warps { scratch.load(lane) } else { f32::NEG_INFINITY };
    let v = warp_max(v);
    simt::sync_threads();
    v
}

/// Minimum over a 1-D block of `u32`s; every thread gets the result. `scratch` holds at least
/// 32 words and is free again when this returns.
#[inline(always)]
pub fn block_min_u32(v: u32, scratch: simt::Shared<u32>) -> u32 {
    let lane = simt::lane_id() as usize;
    let warp = simt::thread_idx_x() as usize / 32;
    let warps = (simt::block_dim_x() as usize).div_ceil(32);
    let warp_min = |mut v: u32| {
        let mut offset = 16;
        while offset > 0 {
            v = v.min(simt::shfl_xor_u32(simt::FULL_MASK, v, offset));
            offset /= 2;
        }
        v
    };
    let v = warp_min(v);
    if lane == 0 {
        scratch.store(warp, v);
    }
    simt::sync_threads();
    let v = warp_min(if lane < warps { scratch.load(lane) } else { u32::MAX });
    simt::sync_threads();
    v
}

kernels! {
    /// `partial[block] = sum of x[i]^2` over the block's grid-stride share of `x[..n]`. The host
    /// adds the partials: with a fixed grid the result is deterministic.
    pub unsafe fn sum_squares_f32(partial: simt::GlobalMut<f32>, x: simt::Global<f32>, n: u32) {
        let scratch = simt::static_shared!(SUM_SQUARES_SCRATCH, f32, 32);
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        let mut acc = 0.0f32;
        while i < n {
            let v = x.load(i as usize);
            acc = simt::fma(v, v, acc);
            i += stride;
        }
        let total = block_sum(acc, scratch);
        if simt::thread_idx_x() == 0 {
            partial.store(simt::block_idx_x() as usize, total);
        }
    }

    /// `first[block]` = the lowest `i` of the block's grid-stride share of `tokens[..n]` with
    /// `tokens[i] >= vocab`, or `u32::MAX`: the range check of token ids that live on the
    /// device (the host takes the minimum over the blocks).
    pub unsafe fn first_token_out_of_range_u32(first: simt::GlobalMut<u32>, tokens: simt::Global<u32>, n: u32, vocab: u32) {
        let scratch = simt::static_shared!(TOKEN_CHECK_SCRATCH, u32, 32);
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        let mut found = u32::MAX;
        while i < n {
            if tokens.load(i as usize) >= vocab {
                found = found.min(i);
            }
            i += stride;
        }
        let found = block_min_u32(found, scratch);
        if simt::thread_idx_x() == 0 {
            first.store(simt::block_idx_x() as usize, found);
        }
    }

    /// `x[i] *= s` for `i < n`.
    pub unsafe fn scale_f32(x: simt::GlobalMut<f32>, s: f32, n: u32) {
        let stride = simt::block_dim_x() * simt::grid_dim_x();
        let mut i = simt::block_idx_x() * simt::block_dim_x() + simt::thread_idx_x();
        while i < n {
            x.store(i as usize, x.load(i as usize) * s);
            i += stride;
        }
    }
}
