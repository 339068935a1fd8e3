//! Point-to-point send and receive between two ranks of a group (a pipeline link): the sender
//! stores its data into the receiver's output buffer, once the receiver has said the buffer is
//! free.
//!
//! **Push, not pull.** The sender writes into the receiver's memory rather than the receiver
//! reading the sender's. Stores to peer memory are posted (the sender does not wait for each to
//! complete, as a remote load waits for its reply), and the sender's own buffer is never read
//! remotely, so its kernel returns as soon as its stores are released and the buffer is its own
//! again. With a pull the sender would have to stay until the receiver had finished reading
//! (a `done` flag), tying it to the receiver for the whole copy; with the push it waits only
//! for the receiver's kernel to start.
//!
//! **The protocol**, for transfer number `seq` of the link (1, 2, ...; set `seq & 1`), block
//! `b` of both kernels moving the balanced slice `b` of the `n` elements (the grids must
//! match):
//!
//! 1. The receiver's thread 0 writes `free[set][dst][b]` into the sender's flags
//!    (`st.release.sys`): its kernel has started, so every earlier read of its output buffer
//!    (kernels before it on its stream, the host before the launch) is done.
//! 2. The sender's thread 0 waits for it (`ld.acquire.sys`, with the deadline of
//!    [`super::wait`]); after `sync_threads` the block stores its slice of its data buffer into
//!    the receiver's output buffer, `sync_threads` again, and thread 0 writes
//!    `full[set][src][b]` into the receiver's flags (`st.release.sys`). The sender is done.
//! 3. The receiver's thread 0 waits for `full` (`ld.acquire.sys`); when its kernel returns the
//!    data is in its output buffer and nobody writes there until its next receive's `free`.
//!
//! The acquire of `free` orders the receiver's earlier reads before the sender's stores, so a
//! buffer is never overwritten while the receiver still reads it; the release of `full` orders
//! the stores before the receiver's later reads (PTX ISA, "Memory Consistency Model",
//! "Release and Acquire Patterns", at `.sys` scope since the ranks are different devices).
//! Each flag has one writer and one reader (see [`super::layout`]). A send blocks until the
//! receiver's kernel starts: a caller that posts sends must order them so that the matching
//! receive can start (a schedule in which every send's receiver is not itself blocked in a
//! send to the sender).
//!
//! The peer table is that of the other collectives ([`super::layout`]): the sender reads its
//! own data buffer (word `rank`) and writes the receiver's output buffer (word
//! `3 * world + dst`); the scratch buffers are not used.

use super::element::Element;
use super::layout::{p2p_free, p2p_full, slice};
use super::planted::Plant;
use super::wait::Waiter;
use crate::simt::{self, Global, GlobalMut, Shared};

/// The sender's body for elements `E`, sending to rank `dst`; see the module documentation.
/// `plant` is [`Plant::None`] in the real kernels.
///
/// # Safety
///
/// The table must hold `4 * world` words addressing the layout's buffers, this rank's data and
/// `dst`'s output of at least `n` elements, the status words four per block.
#[inline(always)]
pub(crate) unsafe fn send<E: Element>(
    plant: Plant,
    table: Global<u64>,
    n: u32,
    rank: u32,
    world: u32,
    seq: u32,
    timeout_ns: u64,
    status: GlobalMut<u32>,
    outcome: Shared<u32>,
    dst: u32,
) {
    let (n, r, w, d) = (n as usize, rank as usize, world as usize, dst as usize);
    if d >= w || d == r {
        return;
    }
    let (blocks, b) = (simt::grid_dim_x() as usize, simt::block_idx_x() as usize);
    let (tid, threads) = (simt::thread_idx_x() as usize, simt::block_dim_x() as usize);
    let set = (seq & 1) as usize;
    // SAFETY: the table holds 4 * world words (the caller's contract).
    let word = |i: usize| unsafe { table.load(i) };
    let data = GlobalMut::<E>::from_ptr(word(r) as usize as *mut E);
    let out_dst = GlobalMut::<E>::from_ptr(word(3 * w + d) as usize as *mut E);
    let flags = GlobalMut::<u32>::from_ptr(word(2 * w + r) as usize as *mut u32);
    let flags_dst = GlobalMut::<u32>::from_ptr(word(2 * w + d) as usize as *mut u32);
    let waiter = Waiter { flags, seq, timeout_ns, status, outcome };
    let mut round = 0u32;
    // SAFETY: a flag word of this rank's layout.
    if plant != Plant::IgnoreFree && !unsafe { waiter.wait(p2p_free(w, blocks, set, d, b), dst, &mut round) }
    {
        return;
    }
    let (start, end) = slice(n, 1, 0, blocks, b);
    let mut i = start + tid;
    while i < end {
        // SAFETY: `i < n`; this rank's data and dst's output hold `n` elements, and dst's
        // `free` (acquired above) handed its output buffer over.
        unsafe { out_dst.store(i, data.load(i)) };
        i += threads;
    }
    simt::sync_threads();
    if tid == 0 {
        let index = p2p_full(w, blocks, set, r, b);
        // SAFETY: a flag word of dst's layout; the barrier above orders the block's stores
        // before this release.
        unsafe {
            if plant == Plant::PlainRelease {
                flags_dst.store(index, seq);
            } else {
                flags_dst.store_release_sys(index, seq);
            }
        }
    }
}

