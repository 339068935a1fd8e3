//! Ring reduce-scatter, all-gather and all-reduce over peer memory, in the manner of NCCL's
//! simple protocol: data moves by stores into the next rank's buffers, each step announced by
//! one flag per (block, step).
//!
//! The `n` elements split into `world` balanced segments, and each segment into one slice per
//! block; block `b` of every rank moves slice `b` only, so the blocks are independent pipelines
//! (the chunks in flight) with flags of their own. With `r` this rank, `next = r + 1` and
//! `prev = r - 1` (mod `world`):
//!
//! - **Start.** Thread 0 writes `ready` in `prev`'s flags (this rank's buffers may now be
//!   written), and waits for `next`'s `ready` before its first store into `next`'s buffers.
//! - **Reduce-scatter**, steps `s = 0 .. world - 1` on segment `c = r - s - 1`: step 0 stores
//!   this rank's slice (as f32) into `next`'s scratch; each later step waits for `recv[s - 1]`
//!   (what `prev` stored), adds this rank's elements to the received partial sums and stores
//!   them on; the last step (`c = r`) writes the finished sums into this rank's own data. The
//!   sum of segment `c` so runs over the ranks `c + 1, c + 2, ..., c` in that order, in f32.
//! - **All-gather**, steps `t = 0 .. world - 1` on segment `c = r - t`: step `t > 0` waits for
//!   `recv[world - 2 + t]` (the segment `prev` stored into this rank's data); every step but
//!   the last stores the segment into `next`'s data and announces it with
//!   `recv[world - 1 + t]` in `next`'s flags.
//!
//! Every step that announces data ends with `sync_threads` and thread 0's `st.release.sys`;
//! every wait is thread 0's `ld.acquire.sys` loop followed by `sync_threads` (see
//! [`super::layout`] for the memory-model argument, [`super::wait`] for the deadlines). A rank
//! reads only its own memory; peers write into it only after its `ready`, so when the kernel
//! returns its buffers are its own again.
//!
//! Reduce-scatter works in place: segment `r` of the data holds the result, the other segments
//! keep the input. All-gather works in place: segment `r` is the input, every segment the
//! output. The scratch buffer holds `n` f32.

use super::element::Element;
use super::layout::{ring_ready, ring_recv, slice};
use super::wait::Waiter;
use crate::simt::{self, Global, GlobalMut, Shared};

/// Which phases a ring kernel runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phases {
    ReduceScatter,
    AllGather,
    AllReduce,
}

