//! A block's shared memory: the bytes, where each array lives, and the shadow state that
//! finds data races.
//!
//! Every byte has a shadow entry with the last write, the last two reads by distinct threads
//! and the last two atomics by distinct threads, each stamped with the barrier epoch it
//! happened in. A barrier only bumps the epoch, so stale entries are ignored rather than
//! cleared; the epoch keeps counting across the blocks a worker runs.

use crate::error::{AccessKind, Site};

/// Fresh shared memory holds this byte pattern: a NaN for f32 and bf16, so reading memory
/// nobody wrote shows up in results.
pub(crate) const POISON_BYTE: u8 = 0xFF;

/// Arrays declared with `static_shared!` start at multiples of this.
const STATIC_ALIGN: u32 = 16;

#[derive(Clone, Copy, Default)]
struct Stamp {
    epoch: u32,
    thread: u32,
    site: Option<Site>,
}

impl Stamp {
    fn live(&self, epoch: u32) -> bool {
        self.epoch == epoch
    }
}

/// Last and previous-distinct-thread stamps of one kind of access.
#[derive(Clone, Copy, Default)]
struct Pair {
    last: Stamp,
    other: Stamp,
}

impl Pair {
    fn record(&mut self, now: Stamp) {
        if self.last.live(now.epoch) && self.last.thread != now.thread {
            self.other = self.last;
        }
        self.last = now;
    }

    /// A live stamp of a thread other than `thread`, if any.
    fn by_other_thread(&self, epoch: u32, thread: u32) -> Option<Stamp> {
        [self.last, self.other].into_iter().find(|s| s.live(epoch) && s.thread != thread)
    }
}

#[derive(Clone, Copy, Default)]
struct ByteShadow {
    write: Stamp,
    reads: Pair,
    atomics: Pair,
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
    epoch: u32,
    dynamic_bytes: u32,
    statics: Vec<StaticArray>,
}

impl SharedMemory {
    pub fn new() -> Self {
        SharedMemory {
            bytes: Vec::new(),
            shadow: Vec::new(),
            epoch: 0,
            dynamic_bytes: 0,
            statics: Vec::new(),
        }
    }

    /// Resets for a new block with `dynamic_bytes` of dynamic shared memory.
    pub fn begin_block(&mut self, dynamic_bytes: u32) {
        self.bytes.clear();
        self.bytes.resize(dynamic_bytes as usize, POISON_BYTE);
        self.grow_shadow();
        self.dynamic_bytes = dynamic_bytes;
        self.statics.clear();
        self.next_epoch();
    }

    /// Starts a new barrier interval: accesses before it no longer conflict with later ones.
    pub fn next_epoch(&mut self) {
        if self.epoch == u32::MAX {
            self.shadow.fill(ByteShadow::default());
            self.epoch = 0;
        }
        self.epoch += 1;
    }

    pub fn dynamic_bytes(&self) -> u32 {
        self.dynamic_bytes
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
        let epoch = self.epoch;
        let now = Stamp { epoch, thread, site: Some(site) };
        let range = offset as usize..(offset + len) as usize;
        for (byte, shadow) in range.clone().zip(&mut self.shadow[range]) {
            let conflict = |s: Stamp, kind| Conflict {
                byte: byte as u32,
                kind,
                thread: s.thread,
                site: s.site.expect("live stamps have a site"),
            };
            if shadow.write.live(epoch) && shadow.write.thread != thread {
                return Err(conflict(shadow.write, AccessKind::Write));
            }
            if kind != AccessKind::Read {
                if let Some(s) = shadow.reads.by_other_thread(epoch, thread) {
                    return Err(conflict(s, AccessKind::Read));
                }
            }
            if kind != AccessKind::Atomic {
                if let Some(s) = shadow.atomics.by_other_thread(epoch, thread) {
                    return Err(conflict(s, AccessKind::Atomic));
                }
            }
            match kind {
                AccessKind::Read => shadow.reads.record(now),
                AccessKind::Write => shadow.write = now,
                AccessKind::Atomic => shadow.atomics.record(now),
            }
        }
        Ok(())
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
        m.next_epoch();
        m.track(0, 8, AccessKind::Read, 1, site()).unwrap();
        m.track(0, 8, AccessKind::Read, 2, site()).unwrap();
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
        assert_eq!(m.read::<u8>(20), POISON_BYTE);
    }
}
