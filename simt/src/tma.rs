//! TMA copies (`cp.async.bulk.tensor`) between global memory, described by a [`TensorMap`],
//! and shared memory, with the swizzle of the map.
//!
//! A load (PTX ISA, "cp.async.bulk.tensor": `.shared::cluster.global.mbarrier::complete_tx::bytes`)
//! writes the box at the coordinates (which may be negative or past the end: out-of-bounds
//! elements read as the map's fill) into shared memory, elements in order with dimension 0
//! fastest, each 16-byte chunk at its swizzled address, and completes the box's bytes on the
//! mbarrier (`complete_tx`). The emulator copies at issue and completes the bytes at once; the
//! destination belongs to the load until the accessing thread observed the mbarrier phase
//! (or a barrier followed another thread's observation): any access before that faults, and
//! so does a load into bytes whose earlier accesses nothing (barrier, mbarrier) ordered before
//! the issue.
//!
//! A store (`.global.shared::cta.bulk_group`) reads the box from shared memory through the
//! async proxy (so generic writes to it need the writer's `fence.proxy.async` ordered before
//! the issue) and writes its in-bounds elements to global memory; its source must not be
//! written until the issuing thread waited for the store's bulk group
//! (`cp.async.bulk.commit_group`, `cp.async.bulk.wait_group.read`).

use crate::block::{BlockInner, BlockState};
use crate::context::{self, fail, fail_with};
use crate::error::{Access, AccessKind, EmuError, Fault, Site};
use crate::global::{Problem, NO_ARG};
use crate::mbarrier;
use crate::shared::{race_error, Shared};
use crate::smem::RegionKind;
use crate::stats::{self, Class, GlobalTraffic, MemOp};
use crate::tensor_map::{OobFill, TensorMap};

/// Bytes per swizzle chunk.
const CHUNK: u32 = 16;

/// Direction of a copy.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Load,
    Store,
}

/// One element of the box: its byte offset within the (unswizzled) box and its global
/// address when in bounds.
struct Element {
    box_offset: u32,
    global: Option<u64>,
}

/// The box's elements at `coords`, in shared-memory order.
fn elements(map: &TensorMap, coords: &[i32]) -> Vec<Element> {
    let counts = map.box_elements();
    let elem = map.data_type.bytes();
    let total: u32 = counts.iter().product();
    let mut out = Vec::with_capacity(total as usize);
    for linear in 0..total {
        let mut rest = linear;
        let mut address = map.global_address as i128;
        let mut inside = true;
        for (d, &count) in counts.iter().enumerate() {
            let e = rest % count;
            rest /= count;
            let c = i64::from(coords.get(d).copied().unwrap_or(0)) + i64::from(e * map.element_strides[d]);
            if c < 0 || c as u64 >= map.global_dims[d] {
                inside = false;
            }
            address += i128::from(c) * map.strides[d] as i128;
        }
        out.push(Element { box_offset: linear * elem, global: inside.then_some(address as u64) });
    }
    out
}

/// Checks the operands both directions share; returns the shared byte offset of the box.
fn check_operands<T: Copy>(
    block: &BlockState,
    thread: u32,
    map: &TensorMap,
    (smem, index): (Shared<T>, usize),
    coords: &[i32],
    what: &str,
    site: Site,
) -> u32 {
    let bad = |detail: String| -> ! { fail(block, thread, Fault::BadOperand { site, detail }) };
    if coords.len() != map.rank {
        bad(format!("{what} with {} coordinates for a tensor map of rank {}", coords.len(), map.rank));
    }
    let bytes = map.box_bytes() as usize;
    let count = bytes.div_ceil(size_of::<T>().max(1));
    let offset = smem.byte_offset_of(block, thread, index, count, site);
    if offset % 128 != 0 {
        bad(format!("{what}: the shared-memory box at byte {offset} is not 128-byte aligned"));
    }
    offset
}

