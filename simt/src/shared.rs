//! `Shared<T>`: a kernel's handle to an array in the block's shared memory. Every access goes
//! through the emulator, which checks the index and tracks races.

use std::marker::PhantomData;
use std::panic::Location;

use crate::block::{BlockInner, BlockState};
use crate::config::MAX_SHARED_BYTES;
use crate::context::{self, fail, fail_with};
use crate::error::{Access, AccessKind, EmuError, Fault, Site};
use crate::smem::Conflict;
use crate::stats::{Class, MemOp};

/// An array of `len` elements of `T` in the current block's shared memory.
///
/// `T` must be plain data for which every bit pattern is a value (integers, floats, arrays of
/// them): memory nobody wrote reads as poison bytes, and views may reinterpret bytes.
#[derive(Debug)]
pub struct Shared<T: Copy> {
    /// Byte offset of element 0 within the block's shared memory.
    pub(crate) offset: u32,
    len: u32,
    _element: PhantomData<T>,
}

impl<T: Copy> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Copy> Copy for Shared<T> {}

impl<T: Copy> Shared<T> {
    /// Number of elements.
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// Whether the array has no elements.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The `len` elements from `start`, as an array of their own (a pipeline stage, a warp's
    /// slice). Faults when they do not lie within this array.
    #[track_caller]
    pub fn sub(self, start: usize, len: usize) -> Shared<T> {
        let (block, thread) = context::current();
        let offset = self.byte_offset_of(block, thread, start, len, Location::caller());
        Shared { offset, len: len as u32, _element: PhantomData }
    }

    /// The same bytes as elements of `U` (bf16 pairs written as `u32`, read by `ldmatrix` as
    /// `u16`). Faults when the array is not aligned for `U` or not a whole number of `U`.
    #[track_caller]
    pub fn cast<U: Copy>(self) -> Shared<U> {
        let bytes = self.len as usize * size_of::<T>();
        if size_of::<U>() == 0 || self.offset as usize % align_of::<U>() != 0 || bytes % size_of::<U>() != 0 {
            let (block, thread) = context::current();
            let detail = format!(
                "cannot view {bytes} bytes at shared byte {} as {}: need alignment {} and a \
                 multiple of {} bytes",
                self.offset,
                std::any::type_name::<U>(),
                align_of::<U>(),
                size_of::<U>()
            );
            fail(block, thread, Fault::BadOperand { site: Location::caller(), detail });
        }
        Shared { offset: self.offset, len: (bytes / size_of::<U>()) as u32, _element: PhantomData }
    }

    /// Byte offset of element `i` (of `count` elements from `i`), failing the thread at `site`
    /// when they are out of range.
    pub(crate) fn byte_offset_of(
        self,
        block: &BlockState,
        thread: u32,
        i: usize,
        count: usize,
        site: Site,
    ) -> u32 {
        if i.checked_add(count).is_none_or(|end| end > self.len as usize) {
            let what = if count == 1 {
                format!("index {i}")
            } else {
                format!("elements {i}..{}", i.saturating_add(count))
            };
            let region = block.inner.borrow().smem.describe(self.offset).0;
            let detail = format!(
                "{what} of a Shared<{}> of {} elements in {region}",
                std::any::type_name::<T>(),
                self.len
            );
            fail(block, thread, Fault::SharedOutOfRange { site, detail });
        }
        self.offset + (i * size_of::<T>()) as u32
    }

    /// Reads element `i`.
    #[track_caller]
    pub fn load(self, i: usize) -> T {
        let (block, thread) = context::current();
        let offset = self.byte_offset_of(block, thread, i, 1, Location::caller());
        let result = {
            let mut inner = block.inner.borrow_mut();
            track(block, &mut inner, thread, offset, size_of::<T>(), AccessKind::Read)
                .map(|()| inner.smem.read(offset))
        };
        result.unwrap_or_else(|error| fail_with(block, thread, error))
    }

    /// Writes element `i`.
    #[track_caller]
    pub fn store(self, i: usize, value: T) {
        let (block, thread) = context::current();
        let offset = self.byte_offset_of(block, thread, i, 1, Location::caller());
        let result = {
            let mut inner = block.inner.borrow_mut();
            track(block, &mut inner, thread, offset, size_of::<T>(), AccessKind::Write)
                .map(|()| inner.smem.write(offset, value))
        };
        result.unwrap_or_else(|error| fail_with(block, thread, error))
    }
}

