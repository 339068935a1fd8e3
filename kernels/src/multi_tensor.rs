//! Kernels over many parameter tensors of one flat buffer in one launch: AdamW and the sum of
//! squares of the gradient norm.
//!
//! The launch wrapper cuts the tensors (ranges of the buffer) into *chunks* of at most a few
//! thousand elements and passes them as a table of `[start, end, flags]` words (`flags` bit 0:
//! the tensor decays); blocks take chunks `blockIdx.x`, `+ gridDim.x`, ... and deal each
//! chunk's whole 16-byte groups and its unaligned ends out over their threads
//! ([`vector::for_range`]). `vectorized = 1` where every buffer is 16-byte aligned.

use crate::reduce::block_sum;
use crate::simt::{self, Global, GlobalMut};
use crate::vector;

/// `flags` bit: weight decay applies to the chunk.
pub const CHUNK_DECAYS: u32 = 1;

/// Words per chunk in the table.
pub const CHUNK_WORDS: usize = 3;

/// One AdamW update of `(p, m, v)` from gradient `g` (before `grad_scale`); see
/// `adamw_chunks_f32`.
#[inline(always)]
fn adamw(p: f32, g: f32, m: f32, v: f32, h: &Hyper) -> (f32, f32, f32) {
    let g = g * h.grad_scale;
    let m = h.beta1 * m + (1.0 - h.beta1) * g;
    let v = h.beta2 * v + (1.0 - h.beta2) * g * g;
    let p = p - h.lr * ((m / h.bc1) / (simt::sqrt(v / h.bc2) + h.eps) + h.weight_decay * p);
    (p, m, v)
}

/// AdamW's scalars for one chunk.
struct Hyper {
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    weight_decay: f32,
    bc1: f32,
    bc2: f32,
    grad_scale: f32,
}

kernels! {
    /// AdamW over every chunk of `chunks` (`nchunks` x `[start, end, flags]`), in the update of
    /// `adamw_f32`: `g = grads[i] * grad_scale`, `m = b1 m + (1 - b1) g`,
    /// `v = b2 v + (1 - b2) g^2`, `p -= lr ((m / bc1) / (sqrt(v / bc2) + eps) + wd p)` with `wd`
    /// `weight_decay` on decaying chunks and 0 on the others.
    pub unsafe fn adamw_chunks_f32(
        params: GlobalMut<f32>, grads: Global<f32>, m: GlobalMut<f32>, v: GlobalMut<f32>,
        chunks: Global<u32>, nchunks: u32, vectorized: u32,
        lr: f32, beta1: f32, beta2: f32, eps: f32, weight_decay: f32, bc1: f32, bc2: f32, grad_scale: f32,
    ) {
        let mut chunk = simt::block_idx_x();
        while chunk < nchunks {
            let at = chunk as usize * CHUNK_WORDS;
            let (start, end, flags) = (chunks.load(at), chunks.load(at + 1), chunks.load(at + 2));
            let wd = if flags & CHUNK_DECAYS != 0 { weight_decay } else { 0.0 };
            let h = Hyper { lr, beta1, beta2, eps, weight_decay: wd, bc1, bc2, grad_scale };
            vector::for_range::<4>(start, end, simt::thread_idx_x(), simt::block_dim_x(), vectorized != 0, |i, whole| {
                if whole {
                    let (p4, g4, m4, v4) = (params.load_v4(i), grads.load_v4(i), m.load_v4(i), v.load_v4(i));
                    let (mut po, mut mo, mut vo) = ([0.0f32; 4], [0.0f32; 4], [0.0f32; 4]);
                    for k in 0..4 {
                        (po[k], mo[k], vo[k]) = adamw(p4[k], g4[k], m4[k], v4[k], &h);
                    }
                    m.store_v4(i, mo);
                    v.store_v4(i, vo);
                    params.store_v4(i, po);
                } else {
                    let (p, mi, vi) = adamw(params.load(i), grads.load(i), m.load(i), v.load(i), &h);
                    m.store(i, mi);
                    v.store(i, vi);
                    params.store(i, p);
                }
            });
            chunk += simt::grid_dim_x();
        }
    }

    /// The first stage of a sum of squares over the chunks of `chunks` (`flags` unused):
    /// `partial[block]` = the sum of `x[i]^2` over the block's chunks.
    pub unsafe fn sum_squares_chunks_f32(
        partial: GlobalMut<f32>, x: Global<f32>, chunks: Global<u32>, nchunks: u32, vectorized: u32,
    ) {
        let scratch = simt::static_shared!(SUM_SQUARES_CHUNKS_SCRATCH, f32, 32);
        let mut acc = 0.0f32;
        let mut chunk = simt::block_idx_x();
        while chunk < nchunks {
            let at = chunk as usize * CHUNK_WORDS;
            let (start, end) = (chunks.load(at), chunks.load(at + 1));
            vector::for_range::<4>(start, end, simt::thread_idx_x(), simt::block_dim_x(), vectorized != 0, |i, whole| {
                if whole {
                    let q = x.load_v4(i);
                    // Four chains, summed in a fixed order: the same result on every device.
                    acc += simt::fma(q[0], q[0], q[1] * q[1]) + simt::fma(q[2], q[2], q[3] * q[3]);
                } else {
                    let e = x.load(i);
                    acc = simt::fma(e, e, acc);
                }
            });
            chunk += simt::grid_dim_x();
        }
        let total = block_sum(acc, scratch);
        if simt::thread_idx_x() == 0 {
            partial.store(simt::block_idx_x() as usize, total);
        }
    }

    /// The second stage: `out[0] = sum of partial[..n]`, one block.
    pub unsafe fn sum_squares_finish_f32(out: GlobalMut<f32>, partial: Global<f32>, n: u32) {
        let scratch = simt::static_shared!(SUM_SQUARES_FINISH_SCRATCH, f32, 32);
        let mut acc = 0.0f32;
        let mut i = simt::thread_idx_x();
        while i < n {
            acc += partial.load(i as usize);
            i += simt::block_dim_x();
        }
        let total = block_sum(acc, scratch);
        if simt::thread_idx_x() == 0 {
            out.store(0, total);
        }
    }
}