/// The ring's body for elements `E`; see the module documentation.
#[inline(always)]
unsafe fn ring<E: Element>(
    phases: Phases,
    table: Global<u64>,
    n: u32,
    rank: u32,
    world: u32,
    seq: u32,
    timeout_ns: u64,
    status: GlobalMut<u32>,
    outcome: Shared<u32>,
) {
    let (n, r, w) = (n as usize, rank as usize, world as usize);
    if w <= 1 {
        return;
    }
    let (next, prev) = ((r + 1) % w, (r + w - 1) % w);
    let (blocks, b) = (simt::grid_dim_x() as usize, simt::block_idx_x() as usize);
    let (tid, threads) = (simt::thread_idx_x() as usize, simt::block_dim_x() as usize);
    let set = (seq & 1) as usize;
    // SAFETY: the table holds 4 * world words (the caller's contract).
    let word = |i: usize| unsafe { table.load(i) };
    let data = GlobalMut::<E>::from_ptr(word(r) as usize as *mut E);
    let data_next = GlobalMut::<E>::from_ptr(word(next) as usize as *mut E);
    let scratch = GlobalMut::<f32>::from_ptr(word(w + r) as usize as *mut f32);
    let scratch_next = GlobalMut::<f32>::from_ptr(word(w + next) as usize as *mut f32);
    let flags = GlobalMut::<u32>::from_ptr(word(2 * w + r) as usize as *mut u32);
    let flags_next = GlobalMut::<u32>::from_ptr(word(2 * w + next) as usize as *mut u32);
    let flags_prev = GlobalMut::<u32>::from_ptr(word(2 * w + prev) as usize as *mut u32);
    let waiter = Waiter { flags, seq, timeout_ns, status, outcome };
    let mut round = 0u32;

    // Start: this rank's buffers may be written; wait until next's may.
    if tid == 0 {
        // SAFETY: flag words of the layout; see the module documentation.
        unsafe { flags_prev.store_release_sys(ring_ready(w, blocks, set, b), seq) };
    }
    // SAFETY: as above.
    if !unsafe { waiter.wait(ring_ready(w, blocks, set, b), next as u32, &mut round) } {
        return;
    }
    // Announces step `step` to next, after every thread's stores.
    let announce = |step: usize| {
        simt::sync_threads();
        if tid == 0 {
            // SAFETY: a flag word of next's layout.
            unsafe { flags_next.store_release_sys(ring_recv(w, blocks, set, b, step), seq) };
        }
    };

    if phases != Phases::AllGather {
        for s in 0..w {
            let c = (r + 2 * w - s - 1) % w;
            // SAFETY: a flag word of this rank's layout.
            if s > 0 && !unsafe { waiter.wait(ring_recv(w, blocks, set, b, s - 1), prev as u32, &mut round) }
            {
                return;
            }
            let (start, end) = slice(n, w, c, blocks, b);
            let mut i = start + tid;
            while i < end {
                // SAFETY: `i < n`; every buffer holds `n` elements (the caller's contract), and
                // the received partial sums were announced by prev's release.
                unsafe {
                    let own = data.load(i).to_f32();
                    let v = if s > 0 { own + scratch.load(i) } else { own };
                    if s + 1 < w {
                        scratch_next.store(i, v);
                    } else {
                        data.store(i, E::from_f32(v));
                    }
                }
                i += threads;
            }
            if s + 1 < w {
                announce(s);
            }
        }
    }
    if phases != Phases::ReduceScatter {
        let base = w - 1;
        for t in 0..w {
            let c = (r + w - t) % w;
            // SAFETY: a flag word of this rank's layout.
            if t > 0
                && !unsafe {
                    waiter.wait(ring_recv(w, blocks, set, b, base + t - 1), prev as u32, &mut round)
                }
            {
                return;
            }
            if t + 1 < w {
                let (start, end) = slice(n, w, c, blocks, b);
                let mut i = start + tid;
                while i < end {
                    // SAFETY: as above; segment `c` of this rank's data is final (its own or
                    // announced by prev).
                    unsafe { data_next.store(i, data.load(i)) };
                    i += threads;
                }
                announce(base + t);
            }
        }
    }
}

kernels! {
    /// Ring all-reduce of `n` f32 in place over the ranks of the peer `table` (see the module
    /// documentation; one launch per rank, the same grid everywhere).
    pub unsafe fn ring_all_reduce_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(RING_AR_F32_OUTCOME, u32, 2);
        ring::<f32>(Phases::AllReduce, table, n, rank, world, seq, timeout_ns, status, outcome);
    }

    /// Ring all-reduce of `n` bf16 (summed in f32) in place.
    pub unsafe fn ring_all_reduce_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(RING_AR_BF16_OUTCOME, u32, 2);
        ring::<u16>(Phases::AllReduce, table, n, rank, world, seq, timeout_ns, status, outcome);
    }

    /// Ring reduce-scatter of `n` f32 in place: segment `rank` of the data gets the sums.
    pub unsafe fn ring_reduce_scatter_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(RING_RS_F32_OUTCOME, u32, 2);
        ring::<f32>(Phases::ReduceScatter, table, n, rank, world, seq, timeout_ns, status, outcome);
    }

    /// Ring reduce-scatter of `n` bf16 (summed in f32) in place.
    pub unsafe fn ring_reduce_scatter_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(RING_RS_BF16_OUTCOME, u32, 2);
        ring::<u16>(Phases::ReduceScatter, table, n, rank, world, seq, timeout_ns, status, outcome);
    }

    /// Ring all-gather of `n` f32 in place: segment `rank` is this rank's part.
    pub unsafe fn ring_all_gather_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(RING_AG_F32_OUTCOME, u32, 2);
        ring::<f32>(Phases::AllGather, table, n, rank, world, seq, timeout_ns, status, outcome);
    }

    /// Ring all-gather of `n` bf16 in place.
    pub unsafe fn ring_all_gather_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(RING_AG_BF16_OUTCOME, u32, 2);
        ring::<u16>(Phases::AllGather, table, n, rank, world, seq, timeout_ns, status, outcome);
    }
}
