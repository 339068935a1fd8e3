//! A block's shared memory: the bytes, where each array lives, and the shadow state that
//! finds data races.
//!
//! Every byte has a shadow entry with the last write, the last two reads by distinct threads
//! and the last two atomics by distinct threads, each stamped with a logical clock that ticks
//! at every barrier and every full-warp `sync_warp`. An earlier access is ordered before a
//! later one when a barrier came between them, or when both threads are in one warp and that
//! warp synchronized in between. Synchronizing only moves clocks, so stale entries are ignored
//! rather than cleared; the clock keeps counting across the blocks a worker runs.
//!
//! mbarriers add ordering ([`SyncOrder`]): an access an mbarrier arrival released to a thread
//! that observed its phase is ordered too. Bytes a TMA load fills belong to a *region* until
//! they are visible to the accessing thread (it observed the load's mbarrier phase, or a
//! barrier followed some thread's observation); bytes a TMA store reads belong to one until
//! its thread waits for the store's bulk group to have read them (writes fault until then).
//! An async-proxy read (TMA store source, later `wgmma` operands) of a generic-proxy write
//! needs the writer's `fence.proxy.async` ordered before the read.

use crate::error::{AccessKind, Site};
use crate::sites::SiteTable;
use crate::sync_order::SyncOrder;
use crate::warp::WARP_SIZE;

/// Fresh shared memory holds this byte pattern: a NaN for f32 and bf16, so reading memory
/// nobody wrote shows up in results.
pub(crate) const POISON_BYTE: u8 = 0xFF;

/// Arrays declared with `static_shared!` start at multiples of this.
const STATIC_ALIGN: u32 = 16;

/// One access: when (clock 0: never), by which thread, from where (an id in the site table).
#[derive(Clone, Copy, Default)]
struct Stamp {
    clock: u32,
    thread: u16,
    site: u16,
}

/// The synchronization a block has done so far.
struct Clocks {
    now: u32,
    /// `now` at the last barrier (or block start); always at least 1.
    barrier: u32,
    /// `now` at each warp's last full-warp `sync_warp`.
    warp_synced: Vec<u32>,
}

/// What orders earlier accesses before one access by `thread`.
#[derive(Clone, Copy)]
struct Viewpoint {
    thread: u16,
    warp: u16,
    barrier: u32,
    warp_synced: u32,
}

impl Viewpoint {
    /// Whether `earlier` is ordered by no synchronization before this access, so the two race
    /// if they touch the same byte and one of them writes.
    fn unordered(self, earlier: Stamp) -> bool {
        earlier.clock >= self.barrier
            && earlier.thread != self.thread
            && !(earlier.thread / WARP_SIZE as u16 == self.warp && earlier.clock < self.warp_synced)
    }
}

/// Last and previous-distinct-thread stamps of one kind of access.
#[derive(Clone, Copy, Default)]
struct Pair {
    last: Stamp,
    other: Stamp,
}

impl Pair {
    fn record(&mut self, now: Stamp, barrier: u32) {
        if self.last.clock >= barrier && self.last.thread != now.thread {
            self.other = self.last;
        }
        self.last = now;
    }
}

#[derive(Clone, Copy, Default)]
struct ByteShadow {
    write: Stamp,
    reads: Pair,
    atomics: Pair,
    /// The `cp.async` copy filling this byte until it is waited for (clock 0: none).
    async_copy: Stamp,
    /// 1 + the index of the TMA region the byte belongs to (0: none).
    region: u16,
}

/// What a TMA region of shared memory is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RegionKind {
    /// A TMA load's destination: defined once phase `phase` of the mbarrier at `barrier`
    /// completed and the accessing thread observed it.
    LoadDestination { barrier: u32, phase: u32 },
    /// A TMA store's source: must not be written until its issuing thread waited for bulk
    /// group `group` (`cp.async.bulk.wait_group.read`).
    StoreSource { group: u32 },
}

/// Shared bytes an in-flight TMA operation owns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Region {
    pub kind: RegionKind,
    /// The issuing thread and call site.
    pub thread: u32,
    pub site: Site,
    /// `clocks.barrier` when some thread first observed the load's phase (its data is then
    /// visible to every thread after the next barrier).
    observed_barrier: Option<u32>,
    /// Whether a store source has been waited for.
    released: bool,
}

