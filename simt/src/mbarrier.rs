//! `mbarrier`: split-phase barriers in shared memory with arrival counts and transaction bytes
//! (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier").
//!
//! An mbarrier object is 8 bytes of shared memory, 8-byte aligned. `mbarrier.init` sets its
//! expected arrival count (1 to 2^20 - 1); each phase completes when its pending arrivals and
//! its transaction count (tx-count) are both zero, and the next phase then starts with the
//! full arrival count and tx-count 0. `arrive` decrements the pending arrivals and returns a
//! state token (here: the number of phases completed before the arrival); `expect_tx` raises
//! the tx-count by a number of bytes, `complete_tx` (done by TMA loads) lowers it; the
//! tx-count must stay within -(2^20 - 1) to 2^20 - 1. `try_wait.parity`/`test_wait.parity`
//! with parity `p` succeed once the phase of parity `p` among the current and the preceding
//! one has completed: with `P` phases completed, when `P % 2 != p` (so waiting on parity 1
//! before the first phase completed succeeds at once, the "preceding phase" of phase 0).
//!
//! The emulator keeps each barrier's state beside shared memory, keyed by its byte offset,
//! and reports instead of hanging: a wait that can never succeed (every live thread of the
//! block waits on an mbarrier or a barrier, and no asynchronous operation is in flight: the
//! emulator's TMA loads complete their bytes when issued), more arrivals in one phase than the
//! count, a use before `init`, `init` of a live barrier, a tx-count out of range, and a phase
//! whose arrivals are all in while more bytes completed than were expected (tx-count below
//! zero: the transaction-count underflow). A waiting thread is suspended, so the other
//! threads run, and resumed in linear-id order once the phase completes; a `test_wait` that
//! finds the phase incomplete also yields and returns false when resumed. The thread whose
//! arrival (or TMA load) completes a phase that others wait for yields to them, so consumers
//! run before their producer goes on (a deterministic schedule in which a producer that
//! refills a stage before its consumers released it races with their reads). Each call
//! counts one [`Class::Mbarrier`] instruction, however long a wait blocks.
//!
//! The barrier's own 8 bytes are tracked as shared memory: `init` writes them, every other
//! operation accesses them atomically, so an `init` not ordered (by `sync_threads`) before
//! another thread's use is a reported race.

use crate::block::{BlockInner, BlockState, Status};
use crate::context::{self, fail, fail_with, suspend};
use crate::error::{Access, AccessKind, EmuError, Fault, Site};
use crate::shared::{describe_mbarrier, race_error, Shared};
use crate::stats::Class;

/// Largest arrival count and largest tx-count magnitude: 2^20 - 1.
pub const MBARRIER_MAX: u32 = (1 << 20) - 1;

/// One initialized mbarrier.
pub(crate) struct Mbarrier {
    pub offset: u32,
    count: u32,
    pending: u32,
    tx: i64,
    /// Phases completed so far.
    pub phase: u32,
    init_site: Site,
}

/// The mbarriers of the running block.
#[derive(Default)]
pub(crate) struct Mbarriers {
    list: Vec<Mbarrier>,
}

impl Mbarriers {
    pub fn clear(&mut self) {
        self.list.clear();
    }

    pub fn get(&self, offset: u32) -> Option<&Mbarrier> {
        self.list.iter().find(|b| b.offset == offset)
    }

    fn get_mut(&mut self, offset: u32) -> Option<&mut Mbarrier> {
        self.list.iter_mut().find(|b| b.offset == offset)
    }
}

impl Mbarrier {
    /// The state of the current phase, for messages.
    pub fn describe(&self) -> String {
        format!(
            "its current phase {} (parity {}) has {} of {} arrivals pending and a tx-count of {} \
             bytes (initialized at {})",
            self.phase,
            self.phase & 1,
            self.pending,
            self.count,
            self.tx,
            self.init_site
        )
    }
}

/// The byte offset of mbarrier `i` of `bars`, failing the thread when it is out of range or
/// not 8-byte aligned.
fn locate(block: &BlockState, thread: u32, bars: Shared<u64>, i: usize, site: Site) -> u32 {
    let offset = bars.byte_offset_of(block, thread, i, 1, site);
    if offset % 8 != 0 {
        let detail = format!("an mbarrier object must be 8-byte aligned, shared byte {offset} is not");
        fail(block, thread, Fault::BadOperand { site, detail });
    }
    offset
}

