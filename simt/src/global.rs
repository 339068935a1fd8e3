//! Global memory: the allocations kernels may touch, and the checks every launch makes on its
//! accesses, as compute-sanitizer's memcheck, racecheck and initcheck do.
//!
//! - Allocations are registered ([`register`]) by whoever owns the memory (the runtime's `Emu`
//!   buffers); an access must lie within one allocation that was live when the launch began.
//! - Each allocation records which of its bytes hold data (uploads and kernel writes make them
//!   so); a read of any other byte faults. Allocations registered as initialized skip the
//!   range bookkeeping.
//! - Races: every access of a block is logged as `(address, bytes, kind, thread)`. At each
//!   barrier the accesses since the previous one are checked against each other (threads of a
//!   block are ordered only by `sync_threads`); at the end of the block its accesses, merged
//!   into byte intervals per kind, are checked against the intervals of the blocks that ended
//!   before it (threads of different blocks are never ordered within a launch). A write races
//!   with any other access to the same bytes, an atomic with any plain access.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Dim3, Site};
use crate::peer_order::Clock;
use crate::stats::MemOp;

/// One allocation a kernel may touch.
pub(crate) struct Alloc {
    id: u64,
    pub start: u64,
    pub bytes: u64,
    label: String,
    /// Set once every byte holds data; then `init` is no longer consulted.
    fully_init: AtomicBool,
    /// Initialized byte ranges `[start, end)` as offsets, disjoint and sorted by start.
    init: Mutex<BTreeMap<u64, u64>>,
    /// Peers (other emulated devices) map it: its accesses are checked across devices.
    peer: AtomicBool,
    /// The emulated device whose memory it is ([`NO_OWNER`] when unknown): an access by a
    /// launch on another device counts as peer traffic ([`crate::LaunchStats::peer_loads`]).
    owner: AtomicU32,
}

/// Whose memory an access reaches, seen from the launch's emulated device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The launch's own device's.
    Own,
    /// Another emulated device's.
    Peer,
    /// No device's, or unknown.
    Unknown,
}

/// [`Alloc::owner`] of memory no emulated device owns (host memory, or registered by a thread
/// that drives no emulated device and never given an owner).
const NO_OWNER: u32 = u32::MAX;

impl Alloc {
    pub fn end(&self) -> u64 {
        self.start + self.bytes
    }

    /// Marks `[offset, offset + len)` as holding data.
    fn mark_init(&self, offset: u64, len: u64) {
        if self.fully_init.load(Ordering::Relaxed) || len == 0 {
            return;
        }
        let mut init = self.init.lock().unwrap_or_else(|e| e.into_inner());
        let (mut s, mut e) = (offset, offset + len);
        // Absorb every range that overlaps or touches [s, e).
        let touching: Vec<u64> =
            init.range(..=e).rev().take_while(|(_, &end)| end >= s).map(|(&k, _)| k).collect();
        for k in touching {
            let end = init.remove(&k).expect("key just listed");
            s = s.min(k);
            e = e.max(end);
        }
        init.insert(s, e);
        if s == 0 && e >= self.bytes {
            self.fully_init.store(true, Ordering::Relaxed);
        }
    }

    /// The first byte of `[offset, offset + len)` that holds no data, if any.
    fn first_uninit(&self, offset: u64, len: u64) -> Option<u64> {
        if self.fully_init.load(Ordering::Relaxed) {
            return None;
        }
        let init = self.init.lock().unwrap_or_else(|e| e.into_inner());
        match init.range(..=offset).next_back() {
            Some((_, &end)) if end >= offset + len => None,
            Some((_, &end)) if end > offset => Some(end),
            _ => Some(offset),
        }
    }
}

impl fmt::Display for Alloc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "allocation #{} `{}` ({} bytes at {:#x})", self.id, self.label, self.bytes, self.start)
    }
}

type Registry = Arc<Vec<Arc<Alloc>>>;

