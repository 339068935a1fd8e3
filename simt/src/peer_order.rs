//! The memory model between emulated devices: which accesses of different devices (or of
//! different launches) to peer-shared memory are ordered, and the race check that follows.
//!
//! Several emulated devices live in one process, one per host thread ([`set_emulated_device`]);
//! their kernels run at the same time and synchronise only through memory. Allocations that
//! peers map ([`crate::Registration::share_with_peers`], or any allocation registered by a
//! host thread that drives an emulated device) are checked across devices, as the PTX ISA's
//! memory consistency model orders them ("Memory Consistency Model": "Scope", "Morally
//! strong operations", "Release and Acquire Patterns"):
//!
//! - Each running block is an *agent* with a logical clock, ticked at every `sync_threads`
//!   and every release. An access is stamped with its agent, clock and thread.
//! - A release store (`st.release.{gpu,sys}`) by thread `t` publishes what the block did
//!   before its last barrier, what `t` did itself, and everything the block had acquired
//!   (a vector clock). An acquire load (`ld.acquire.{gpu,sys}`) that reads the value a release
//!   stored takes that clock for its own thread, and for the whole block after the next
//!   barrier. Both must be at `.sys` scope when the two devices differ; `.gpu` orders only
//!   accesses of one device. A plain or volatile store to the flag breaks the chain.
//! - A launch starts knowing everything its host thread knows (the launches it made before:
//!   stream order) and, when it ends, the host thread learns everything its blocks did.
//!   Host threads learn from each other only through [`HostOrder`] (a join or barrier of the
//!   host threads, which the emulator cannot see).
//! - Two accesses to overlapping bytes from different agents race when one is a plain store
//!   (or one is atomic and the other plain) and no clock orders the earlier before the later.
//!   Accesses of one block are the block's own checker's (`global.rs`), not this one's.
//!
//! So a flag written or polled with plain or volatile accesses races with the acquire or
//! release on the other side, data read after such a poll races with the peer's writes, and
//! a buffer written for the next step or collective before every peer has finished reading it
//! races with those reads; each report names both sides: device, kernel, block, thread and
//! source line.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::error::{Dim3, Site};
use crate::stats::MemOp;

/// The scope of a release or acquire (PTX ISA, "Scope"): `.gpu` synchronises threads of one
/// device, `.sys` threads of every device and the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `.gpu`: the threads of one device.
    Gpu,
    /// `.sys`: every thread of the system.
    Sys,
}

/// An agent: one block of one launch.
pub(crate) type AgentId = u32;

/// What an agent's releases, as far as someone has acquired them, cover of its accesses: every
/// access stamped before `below`, and one thread's accesses up to and including a clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    below: u32,
    thread: Option<(u32, u32)>,
}

impl Entry {
    const ALL: Entry = Entry { below: u32::MAX, thread: None };

    fn covers(&self, clock: u32, thread: u32) -> bool {
        clock < self.below || matches!(self.thread, Some((t, c)) if t == thread && clock <= c)
    }

    fn join(&mut self, other: &Entry) {
        self.below = self.below.max(other.below);
        self.thread = match (self.thread, other.thread) {
            (Some(a), Some(b)) => Some(if b.1 > a.1 { b } else { a }),
            (a, b) => a.or(b),
        };
        if matches!(self.thread, Some((_, c)) if c < self.below) {
            self.thread = None;
        }
    }
}

/// A vector clock: per agent, what of its accesses are known to have happened before.
#[derive(Clone, Debug, Default)]
pub(crate) struct Clock(BTreeMap<AgentId, Entry>);

impl Clock {
    fn join(&mut self, other: &Clock) {
        for (agent, entry) in &other.0 {
            self.add(*agent, entry);
        }
    }

    fn add(&mut self, agent: AgentId, entry: &Entry) {
        self.0.entry(agent).and_modify(|e| e.join(entry)).or_insert(*entry);
    }

    fn covers(&self, agent: AgentId, clock: u32, thread: u32) -> bool {
        self.0.get(&agent).is_some_and(|e| e.covers(clock, thread))
    }
}

/// What a host thread knows has happened before its next launch; hand it to another host
/// thread ([`join_host_order`]) where the host synchronises them (a join, a barrier), which the
/// emulator does not see.
#[derive(Clone, Debug, Default)]
pub struct HostOrder(Clock);

