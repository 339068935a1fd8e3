//! A block's shared memory: the bytes, where each array lives, and the shadow state that
//! finds data races.
//!
//! Every byte has a shadow entry with the last write, the last two reads by distinct threads
//! and the last two atomics by distinct threads, each stamped with a logical clock that ticks
//! at every barrier and every full-warp `sync_warp`. An earlier access is ordered before a
//! later one when a barrier came between them, or when both threads are in one warp and that
//! warp synchronized in between. Synchronizing only moves clocks, so stale entries are ignored
//! rather than cleared; the clock keeps counting across the blocks a worker runs.

use crate::error::{AccessKind, Site};
use crate::sites::SiteTable;
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

    fn unordered(&self, view: Viewpoint) -> Option<Stamp> {
        [self.last, self.other].into_iter().find(|s| view.unordered(*s))
    }
}

#[derive(Clone, Copy, Default)]
struct ByteShadow {
    write: Stamp,
    reads: Pair,
    atomics: Pair,
    /// The `cp.async` copy filling this byte until it is waited for (clock 0: none).
    async_copy: Stamp,
}

/// The earlier access of a conflicting pair.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conflict {
    pub byte: u32,
    pub kind: AccessKind,
    pub thread: u32,
    pub site: Site,
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
        self.barrier();
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
        }
        self.clocks.now += 1;
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
    /// returns the earlier conflicting access if it races with one.
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
        let range = offset as usize..(offset + len) as usize;
        for (byte, shadow) in range.clone().zip(&mut self.shadow[range]) {
            let earlier = if shadow.async_copy.clock != 0 {
                Some((shadow.async_copy, AccessKind::AsyncCopy))
            } else if view.unordered(shadow.write) {
                Some((shadow.write, AccessKind::Write))
            } else if let Some(s) = shadow.reads.unordered(view).filter(|_| kind != AccessKind::Read) {
                Some((s, AccessKind::Read))
            } else {
                shadow
                    .atomics
                    .unordered(view)
                    .filter(|_| kind != AccessKind::Atomic)
                    .map(|s| (s, AccessKind::Atomic))
            };
            if let Some((s, kind)) = earlier {
                let (thread, site) = (u32::from(s.thread), self.sites.site(s.site));
                return Err(Conflict { byte: byte as u32, kind, thread, site });
            }
            match kind {
                AccessKind::Read => shadow.reads.record(now, view.barrier),
                AccessKind::Write => shadow.write = now,
                AccessKind::Atomic => shadow.atomics.record(now, view.barrier),
                AccessKind::AsyncCopy => shadow.async_copy = now,
            }
        }
        Ok(())
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