/// Live allocations sorted by start address; replaced whole on every change so a launch can
/// take a snapshot without holding a lock.
static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn update(f: impl FnOnce(&mut Vec<Arc<Alloc>>)) {
    let mut registry = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    let mut list: Vec<Arc<Alloc>> = registry.as_deref().cloned().unwrap_or_default();
    f(&mut list);
    *registry = Some(Arc::new(list));
}

/// The live allocations, as a launch sees them.
pub(crate) fn snapshot() -> Registry {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_default()
}

/// Memory kernels may access while this lives: an emulated device allocation, or host memory
/// lent to a launch.
pub struct Registration {
    alloc: Arc<Alloc>,
}

impl Registration {
    /// Makes the allocation memory that other emulated devices map: from now on its accesses
    /// are checked across devices and launches (see [`crate::set_emulated_device`]).
    /// Allocations registered by a host thread that drives an emulated device are so already.
    pub fn share_with_peers(&self) {
        self.alloc.peer.store(true, Ordering::Relaxed);
    }

    /// Makes the allocation the memory of emulated device `device`: a launch on any other
    /// device that reaches it counts its bytes as peer traffic
    /// ([`crate::LaunchStats::peer_loads`], [`crate::LaunchStats::peer_stores`]). Allocations
    /// registered by a host thread that drives an emulated device belong to that device already.
    pub fn set_owner(&self, device: u32) {
        self.alloc.owner.store(device, Ordering::Relaxed);
    }

    /// Marks `bytes` bytes at byte `offset` of the allocation as holding data.
    pub fn mark_initialized(&self, offset: usize, bytes: usize) {
        self.alloc.mark_init(offset as u64, bytes as u64);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let id = self.alloc.id;
        update(|list| list.retain(|a| a.id != id));
        if self.alloc.peer.load(Ordering::Relaxed) {
            crate::peer_order::forget(self.alloc.start, self.alloc.end());
        }
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Registration({})", self.alloc)
    }
}

/// Registers `bytes` bytes at `start` as an allocation named `label`, its bytes holding data
/// when `initialized` (a zeroed or uploaded buffer) and none otherwise.
pub fn register(start: *const u8, bytes: usize, initialized: bool, label: impl Into<String>) -> Registration {
    let alloc = Arc::new(Alloc {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        start: start as u64,
        bytes: bytes as u64,
        label: label.into(),
        fully_init: AtomicBool::new(initialized || bytes == 0),
        init: Mutex::new(BTreeMap::new()),
        peer: AtomicBool::new(crate::peer_order::emulated_device().is_some()),
        owner: AtomicU32::new(crate::peer_order::emulated_device().unwrap_or(NO_OWNER)),
    });
    let a = alloc.clone();
    update(|list| {
        let at = list.partition_point(|b| b.start <= a.start);
        list.insert(at, a);
    });
    Registration { alloc }
}

/// Marks `bytes` bytes at `start` as holding data in every live allocation that contains them
/// (an upload into a buffer).
pub fn mark_initialized(start: *const u8, bytes: usize) {
    let (start, bytes) = (start as u64, bytes as u64);
    for a in snapshot().iter().filter(|a| a.start <= start && start + bytes <= a.end()) {
        a.mark_init(start - a.start, bytes);
    }
}

/// Whether `bytes` bytes at `start` lie within one live allocation.
pub fn is_registered(start: *const u8, bytes: usize) -> bool {
    find(&snapshot(), start as u64, bytes as u64).is_some()
}

/// The allocation of `allocs` that holds `[addr, addr + len)`.
fn find(allocs: &[Arc<Alloc>], addr: u64, len: u64) -> Option<usize> {
    let right = allocs.partition_point(|a| a.start <= addr);
    // Registrations may nest (host memory lent inside a buffer): look at a few candidates.
    (right.saturating_sub(8)..right).rev().find(|&i| addr + len <= allocs[i].end())
}