/// The earlier access of a conflicting pair.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conflict {
    pub byte: u32,
    pub kind: AccessKind,
    pub thread: u32,
    pub site: Site,
    /// The TMA region the byte belongs to, when that is the conflict.
    pub region: Option<Region>,
    /// For an async-proxy read: the earlier access is a generic-proxy write that no
    /// `fence.proxy.async` of its thread (ordered before the read) covers.
    pub proxy: bool,
}

struct StaticArray {
    key: &'static str,
    offset: u32,
    bytes: u32,
}

/// One block's shared memory: dynamic window at offset 0, static arrays after it.
pub(crate) struct SharedMemory {
    bytes: Vec<u8>,
    shadow: Vec<ByteShadow>,
    clocks: Clocks,
    sites: SiteTable,
    dynamic_bytes: u32,
    statics: Vec<StaticArray>,
    /// Size of the static arrays declared so far, laid out as `.shared` declarations are
    /// (each at a multiple of [`STATIC_ALIGN`]).
    static_bytes: u32,
    /// The clock when the running block began: older stamps belong to earlier blocks.
    block_start: u32,
    /// mbarrier arrivals and observations, proxy fences.
    pub order: SyncOrder,
    /// TMA regions of the running block, indexed by `ByteShadow::region - 1`.
    regions: Vec<Region>,
}

impl SharedMemory {
    pub fn new() -> Self {
        SharedMemory {
            bytes: Vec::new(),
            shadow: Vec::new(),
            clocks: Clocks { now: 0, barrier: 0, warp_synced: Vec::new() },
            sites: SiteTable::new(),
            dynamic_bytes: 0,
            statics: Vec::new(),
            static_bytes: 0,
            block_start: 0,
            order: SyncOrder::default(),
            regions: Vec::new(),
        }
    }

    /// Resets for a new block with `dynamic_bytes` of dynamic shared memory.
    pub fn begin_block(&mut self, dynamic_bytes: u32) {
        self.bytes.clear();
        self.bytes.resize(dynamic_bytes as usize, POISON_BYTE);
        self.grow_shadow();
        self.dynamic_bytes = dynamic_bytes;
        self.statics.clear();
        self.static_bytes = 0;
        if !self.regions.is_empty() {
            self.shadow.iter_mut().for_each(|s| s.region = 0);
            self.regions.clear();
        }
        self.order.clear();
        self.barrier();
        self.block_start = self.clocks.now;
    }

    /// A barrier: accesses before it no longer conflict with later ones.
    pub fn barrier(&mut self) {
        self.tick();
        self.clocks.barrier = self.clocks.now;
    }

    /// A full-warp `sync_warp` of `warp`: its lanes' earlier accesses are ordered before their
    /// later ones.
    pub fn warp_synced(&mut self, warp: u32) {
        self.tick();
        let warp = warp as usize;
        if self.clocks.warp_synced.len() <= warp {
            self.clocks.warp_synced.resize(warp + 1, 0);
        }
        self.clocks.warp_synced[warp] = self.clocks.now;
    }

    fn tick(&mut self) {
        if self.clocks.now == u32::MAX {
            // Start over: clock 1 is older than any live access can be after the tick below.
            self.shadow.fill(ByteShadow::default());
            self.clocks.now = 1;
            self.clocks.barrier = 1;
            self.clocks.warp_synced.fill(0);
            self.regions.clear();
            self.order.clear();
            self.block_start = 1;
        }
        self.clocks.now += 1;
    }

    /// Ticks the clock and returns it: the time of an mbarrier arrival or a proxy fence, after
    /// every earlier access of the thread.
    pub fn tick_now(&mut self) -> u32 {
        self.tick();
        self.clocks.now
    }

    /// `thread` observed that `phases` phases of the mbarrier at `barrier` completed.
    pub fn observe(&mut self, thread: u32, barrier: u32, phases: u32) {
        self.order.observe(thread, barrier, phases);
        let now = self.clocks.barrier;
        for r in &mut self.regions {
            if let RegionKind::LoadDestination { barrier: b, phase } = r.kind {
                if b == barrier && phase < phases && r.observed_barrier.is_none() {
                    r.observed_barrier = Some(now);
                }
            }
        }
    }

