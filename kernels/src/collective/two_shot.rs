//! Two-shot all-reduce: a reduce-scatter by reading, then an all-gather by writing, for
//! medium messages (every byte crosses the links twice, as in the ring, but in two rounds).
//!
//! The `n` elements split into `world` balanced segments, each into one slice per block. After
//! the `start` exchange (as in [`super::one_shot`]: every peer's input may be read and its
//! output written), block `b` of rank `r` sums slice `b` of segment `r` over the ranks in rank
//! order (f32) and stores the result into that slice of every rank's output, its own included.
//! The `end` exchange then tells each peer that this rank has finished reading its input and
//! writing its output; when the kernel returns, its output is complete and nobody touches its
//! buffers. Only rank `r` touches segment `r` of any buffer, so the output may be the input
//! (in place).

use super::element::Element;
use super::layout::{shot_end, shot_start, slice};
use super::one_shot::exchange;
use super::wait::Waiter;
use crate::simt::{self, Global, GlobalMut, Shared};

/// The two-shot body for elements `E`; see the module documentation.
#[inline(always)]
unsafe fn two_shot<E: Element>(
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
    let waiter = Waiter { flags, seq, timeout_ns, status, outcome };
    let mut round = 0u32;
    // SAFETY: flag words of the layout.
    if !unsafe { exchange(waiter, table, r, w, |p| shot_start(w, blocks, set, p, b), &mut round) } {
        return;
    }
    let (start, end) = slice(n, w, r, blocks, b);
    let mut i = start + tid;
    while i < end {
        // SAFETY: every rank's input and output hold `n` elements; the peers' `start` releases
        // announced their inputs and freed their outputs.
        unsafe {
            let mut acc = GlobalMut::<E>::from_ptr(word(0) as usize as *mut E).load(i).to_f32();
            for p in 1..w {
                acc += GlobalMut::<E>::from_ptr(word(p) as usize as *mut E).load(i).to_f32();
            }
            let v = E::from_f32(acc);
            for p in 0..w {
                GlobalMut::<E>::from_ptr(word(3 * w + p) as usize as *mut E).store(i, v);
            }
        }
        i += threads;
    }
    // SAFETY: flag words of the layout.
    unsafe { exchange(waiter, table, r, w, |p| shot_end(w, blocks, set, p, b), &mut round) };
}

kernels! {
    /// Two-shot all-reduce of `n` f32 into every rank's output (see the module documentation).
    pub unsafe fn two_shot_all_reduce_f32(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(TWO_SHOT_F32_OUTCOME, u32, 2);
        two_shot::<f32>(table, n, rank, world, seq, timeout_ns, status, outcome);
    }

    /// Two-shot all-reduce of `n` bf16 (summed in f32) into every rank's output.
    pub unsafe fn two_shot_all_reduce_bf16(table: simt::Global<u64>, n: u32, rank: u32, world: u32, seq: u32, timeout_ns: u64, status: simt::GlobalMut<u32>) {
        let outcome = simt::static_shared!(TWO_SHOT_BF16_OUTCOME, u32, 2);
        two_shot::<u16>(table, n, rank, world, seq, timeout_ns, status, outcome);
    }
}