/// Describes where `addr` lies relative to the allocations, for an out-of-range report.
fn nearest(allocs: &[Arc<Alloc>], addr: u64, len: u64) -> String {
    let right = allocs.partition_point(|a| a.start <= addr);
    let below = right.checked_sub(1).map(|i| &allocs[i]);
    let above = allocs.get(right);
    match (below, above) {
        (Some(b), _) if addr < b.end() => format!(
            "it starts at byte {} of {} and runs {} bytes past its end",
            addr - b.start,
            b,
            addr + len - b.end()
        ),
        (Some(b), Some(a)) if a.start - (addr + len) < addr - b.end() => {
            format!("it ends {} bytes before {}", a.start - addr, a)
        }
        (Some(b), _) => format!("it starts {} bytes past the end of {}", addr - b.end(), b),
        (None, Some(a)) => format!("it ends {} bytes before {}", a.start - addr, a),
        (None, None) => "no allocation is live (device buffers register theirs)".to_string(),
    }
}

/// What a check of one access found wrong.
pub(crate) enum Problem {
    OutOfRange(String),
    Misaligned(String),
    Uninitialized(String),
}

/// The memory a pointer argument of a launch may reach: the buffer view it was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgExtent {
    /// Address of the view's first byte (the argument's value).
    pub start: u64,
    /// Bytes in the view.
    pub bytes: u64,
}

/// Marks an access through a pointer that did not come from a kernel argument.
pub const NO_ARG: u32 = u32::MAX;

/// One logged access of a block.
#[derive(Clone, Copy)]
pub(crate) struct Record {
    pub addr: u64,
    pub bytes: u32,
    pub op: MemOp,
    pub thread: u32,
    pub site: u16,
    /// Order within the block.
    pub seq: u32,
    /// Full-warp `sync_warp`s the thread's warp had completed when it made the access: two
    /// accesses of one warp with different counts are ordered.
    pub warp_syncs: u32,
}

impl Record {
    /// Whether no synchronization orders `self` and `other` (within one barrier interval).
    fn unordered(&self, other: &Record) -> bool {
        self.thread != other.thread
            && !(self.thread / crate::warp::WARP_SIZE == other.thread / crate::warp::WARP_SIZE
                && self.warp_syncs != other.warp_syncs)
    }
}

/// An ordered atomic of a launch: the word it updated and its place in that word's
/// modification order (0 for the first update of the launch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SyncPoint {
    pub addr: u64,
    pub order: u32,
}

/// How a block's access is ordered with other blocks through ordered atomics (see
/// [`BlockSpan`]): released by the block's fence-then-atomic at `release`, acquired by its
/// atomic-then-fence at `acquire`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SyncTags {
    pub release: Option<SyncPoint>,
    pub acquire: Option<SyncPoint>,
}

impl SyncTags {
    /// Whether an access ordered as `self` happens before one ordered as `later`: `self` was
    /// released by an update of a word that `later`'s block acquired from a later update.
    fn before(&self, later: &SyncTags) -> bool {
        matches!((self.release, later.acquire), (Some(r), Some(a)) if r.addr == a.addr && r.order < a.order)
    }

    /// Whether the two accesses are ordered, one way or the other.
    fn ordered(&self, other: &SyncTags) -> bool {
        self.before(other) || other.before(self)
    }
}

/// An access of another block, as the launch remembers it.
#[derive(Clone, Copy)]
struct Span {
    end: u64,
    block: [u32; 3],
    /// The thread, when one thread made every access of the span.
    thread: Option<[u32; 3]>,
    site: Site,
    sync: SyncTags,
}

/// The accesses of the blocks that have ended, per kind (load, store, atomic): disjoint byte
/// intervals keyed by start.
#[derive(Default)]
struct Shadow {
    maps: [BTreeMap<u64, Span>; 3],
}