    /// Starts a TMA region issued by `thread` at `site`; returns its id for [`SharedMemory::mark`].
    pub fn new_region(&mut self, kind: RegionKind, thread: u32, site: Site) -> Result<u16, String> {
        if self.regions.len() >= usize::from(u16::MAX) - 1 {
            return Err("more than 65534 TMA operations in one block".to_string());
        }
        self.regions.push(Region { kind, thread, site, observed_barrier: None, released: false });
        Ok(self.regions.len() as u16)
    }

    /// Puts `len` bytes at `offset` (already checked with [`SharedMemory::track`]) in region
    /// `id`; a load's destination bytes forget their earlier accesses (the load ordered after
    /// them).
    pub fn mark(&mut self, offset: u32, len: u32, id: u16) {
        let load = matches!(self.regions[usize::from(id) - 1].kind, RegionKind::LoadDestination { .. });
        for shadow in &mut self.shadow[offset as usize..(offset + len) as usize] {
            shadow.region = id;
            if load {
                shadow.write = Stamp::default();
                shadow.reads = Pair::default();
                shadow.atomics = Pair::default();
            }
        }
    }

    /// The TMA store sources of `thread` in bulk groups before `limit` may be written again.
    pub fn release_store_sources(&mut self, thread: u32, limit: u32) {
        for r in &mut self.regions {
            if let RegionKind::StoreSource { group } = r.kind {
                if r.thread == thread && group < limit {
                    r.released = true;
                }
            }
        }
    }

    /// Whether a region no longer restricts an access of `kind` by `thread`.
    /// (Observing a phase implies it completed.)
    fn region_allows(&self, r: &Region, kind: AccessKind, thread: u32) -> bool {
        match r.kind {
            RegionKind::LoadDestination { barrier, phase } => {
                self.order.seen(thread, barrier) > phase
                    || r.observed_barrier.is_some_and(|b| b < self.clocks.barrier)
            }
            RegionKind::StoreSource { .. } => {
                r.released || matches!(kind, AccessKind::Read | AccessKind::TmaStore | AccessKind::WgmmaRead)
            }
        }
    }

    pub fn dynamic_bytes(&self) -> u32 {
        self.dynamic_bytes
    }

    /// Bytes of the static arrays the block has declared so far (with their alignment padding,
    /// without the dynamic window) once the static array `key` of `bytes` bytes is declared
    /// (the same when it already is).
    pub fn static_bytes_with(&self, key: &'static str, bytes: u32) -> u64 {
        if self.statics.iter().any(|a| a.key == key) {
            u64::from(self.static_bytes)
        } else {
            u64::from(self.static_bytes.next_multiple_of(STATIC_ALIGN)) + u64::from(bytes)
        }
    }

    /// Total bytes in use (dynamic plus static).
    pub fn used_bytes(&self) -> u32 {
        self.bytes.len() as u32
    }

    /// Offset of the static array `key`, allocating `bytes` for it on first use.
    pub fn static_array(&mut self, key: &'static str, bytes: u32, limit: u32) -> Result<u32, String> {
        if let Some(a) = self.statics.iter().find(|a| a.key == key) {
            if a.bytes != bytes {
                return Err(format!(
                    "static shared array `{key}` declared with {bytes} bytes here but {} bytes \
                     elsewhere in the same block",
                    a.bytes
                ));
            }
            return Ok(a.offset);
        }
        let offset = self.used_bytes().next_multiple_of(STATIC_ALIGN);
        let end = u64::from(offset) + u64::from(bytes);
        if end > u64::from(limit) {
            return Err(format!(
                "static shared array `{key}` of {bytes} bytes does not fit: the block already \
                 uses {offset} bytes (dynamic {} + earlier static arrays) of the {limit} available",
                self.dynamic_bytes
            ));
        }
        self.bytes.resize(end as usize, POISON_BYTE);
        self.grow_shadow();
        self.statics.push(StaticArray { key, offset, bytes });
        self.static_bytes = self.static_bytes.next_multiple_of(STATIC_ALIGN) + bytes;
        Ok(offset)
    }

    fn grow_shadow(&mut self) {
        if self.shadow.len() < self.bytes.len() {
            self.shadow.resize(self.bytes.len(), ByteShadow::default());
        }
    }

