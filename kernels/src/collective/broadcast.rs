//! Broadcast from a root rank to every rank of the group, in place in the data buffers: the
//! root's data is the input, every other rank's data the output.
//!
//! The root pushes (as [`super::send_recv`] does, and for the same reasons: posted stores,
//! and the root's buffer is never read remotely, so no rank waits for another to finish
//! reading). Block `b` of every rank moves the balanced slice `b` of the `n` elements (the
//! grids must match), for collective `seq` (set `seq & 1`):
//!
//! 1. Every rank `p` but the root: thread 0 writes `cast_ready[set][p][b]` into the root's
//!    flags (`st.release.sys`; its kernel has started, so its data buffer is free to be
//!    written), then waits for `cast_full[set][root][b]` in its own flags (`ld.acquire.sys`).
//! 2. The root, for each peer `p` in turn from `root + 1` round the ring: thread 0 waits for
//!    `cast_ready[set][p][b]`; after `sync_threads` the block stores its slice into `p`'s data,
//!    `sync_threads` again, and thread 0 writes `cast_full[set][root][b]` into `p`'s flags
//!    (`st.release.sys`).
//!
//! When a rank's kernel returns the slice is in its data and no peer writes there any more
//! until its next collective's `cast_ready`. The flags are indexed by the peer (`cast_ready`,
//! in the root's flags) and by the root (`cast_full`), so each word has one writer and one
//! reader whichever rank is the root (see [`super::layout`]). Every wait has the deadline of
//! [`super::wait`] and leaves the peer's rank in the status words.
//!
//! The root stores `world - 1` copies through its own links, which suits the small and medium
//! messages of a trainer's start-up and control traffic; a pipelined ring broadcast would
//! spread large ones over every link.

use super::element::Element;
use super::layout::{cast_full, cast_ready, slice};
use super::planted::Plant;
use super::wait::Waiter;
use crate::simt::{self, Global, GlobalMut, Shared};

/// The broadcast's body for elements `E` from rank `root`; see the module documentation.
/// `plant` is [`Plant::None`] in the real kernels.
///
/// # Safety
///
/// The table must hold `4 * world` words addressing the layout's buffers, every rank's data of
/// at least `n` elements, the status words four per block.
#[inline(always)]
pub(crate) unsafe fn broadcast<E: Element>(
    plant: Plant,
    table: Global<u64>,
    n: u32,
    rank: u32,
    world: u32,
    seq: u32,
    timeout_ns: u64,
    status: GlobalMut<u32>,
    outcome: Shared<u32>,
    root: u32,
) {
    let (n, r, w, root_) = (n as usize, rank as usize, world as usize, root as usize);
    if root_ >= w || w <= 1 {
        return;
    }
    let (blocks, b) = (simt::grid_dim_x() as usize, simt::block_idx_x() as usize);
    let (tid, threads) = (simt::thread_idx_x() as usize, simt::block_dim_x() as usize);
    let set = (seq & 1) as usize;
    // SAFETY: the table holds 4 * world words (the caller's contract).
    let word = |i: usize| unsafe { table.load(i) };
    let flags_of = |p: usize| GlobalMut::<u32>::from_ptr(word(2 * w + p) as usize as *mut u32);
    let waiter = Waiter { flags: flags_of(r), seq, timeout_ns, status, outcome };
    let mut round = 0u32;
    if r != root_ {
        if tid == 0 {
            // SAFETY: a flag word of the root's layout; this kernel's start orders every
            // earlier access to this rank's data before it.
            unsafe { flags_of(root_).store_release_sys(cast_ready(w, blocks, set, r, b), seq) };
        }
        // SAFETY: a flag word of this rank's layout. The outcome is in the status words.
        unsafe { waiter.wait(cast_full(w, blocks, set, root_, b), root, &mut round) };
        return;
    }
    let data = GlobalMut::<E>::from_ptr(word(r) as usize as *mut E);
    let (start, end) = slice(n, 1, 0, blocks, b);
    for k in 1..w {
        let p = (r + k) % w;
        // SAFETY: a flag word of this rank's layout.
        if plant != Plant::IgnoreFree
            && !unsafe { waiter.wait(cast_ready(w, blocks, set, p, b), p as u32, &mut round) }
        {
            return;
        }
        let data_p = GlobalMut::<E>::from_ptr(word(p) as usize as *mut E);
        let mut i = start + tid;
        while i < end {
            // SAFETY: `i < n`; every rank's data holds `n` elements, and p's `cast_ready`
            // (acquired above) handed its data buffer over.
            unsafe { data_p.store(i, data.load(i)) };
            i += threads;
        }
        simt::sync_threads();
        if tid == 0 {
            let index = cast_full(w, blocks, set, r, b);
            // SAFETY: a flag word of p's layout; the barrier above orders the block's stores
            // before this release.
            unsafe {
                if plant == Plant::PlainRelease {
                    flags_of(p).store(index, seq);
                } else {
                    flags_of(p).store_release_sys(index, seq);
                }
            }
        }
    }
}

kernels! {
    /// Broadcasts `n` f32 of rank `root`'s data into every rank's data, as collective `seq`
    /// of the group (see the module documentation; every rank launches it with the same `n`,
    /// `seq`, `root` and grid).
    pub unsafe fn broadcast_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, root: u32) {
        let outcome = simt::static_shared!(BROADCAST_F32_OUTCOME, u32, 2);
        broadcast::<f32>(Plant::None, table, n, rank, world, seq, timeout_ns, status, outcome, root);
    }

    /// Broadcasts `n` bf16 (`u16` bits) of rank `root`'s data into every rank's data.
    pub unsafe fn broadcast_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, root: u32) {
        let outcome = simt::static_shared!(BROADCAST_BF16_OUTCOME, u32, 2);
        broadcast::<u16>(Plant::None, table, n, rank, world, seq, timeout_ns, status, outcome, root);
    }
}