/// Checks a global access of the box and logs it; fails the thread on a bad one.
fn global_segment(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    addr: u64,
    len: u32,
    op: MemOp,
    site: Site,
) {
    let checked = block.memory().check(addr, u64::from(len), 1, op, NO_ARG, &mut inner.log.alloc_cache);
    match checked {
        Ok(_) => inner.log.push_bulk_global(addr, len, op, thread, site),
        Err(problem) => {
            let fault = match problem {
                Problem::OutOfRange(detail) => Fault::GlobalOutOfRange { site, detail },
                Problem::Misaligned(detail) => Fault::BadOperand { site, detail },
                Problem::Uninitialized(detail) => Fault::GlobalUninitialized { site, detail },
            };
            inner.fault.get_or_insert(block.error_at(thread, fault));
        }
    }
}

/// Counts the copy's global traffic and returns the in-bounds elements' global addresses.
fn traffic(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    map: &TensorMap,
    elements: &[Element],
    dir: Direction,
    site: Site,
) -> bool {
    let elem = map.data_type.bytes();
    let op = if dir == Direction::Load { MemOp::Load } else { MemOp::Store };
    let mut segments: Vec<(u64, u32)> = Vec::new();
    for e in elements {
        if let Some(addr) = e.global {
            match segments.last_mut() {
                Some((start, len)) if *start + u64::from(*len) == addr => *len += elem,
                _ => segments.push((addr, elem)),
            }
        }
    }
    for &(addr, len) in &segments {
        global_segment(block, inner, thread, addr, len, op, site);
        if inner.fault.is_some() {
            return false;
        }
    }
    let t: &mut GlobalTraffic = &mut inner.log.counts.tma[dir as usize];
    t.requests += 1;
    t.sectors += stats::sectors(segments.iter().copied(), &mut Vec::new());
    t.bytes_requested += segments.iter().map(|s| u64::from(s.1)).sum::<u64>();
    inner.log.counts.tma_shared_bytes += u64::from(map.box_bytes());
    true
}

/// Tracks the box's 16-byte chunks at their swizzled addresses as `kind`; returns them.
fn track_chunks(
    block: &BlockState,
    inner: &mut BlockInner,
    thread: u32,
    map: &TensorMap,
    offset: u32,
    kind: AccessKind,
    site: Site,
) -> Result<Vec<u32>, EmuError> {
    let chunks: Vec<u32> =
        (0..map.box_bytes() / CHUNK).map(|c| map.swizzle.apply(offset + c * CHUNK)).collect();
    for &chunk in &chunks {
        inner.smem.track(chunk, CHUNK, kind, thread, site).map_err(|c| {
            let later = Access { kind, thread: block.dim3(thread), site };
            race_error(block, inner, c, later, thread)
        })?;
    }
    Ok(chunks)
}

/// `cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes`: loads
/// the box at `coords` into `dst` from element `index` on, completing its bytes on mbarrier
/// `bar` of `bars`.
///
/// # Safety
///
/// The map's global address must describe memory valid for the reads (checked against the
/// registered allocations element by element).
pub(crate) unsafe fn load<T: Copy>(
    map: &TensorMap,
    dst: Shared<T>,
    index: usize,
    coords: &[i32],
    bars: Shared<u64>,
    bar: usize,
    site: Site,
) {
    let (block, thread) = context::current();
    block.count(thread, Class::Tma);
    let offset = check_operands(block, thread, map, (dst, index), coords, "cp.async.bulk.tensor load", site);
    let bar_offset = bars.byte_offset_of(block, thread, bar, 1, site);
    let elements = elements(map, coords);
    let elem = map.data_type.bytes() as usize;
    let result = {
        let mut inner = block.inner.borrow_mut();
        let inner = &mut *inner;
        let phase = inner.mbarriers.get(bar_offset).map(|b| b.phase);
        (|| {
            if !traffic(block, inner, thread, map, &elements, Direction::Load, site) {
                return Err(inner.fault.take().expect("traffic recorded the fault"));
            }
            let Some(phase) = phase else {
                let detail = "the TMA load's mbarrier was not initialized (no mbarrier.init of this address in this block)".to_string();
                return Err(block.error_at(
                    thread,
                    Fault::Mbarrier {
                        site,
                        barrier: crate::shared::describe_mbarrier(inner, bar_offset),
                        detail,
                    },
                ));
            };
            let chunks = track_chunks(block, inner, thread, map, offset, AccessKind::TmaLoad, site)?;
            let fill = match map.oob_fill {
                OobFill::Zero => [0u8; 8],
                OobFill::Nan => map.data_type.nan_bytes(),
            };
            for e in &elements {
                let mut bytes = [0u8; 8];
                match e.global {
                    // SAFETY: checked above to lie in a registered allocation; the caller
                    // vouches for the map's memory.
                    Some(addr) => unsafe {
                        std::ptr::copy_nonoverlapping(addr as *const u8, bytes.as_mut_ptr(), elem)
                    },
                    None => bytes = fill,
                }
                let at = map.swizzle.apply(offset + e.box_offset);
                for (k, &b) in bytes[..elem].iter().enumerate() {
                    inner.smem.write(at + k as u32, b);
                }
            }
            let kind = RegionKind::LoadDestination { barrier: bar_offset, phase };
            let id = inner
                .smem
                .new_region(kind, thread, site)
                .map_err(|detail| block.error_at(thread, Fault::BadOperand { site, detail }))?;
            for &chunk in &chunks {
                inner.smem.mark(chunk, CHUNK, id);
            }
            mbarrier::complete_tx_at(block, inner, thread, bar_offset, map.box_bytes(), site)
        })()
    };
    match result {
        Ok(woke) => mbarrier::yield_to_woken(block, thread, woke),
        Err(error) => fail_with(block, thread, error),
    }
}