    /// Records an access by `thread` to `len` bytes at `offset` (already bounds-checked) and
    /// returns the earlier conflicting access if it races with one. An async-proxy read
    /// ([`AccessKind::TmaStore`]) also needs every generic write it reads covered by a
    /// `fence.proxy.async` of the writer ordered before it.
    pub fn track(
        &mut self,
        offset: u32,
        len: u32,
        kind: AccessKind,
        thread: u32,
        site: Site,
    ) -> Result<(), Conflict> {
        let warp = thread / WARP_SIZE;
        let view = Viewpoint {
            thread: thread as u16,
            warp: warp as u16,
            barrier: self.clocks.barrier,
            warp_synced: self.clocks.warp_synced.get(warp as usize).copied().unwrap_or(0),
        };
        let now = Stamp { clock: self.clocks.now, thread: thread as u16, site: self.sites.id(site) };
        let order = &self.order;
        let unordered = |s: Stamp| view.unordered(s) && !order.orders(u32::from(s.thread), s.clock, thread);
        let pair_unordered = |p: &Pair| [p.last, p.other].into_iter().find(|s| unordered(*s));
        let writes = !matches!(kind, AccessKind::Read | AccessKind::TmaStore | AccessKind::WgmmaRead);
        let async_read = matches!(kind, AccessKind::TmaStore | AccessKind::WgmmaRead);
        for byte in offset as usize..(offset + len) as usize {
            let shadow = self.shadow[byte];
            let conflict = |s: Stamp, kind: AccessKind, region: Option<Region>, proxy: bool| Conflict {
                byte: byte as u32,
                kind,
                thread: u32::from(s.thread),
                site: self.sites.site(s.site),
                region,
                proxy,
            };
            if shadow.region != 0 {
                let r = self.regions[usize::from(shadow.region) - 1];
                if !self.region_allows(&r, kind, thread) {
                    let what = match r.kind {
                        RegionKind::LoadDestination { .. } => AccessKind::TmaLoad,
                        RegionKind::StoreSource { .. } => AccessKind::TmaStore,
                    };
                    let (byte, thread, site, region) = (byte as u32, r.thread, r.site, Some(r));
                    return Err(Conflict { byte, kind: what, thread, site, region, proxy: false });
                }
            }
            let earlier = if shadow.async_copy.clock != 0 {
                Some((shadow.async_copy, AccessKind::AsyncCopy))
            } else if unordered(shadow.write) {
                Some((shadow.write, AccessKind::Write))
            } else if let Some(s) = pair_unordered(&shadow.reads).filter(|_| writes) {
                Some((s, AccessKind::Read))
            } else {
                pair_unordered(&shadow.atomics)
                    .filter(|_| kind != AccessKind::Atomic)
                    .map(|s| (s, AccessKind::Atomic))
            };
            if let Some((s, kind)) = earlier {
                return Err(conflict(s, kind, None, false));
            }
            if async_read && !self.proxy_fenced(shadow.write, thread) {
                return Err(conflict(shadow.write, AccessKind::Write, None, true));
            }
        }
        let barrier = view.barrier;
        for shadow in &mut self.shadow[offset as usize..(offset + len) as usize] {
            if shadow.region != 0 {
                // The region allowed this access: once visible, its bytes are plain data.
                let r = &self.regions[usize::from(shadow.region) - 1];
                if matches!(r.kind, RegionKind::LoadDestination { .. }) || r.released {
                    shadow.region = 0;
                }
            }
            match kind {
                AccessKind::Read | AccessKind::TmaStore | AccessKind::WgmmaRead => {
                    shadow.reads.record(now, barrier)
                }
                AccessKind::Write | AccessKind::TmaLoad => shadow.write = now,
                AccessKind::Atomic => shadow.atomics.record(now, barrier),
                AccessKind::AsyncCopy => shadow.async_copy = now,
            }
        }
        Ok(())
    }

    /// Whether the async proxy may read what the generic write `write` stored, when `thread`
    /// issues the read now: the writer ran `fence.proxy.async` after the write and that fence
    /// is ordered before now (the writer is the reader, a barrier came after the fence, or an
    /// mbarrier released it to the reader).
    fn proxy_fenced(&self, write: Stamp, thread: u32) -> bool {
        if write.clock == 0 || write.clock < self.block_start {
            return true;
        }
        let writer = u32::from(write.thread);
        match self.order.proxy_fence_after(writer, write.clock) {
            None => false,
            Some(fence) => {
                writer == thread || fence < self.clocks.barrier || self.order.orders(writer, fence, thread)
            }
        }
    }

