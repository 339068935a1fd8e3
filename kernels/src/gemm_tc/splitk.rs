//! Split-K inside one launch: the tensor-core GEMM's serial ("last block") reduction.
//!
//! With `S` splits (the grid's z extent) the `S` blocks of one output tile each multiply
//! their own K range. Every one writes its f32 partial tile to the workspace and then counts
//! itself in at the tile's arrival counter: a barrier (the block's stores are done), then one
//! thread's `fence.acq_rel.gpu` (release), `atom.global.add.u32` on the counter, and a second
//! fence (acquire). The block that reads `S - 1` from the counter arrived last, whichever z it
//! is: it reads the other partials back, sums all `S` in split order, runs the epilogue and
//! sets the counter back to 0, so the next launch finds it as the workspace's creation left
//! it (zeroed once) and no memset is needed between launches. The sum is the left fold
//! `((p0 + p1) + p2) + ...` for every arrival order — the last block holds its own partial in
//! registers and adds it at its own index — so results are bitwise independent of the order
//! in which blocks run or finish.
//!
//! Workspace layout (f32 elements): the partial of split `s` of tile `t = by * gridDim.x +
//! bx` starts at `(t S + s) BM BN`; in it, thread `tid` (of `T`) keeps accumulator fragment
//! `acc[mi][nj]` (4 values) at float4 `(8 mi + nj) T + tid`. A warp's request is then 512
//! contiguous bytes, and the reading block finds each value at the thread that holds its own.
//! Edge tiles store their whole tile (the rows and columns past C are zeros of the zero-filled
//! operands), so the layout needs no masks. Counters: one `u32` per tile.

use crate::simt::{self, GlobalMut, Shared};

/// Where the split-K partials and the arrival counters live.
#[derive(Clone, Copy)]
pub struct Workspace {
    /// `tiles x splits` partial tiles of `BM x BN` f32, in the layout of the module
    /// documentation.
    pub partial: GlobalMut<f32>,
    /// One arrival counter per tile, 0 between launches.
    pub counters: GlobalMut<u32>,
}

/// `a + b` elementwise.
#[inline(always)]
fn add4(a: [f32; 4], b: [f32; 4]) -> [f32; 4] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]]
}

/// Writes this block's partial (`acc`), counts it in, and, in the block that arrives last,
/// replaces `acc` by the sum of the tile's `S` partials in split order. Returns whether this
/// block arrived last (and must run the epilogue); the others are done.
///
/// # Safety
///
/// The workspace holds `gridDim.x gridDim.y` counters, 0 when the launch began (or left so by
/// the previous launch), and as many partial tiles of `threads x 128` f32 times `gridDim.z`;
/// its base is 16-byte aligned. Every thread of the block calls this at the same point, with
/// `threads` the block's threads and `tid` its own, after its main loop; `stage` is shared
/// memory of `threads x 64` f32 (16-byte aligned) no thread uses any more, and no `cp.async`
/// of the thread is in flight.
#[inline(always)]
pub unsafe fn reduce_tile(
    ws: &Workspace,
    stage: Shared<f32>,
    acc: &mut [[[f32; 4]; 8]; 4],
    tid: usize,
    threads: usize,
) -> bool {
    let splits = simt::grid_dim_z() as usize;
    let z = simt::block_idx_z() as usize;
    let tile = (simt::block_idx_y() * simt::grid_dim_x() + simt::block_idx_x()) as usize;
    // 128 accumulators per thread: the tile's BM x BN values.
    let tile_elems = threads * 128;
    let at = |s: usize, j: usize| (tile * splits + s) * tile_elems + (j * threads + tid) * 4;
    unroll!(mi in [0, 1, 2, 3] {
        unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
            // SAFETY: the partial tile (tile, z) lies in the workspace; `at` is a multiple of 4
            // on a 16-byte aligned base.
            unsafe { ws.partial.store_v4(at(z, mi * 8 + nj), acc[mi][nj]) };
        });
    });
    let arrived = simt::static_shared!(GEMM_TC_SPLITK_ARRIVED, u32, 1);
    // Every thread's partial is stored: thread 0's fence releases them all (cumulatively, the
    // barrier having ordered them before it) with its count.
    simt::sync_threads();
    if tid == 0 {
        simt::fence_acq_rel_gpu();
        // SAFETY: counter `tile` lies in the workspace and is only updated atomically until
        // the last block (ordered after every update by the fence below) resets it.
        let before = unsafe { ws.counters.atomic_add(tile, 1) };
        // Acquire: the partials of the blocks counted before are visible to the reads below
        // (to the other threads through the barrier that follows).
        simt::fence_acq_rel_gpu();
        arrived.store(0, before);
    }
    simt::sync_threads();
    if arrived.load(0) as usize != splits - 1 {
        return false;
    }
    // The other partials come in through the drained stages, 8 float4 of each thread (one
    // row of fragments, `mi`, of one split) at a time, double-buffered: the copy of chunk
    // c + 1 is in flight while chunk c is added, and a barrier between a chunk's copy and its
    // use lets the copy overlap the previous chunk's work. Each thread reads back only what it
    // copied itself, at float4 `b T 8 + nj T + tid` of buffer b (conflict-free).
    let others = splits - 1;
    let chunk = threads * 8;
    let split_of = |i: usize| if i < z { i } else { i + 1 };
    let src = ws.partial.as_const();
    let issue = |c: usize| {
        if c < 4 * others {
            let (mi, s) = (c / others, split_of(c % others));
            unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
                let dst = ((c % 2) * chunk + nj * threads + tid) * 4;
                // SAFETY: partial tile (tile, s) lies in the workspace, written by block
                // z = s of this tile before its count, which the acquire above ordered
                // before this copy; `dst` is inside the two buffers (see `reduce_tile`).
                unsafe { simt::cp_async_16(stage, dst, src.add(at(s, mi * 8 + nj))) };
            });
        }
        // One group per chunk, empty past the last, so that `wait_group` counts chunks.
        simt::cp_async_commit_group();
    };
    let buffers = stage.cast::<[f32; 4]>();
    issue(0);
    let mut c = 0;
    unroll!(mi in [0, 1, 2, 3] {
        // The left fold p0 + p1 + ... in split order, this block's own partial at index z.
        let mut sum = [[0.0f32; 4]; 8];
        for s in 0..splits {
            let part = if s == z {
                acc[mi]
            } else {
                issue(c + 1);
                simt::sync_threads();
                // Chunk c has landed (only chunk c + 1's group may still be in flight).
                simt::cp_async_wait_group::<1>();
                let mut part = [[0.0f32; 4]; 8];
                unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
                    part[nj] = buffers.load((c % 2) * chunk + nj * threads + tid);
                });
                c += 1;
                part
            };
            unroll!(nj in [0, 1, 2, 3, 4, 5, 6, 7] {
                sum[nj] = if s == 0 { part[nj] } else { add4(sum[nj], part[nj]) };
            });
        }
        acc[mi] = sum;
    });
    if tid == 0 {
        // SAFETY: every other block of the tile has counted in (ordered before us by the
        // acquire); the next update is the next launch's.
        unsafe { ws.counters.store(tile, 0) };
    }
    true
}
