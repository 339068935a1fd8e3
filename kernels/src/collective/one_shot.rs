//! One-shot all-reduce: every rank reads every peer's input and sums it, for small messages
//! (one round of reads, latency bound).
//!
//! Block `b` of every rank owns slice `b` of the `n` elements. Thread 0 writes
//! `start[set][rank][b]` into every peer's flags (this rank's input may be read) and waits for
//! every peer's; the block then sums the slice over the ranks in rank order (`0, 1, ...`, in
//! f32) into this rank's output; finally it writes `end[set][rank][b]` into every peer's flags
//! (it has finished reading their inputs) and waits for every peer's, so that when the kernel
//! returns nobody reads its input any more. The output (word `3 * world + rank` of the table)
//! must not be the input: peers read the input while this rank writes the output.

use super::element::Element;
use super::layout::{shot_end, shot_start, slice};
use super::wait::Waiter;
use crate::simt::{self, Global, GlobalMut, Shared};

/// Thread 0 writes `seq` into flag `index` of every peer, then waits for every peer's
/// counterpart in this rank's flags; the block shares the outcome.
#[inline(always)]
pub(crate) unsafe fn exchange(
    waiter: Waiter,
    table: Global<u64>,
    rank: usize,
    world: usize,
    index: impl Fn(usize) -> usize,
    round: &mut u32,
) -> bool {
    simt::sync_threads();
    let mut ok = true;
    if simt::thread_idx_x() == 0 {
        for p in 0..world {
            if p != rank {
                // SAFETY: word `2 * world + p` of the table is p's flag buffer.
                unsafe {
                    let flags = GlobalMut::<u32>::from_ptr(table.load(2 * world + p) as usize as *mut u32);
                    flags.store_release_sys(index(rank), waiter.seq);
                }
            }
        }
        for p in 0..world {
            // SAFETY: a flag word of this rank's layout.
            if p != rank && !unsafe { waiter.poll(index(p), p as u32) } {
                ok = false;
                break;
            }
        }
    }
    waiter.share(ok, round)
}

/// The one-shot body for elements `E`; see the module documentation.
#[inline(always)]
unsafe fn one_shot<E: Element>(
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
    let (blocks, b) = (simt::grid_dim_x() as usize, simt::block_idx_x() as usize);
    let (tid, threads) = (simt::thread_idx_x() as usize, simt::block_dim_x() as usize);
    let set = (seq & 1) as usize;
    // SAFETY: the table holds 4 * world words (the caller's contract).
    let word = |i: usize| unsafe { table.load(i) };
    let flags = GlobalMut::<u32>::from_ptr(word(2 * w + r) as usize as *mut u32);
    let out = GlobalMut::<E>::from_ptr(word(3 * w + r) as usize as *mut E);
    let waiter = Waiter { flags, seq, timeout_ns, status, outcome };
    let mut round = 0u32;
    // SAFETY: flag words of the layout.
    if !unsafe { exchange(waiter, table, r, w, |p| shot_start(w, blocks, set, p, b), &mut round) } {
        return;
    }
    let (start, end) = slice(n, 1, 0, blocks, b);
    let mut i = start + tid;
    while i < end {
        // SAFETY: every rank's input and this rank's output hold `n` elements; the inputs were
        // announced by the peers' `start` releases.
        unsafe {
            let mut acc = GlobalMut::<E>::from_ptr(word(0) as usize as *mut E).load(i).to_f32();
            for p in 1..w {
                acc += GlobalMut::<E>::from_ptr(word(p) as usize as *mut E).load(i).to_f32();
            }
            out.store(i, E::from_f32(acc));
        }
        i += threads;
    }
    // SAFETY: flag words of the layout.
    unsafe { exchange(waiter, table, r, w, |p| shot_end(w, blocks, set, p, b), &mut round) };
}

kernels! {
    /// One-shot all-reduce of `n` f32 into this rank's output (see the module documentation).
    pub unsafe fn one_shot_all_reduce_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(ONE_SHOT_F32_OUTCOME, u32, 2);
        one_shot::<f32>(table, n, rank, world, seq, timeout_ns, status, outcome);
    }

    /// One-shot all-reduce of `n` bf16 (summed in f32) into this rank's output.
    pub unsafe fn one_shot_all_reduce_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(ONE_SHOT_BF16_OUTCOME, u32, 2);
        one_shot::<u16>(table, n, rank, world, seq, timeout_ns, status, outcome);
    }
}