    /// Lands a `cp.async` copy started with `track(.., AccessKind::AsyncCopy, ..)`: writes its
    /// bytes and records them as written by `thread` now.
    pub fn finish_async_copy(&mut self, offset: u32, data: &[u8], thread: u32, site: Site) {
        let range = offset as usize..offset as usize + data.len();
        self.bytes[range.clone()].copy_from_slice(data);
        let now = Stamp { clock: self.clocks.now, thread: thread as u16, site: self.sites.id(site) };
        for shadow in &mut self.shadow[range] {
            shadow.async_copy = Stamp::default();
            shadow.write = now;
        }
    }

    /// Forgets a `cp.async` copy that was never waited for (at the end of a block).
    pub fn abandon_async_copy(&mut self, offset: u32, len: u32) {
        for shadow in &mut self.shadow[offset as usize..(offset + len) as usize] {
            shadow.async_copy = Stamp::default();
        }
    }

    /// Reads a `T` at `offset` (bounds already checked).
    pub fn read<T: Copy>(&self, offset: u32) -> T {
        let bytes = &self.bytes[offset as usize..offset as usize + size_of::<T>()];
        // SAFETY: the slice holds exactly size_of::<T>() initialized bytes; kernels only put
        // plain-old-data types (floats, integers, arrays of them) in shared memory.
        unsafe { bytes.as_ptr().cast::<T>().read_unaligned() }
    }

    /// Writes a `T` at `offset` (bounds already checked).
    pub fn write<T: Copy>(&mut self, offset: u32, value: T) {
        let bytes = &mut self.bytes[offset as usize..offset as usize + size_of::<T>()];
        // SAFETY: the slice has room for exactly size_of::<T>() bytes.
        unsafe { bytes.as_mut_ptr().cast::<T>().write_unaligned(value) }
    }

