//! Flag operations of kernels that synchronise through memory (with other blocks, or with the
//! kernels of other emulated devices): scoped acquire loads and release stores, volatile
//! accesses, and the global timer their waits take deadlines from.
//!
//! Forward progress. A kernel waiting for a flag spins on a load, and the thread that will set
//! the flag may be another coroutine of the same worker, a block not yet started, or another
//! device's kernel. So:
//! - every acquire or volatile load is a scheduling point: the thread yields its coroutine
//!   before it reads, and the block's other threads run;
//! - a pass of the block's scheduler in which every thread that ran only polled is idle: the
//!   worker then lets the launch start another worker if blocks of the grid are still waiting
//!   to start (so a waiting block never keeps the others of its grid from running: the grid
//!   grows up to one worker per block), and hands its core to the operating system (a yield,
//!   and a short sleep after many idle passes in a row). Launches of different devices run on
//!   their own host threads, which the operating system interleaves however few cores there
//!   are;
//! - a thread that reads the same flag with the same value for longer than the poll limit
//!   ([`set_poll_limit`], default 60 s) fails with [`Fault::StalledWait`]: a wait that can
//!   never complete ends the launch with an error naming the flag and the thread instead of
//!   hanging (kernels also bound their waits with [`global_timer_ns`] and report which peer
//!   never arrived).

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::block::PollState;
use crate::context::{self, fail, suspend};
use crate::device::{checked_access, peer_access};
use crate::error::{Fault, Site};
use crate::peer_order::Scope;
use crate::stats::{Class, MemOp};

/// How long a thread may read an unchanging flag when nobody set a limit.
const DEFAULT_POLL_LIMIT: Duration = Duration::from_secs(60);

thread_local! {
    static POLL_LIMIT: Cell<Duration> = const { Cell::new(DEFAULT_POLL_LIMIT) };
}

/// Makes the launches this host thread starts from now on fail a thread that has read the
/// same flag with the same value for `limit` ([`Fault::StalledWait`]). Returns the previous
/// limit.
pub fn set_poll_limit(limit: Duration) -> Duration {
    POLL_LIMIT.with(|l| l.replace(limit))
}

/// The poll limit of the launches this host thread starts.
pub(crate) fn poll_limit() -> Duration {
    POLL_LIMIT.with(Cell::get)
}

/// `%globaltimer`: nanoseconds on a timer every device of the process shares.
pub fn global_timer_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    // Starts at 1 s, so a deadline of "now minus a little" never underflows.
    start.elapsed().as_nanos() as u64 + 1_000_000_000
}

/// Yields the running thread to the block's others (a poll), then returns.
fn poll_point() {
    let (block, thread) = context::current();
    block.inner.borrow_mut().polls += 1;
    suspend(block, thread);
}

/// Fails the running thread when it has read `value` at `addr` for longer than the poll limit.
fn watch_poll(addr: u64, value: u32, site: Site) {
    let (block, thread) = context::current();
    let limit = block.memory().poll_limit;
    let stalled = {
        let mut inner = block.inner.borrow_mut();
        let slot = &mut inner.threads[thread as usize];
        match slot.poll {
            Some(p) if p.addr == addr && p.value == value => p.since.elapsed() >= limit,
            _ => {
                slot.poll = Some(PollState { addr, value, since: Instant::now() });
                false
            }
        }
    };
    if stalled {
        let detail = format!(
            "the thread has read {value} from the flag at {} for {:.1} s (the poll limit): a wait that \
             can never complete (a peer that never arrives, a deadlocked flag protocol)",
            block.memory().describe(addr),
            limit.as_secs_f64()
        );
        fail(block, thread, Fault::StalledWait { site, detail });
    }
}

/// `ld.acquire.{gpu,sys}.global.u32`: reads the flag at `p`, acquiring the release that wrote
/// the value read (PTX ISA, "Memory Consistency Model", release and acquire patterns). A
/// scheduling point: the thread yields before it reads.
///
/// # Safety
///
/// As for [`crate::device::global_load`].
pub unsafe fn global_load_acquire_u32(p: *const u32, scope: Scope, arg: u32, site: Site) -> u32 {
    poll_point();
    let addr = p as u64;
    let peer = checked_access(addr, 4, 4, MemOp::Atomic, Class::GlobalAtomic, arg, site);
    // SAFETY: checked to be in a registered allocation and 4-byte aligned; read atomically.
    let word = unsafe { AtomicU32::from_ptr(p.cast_mut()) };
    let value = if peer {
        peer_access(addr, 4, MemOp::Atomic, site, |side| {
            side.acquire(scope);
            word.load(Ordering::Acquire)
        })
    } else {
        word.load(Ordering::Acquire)
    };
    watch_poll(addr, value, site);
    value
}

/// `st.release.{gpu,sys}.global.u32`: writes `value` to the flag at `p`, releasing the running
/// thread's earlier accesses and those its block made before its last `sync_threads`.
///
/// # Safety
///
/// As for [`crate::device::global_store`].
pub unsafe fn global_store_release_u32(p: *mut u32, value: u32, scope: Scope, arg: u32, site: Site) {
    let addr = p as u64;
    let peer = checked_access(addr, 4, 4, MemOp::Atomic, Class::GlobalAtomic, arg, site);
    // SAFETY: as in `global_load_acquire_u32`.
    let word = unsafe { AtomicU32::from_ptr(p) };
    if peer {
        peer_access(addr, 4, MemOp::Atomic, site, |side| {
            side.release(scope);
            word.store(value, Ordering::Release);
        });
    } else {
        word.store(value, Ordering::Release);
    }
}

/// `ld.volatile.global.u32`: a plain read that the compiler may not cache or drop. A
/// scheduling point like an acquire load; it orders nothing (a flag polled with it races with
/// the release that sets it).
///
/// # Safety
///
/// As for [`crate::device::global_load`].
pub unsafe fn global_load_volatile_u32(p: *const u32, arg: u32, site: Site) -> u32 {
    poll_point();
    let addr = p as u64;
    let peer = checked_access(addr, 4, 4, MemOp::Load, Class::GlobalLoad, arg, site);
    // SAFETY: as in `global_load_acquire_u32`; read atomically on the host only so that the
    // emulator itself has no data race while it reports the kernel's.
    let word = unsafe { AtomicU32::from_ptr(p.cast_mut()) };
    let value = if peer {
        peer_access(addr, 4, MemOp::Load, site, |_| word.load(Ordering::Relaxed))
    } else {
        word.load(Ordering::Relaxed)
    };
    watch_poll(addr, value, site);
    value
}

/// `st.volatile.global.u32`: a plain write that the compiler may not drop; it releases nothing.
///
/// # Safety
///
/// As for [`crate::device::global_store`].
pub unsafe fn global_store_volatile_u32(p: *mut u32, value: u32, arg: u32, site: Site) {
    let addr = p as u64;
    let peer = checked_access(addr, 4, 4, MemOp::Store, Class::GlobalStore, arg, site);
    // SAFETY: as in `global_load_volatile_u32`.
    let word = unsafe { AtomicU32::from_ptr(p) };
    if peer {
        peer_access(addr, 4, MemOp::Store, site, |side| {
            side.plain_store();
            word.store(value, Ordering::Relaxed);
        });
    } else {
        word.store(value, Ordering::Relaxed);
    }
}
