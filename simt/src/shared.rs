//! `Shared<T>`: a kernel's handle to an array in the block's shared memory. Every access goes
//! through the emulator, which checks the index and tracks races.

use std::marker::PhantomData;
use std::panic::Location;

use crate::block::{BlockInner, BlockState};
use crate::config::MAX_SHARED_BYTES;
use crate::context::{self, fail, fail_with};
use crate::error::{Access, AccessKind, EmuError, Fault, Site};
use crate::smem::{Conflict, RegionKind};
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

    /// The shared byte address of element `i` (not checked against the length): what a
    /// `wgmma` matrix descriptor holds. The launch's dynamic shared memory starts at address 0.
    pub fn shared_address(self, i: usize) -> u32 {
        self.offset + (i * size_of::<T>()) as u32
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
        let align = access_align::<U>();
        if size_of::<U>() == 0 || self.offset as usize % align != 0 || bytes % size_of::<U>() != 0 {
            let (block, thread) = context::current();
            let detail = format!(
                "cannot view {bytes} bytes at shared byte {} as {}: need alignment {align} and a \
                 multiple of {} bytes{}",
                self.offset,
                std::any::type_name::<U>(),
                size_of::<U>(),
                width_rule::<U>()
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

    /// Fails the thread when element offset `offset` is not aligned to the width of the
    /// instruction that accesses a `T` (see [`access_align`]).
    fn check_aligned(block: &BlockState, thread: u32, offset: u32, store: bool, site: Site) {
        let align = access_align::<T>();
        if offset as usize % align != 0 {
            let instruction = shared_instruction(size_of::<T>(), store);
            let detail = format!(
                "{instruction} of a {} at shared byte {offset}, which is not {align}-byte \
                 aligned{}",
                std::any::type_name::<T>(),
                width_rule::<T>()
            );
            fail(block, thread, Fault::BadOperand { site, detail });
        }
    }

    /// Reads element `i`.
    #[track_caller]
    pub fn load(self, i: usize) -> T {
        let (block, thread) = context::current();
        let offset = self.byte_offset_of(block, thread, i, 1, Location::caller());
        Self::check_aligned(block, thread, offset, false, Location::caller());
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
        Self::check_aligned(block, thread, offset, true, Location::caller());
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

/// Alignment the GPU needs for one access of a `T` in shared memory: `Shared::load` and
/// `Shared::store` compile elements of 2, 4, 8 and 16 bytes to `ld/st.shared.b16`, `.b32`,
/// `.b64` and `.v4.b32`, which need an address aligned to their width whatever `T`'s own
/// alignment (`[u32; 4]` has alignment 4 but is read with one 16-byte `ld.shared.v4.b32`);
/// other sizes go through a generic pointer to `T` and need `align_of::<T>()`.
///
/// PTX ISA, "Addresses as Operands": the address must be naturally aligned to a multiple of
/// the access size, otherwise the behaviour is undefined; "Vectors": a vector access is
/// aligned to its whole size (vector length times element size).
pub(crate) fn access_align<T>() -> usize {
    match size_of::<T>() {
        width @ (2 | 4 | 8 | 16) => width.max(align_of::<T>()),
        _ => align_of::<T>(),
    }
}

/// The instruction that accesses one element of `size` bytes in shared memory.
fn shared_instruction(size: usize, store: bool) -> String {
    let op = if store { "st" } else { "ld" };
    match size {
        2 => format!("{op}.shared.b16"),
        4 => format!("{op}.shared.b32"),
        8 => format!("{op}.shared.b64"),
        16 => format!("{op}.shared.v4.b32"),
        _ => format!("{op} through a generic pointer"),
    }
}

/// The rule a misaligned view or access of `T` breaks, for messages ("" where only `T`'s own
/// alignment is involved).
fn width_rule<T>() -> String {
    if access_align::<T>() > align_of::<T>() {
        format!(
            " (shared-memory accesses of {} bytes are {}/{}, which need an address aligned to \
             their width: PTX ISA, \"Addresses as Operands\")",
            size_of::<T>(),
            shared_instruction(size_of::<T>(), false),
            shared_instruction(size_of::<T>(), true)
        )
    } else {
        String::new()
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
        AccessKind::Write | AccessKind::AsyncCopy | AccessKind::TmaLoad => (MemOp::Store, Class::SharedStore),
        AccessKind::TmaStore | AccessKind::WgmmaRead => (MemOp::Load, Class::SharedLoad),
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
    let fault = match (c.region.map(|r| r.kind), c.kind) {
        (Some(RegionKind::LoadDestination { barrier, phase }), _) => Fault::TmaLoadInFlight {
            region,
            byte,
            load: format!(
                "{earlier} (completing phase {phase}, parity {}, of the mbarrier {})",
                phase & 1,
                describe_mbarrier(inner, barrier)
            ),
            access: later,
        },
        (Some(RegionKind::StoreSource { .. }), _) => {
            Fault::TmaStoreInFlight { region, byte, store: earlier, access: later }
        }
        _ if c.proxy => Fault::AsyncProxyRace { region, byte, write: earlier, read: later },
        (None, AccessKind::AsyncCopy) => {
            Fault::AsyncCopyInFlight { region, byte, copy: earlier, access: later }
        }
        _ => Fault::SharedRace { region, byte, earlier, later },
    };
    block.error_at(thread, fault)
}

/// Names the mbarrier at shared byte `offset`: its array, offset and shared address.
pub(crate) fn describe_mbarrier(inner: &BlockInner, offset: u32) -> String {
    let (region, byte) = inner.smem.describe(offset);
    format!("at shared address {offset:#x} (byte {byte} of {region})")
}

/// A window of `len` elements of `T` at `byte_offset` in the launch's dynamic shared memory.
pub(crate) fn dynamic_shared<T: Copy>(byte_offset: usize, len: usize, site: Site) -> Shared<T> {
    let (block, thread) = context::current();
    let dynamic_bytes = block.inner.borrow().smem.dynamic_bytes();
    let end = len.checked_mul(size_of::<T>()).and_then(|bytes| bytes.checked_add(byte_offset));
    let type_name = std::any::type_name::<T>();
    let align = access_align::<T>();
    if byte_offset % align != 0 {
        let detail = format!(
            "dynamic_shared::<{type_name}> at byte offset {byte_offset}, which is not a multiple of \
             its alignment {align}{}",
            width_rule::<T>()
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
    if let Some(bytes) = bytes {
        // The static arrays' total counts against the 48 KiB default or the opt-in, as the
        // kernel's `.shared` declarations would when the driver launches it.
        let checked = {
            let inner = block.inner.borrow();
            let static_bytes = inner.smem.static_bytes_with(key, bytes as u32);
            let static_bytes = u32::try_from(static_bytes).unwrap_or(u32::MAX);
            block.attributes.check_shared(static_bytes, inner.smem.dynamic_bytes())
        };
        if let Err(problem) = checked {
            let problem =
                format!("{problem}; found when the block declared static shared array `{key}` at {site}");
            fail_with(block, thread, EmuError::InvalidLaunch { kernel: block.kernel, problem });
        }
    }
    let offset = match bytes {
        Some(bytes) => block.inner.borrow_mut().smem.static_array(key, bytes as u32, MAX_SHARED_BYTES),
        None => Err(format!("static shared array `{key}` of {len} elements is larger than shared memory")),
    };
    let offset = match offset {
        Ok(offset) => offset,
        Err(detail) => fail(block, thread, Fault::SharedOutOfRange { site, detail }),
    };
    Shared { offset, len: len as u32, _element: PhantomData }
}