    /// Names the array holding `byte` and the offset of the byte within it.
    pub fn describe(&self, byte: u32) -> (String, u32) {
        match self.statics.iter().find(|a| (a.offset..a.offset + a.bytes).contains(&byte)) {
            Some(a) => (format!("static shared array `{}`", a.key), byte - a.offset),
            None => ("dynamic shared memory".to_string(), byte),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::Location;

    fn site() -> Site {
        Location::caller()
    }

    #[test]
    fn reads_by_many_threads_then_write_conflicts() {
        let mut m = SharedMemory::new();
        m.begin_block(16);
        for t in 0..3 {
            m.track(4, 4, AccessKind::Read, t, site()).unwrap();
        }
        let c = m.track(4, 4, AccessKind::Write, 2, site()).unwrap_err();
        assert_eq!((c.kind, c.byte), (AccessKind::Read, 4));
        assert_ne!(c.thread, 2);
    }

    #[test]
    fn barrier_epoch_separates_accesses() {
        let mut m = SharedMemory::new();
        m.begin_block(8);
        m.track(0, 8, AccessKind::Write, 0, site()).unwrap();
        m.track(0, 8, AccessKind::Write, 0, site()).unwrap();
        assert!(m.track(0, 1, AccessKind::Read, 1, site()).is_err());
        m.barrier();
        m.track(0, 8, AccessKind::Read, 1, site()).unwrap();
        m.track(0, 8, AccessKind::Read, 2, site()).unwrap();
    }

    #[test]
    fn full_warp_sync_orders_accesses_within_the_warp_only() {
        let mut m = SharedMemory::new();
        m.begin_block(8);
        m.track(0, 4, AccessKind::Write, 3, site()).unwrap();
        m.track(4, 4, AccessKind::Write, 40, site()).unwrap();
        m.warp_synced(0);
        m.track(0, 4, AccessKind::Read, 7, site()).unwrap();
        let c = m.track(4, 4, AccessKind::Read, 41, site()).unwrap_err();
        assert_eq!((c.kind, c.thread), (AccessKind::Write, 40));
        m.track(0, 4, AccessKind::Write, 3, site()).unwrap_err();
    }

    #[test]
    fn atomics_only_conflict_with_plain_accesses() {
        let mut m = SharedMemory::new();
        m.begin_block(4);
        for t in 0..4 {
            m.track(0, 4, AccessKind::Atomic, t, site()).unwrap();
        }
        let c = m.track(0, 4, AccessKind::Read, 0, site()).unwrap_err();
        assert_eq!(c.kind, AccessKind::Atomic);
    }

    #[test]
    fn mbarrier_arrivals_order_accesses_for_threads_that_observed_them() {
        let mut m = SharedMemory::new();
        m.begin_block(8);
        m.track(0, 4, AccessKind::Write, 1, site()).unwrap();
        assert!(m.track(0, 4, AccessKind::Read, 2, site()).is_err(), "no ordering yet");
        let clock = m.tick_now();
        m.order.arrive(1, clock, 64, 0);
        m.observe(2, 64, 1);
        m.track(0, 4, AccessKind::Read, 2, site()).unwrap();
        let c = m.track(0, 4, AccessKind::Read, 3, site()).unwrap_err();
        assert_eq!((c.kind, c.thread), (AccessKind::Write, 1), "thread 3 observed nothing");
        m.observe(3, 64, 1);
        m.track(0, 4, AccessKind::Read, 3, site()).unwrap();
        let c = m.track(0, 4, AccessKind::Write, 1, site()).unwrap_err();
        assert_eq!(c.kind, AccessKind::Read, "the readers released nothing to thread 1");
    }

    #[test]
    fn the_async_proxy_needs_a_fence_ordered_before_it() {
        let mut m = SharedMemory::new();
        m.begin_block(32);
        m.track(0, 16, AccessKind::Write, 0, site()).unwrap();
        let c = m.track(0, 16, AccessKind::TmaStore, 0, site()).unwrap_err();
        assert!(c.proxy && c.kind == AccessKind::Write, "the writer itself needs the fence");
        let clock = m.tick_now();
        m.order.proxy_fence(0, clock);
        m.track(0, 16, AccessKind::TmaStore, 0, site()).unwrap();
        m.track(16, 16, AccessKind::Write, 0, site()).unwrap();
        let clock = m.tick_now();
        m.order.proxy_fence(0, clock);
        m.barrier();
        m.track(16, 16, AccessKind::TmaStore, 5, site()).unwrap();
        m.barrier();
        m.track(0, 4, AccessKind::Write, 0, site()).unwrap();
        m.barrier();
        let c = m.track(0, 16, AccessKind::TmaStore, 5, site()).unwrap_err();
        assert!(c.proxy && c.thread == 0, "a barrier without a fence does not do");
    }

    #[test]
    fn a_tma_region_holds_until_its_phase_is_observed() {
        let mut m = SharedMemory::new();
        m.begin_block(64);
        let kind = RegionKind::LoadDestination { barrier: 48, phase: 0 };
        let id = m.new_region(kind, 0, site()).unwrap();
        m.mark(0, 32, id);
        let c = m.track(4, 4, AccessKind::Read, 0, site()).unwrap_err();
        assert_eq!((c.kind, c.region.map(|r| r.kind)), (AccessKind::TmaLoad, Some(kind)));
        m.observe(0, 48, 1);
        m.track(4, 4, AccessKind::Read, 0, site()).unwrap();
        assert!(m.track(8, 4, AccessKind::Read, 1, site()).is_err(), "thread 1 did not wait");
        m.barrier();
        m.track(8, 4, AccessKind::Read, 1, site()).unwrap();
    }

    #[test]
    fn static_arrays_are_aligned_and_named() {
        let mut m = SharedMemory::new();
        m.begin_block(10);
        let a = m.static_array("a", 6, 1024).unwrap();
        let b = m.static_array("b", 4, 1024).unwrap();
        assert_eq!((a, b), (16, 32));
        assert_eq!(m.static_array("a", 6, 1024).unwrap(), 16);
        assert!(m.static_array("a", 8, 1024).is_err());
        assert!(m.static_array("c", 2000, 1024).is_err());
        assert_eq!(m.describe(34), ("static shared array `b`".to_string(), 2));
        assert_eq!(m.static_bytes, 16 + 4);
        assert_eq!((m.static_bytes_with("a", 6), m.static_bytes_with("d", 1)), (20, 33));
        assert_eq!(m.read::<u8>(20), POISON_BYTE);
    }
}