fn mbarrier_fault(
    block: &BlockState,
    inner: &BlockInner,
    thread: u32,
    offset: u32,
    site: Site,
    detail: String,
) -> EmuError {
    block.error_at(thread, Fault::Mbarrier { site, barrier: describe_mbarrier(inner, offset), detail })
}

/// Tracks the operation's access to the barrier's 8 bytes (`kind`: a write for `init`, an
/// atomic otherwise).
fn touch(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    offset: u32,
    kind: AccessKind,
    site: Site,
) -> Result<(), EmuError> {
    inner.smem.track(offset, 8, kind, thread, site).map_err(|c| {
        let later = Access { kind, thread: block.dim3(thread), site };
        race_error(block, inner, c, later, thread)
    })
}

/// `mbarrier.init.shared::cta.b64 [bar], count`.
pub(crate) fn init(bars: Shared<u64>, i: usize, count: u32, site: Site) {
    let (block, thread) = context::current();
    block.count(thread, Class::Mbarrier);
    let offset = locate(block, thread, bars, i, site);
    let result = {
        let mut inner = block.inner.borrow_mut();
        let inner = &mut *inner;
        touch(block, inner, thread, offset, AccessKind::Write, site).and_then(|()| {
            if !(1..=MBARRIER_MAX).contains(&count) {
                return Err(mbarrier_fault(
                    block,
                    inner,
                    thread,
                    offset,
                    site,
                    format!(
                        "mbarrier.init with count {count}: the expected arrival count must be 1 to 2^20 - 1"
                    ),
                ));
            }
            if let Some(b) = inner.mbarriers.get(offset) {
                let detail = format!(
                    "mbarrier.init on a live mbarrier (initialized at {}): invalidate it first \
                     (mbarrier.inval), or the behaviour is undefined",
                    b.init_site
                );
                return Err(mbarrier_fault(block, inner, thread, offset, site, detail));
            }
            inner.mbarriers.list.push(Mbarrier {
                offset,
                count,
                pending: count,
                tx: 0,
                phase: 0,
                init_site: site,
            });
            inner.smem.write(offset, u64::from(count));
            Ok(())
        })
    };
    if let Err(error) = result {
        fail_with(block, thread, error);
    }
}

/// `mbarrier.inval.shared::cta.b64 [bar]`: the bytes become plain shared memory again.
pub(crate) fn inval(bars: Shared<u64>, i: usize, site: Site) {
    let (block, thread) = context::current();
    block.count(thread, Class::Mbarrier);
    let offset = locate(block, thread, bars, i, site);
    let result = {
        let mut inner = block.inner.borrow_mut();
        let inner = &mut *inner;
        touch(block, inner, thread, offset, AccessKind::Write, site).and_then(|()| {
            match inner.mbarriers.list.iter().position(|b| b.offset == offset) {
                Some(index) => {
                    inner.mbarriers.list.swap_remove(index);
                    Ok(())
                }
                None => {
                    Err(mbarrier_fault(block, inner, thread, offset, site, not_initialized("mbarrier.inval")))
                }
            }
        })
    };
    if let Err(error) = result {
        fail_with(block, thread, error);
    }
}

fn not_initialized(op: &str) -> String {
    format!("{op} on an mbarrier that was not initialized (no mbarrier.init of this address in this block)")
}

/// What an operation does to a barrier's state.
#[derive(Clone, Copy)]
enum Update {
    /// An arrival, raising the tx-count by this many bytes first (`arrive.expect_tx`).
    Arrive { expect_tx: u32 },
    /// `expect_tx`: raise the tx-count.
    ExpectTx(u32),
    /// `complete_tx`: lower it.
    CompleteTx(u32),
}