/// `cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group`: stores the box in `src` from
/// element `index` on to the tensor at `coords` (out-of-bounds elements are not written).
///
/// # Safety
///
/// The map's global address must describe memory valid for the writes (checked against the
/// registered allocations).
pub(crate) unsafe fn store<T: Copy>(
    map: &TensorMap,
    src: Shared<T>,
    index: usize,
    coords: &[i32],
    site: Site,
) {
    let (block, thread) = context::current();
    block.count(thread, Class::Tma);
    let offset = check_operands(block, thread, map, (src, index), coords, "cp.async.bulk.tensor store", site);
    let elements = elements(map, coords);
    let elem = map.data_type.bytes() as usize;
    let result = {
        let mut inner = block.inner.borrow_mut();
        let inner = &mut *inner;
        (|| {
            let chunks = track_chunks(block, inner, thread, map, offset, AccessKind::TmaStore, site)?;
            if !traffic(block, inner, thread, map, &elements, Direction::Store, site) {
                return Err(inner.fault.take().expect("traffic recorded the fault"));
            }
            for e in &elements {
                if let Some(addr) = e.global {
                    let at = map.swizzle.apply(offset + e.box_offset);
                    let bytes: [u8; 8] =
                        std::array::from_fn(|k| if k < elem { inner.smem.read(at + k as u32) } else { 0 });
                    // SAFETY: checked above to lie in a registered allocation; the caller
                    // vouches for the map's memory.
                    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, elem) };
                }
            }
            let group = inner.threads[thread as usize].bulk_committed;
            let id = inner
                .smem
                .new_region(RegionKind::StoreSource { group }, thread, site)
                .map_err(|detail| block.error_at(thread, Fault::BadOperand { site, detail }))?;
            for &chunk in &chunks {
                inner.smem.mark(chunk, CHUNK, id);
            }
            Ok(())
        })()
    };
    if let Err(error) = result {
        fail_with(block, thread, error);
    }
}

/// `cp.async.bulk.commit_group`: the running thread's uncommitted bulk stores form a group.
pub(crate) fn commit_group() {
    let (block, thread) = context::current();
    block.count(thread, Class::Tma);
    block.inner.borrow_mut().threads[thread as usize].bulk_committed += 1;
}

/// `cp.async.bulk.wait_group.read n`: every committed group but the `n` most recent has read
/// its source (the emulator's stores are complete at issue, so this also serves `wait_group`).
pub(crate) fn wait_group_read(n: u32) {
    let (block, thread) = context::current();
    block.count(thread, Class::Tma);
    let mut inner = block.inner.borrow_mut();
    let limit = inner.threads[thread as usize].bulk_committed.saturating_sub(n);
    inner.smem.release_store_sources(thread, limit);
}