impl Shared<f32> {
    /// Atomically adds `value` to element `i` and returns the previous value.
    #[track_caller]
    pub fn atomic_add(self, i: usize, value: f32) -> f32 {
        let (block, thread) = context::current();
        let offset = self.byte_offset_of(block, thread, i, 1, Location::caller());
        let result = {
            let mut inner = block.inner.borrow_mut();
            track(block, &mut inner, thread, offset, 4, AccessKind::Atomic).map(|()| {
                let old: f32 = inner.smem.read(offset);
                inner.smem.write(offset, old + value);
                old
            })
        };
        result.unwrap_or_else(|error| fail_with(block, thread, error))
    }
}

impl Shared<u16> {
    /// Byte offset of the 16-byte row of 8 elements at `i`, as `ldmatrix` addresses it.
    pub(crate) fn row_offset(self, block: &BlockState, thread: u32, i: usize, site: Site) -> u32 {
        let offset = self.byte_offset_of(block, thread, i, 8, site);
        if offset % 16 != 0 {
            let detail = format!("ldmatrix row at element {i} (shared byte {offset}) is not 16-byte aligned");
            fail(block, thread, Fault::BadOperand { site, detail });
        }
        offset
    }
}

/// Records an access for race detection; the error names both racing accesses.
#[track_caller]
fn track(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    offset: u32,
    bytes: usize,
    kind: AccessKind,
) -> Result<(), EmuError> {
    let site: Site = Location::caller();
    let (op, class) = match kind {
        AccessKind::Read => (MemOp::Load, Class::SharedLoad),
        AccessKind::Write | AccessKind::AsyncCopy => (MemOp::Store, Class::SharedStore),
        AccessKind::Atomic => (MemOp::Atomic, Class::SharedAtomic),
    };
    block.count(thread, class);
    inner.log.push_shared(offset, bytes as u32, op, thread, site);
    inner.smem.track(offset, bytes as u32, kind, thread, site).map_err(|c| {
        let later = Access { kind, thread: block.dim3(thread), site };
        race_error(block, inner, c, later, thread)
    })
}

/// The error for an access by `thread` (`later`) that races with the earlier access `c`.
pub(crate) fn race_error(
    block: &BlockState,
    inner: &BlockInner,
    c: Conflict,
    later: Access,
    thread: u32,
) -> EmuError {
    let (region, byte) = inner.smem.describe(c.byte);
    let earlier = Access { kind: c.kind, thread: block.dim3(c.thread), site: c.site };
    let fault = if c.kind == AccessKind::AsyncCopy {
        Fault::AsyncCopyInFlight { region, byte, copy: earlier, access: later }
    } else {
        Fault::SharedRace { region, byte, earlier, later }
    };
    block.error_at(thread, fault)
}

/// A window of `len` elements of `T` at `byte_offset` in the launch's dynamic shared memory.
pub(crate) fn dynamic_shared<T: Copy>(byte_offset: usize, len: usize, site: Site) -> Shared<T> {
    let (block, thread) = context::current();
    let dynamic_bytes = block.inner.borrow().smem.dynamic_bytes();
    let end = len.checked_mul(size_of::<T>()).and_then(|bytes| bytes.checked_add(byte_offset));
    let type_name = std::any::type_name::<T>();
    if byte_offset % align_of::<T>() != 0 {
        let detail = format!(
            "dynamic_shared::<{type_name}> at byte offset {byte_offset}, which is not a multiple of \
             its alignment {}",
            align_of::<T>()
        );
        fail(block, thread, Fault::BadOperand { site, detail });
    }
    if end.is_none_or(|end| end > dynamic_bytes as usize) {
        let detail = format!(
            "dynamic_shared::<{type_name}> of {len} elements at byte offset {byte_offset} ends past \
             the launch's {dynamic_bytes} bytes of dynamic shared memory \
             (LaunchConfig::dynamic_smem_bytes)"
        );
        fail(block, thread, Fault::SharedOutOfRange { site, detail });
    }
    Shared { offset: byte_offset as u32, len: len as u32, _element: PhantomData }
}

/// The block's static shared array `key` of `len` elements, allocated on first use.
pub(crate) fn static_shared<T: Copy>(key: &'static str, len: usize, site: Site) -> Shared<T> {
    let (block, thread) = context::current();
    let bytes = len.checked_mul(size_of::<T>()).filter(|&b| b <= MAX_SHARED_BYTES as usize);
    let offset = match bytes {
        Some(bytes) => block.inner.borrow_mut().smem.static_array(key, bytes as u32, MAX_SHARED_BYTES),
        None => Err(format!("static shared array `{key}` of {len} elements is larger than shared memory")),
    };
    match offset {
        Ok(offset) => Shared { offset, len: len as u32, _element: PhantomData },
        Err(detail) => fail(block, thread, Fault::SharedOutOfRange { site, detail }),
    }
}