/// Applies `update` to the mbarrier at `offset`; returns the state token of an arrival (the
/// phases completed before it) and whether a completed phase woke a waiting thread.
fn update_at(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    offset: u32,
    update: Update,
    op: &str,
    site: Site,
) -> Result<(u64, bool), EmuError> {
    touch(block, inner, thread, offset, AccessKind::Atomic, site)?;
    let fault =
        |inner: &BlockInner, detail: String| mbarrier_fault(block, inner, thread, offset, site, detail);
    let Some(b) = inner.mbarriers.get_mut(offset) else {
        return Err(fault(inner, not_initialized(op)));
    };
    let token = u64::from(b.phase);
    let delta = match update {
        Update::Arrive { expect_tx } | Update::ExpectTx(expect_tx) => i64::from(expect_tx),
        Update::CompleteTx(bytes) => -i64::from(bytes),
    };
    let tx = b.tx + delta;
    if tx.abs() > i64::from(MBARRIER_MAX) {
        let detail = format!(
            "{op} takes the tx-count from {} to {tx} bytes, outside the range -(2^20 - 1) to 2^20 - 1 \
             the PTX ISA allows; {}",
            b.tx,
            b.describe()
        );
        return Err(fault(inner, detail));
    }
    if let Update::Arrive { .. } = update {
        if b.pending == 0 {
            let detail = format!(
                "{op}: more arrivals than the count {} in phase {} (all arrivals are in and the \
                 phase waits for {} transaction bytes)",
                b.count, b.phase, b.tx
            );
            return Err(fault(inner, detail));
        }
    }
    b.tx = tx;
    let phase = b.phase;
    if let Update::Arrive { .. } = update {
        b.pending -= 1;
    }
    if b.pending == 0 && b.tx < 0 {
        let detail = format!(
            "{op}: transaction-count underflow: every arrival of phase {} is in and the tx-count is \
             {} bytes, so more bytes completed than the phase expected (expect_tx); {}",
            b.phase,
            b.tx,
            b.describe()
        );
        return Err(fault(inner, detail));
    }
    let completed = b.pending == 0 && b.tx == 0;
    if completed {
        b.phase += 1;
        b.pending = b.count;
    }
    if let Update::Arrive { .. } = update {
        let clock = inner.smem.tick_now();
        inner.smem.order.arrive(thread, clock, offset, phase);
    }
    let woke = completed && wake(inner, offset);
    Ok((token, woke))
}

/// Makes runnable the threads waiting on the mbarrier at `offset` (it just completed a phase;
/// each re-checks its parity when it resumes); returns whether there were any.
fn wake(inner: &mut BlockInner, offset: u32) -> bool {
    let mut any = false;
    for slot in &mut inner.threads {
        if let Status::AtMbarrier { offset: o, .. } = slot.status {
            if o == offset {
                slot.status = Status::Runnable;
                any = true;
            }
        }
    }
    any
}

/// After completing a phase that threads wait for, the completing thread yields, so the
/// waiters run before it goes on: a schedule that lets consumers take a stage before its
/// producer refills it, where a refill not ordered after their release shows as a race.
pub(crate) fn yield_to_woken(block: &BlockState, thread: u32, woke: bool) {
    if woke {
        suspend(block, thread);
    }
}

fn apply(bars: Shared<u64>, i: usize, update: Update, op: &str, site: Site) -> u64 {
    let (block, thread) = context::current();
    block.count(thread, Class::Mbarrier);
    let offset = locate(block, thread, bars, i, site);
    let result = {
        let mut inner = block.inner.borrow_mut();
        update_at(block, &mut inner, thread, offset, update, op, site)
    };
    let (token, woke) = result.unwrap_or_else(|error| fail_with(block, thread, error));
    yield_to_woken(block, thread, woke);
    token
}