/// State shared by the workers of one launch.
pub(crate) struct LaunchMemory {
    allocs: Registry,
    shadow: Mutex<Shadow>,
    /// Per word updated by an ordered atomic: the updates so far (the next one's place in the
    /// word's modification order).
    orders: Mutex<HashMap<u64, u32>>,
    /// Per parameter: the view a pointer argument came from, where the launch knows it.
    extents: Vec<Option<ArgExtent>>,
    /// Per parameter: its name and type, for reports.
    params: Vec<String>,
    /// The emulated device the launch runs on.
    pub device: Option<u32>,
    /// What the launching host thread knew when the launch began.
    pub start_clock: Clock,
    /// What the launch's blocks did and learned, for the host thread when it ends.
    pub learned: Mutex<Clock>,
    /// How long a thread may read an unchanging flag (`flags.rs`).
    pub poll_limit: std::time::Duration,
}

impl LaunchMemory {
    pub fn new(extents: &[Option<ArgExtent>], names: &[&str], types: &[&str]) -> Self {
        // `stringify!` spaces out the tokens of a type (`simt :: Global < f32 >`).
        let types: Vec<String> = types.iter().map(|t| t.replace(' ', "")).collect();
        let params = (0..types.len().max(extents.len()))
            .map(|i| match (names.get(i), types.get(i)) {
                (Some(n), Some(t)) => format!("parameter {i} `{n}: {t}`"),
                (None, Some(t)) => format!("parameter {i} (`{t}`)"),
                _ => format!("parameter {i}"),
            })
            .collect();
        LaunchMemory {
            allocs: snapshot(),
            shadow: Mutex::new(Shadow::default()),
            orders: Mutex::new(HashMap::new()),
            extents: extents.to_vec(),
            params,
            device: crate::peer_order::emulated_device(),
            start_clock: crate::peer_order::launch_clock(),
            learned: Mutex::new(Clock::default()),
            poll_limit: crate::flags::poll_limit(),
        }
    }

    /// Whose memory the allocation at index `cache` (as [`LaunchMemory::check`] left it) is,
    /// seen from this launch's emulated device: its own, another device's, or neither's (host
    /// memory, memory with no owner, or a launch on no emulated device).
    pub fn owner_of(&self, cache: usize) -> Owner {
        let (Some(device), Some(alloc)) = (self.device, self.allocs.get(cache)) else {
            return Owner::Unknown;
        };
        match alloc.owner.load(Ordering::Relaxed) {
            NO_OWNER => Owner::Unknown,
            o if o == device => Owner::Own,
            _ => Owner::Peer,
        }
    }

    /// The allocation holding `addr` (for reports).
    pub fn describe(&self, addr: u64) -> String {
        match find(&self.allocs, addr, 1) {
            Some(i) => {
                format!("address {addr:#x} (byte {} of {})", addr - self.allocs[i].start, self.allocs[i])
            }
            None => format!("address {addr:#x}, in no live allocation"),
        }
    }

