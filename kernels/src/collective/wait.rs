//! Waiting for a peer's flag, with a deadline, and the status a kernel leaves when a peer
//! never arrives.
//!
//! Thread 0 of a block polls the flag with `ld.acquire.sys` until it reaches the collective's
//! number or `%globaltimer` passes the deadline; a `sync_threads` then hands the outcome (and
//! what the acquire made visible) to the block's other threads. On a timeout thread 0 writes
//! the block's four status words, `[1, peer, flag index, seq]`, and the whole block returns:
//! the kernel ends instead of hanging, and the host turns the words into an error naming the
//! collective, the rank and the peer ([`describe_timeout`]). The peers waiting on this rank time
//! out in turn and name it.

#[cfg(not(target_arch = "nvptx64"))]
use core::fmt;

use crate::simt::{self, GlobalMut, Shared};

/// The status code of a block whose wait timed out.
pub const TIMED_OUT: u32 = 1;

/// A block's view of the waits of one kernel: the flags, the deadline length, where to report.
#[derive(Clone, Copy)]
pub struct Waiter {
    /// This rank's flag words.
    pub flags: GlobalMut<u32>,
    /// The collective's number (see [`crate::collective::layout`]).
    pub seq: u32,
    /// How long one wait may take, in nanoseconds.
    pub timeout_ns: u64,
    /// The status words (four per block).
    pub status: GlobalMut<u32>,
    /// Two shared words: the outcome of waits, in alternate slots.
    pub outcome: Shared<u32>,
}

/// Whether `value` has reached `seq` (modulo 2^32).
#[inline(always)]
pub fn reached(value: u32, seq: u32) -> bool {
    (value.wrapping_sub(seq) as i32) >= 0
}

impl Waiter {
    /// Thread 0 polls flag `index` until it reaches `seq` or the deadline passes; on a timeout it
    /// records `peer` and the flag in the status words. Every thread of the block must call this
    /// (it ends with `sync_threads`); `round` counts the block's waits (see [`Waiter::share`]).
    ///
    /// # Safety
    ///
    /// `index` must be a flag word of this rank and the status words must hold four per block.
    #[inline(always)]
    pub unsafe fn wait(self, index: usize, peer: u32, round: &mut u32) -> bool {
        let ok = simt::thread_idx_x() != 0 || unsafe { self.poll(index, peer) };
        self.share(ok, round)
    }

    /// Thread 0's part of a wait: polls flag `index` until it reaches `seq` (true) or the
    /// deadline passes (false, after writing the block's status words naming `peer`).
    ///
    /// # Safety
    ///
    /// As for [`Waiter::wait`]; only thread 0 may call it.
    #[inline(always)]
    pub unsafe fn poll(self, index: usize, peer: u32) -> bool {
        let deadline = simt::global_timer_ns().saturating_add(self.timeout_ns);
        // SAFETY: `index` is a flag word of this rank (the caller's contract).
        while !reached(unsafe { self.flags.load_acquire_sys(index) }, self.seq) {
            if simt::global_timer_ns() > deadline {
                let b = simt::block_idx_x() as usize * 4;
                // SAFETY: four status words per block (the caller's contract); only thread 0
                // of this block writes them.
                unsafe {
                    self.status.store(b, TIMED_OUT);
                    self.status.store(b + 1, peer);
                    self.status.store(b + 2, index as u32);
                    self.status.store(b + 3, self.seq);
                }
                return false;
            }
        }
        true
    }

    /// Hands thread 0's outcome (`ok`; the other threads pass true) and what its acquire made
    /// visible to the whole block: thread 0 stores it in a shared slot, and after
    /// `sync_threads` every thread reads it. `round` counts the block's waits and picks the slot,
    /// alternating, so that no slot is written while another thread may still read it.
    #[inline(always)]
    pub fn share(self, ok: bool, round: &mut u32) -> bool {
        let slot = (*round % 2) as usize;
        *round += 1;
        if simt::thread_idx_x() == 0 {
            self.outcome.store(slot, u32::from(ok));
        }
        simt::sync_threads();
        self.outcome.load(slot) == 1
    }
}

/// A timed-out wait, decoded from a rank's status words by [`describe_timeout`] (host only).
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeout<'a> {
    /// The collective's name (for example `ring all-reduce`).
    pub collective: &'a str,
    /// The rank whose kernel waited.
    pub rank: u32,
    /// The peer that never arrived.
    pub peer: u32,
    /// The block that waited.
    pub block: u32,
    /// The flag word it polled.
    pub flag: u32,
    /// The collective's number.
    pub seq: u32,
}

#[cfg(not(target_arch = "nvptx64"))]
impl fmt::Display for Timeout<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (collective #{}): rank {} waited for rank {} past its deadline (block {}, flag word {}); \
             rank {} never arrived or stopped",
            self.collective, self.seq, self.rank, self.peer, self.block, self.flag, self.peer
        )
    }
}

/// The first timed-out block in `status` (four words per block), if any.
#[cfg(not(target_arch = "nvptx64"))]
pub fn describe_timeout<'a>(collective: &'a str, rank: u32, status: &[u32]) -> Option<Timeout<'a>> {
    status.chunks_exact(4).enumerate().find(|(_, w)| w[0] == TIMED_OUT).map(|(block, w)| Timeout {
        collective,
        rank,
        peer: w[1],
        block: block as u32,
        flag: w[2],
        seq: w[3],
    })
}