/// `mbarrier.arrive.shared::cta.b64 state, [bar]`.
pub(crate) fn arrive(bars: Shared<u64>, i: usize, site: Site) -> u64 {
    apply(bars, i, Update::Arrive { expect_tx: 0 }, "mbarrier.arrive", site)
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], tx_count`.
pub(crate) fn arrive_expect_tx(bars: Shared<u64>, i: usize, bytes: u32, site: Site) -> u64 {
    apply(bars, i, Update::Arrive { expect_tx: bytes }, "mbarrier.arrive.expect_tx", site)
}

/// `mbarrier.expect_tx.shared::cta.b64 [bar], tx_count`.
pub(crate) fn expect_tx(bars: Shared<u64>, i: usize, bytes: u32, site: Site) {
    apply(bars, i, Update::ExpectTx(bytes), "mbarrier.expect_tx", site);
}

/// `mbarrier.complete_tx.shared::cta.b64 [bar], tx_count`.
pub(crate) fn complete_tx(bars: Shared<u64>, i: usize, bytes: u32, site: Site) {
    apply(bars, i, Update::CompleteTx(bytes), "mbarrier.complete_tx", site);
}

/// A TMA load's completion of `bytes` on the mbarrier at `offset`; returns whether it woke a
/// waiting thread.
pub(crate) fn complete_tx_at(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    offset: u32,
    bytes: u32,
    site: Site,
) -> Result<bool, EmuError> {
    update_at(block, inner, thread, offset, Update::CompleteTx(bytes), "the TMA load's complete_tx", site)
        .map(|(_, woke)| woke)
}

/// `mbarrier.try_wait.parity` (`blocking`) or `mbarrier.test_wait.parity`: whether the phase
/// of parity `parity` completed (see the module documentation).
pub(crate) fn wait_parity(bars: Shared<u64>, i: usize, parity: u32, blocking: bool, site: Site) -> bool {
    let (block, thread) = context::current();
    let offset = locate(block, thread, bars, i, site);
    let op = if blocking { "mbarrier.try_wait.parity" } else { "mbarrier.test_wait.parity" };
    if parity > 1 {
        let detail = format!("{op} with phase parity {parity}: the parity operand is 0 or 1");
        fail(block, thread, Fault::BadOperand { site, detail });
    }
    block.count(thread, Class::Mbarrier);
    loop {
        let result = {
            let mut inner = block.inner.borrow_mut();
            let inner = &mut *inner;
            touch(block, inner, thread, offset, AccessKind::Atomic, site).and_then(|()| {
                match inner.mbarriers.get(offset).map(|b| b.phase) {
                    None => Err(mbarrier_fault(block, inner, thread, offset, site, not_initialized(op))),
                    Some(phases) if phases % 2 != parity => {
                        inner.smem.observe(thread, offset, phases);
                        Ok(true)
                    }
                    Some(_) => {
                        inner.threads[thread as usize].status = Status::AtMbarrier { offset, parity, site };
                        Ok(false)
                    }
                }
            })
        };
        match result {
            Ok(true) => return true,
            Ok(false) => {
                suspend(block, thread);
                if !blocking {
                    return false;
                }
            }
            Err(error) => fail_with(block, thread, error),
        }
    }
}

/// The deadlock error when no thread can run and some wait on mbarriers.
pub(crate) fn deadlock(block: &BlockState, inner: &BlockInner) -> Option<EmuError> {
    let (waiter, offset, parity, site) =
        inner.threads.iter().enumerate().find_map(|(t, s)| match s.status {
            Status::AtMbarrier { offset, parity, site } => Some((t as u32, offset, parity, site)),
            _ => None,
        })?;
    let state = inner
        .mbarriers
        .get(offset)
        .map_or_else(|| "it is no longer initialized".to_string(), Mbarrier::describe);
    let mut others = Vec::new();
    let mut exited = 0;
    for (t, s) in inner.threads.iter().enumerate() {
        let t = t as u32;
        if t == waiter {
            continue;
        }
        match s.status {
            Status::Exited => exited += 1,
            Status::AtMbarrier { offset: o, parity: p, site: s } if others.len() < 4 => others.push(format!(
                "thread {} waits at {s} for parity {p} of the mbarrier {}",
                block.dim3(t),
                describe_mbarrier(inner, o)
            )),
            Status::AtBarrier(s) if others.len() < 4 => {
                others.push(format!("thread {} waits at the barrier at {s}", block.dim3(t)))
            }
            _ => {}
        }
    }
    if exited > 0 {
        others.push(format!("{exited} threads have exited"));
    }
    let why = format!(
        "{state}; no asynchronous operation is in flight and every other live thread waits too{}{}",
        if others.is_empty() { "" } else { ": " },
        others.join("; ")
    );
    let wait = format!(
        "the phase of parity {parity} of the mbarrier {} to complete",
        describe_mbarrier(inner, offset)
    );
    Some(block.error_at(waiter, Fault::Deadlock { site, wait, why }))
}