/// The receiver's body for elements `E`, receiving from rank `src`; see the module
/// documentation.
///
/// # Safety
///
/// As for [`send`], with `src` for `dst`.
#[inline(always)]
pub(crate) unsafe fn recv(
    table: Global<u64>,
    rank: u32,
    world: u32,
    seq: u32,
    timeout_ns: u64,
    status: GlobalMut<u32>,
    outcome: Shared<u32>,
    src: u32,
) {
    let (r, w, s) = (rank as usize, world as usize, src as usize);
    if s >= w || s == r {
        return;
    }
    let (blocks, b) = (simt::grid_dim_x() as usize, simt::block_idx_x() as usize);
    let set = (seq & 1) as usize;
    // SAFETY: the table holds 4 * world words (the caller's contract).
    let word = |i: usize| unsafe { table.load(i) };
    let flags = GlobalMut::<u32>::from_ptr(word(2 * w + r) as usize as *mut u32);
    let flags_src = GlobalMut::<u32>::from_ptr(word(2 * w + s) as usize as *mut u32);
    let waiter = Waiter { flags, seq, timeout_ns, status, outcome };
    let mut round = 0u32;
    if simt::thread_idx_x() == 0 {
        // SAFETY: a flag word of src's layout; this kernel's start orders every earlier read
        // of the output buffer before it.
        unsafe { flags_src.store_release_sys(p2p_free(w, blocks, set, r, b), seq) };
    }
    // SAFETY: a flag word of this rank's layout. The outcome is in the status words.
    unsafe { waiter.wait(p2p_full(w, blocks, set, s, b), src, &mut round) };
}

kernels! {
    /// Sends `n` f32 of this rank's data to rank `dst`'s output buffer, as transfer `seq` of
    /// the link (see the module documentation; `dst` launches [`recv_f32`] with the same
    /// `n`, `seq` and grid).
    pub unsafe fn send_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, dst: u32) {
        let outcome = simt::static_shared!(SEND_F32_OUTCOME, u32, 2);
        send::<f32>(Plant::None, table, n, rank, world, seq, timeout_ns, status, outcome, dst);
    }

    /// Sends `n` bf16 (`u16` bits) of this rank's data to rank `dst`'s output buffer.
    pub unsafe fn send_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, dst: u32) {
        let outcome = simt::static_shared!(SEND_BF16_OUTCOME, u32, 2);
        send::<u16>(Plant::None, table, n, rank, world, seq, timeout_ns, status, outcome, dst);
    }

    /// Receives `n` f32 from rank `src` into this rank's output buffer, as transfer `seq` of
    /// the link (`src` launches [`send_f32`]).
    pub unsafe fn recv_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, src: u32) {
        let _ = n;
        let outcome = simt::static_shared!(RECV_F32_OUTCOME, u32, 2);
        recv(table, rank, world, seq, timeout_ns, status, outcome, src);
    }

    /// Receives `n` bf16 from rank `src` into this rank's output buffer.
    pub unsafe fn recv_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>, src: u32) {
        let _ = n;
        let outcome = simt::static_shared!(RECV_BF16_OUTCOME, u32, 2);
        recv(table, rank, world, seq, timeout_ns, status, outcome, src);
    }
}