    /// Checks an access of `len` bytes at `addr`, needing alignment `align`; `cache` is the
    /// caller's last allocation index. Returns whether the allocation is shared with peers.
    pub fn check(
        &self,
        addr: u64,
        len: u64,
        align: u64,
        op: MemOp,
        arg: u32,
        cache: &mut usize,
    ) -> Result<bool, Problem> {
        let what = match op {
            MemOp::Load => "read",
            MemOp::Store => "write",
            MemOp::Atomic => "atomic",
        };
        if let Some(Some(e)) = self.extents.get(arg as usize) {
            if addr < e.start || addr + len > e.start + e.bytes {
                let place = if addr < e.start {
                    format!("{} bytes before its start", e.start - addr)
                } else {
                    format!(
                        "at byte {} of it, {} bytes past its end",
                        addr - e.start,
                        addr + len - (e.start + e.bytes)
                    )
                };
                return Err(Problem::OutOfRange(format!(
                    "{len}-byte {what} at address {addr:#x} through {} is outside the {}-byte view passed \
                     for it ({place}); {}",
                    self.params[arg as usize],
                    e.bytes,
                    self.describe(addr)
                )));
            }
        }
        let hit = |i: usize| self.allocs.get(i).is_some_and(|a| a.start <= addr && addr + len <= a.end());
        if !hit(*cache) {
            match find(&self.allocs, addr, len) {
                Some(i) => *cache = i,
                None => {
                    return Err(Problem::OutOfRange(format!(
                        "{len}-byte {what} at address {addr:#x} is outside every live allocation: {}",
                        nearest(&self.allocs, addr, len)
                    )))
                }
            }
        }
        let alloc = &self.allocs[*cache];
        if addr % align != 0 {
            return Err(Problem::Misaligned(format!(
                "{len}-byte {what} at address {addr:#x} (byte {} of {alloc}) is not {align}-byte aligned",
                addr - alloc.start
            )));
        }
        let offset = addr - alloc.start;
        if op != MemOp::Store {
            if let Some(byte) = alloc.first_uninit(offset, len) {
                return Err(Problem::Uninitialized(format!(
                    "{len}-byte {what} at address {addr:#x} reads byte {byte} of {alloc}, which was never \
                     written (not uploaded, zeroed or stored by a kernel before this read)"
                )));
            }
        }
        if op != MemOp::Load {
            alloc.mark_init(offset, len);
        }
        Ok(alloc.peer.load(Ordering::Relaxed))
    }

    /// Runs `rmw`, an atomic read-modify-write of the word at `addr`, as the next update in
    /// that word's modification order; returns its result and its place in the order. The
    /// lock makes the order the one the updates happened in.
    pub fn ordered_rmw(&self, addr: u64, rmw: impl FnOnce() -> u32) -> (u32, u32) {
        let mut orders = self.orders.lock().unwrap_or_else(|e| e.into_inner());
        let next = orders.entry(addr).or_insert(0);
        let order = *next;
        *next += 1;
        (rmw(), order)
    }

    /// Checks the accesses `spans` of block `block` (per kind: sorted, disjoint) against the
    /// blocks that ended before, then adds them. Returns the conflicting pair: this block's
    /// access kind and first byte, the other block's access. Accesses that ordered atomics
    /// order ([`SyncTags`]) do not conflict.
    pub fn merge_block(&self, spans: &[Vec<BlockSpan>; 3], block: [u32; 3]) -> Result<(), InterBlockRace> {
        let mut shadow = self.shadow.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, list) in spans.iter().enumerate() {
            for s in list {
                for &other in conflicting_kinds(kind) {
                    let unordered =
                        overlaps(&shadow.maps[other], s.start, s.end).find(|(_, o)| !s.sync.ordered(&o.sync));
                    if let Some((start, span)) = unordered {
                        let byte = start.max(s.start);
                        return Err(InterBlockRace {
                            byte,
                            kind: kind_of(kind),
                            other_kind: kind_of(other),
                            other_block: span.block,
                            other_thread: span.thread,
                            other_site: span.site,
                        });
                    }
                }
            }
        }
        for (kind, list) in spans.iter().enumerate() {
            for s in list {
                let span = Span { end: 0, block, thread: s.thread, site: s.site, sync: s.sync };
                insert_gaps(&mut shadow.maps[kind], s.start, s.end, span);
            }
        }
        Ok(())
    }
}

/// Kinds (0 load, 1 store, 2 atomic) whose accesses race with an access of `kind` from
/// another thread.
fn conflicting_kinds(kind: usize) -> &'static [usize] {
    match kind {
        0 => &[1, 2],
        1 => &[0, 1, 2],
        _ => &[0, 1],
    }
}

fn kind_of(kind: usize) -> MemOp {
    [MemOp::Load, MemOp::Store, MemOp::Atomic][kind]
}