thread_local! {
    static HOST: RefCell<Clock> = RefCell::new(Clock::default());
    static DEVICE: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Makes this host thread drive emulated device `ordinal` (None: the plain emulator): its
/// launches are that device's, named in reports, and the allocations it registers from now on
/// are shared with peers (checked across devices). Returns the previous setting.
pub fn set_emulated_device(ordinal: Option<u32>) -> Option<u32> {
    DEVICE.with(|d| d.replace(ordinal))
}

/// The emulated device this host thread drives, if any (see [`set_emulated_device`]).
pub fn emulated_device() -> Option<u32> {
    DEVICE.with(Cell::get)
}

/// What this host thread's launches so far have done (stream order).
pub fn host_order() -> HostOrder {
    HostOrder(HOST.with(|h| h.borrow().clone()))
}

/// Makes this host thread's later launches ordered after what `order` covers (another host
/// thread's launches, once the host has synchronised with it).
pub fn join_host_order(order: &HostOrder) {
    HOST.with(|h| h.borrow_mut().join(&order.0));
}

/// The host thread's knowledge, for a launch it starts.
pub(crate) fn launch_clock() -> Clock {
    HOST.with(|h| h.borrow().clone())
}

/// The launch's blocks are done: the host thread knows what they did.
pub(crate) fn launch_done(learned: &Clock) {
    HOST.with(|h| h.borrow_mut().join(learned));
}

/// One remembered access to peer-shared memory.
#[derive(Clone, Copy)]
struct Acc {
    agent: AgentId,
    clock: u32,
    thread: u32,
    /// The thread's index within its block.
    index: [u32; 3],
    bytes: u32,
    op: MemOp,
    site: Site,
}

/// The release a flag word's last store published.
struct FlagRelease {
    clock: Clock,
    scope: Scope,
    device: Option<u32>,
}

#[derive(Default)]
struct State {
    next_agent: AgentId,
    /// Per agent: "device 1, kernel `k`, block (0, 0, 0)".
    labels: HashMap<AgentId, String>,
    /// Accesses to peer-shared memory by start address.
    shadow: BTreeMap<u64, Vec<Acc>>,
    /// Per flag word: the release its last store published, when that store was one.
    flags: HashMap<u64, FlagRelease>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
    f(state.get_or_insert_with(State::default))
}

/// Forgets the accesses and releases of `[start, end)` (an allocation that went away).
pub(crate) fn forget(start: u64, end: u64) {
    with_state(|s| {
        let keys: Vec<u64> = s.shadow.range(start..end).map(|(&k, _)| k).collect();
        for k in keys {
            s.shadow.remove(&k);
        }
        s.flags.retain(|&a, _| a < start || a >= end);
    });
}

/// A race found by [`Agent::access`].
pub(crate) struct PeerRace {
    /// Where the two overlap.
    pub byte: u64,
    /// The earlier access, described: "write by device 1, kernel `k`, block (0, 0, 0),
    /// thread (3, 0, 0) at file:line".
    pub earlier: String,
    /// What was missing.
    pub why: String,
}

/// The running block as an agent of the cross-device order.
pub(crate) struct Agent {
    id: AgentId,
    device: Option<u32>,
    clock: u32,
    /// Clock at the block's last barrier: accesses stamped before it are covered by a release.
    bar: u32,
    /// What the whole block has acquired (as of its last barrier).
    known: Clock,
    /// Per thread: what it acquired since the last barrier.
    pending: HashMap<u32, Clock>,
    /// An acquire observed a release whose scope did not reach this device.
    narrow_scope: Option<String>,
}

impl Agent {
    /// A new agent for block `block` of `kernel` on `device`, knowing `start`.
    pub fn new(kernel: &str, block: [u32; 3], device: Option<u32>, start: &Clock) -> Agent {
        let id = with_state(|s| {
            let id = s.next_agent;
            s.next_agent += 1;
            s.labels.insert(id, label(device, kernel, block));
            id
        });
        Agent {
            id,
            device,
            clock: 1,
            bar: 1,
            known: start.clone(),
            pending: HashMap::new(),
            narrow_scope: None,
        }
    }

    /// `sync_threads`: what any thread acquired is the block's now.
    pub fn barrier(&mut self) {
        for (_, clock) in self.pending.drain() {
            self.known.join(&clock);
        }
        self.clock += 1;
        self.bar = self.clock;
    }

    /// What the block did and learned, for its launch's host thread once it has ended.
    pub fn finish(mut self, into: &mut Clock) {
        self.barrier();
        into.join(&self.known);
        into.add(self.id, &Entry::ALL);
    }

    fn knows(&self, thread: u32, agent: AgentId, clock: u32, other_thread: u32) -> bool {
        self.known.covers(agent, clock, other_thread)
            || self.pending.get(&thread).is_some_and(|c| c.covers(agent, clock, other_thread))
    }

    /// Checks `thread`'s access (`op`: plain or volatile loads and stores, atomics for acquire
    /// loads and release stores) of `bytes` at `addr` against the other agents' and records
    /// it; `memory_op` runs under the check's lock (so a flag's value and its release match).
    pub fn access<R>(
        &mut self,
        (thread, index): (u32, [u32; 3]),
        addr: u64,
        bytes: u32,
        op: MemOp,
        site: Site,
        memory_op: impl FnOnce(&mut FlagSide) -> R,
    ) -> Result<R, PeerRace> {
        let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
        let state = guard.get_or_insert_with(State::default);
        let end = addr + u64::from(bytes);
        let me = Acc { agent: self.id, clock: self.clock, thread, index, bytes, op, site };
        for (&start, list) in state.shadow.range(addr.saturating_sub(16)..end) {
            for other in list {
                let overlaps = start + u64::from(other.bytes) > addr;
                if !overlaps || other.agent == self.id || !conflict(other.op, op) {
                    continue;
                }
                if self.knows(thread, other.agent, other.clock, other.thread) {
                    continue;
                }
                let other_label = state.labels.get(&other.agent).map_or("another device", String::as_str);
                let earlier = format!(
                    "{} by {other_label}, thread {} at {}",
                    op_word(other.op),
                    Dim3(other.index),
                    other.site
                );
                return Err(PeerRace { byte: start.max(addr), earlier, why: self.why(other.op, op) });
            }
        }
        // Forget what this access is known to follow, then remember it (one per agent and kind).
        let list = state.shadow.entry(addr).or_default();
        list.retain(|o| {
            !(o.agent == self.id && o.op == op && o.bytes == bytes)
                && !(o.agent != self.id
                    && (self.known.covers(o.agent, o.clock, o.thread)
                        || self.pending.get(&thread).is_some_and(|c| c.covers(o.agent, o.clock, o.thread))))
        });
        list.push(me);
        let mut side = FlagSide { release: None, acquired: None, plain_store: false };
        let result = memory_op(&mut side);
        if side.plain_store {
            state.flags.remove(&addr);
        }
        if let Some(scope) = side.release {
            let mut clock = self.known.clone();
            if let Some(p) = self.pending.get(&thread) {
                clock.join(p);
            }
            clock.add(self.id, &Entry { below: self.bar, thread: Some((thread, self.clock)) });
            state.flags.insert(addr, FlagRelease { clock, scope, device: self.device });
            self.clock += 1;
        }
        if let Some(scope) = side.acquired {
            if let Some(release) = state.flags.get(&addr) {
                let same_device = release.device == self.device;
                if same_device || (release.scope == Scope::Sys && scope == Scope::Sys) {
                    self.pending.entry(thread).or_default().join(&release.clock);
                } else {
                    self.narrow_scope = Some(format!(
                        "the flag at {addr:#x} was released at {:?} scope and acquired at {:?} scope, which \
                         does not reach across devices (both need .sys)",
                        release.scope, scope
                    ));
                }
            }
        }
        Ok(result)
    }

    fn why(&self, earlier: MemOp, later: MemOp) -> String {
        let flag = earlier == MemOp::Atomic || later == MemOp::Atomic;
        let mut why = if flag {
            "a word accessed atomically on one side and with a plain or volatile access on the other: a \
             flag that announces data must be written with st.release.sys and polled with ld.acquire.sys \
             (PTX ISA, Memory Consistency Model: only morally strong operations synchronize)"
                .to_string()
        } else {
            "and no release/acquire chain orders them: either the data was not announced by a \
             st.release.sys that this block observed with ld.acquire.sys (then sync_threads for the \
             other threads), or the buffer was reused before every peer had finished reading it"
                .to_string()
        };
        if let Some(narrow) = &self.narrow_scope {
            why.push_str("; ");
            why.push_str(narrow);
        }
        why
    }
}

/// How the memory operation under [`Agent::access`]'s lock says what it was.
pub(crate) struct FlagSide {
    release: Option<Scope>,
    acquired: Option<Scope>,
    plain_store: bool,
}

impl FlagSide {
    /// The access was a release store at `scope`.
    pub fn release(&mut self, scope: Scope) {
        self.release = Some(scope);
    }

    /// The access was an acquire load at `scope` (it takes the release of the value it read).
    pub fn acquire(&mut self, scope: Scope) {
        self.acquired = Some(scope);
    }

    /// The access was a plain or volatile store (it breaks a release sequence).
    pub fn plain_store(&mut self) {
        self.plain_store = true;
    }
}

/// Whether two accesses of different agents to the same bytes race when unordered.
fn conflict(a: MemOp, b: MemOp) -> bool {
    !matches!((a, b), (MemOp::Load, MemOp::Load) | (MemOp::Atomic, MemOp::Atomic))
}

fn op_word(op: MemOp) -> &'static str {
    match op {
        MemOp::Load => "read",
        MemOp::Store => "write",
        MemOp::Atomic => "atomic (release/acquire)",
    }
}

fn label(device: Option<u32>, kernel: &str, block: [u32; 3]) -> String {
    match device {
        Some(d) => format!("device {d}, kernel `{kernel}`, block {}", Dim3(block)),
        None => format!("kernel `{kernel}` of the host's plain emulator, block {}", Dim3(block)),
    }
}

/// The label of `device`, for the faulting side of a report.
pub(crate) fn device_label(device: Option<u32>, kernel: &str, block: [u32; 3]) -> String {
    label(device, kernel, block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_cover_before_the_barrier_and_the_releasing_thread() {
        let e = Entry { below: 3, thread: Some((5, 7)) };
        assert!(e.covers(2, 0));
        assert!(!e.covers(3, 0));
        assert!(e.covers(7, 5));
        assert!(!e.covers(8, 5));
        let mut j = e;
        j.join(&Entry { below: 9, thread: None });
        assert_eq!(j, Entry { below: 9, thread: None });
    }
}