/// The entries of `map` (disjoint intervals) overlapping `[start, end)`, last first.
fn overlaps(map: &BTreeMap<u64, Span>, start: u64, end: u64) -> impl Iterator<Item = (u64, Span)> + '_ {
    map.range(..end).rev().take_while(move |(_, s)| s.end > start).map(|(&k, s)| (k, *s))
}

/// Adds the parts of `[start, end)` that `map` does not cover yet.
fn insert_gaps(map: &mut BTreeMap<u64, Span>, start: u64, end: u64, span: Span) {
    let covered: Vec<(u64, u64)> = {
        let first = map.range(..=start).next_back().map_or(start, |(&k, _)| k);
        map.range(first..end).filter(|(_, s)| s.end > start).map(|(&k, s)| (k, s.end)).collect()
    };
    let mut at = start;
    for (s, e) in covered {
        if s > at {
            map.insert(at, Span { end: s, ..span });
        }
        at = at.max(e);
    }
    if at < end {
        map.insert(at, Span { end, ..span });
    }
}

/// A byte interval one block accessed with one kind of access, all of it ordered alike with
/// other blocks.
#[derive(Clone, Copy)]
pub(crate) struct BlockSpan {
    pub start: u64,
    pub end: u64,
    pub thread: Option<[u32; 3]>,
    pub site: Site,
    pub sync: SyncTags,
}

/// A race between this block and one that ended before it.
pub(crate) struct InterBlockRace {
    pub byte: u64,
    pub kind: MemOp,
    pub other_kind: MemOp,
    pub other_block: [u32; 3],
    pub other_thread: Option<[u32; 3]>,
    pub other_site: Site,
}

impl InterBlockRace {
    pub fn other(&self) -> String {
        let thread = match self.other_thread {
            Some(t) => format!("thread {}", Dim3(t)),
            None => "threads".to_string(),
        };
        format!(
            "{} by {thread} of block {} at {}",
            op_name(self.other_kind),
            Dim3(self.other_block),
            self.other_site
        )
    }
}

pub(crate) fn op_name(op: MemOp) -> &'static str {
    match op {
        MemOp::Load => "read",
        MemOp::Store => "write",
        MemOp::Atomic => "atomic",
    }
}

/// Whether two accesses of different threads to common bytes race.
pub(crate) fn races(a: MemOp, b: MemOp) -> bool {
    !(a == MemOp::Load && b == MemOp::Load || a == MemOp::Atomic && b == MemOp::Atomic)
}

/// Finds two records of `records` (sorted by address) from different threads that touch a
/// common byte and race; returns (earlier, later) by `seq`.
pub(crate) fn find_race(records: &[Record]) -> Option<(Record, Record)> {
    let mut i = 0;
    while i < records.len() {
        // A cluster: records overlapping a chain from records[i].
        let mut end = records[i].addr + u64::from(records[i].bytes);
        let mut j = i + 1;
        let mut plain_write = records[i].op == MemOp::Store;
        let mut atomic = records[i].op == MemOp::Atomic;
        let mut load = records[i].op == MemOp::Load;
        let mut threads_differ = false;
        while j < records.len() && records[j].addr < end {
            end = end.max(records[j].addr + u64::from(records[j].bytes));
            plain_write |= records[j].op == MemOp::Store;
            atomic |= records[j].op == MemOp::Atomic;
            load |= records[j].op == MemOp::Load;
            threads_differ |= records[j].thread != records[i].thread;
            j += 1;
        }
        let cluster = &records[i..j];
        if threads_differ && (plain_write || atomic && load) {
            for (x, a) in cluster.iter().enumerate() {
                if a.op == MemOp::Load {
                    continue;
                }
                for b in &cluster[x + 1..] {
                    let overlaps =
                        b.addr < a.addr + u64::from(a.bytes) && a.addr < b.addr + u64::from(b.bytes);
                    if overlaps && a.unordered(b) && races(a.op, b.op) {
                        return Some(if a.seq < b.seq { (*a, *b) } else { (*b, *a) });
                    }
                }
                // Loads before `a` in address order that overlap it.
                for b in &cluster[..x] {
                    let overlaps = a.addr < b.addr + u64::from(b.bytes);
                    if overlaps && a.unordered(b) && races(a.op, b.op) {
                        return Some(if a.seq < b.seq { (*a, *b) } else { (*b, *a) });
                    }
                }
            }
        }
        i = j;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(addr: u64, bytes: u32, op: MemOp, thread: u32, seq: u32) -> Record {
        Record { addr, bytes, op, thread, site: 0, seq, warp_syncs: 0 }
    }

    #[test]
    fn init_ranges_merge_and_answer() {
        let data = [0u8; 64];
        let r = register(data.as_ptr(), 64, false, "t");
        let a = &r.alloc;
        assert_eq!(a.first_uninit(0, 4), Some(0));
        a.mark_init(8, 8);
        a.mark_init(16, 8);
        assert_eq!(a.first_uninit(8, 16), None);
        assert_eq!(a.first_uninit(12, 16), Some(24));
        a.mark_init(0, 8);
        a.mark_init(24, 40);
        assert!(a.fully_init.load(Ordering::Relaxed));
    }

    #[test]
    fn a_full_warp_sync_orders_the_accesses_of_its_lanes() {
        let write = rec(0, 4, MemOp::Store, 0, 0);
        let read = |thread, warp_syncs| Record { warp_syncs, ..rec(0, 4, MemOp::Load, thread, 1) };
        assert!(find_race(&[write, read(1, 0)]).is_some());
        assert!(find_race(&[write, read(1, 1)]).is_none());
        assert!(find_race(&[write, read(33, 1)]).is_some(), "another warp's sync orders nothing");
    }

    #[test]
    fn races_need_two_threads_and_a_plain_write_or_mixed_atomics() {
        let reads = [rec(0, 4, MemOp::Load, 0, 0), rec(0, 4, MemOp::Load, 1, 1)];
        assert!(find_race(&reads).is_none());
        let atomics = [rec(0, 4, MemOp::Atomic, 0, 0), rec(0, 4, MemOp::Atomic, 1, 1)];
        assert!(find_race(&atomics).is_none());
        let own = [rec(0, 4, MemOp::Load, 3, 0), rec(0, 4, MemOp::Store, 3, 1)];
        assert!(find_race(&own).is_none());
        let neighbours = [rec(0, 4, MemOp::Store, 0, 0), rec(4, 4, MemOp::Store, 1, 1)];
        assert!(find_race(&neighbours).is_none());
        let rw = [rec(0, 16, MemOp::Load, 0, 5), rec(12, 4, MemOp::Store, 1, 2)];
        let (earlier, later) = find_race(&rw).unwrap();
        assert_eq!((earlier.seq, later.seq), (2, 5));
        let mixed = [rec(8, 4, MemOp::Atomic, 0, 0), rec(8, 4, MemOp::Load, 1, 1)];
        assert!(find_race(&mixed).is_some());
    }

    #[test]
    fn gaps_fill_around_covered_ranges() {
        let mut map = BTreeMap::new();
        let span = Span {
            end: 0,
            block: [0; 3],
            thread: None,
            site: std::panic::Location::caller(),
            sync: SyncTags::default(),
        };
        insert_gaps(&mut map, 10, 20, span);
        insert_gaps(&mut map, 0, 30, Span { block: [1, 0, 0], ..span });
        let ranges: Vec<(u64, u64, u32)> = map.iter().map(|(&k, s)| (k, s.end, s.block[0])).collect();
        assert_eq!(ranges, [(0, 10, 1), (10, 20, 0), (20, 30, 1)]);
        assert_eq!(overlaps(&map, 29, 31).count(), 1);
        assert_eq!(overlaps(&map, 5, 25).map(|(k, _)| k).collect::<Vec<_>>(), [20, 10, 0]);
        assert!(overlaps(&map, 30, 40).next().is_none());
    }
}
